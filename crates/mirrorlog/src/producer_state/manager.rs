//! [`ProducerStateManager`]: one partition's producer table, open transactions and scratch;
//! its lookups, the barrier's clear, expiration, the snapshot and the invariants. Staging and
//! applying live in `stage.rs` and `apply.rs`.

use super::{
    decode_snapshot, encode_snapshot, ColdHistory, HotEntry, OpenTxns, PackedEntry, PendingIndex,
    ProducerEntry, ProducerStateConfig, ProducerView, SnapshotError, StagedOne, Staging, Table,
    ENTRIES_MAX,
};
use crate::format::Offset;

/// The producer state of one partition. See the module docs.
#[derive(Debug, Clone)]
pub struct ProducerStateManager {
    pub(super) config: ProducerStateConfig,
    pub(super) table: Table<HotEntry, ColdHistory>,
    pub(super) open: OpenTxns,
    pub(super) staging: Staging,
    /// Bumped by every change of observable state.
    pub(super) mutation: u64,
    /// Bumped by every `stage`; only the latest stage can be applied.
    pub(super) stage: u64,
}

impl ProducerStateManager {
    /// An empty PSM.
    #[must_use]
    pub fn new(config: ProducerStateConfig) -> Self {
        ProducerStateManager {
            config,
            table: Table::new(HotEntry::FILLER, ColdHistory::FILLER),
            open: OpenTxns::new(),
            staging: Staging {
                index: PendingIndex::default(),
                batches: 0,
                one: StagedOne::EMPTY,
                has_one: false,
                many: Vec::new(),
                has_many: false,
                pending: Vec::new(),
                started: Vec::new(),
                completed: Vec::new(),
                clears: false,
                new_producers: 0,
            },
            mutation: 0,
            stage: 0,
        }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &ProducerStateConfig {
        &self.config
    }

    /// Replaces the settings (`producer.id.expiration.ms`), for the next expiration.
    pub fn set_config(&mut self, config: ProducerStateConfig) {
        self.config = config;
    }

    /// Number of producers tracked.
    #[must_use]
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no producer is tracked.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Bytes held by the producer table and the open-transaction index.
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        self.table.memory_bytes() + self.open.memory_bytes()
    }

    /// The entry of `producer_id`.
    #[must_use]
    pub fn get(&self, producer_id: i64) -> Option<ProducerEntry> {
        self.table.get(producer_id).map(|(hot, cold)| {
            PackedEntry::unpack(
                hot,
                cold,
                producer_id,
                self.txn_first_offset(producer_id, hot),
            )
        })
    }

    /// A look at the entry of `producer_id` in place: no copy, the batch history left packed.
    /// For callers that need a field or two on a hot path (a broker checking an epoch, say);
    /// [`ProducerStateManager::get`] gives the whole entry.
    #[must_use]
    pub fn view(&self, producer_id: i64) -> Option<ProducerView<'_>> {
        self.table
            .get_hot(producer_id)
            .map(|entry| ProducerView { entry })
    }

    pub(super) fn txn_first_offset(&self, producer_id: i64, entry: &HotEntry) -> Option<Offset> {
        if entry.txn_open() {
            self.open.first_offset_of(producer_id)
        } else {
            None
        }
    }

    /// Every entry, in no particular order.
    pub fn producers(&self) -> impl ExactSizeIterator<Item = ProducerEntry> + '_ {
        let open = &self.open;
        let slots: Vec<_> = self
            .table
            .iter()
            .map(|(key, &hot, &cold)| (key, hot, cold))
            .collect();
        slots.into_iter().map(move |(key, hot, cold)| {
            PackedEntry::unpack(&hot, &cold, key, open.first_offset_of(key))
        })
    }

    /// Open transactions as `(first offset, producer id)`, earliest first.
    pub fn open_transactions(&self) -> impl Iterator<Item = (Offset, i64)> + '_ {
        self.open.iter()
    }

    /// First offset of the earliest open transaction.
    #[must_use]
    pub fn first_unstable_offset(&self) -> Option<Offset> {
        self.open.first_unstable_offset()
    }

    /// Last stable offset: min(first unstable offset, high watermark).
    #[must_use]
    pub fn last_stable_offset(&self, high_watermark: Offset) -> Offset {
        self.first_unstable_offset()
            .map_or(high_watermark, |fuo| fuo.min(high_watermark))
    }

    /// Removes every producer entry and all open-transaction tracking, in constant time for the
    /// producer table. Called by `apply` for a barrier in a Local range; public for the log's
    /// truncation paths and tests.
    pub fn clear_for_barrier(&mut self) {
        self.table.clear();
        self.open.clear();
        self.mutation += 1;
    }

    /// The "now" for a [`ProducerStateManager::load_snapshot`] that expires nothing: the log
    /// layer has no clock, so a load keeps every entry and the shard expires them right after
    /// the open with its clock's now ([`ProducerStateManager::remove_expired`]).
    pub const LOAD_WITHOUT_EXPIRING_MS: i64 = i64::MIN / 2;

    /// Removes producers with no open transaction whose last timestamp is at least
    /// `producer.id.expiration.ms` before `now_ms`. Returns how many were removed.
    pub fn remove_expired(&mut self, now_ms: i64) -> usize {
        let before = self.table.len();
        let expiration_ms = self.config.producer_id_expiration_ms;
        self.table.retain(|_, e, _| {
            e.txn_open() || now_ms.saturating_sub(e.last_timestamp()) < expiration_ms
        });
        self.mutation += 1;
        before - self.table.len()
    }

    /// The state as a `.snapshot` file.
    #[must_use]
    pub fn snapshot(&self) -> Vec<u8> {
        let entries: Vec<ProducerEntry> = self.producers().collect();
        encode_snapshot(entries.iter())
    }

    /// Replaces the state with a snapshot's, dropping producers already expired at `now_ms`
    /// (Kafka's `loadFromSnapshot`). Returns the number of producers now tracked.
    ///
    /// # Errors
    /// [`SnapshotError`] when the bytes are not a valid snapshot; the state is then unchanged,
    /// and the caller falls back to an older snapshot or an empty state.
    pub fn load_snapshot(&mut self, bytes: &[u8], now_ms: i64) -> Result<usize, SnapshotError> {
        let entries = decode_snapshot(bytes)?;
        self.clear_for_barrier();
        let expiration_ms = self.config.producer_id_expiration_ms;
        for e in &entries {
            let expired = e.current_txn_first_offset.is_none()
                && now_ms.saturating_sub(e.last_timestamp) >= expiration_ms;
            if expired || self.table.len() >= ENTRIES_MAX {
                continue;
            }
            let packed = PackedEntry::pack(e);
            let inserted = self.table.insert(e.producer_id, packed.hot, packed.cold);
            debug_assert!(inserted.is_ok());
            if let Some(first) = e.current_txn_first_offset {
                let opened = self.open.open(e.producer_id, first);
                debug_assert!(opened.is_ok());
            }
        }
        self.open.tidy();
        Ok(self.table.len())
    }

    /// Checks every invariant; panics on a violation. Run after each mutation in debug builds.
    pub fn check_invariants(&self) {
        self.table.check_invariants();
        self.open.check_invariants();
        for (first, id) in self.open.iter() {
            let entry = self.table.get_hot(id);
            assert!(
                entry.is_some_and(HotEntry::txn_open),
                "open txn of {id} at {first} has an entry flagged open"
            );
        }
        let flagged = self.table.iter().filter(|(_, e, _)| e.txn_open()).count();
        assert_eq!(
            flagged,
            self.open.len(),
            "entries flagged open match the open transactions"
        );
    }
}
