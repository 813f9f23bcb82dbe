//! The producer state manager (PSM) of one partition, with Kafka 3.x semantics (SPEC §2).
//!
//! Contract:
//! - An append is first *staged*: [`ProducerStateManager::stage`] validates every batch against
//!   the rules of its [`Origin`] and computes the resulting producer entries, open and completed
//!   transactions in a scratch overlay. Observable state does not change. A rejected append returns
//!   the first broken rule and leaves nothing behind. [`ProducerStateManager::apply`] then makes
//!   the staged result the state in one step.
//! - A barrier batch clears every producer entry and all open-transaction tracking iff the
//!   caller's rule says its offset lies in a Local range (the mode history lives in the log); the
//!   table clear is constant time. Later batches of the same append see the cleared state.
//! - Duplicates (Client origin, single-batch appends, as Kafka clients send): a batch whose epoch
//!   and sequence range equal one of the producer's last five batches is reported with the
//!   original offsets and changes nothing.
//! - Completed transactions carry Kafka's `lastStableOffset`, computed once the whole append is
//!   applied; aborted ones become `.txnindex` entries ([`AbortedTxn`]).
//!
//! Storage: producer entries live in [`table::Table`], an open-addressing table with 4-byte
//! buckets over two dense columns, a 64-byte hot slot (one cache line, all an append reads) and
//! 48 bytes of older history (see its docs for the memory arithmetic); open transactions live
//! in a second table plus an offset-ordered vector.

mod entry;
mod error;
mod snapshot;
pub mod table;
mod txn;

pub use entry::{BatchHistory, BatchMetadata, ProducerEntry, BATCH_HISTORY_LEN};
pub use error::ProducerStateError;
pub use snapshot::{
    decode_snapshot, encode_snapshot, snapshot_file_name, SnapshotError, SNAPSHOT_ENTRY_SIZE_BYTES,
    SNAPSHOT_HEADER_SIZE_BYTES, SNAPSHOT_VERSION,
};
pub use txn::{
    decode_txn_index, AbortedTxn, AbortedTxnError, CompletedTxn, ABORTED_TXN_SIZE_BYTES,
    ABORTED_TXN_VERSION,
};

use crate::format::{sequence, BatchKind, BatchView, Offset, ProducerFields};
use entry::{ColdHistory, HotEntry, PackedEntry};
use table::{Table, ENTRIES_MAX};
use txn::OpenTxns;

/// Kafka's default `producer.id.expiration.ms`: one day.
pub const PRODUCER_ID_EXPIRATION_MS_DEFAULT: i64 = 86_400_000;

/// Where an append comes from; the rules differ (SPEC §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A producer client of this cluster: offsets assigned, sequences checked, no control batches.
    Client,
    /// A coordinator of this cluster writing markers or the barrier: epochs and coordinator
    /// epochs checked, sequences not.
    Coordinator,
    /// A follower copying its own cluster's leader: offsets kept, lower epochs accepted.
    Replication,
    /// Fetched from another cluster by mirroring: like Replication, offsets kept as-is.
    Mirror,
}

impl Origin {
    /// Whether lower producer and coordinator epochs are accepted (copies of someone else's log).
    #[must_use]
    pub fn accepts_stale_epochs(self) -> bool {
        matches!(self, Origin::Replication | Origin::Mirror)
    }
}

/// What the PSM needs of one batch: its final offsets and producer fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    /// First offset (for client appends: the one the log assigned).
    pub base_offset: Offset,
    /// Last offset.
    pub last_offset: Offset,
    /// `producerId`, `producerEpoch`, `baseSequence`.
    pub producer: ProducerFields,
    /// Transactional bit.
    pub transactional: bool,
    /// Data, marker, barrier, …
    pub kind: BatchKind,
    /// `maxTimestamp` for data batches; the record timestamp for control batches.
    pub timestamp: i64,
}

impl BatchInfo {
    /// The PSM's view of a checked batch that will sit at `base_offset`.
    #[must_use]
    pub fn from_view(view: &BatchView<'_>, base_offset: Offset) -> Self {
        let h = view.header();
        let control = h.attributes.is_control();
        BatchInfo {
            base_offset,
            last_offset: Offset(base_offset.0 + i64::from(h.last_offset_delta)),
            producer: h.producer,
            transactional: h.attributes.is_transactional(),
            kind: view.kind(),
            // Control records carry timestampDelta 0: their time is the base timestamp.
            timestamp: if control {
                h.base_timestamp
            } else {
                h.max_timestamp
            },
        }
    }

    /// `lastOffsetDelta`.
    #[must_use]
    pub fn offset_delta(&self) -> i32 {
        (self.last_offset.0 - self.base_offset.0) as i32
    }

    /// Last sequence (Kafka's `lastSequence`: none stays none, otherwise wraps).
    #[must_use]
    pub fn last_seq(&self) -> i32 {
        if self.producer.base_sequence < 0 {
            self.producer.base_sequence
        } else {
            sequence::last_sequence(self.producer.base_sequence, self.offset_delta())
        }
    }

    /// What the producer's history remembers of this batch.
    #[must_use]
    pub fn metadata(&self) -> BatchMetadata {
        BatchMetadata {
            last_seq: self.last_seq(),
            last_offset: self.last_offset,
            offset_delta: self.offset_delta(),
            timestamp: self.timestamp,
        }
    }
}

/// Settings of the PSM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerStateConfig {
    /// `producer.id.expiration.ms`.
    pub producer_id_expiration_ms: i64,
}

impl Default for ProducerStateConfig {
    fn default() -> Self {
        ProducerStateConfig {
            producer_id_expiration_ms: PRODUCER_ID_EXPIRATION_MS_DEFAULT,
        }
    }
}

/// The result of a successful [`ProducerStateManager::stage`]; hand it to
/// [`ProducerStateManager::apply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a staged append changes nothing until applied"]
pub struct Staged {
    mutation: u64,
    stage: u64,
    /// A Client duplicate: the original batch. Nothing is to be written or applied.
    pub duplicate: Option<BatchMetadata>,
    /// Whether a barrier in the append clears the state.
    pub clears: bool,
}

/// A producer's entry being staged (packed, as the table holds it), with what staging needs to
/// know of its committed state.
#[derive(Debug, Clone, Copy)]
struct Pending {
    producer_id: i64,
    entry: PackedEntry,
    /// First offset of its open transaction, as staged.
    txn_first_offset: Option<Offset>,
    /// Its epoch before this append (Kafka's `currentEntry.producerEpoch`, which the client
    /// sequence rule consults); −1 for a producer with no entry.
    committed_epoch: i16,
    /// Its slot in the table, when it has one (valid until the table changes; `apply` checks).
    slot: Option<u32>,
    /// Whether the committed entry has an open transaction.
    committed_txn_open: bool,
}

impl Pending {
    /// A producer with no entry.
    fn new(producer_id: i64) -> Self {
        Pending {
            producer_id,
            entry: PackedEntry::FILLER,
            txn_first_offset: None,
            committed_epoch: crate::format::NO_PRODUCER_EPOCH,
            slot: None,
            committed_txn_open: false,
        }
    }

    /// The entry to store: the staged one, flagged with whether a transaction is open.
    fn final_entry(&self) -> PackedEntry {
        let mut entry = self.entry;
        entry.hot.set_txn_open(self.txn_first_offset.is_some());
        entry
    }
}

/// Pending entries are found by linear search up to this many, through the index beyond.
const PENDING_LINEAR_MAX: usize = 8;

/// Where each producer of a long append sits in `Staging::pending`: open addressing over
/// `(producer id, position)` pairs with at least twice as many places as the append has
/// batches, wiped at the start of each append that needs it (the ids are non-negative, so −1
/// marks a free place).
#[derive(Debug, Clone, Default)]
struct PendingIndex {
    places: Vec<(i64, u32)>,
}

impl PendingIndex {
    const FREE: (i64, u32) = (-1, 0);

    /// Empties the index and sizes it for `producers` entries.
    fn reset(&mut self, producers: usize) {
        let len = (producers * 2).next_power_of_two().max(16);
        self.places.clear();
        self.places.resize(len, Self::FREE);
    }

    #[inline]
    fn home(&self, producer_id: i64) -> usize {
        (table::hash(producer_id) >> (64 - self.places.len().trailing_zeros())) as usize
    }

    fn get(&self, producer_id: i64) -> Option<usize> {
        let mask = self.places.len() - 1;
        let mut pos = self.home(producer_id);
        loop {
            let (id, at) = self.places[pos];
            if id == producer_id {
                return Some(at as usize);
            }
            if id == -1 {
                return None;
            }
            pos = (pos + 1) & mask;
        }
    }

    /// Adds a producer not in the index; the index holds fewer than half its places.
    fn insert(&mut self, producer_id: i64, at: usize) {
        let mask = self.places.len() - 1;
        let mut pos = self.home(producer_id);
        while self.places[pos].0 != -1 {
            pos = (pos + 1) & mask;
        }
        self.places[pos] = (producer_id, at as u32);
    }
}

/// Scratch space reused by every stage: nothing is allocated per append once warm.
#[derive(Debug, Clone)]
struct Staging {
    index: PendingIndex,
    /// Batches in the append being staged: bounds the producers `index` must hold.
    batches: usize,
    pending: Vec<Pending>,
    started: Vec<(Offset, i64)>,
    completed: Vec<CompletedTxn>,
    clears: bool,
    new_producers: usize,
    /// An append of one data batch (clients, replication, recovery's replay) is staged here
    /// instead of in `pending`: validated against the producer's entry where it lies, and
    /// recorded into it by `apply`. Valid when `has_one`.
    one: StagedOne,
    has_one: bool,
}

/// A single data batch, validated: what `apply` records. Written and read field by field (not
/// copied whole) on the hot path: a wide load of fields just written by narrow stores cannot
/// take them from the store buffer and waits until they reach the cache, which is after the
/// producer's entry arrived from memory.
#[derive(Debug, Clone, Copy)]
struct StagedOne {
    producer_id: i64,
    /// The batch's first offset (where a transaction it opens starts).
    base_offset: Offset,
    epoch: i16,
    metadata: BatchMetadata,
    /// The producer's slot, or [`StagedOne::NO_SLOT`] if it has no entry (valid until the
    /// table changes; `apply` checks).
    slot: u32,
    /// Whether the batch opens a transaction.
    opens: bool,
}

impl StagedOne {
    const NO_SLOT: u32 = u32::MAX;
    const EMPTY: StagedOne = StagedOne {
        producer_id: -1,
        base_offset: Offset(-1),
        epoch: crate::format::NO_PRODUCER_EPOCH,
        metadata: BatchMetadata {
            last_seq: crate::format::NO_SEQUENCE,
            last_offset: Offset(-1),
            offset_delta: 0,
            timestamp: -1,
        },
        slot: Self::NO_SLOT,
        opens: false,
    };
}

impl Staging {
    fn reset(&mut self) {
        self.has_one = false;
        self.forget_producers();
        self.completed.clear();
        self.clears = false;
    }

    /// Forgets staged producers and started transactions (a barrier inside the append), but
    /// keeps the transactions completed before it: their markers are in the log.
    fn forget_producers(&mut self) {
        self.pending.clear();
        self.started.clear();
        self.new_producers = 0;
    }

    fn find(&self, producer_id: i64) -> Option<usize> {
        if self.pending.len() <= PENDING_LINEAR_MAX {
            self.pending
                .iter()
                .position(|p| p.producer_id == producer_id)
        } else {
            self.index.get(producer_id)
        }
    }

    fn push(&mut self, pending: Pending) {
        let i = self.pending.len();
        self.pending.push(pending);
        // The index takes over once linear search gets long; an append has at most one
        // pending entry per batch.
        if i == PENDING_LINEAR_MAX {
            self.index.reset(self.batches);
            for (j, p) in self.pending.iter().enumerate() {
                self.index.insert(p.producer_id, j);
            }
        } else if i > PENDING_LINEAR_MAX {
            self.index.insert(pending.producer_id, i);
        }
    }
}

/// A borrowed look at one producer's entry; see [`ProducerStateManager::view`].
#[derive(Debug, Clone, Copy)]
pub struct ProducerView<'a> {
    entry: &'a HotEntry,
}

impl ProducerView<'_> {
    /// Current epoch.
    #[must_use]
    pub fn epoch(&self) -> i16 {
        self.entry.epoch()
    }

    /// Last sequence of the newest batch, or [`crate::format::NO_SEQUENCE`].
    #[must_use]
    pub fn last_seq(&self) -> i32 {
        self.entry.last_seq()
    }

    /// Coordinator epoch of the last marker (−1 if none).
    #[must_use]
    pub fn coordinator_epoch(&self) -> i32 {
        self.entry.coordinator_epoch()
    }

    /// Timestamp of the last batch or marker (ms).
    #[must_use]
    pub fn last_timestamp(&self) -> i64 {
        self.entry.last_timestamp()
    }

    /// Whether the producer has an open transaction.
    #[must_use]
    pub fn has_open_transaction(&self) -> bool {
        self.entry.txn_open()
    }
}

/// The producer state of one partition. See the module docs.
#[derive(Debug, Clone)]
pub struct ProducerStateManager {
    config: ProducerStateConfig,
    table: Table<HotEntry, ColdHistory>,
    open: OpenTxns,
    staging: Staging,
    /// Bumped by every change of observable state.
    mutation: u64,
    /// Bumped by every `stage`; only the latest stage can be applied.
    stage: u64,
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

    fn txn_first_offset(&self, producer_id: i64, entry: &HotEntry) -> Option<Offset> {
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

    /// Staging's view of a producer: pending if touched in this append, else committed (unless
    /// a barrier in this append cleared it), else empty.
    fn pending_index(&mut self, producer_id: i64) -> Result<usize, ()> {
        if let Some(i) = self.staging.find(producer_id) {
            return Ok(i);
        }
        let committed = if self.staging.clears {
            None
        } else {
            self.table.find_slot(producer_id)
        };
        let pending = match committed {
            Some(slot) => {
                let entry = PackedEntry {
                    hot: *self.table.hot_at(slot),
                    cold: *self.table.cold_at(slot),
                };
                Pending {
                    producer_id,
                    entry,
                    txn_first_offset: self.txn_first_offset(producer_id, &entry.hot),
                    committed_epoch: entry.hot.epoch(),
                    slot: Some(slot as u32),
                    committed_txn_open: entry.hot.txn_open(),
                }
            }
            None => {
                self.staging.new_producers += 1;
                let tracked = if self.staging.clears {
                    0
                } else {
                    self.table.len()
                };
                if tracked + self.staging.new_producers > ENTRIES_MAX {
                    return Err(());
                }
                Pending::new(producer_id)
            }
        };
        self.staging.push(pending);
        Ok(self.staging.pending.len() - 1)
    }

    /// Validates an append and stages its effect without changing any observable state.
    ///
    /// `barrier_clears(offset)` says whether a barrier at `offset` lies in a Local range (the
    /// log's mode history decides; SPEC §3).
    ///
    /// # Errors
    /// The first rule the append breaks; nothing is staged then.
    #[inline(always)]
    pub fn stage(
        &mut self,
        batches: &[BatchInfo],
        origin: Origin,
        barrier_clears: impl Fn(Offset) -> bool,
    ) -> Result<Staged, ProducerStateError> {
        self.staging.reset();
        self.stage += 1;
        if let [batch] = batches {
            if batch.kind == BatchKind::Data && batch.producer.producer_id >= 0 {
                return self.stage_one(batch, origin);
            }
        }
        self.staging.batches = batches.len();
        let result = self.stage_batches(batches, origin, &barrier_clears);
        if result.is_err() {
            self.staging.reset();
        }
        result
    }

    /// [`ProducerStateManager::stage`] for an append of one data batch with a producer id: the
    /// same rules on the producer's entry, without the overlay a multi-batch append needs.
    #[inline(always)]
    fn stage_one(
        &mut self,
        batch: &BatchInfo,
        origin: Origin,
    ) -> Result<Staged, ProducerStateError> {
        let producer_id = batch.producer.producer_id;
        let slot = self.table.find_slot(producer_id);
        let (entry, cold) = match slot {
            Some(slot) => {
                let cold = self.table.cold_at(slot);
                // `apply` writes one older batch into it: have the line arrive meanwhile.
                crate::io::prefetch_write(cold);
                (self.table.hot_at(slot), cold)
            }
            None if self.table.len() >= ENTRIES_MAX => {
                return Err(ProducerStateError::TooManyProducers {
                    producer_id,
                    offset: batch.base_offset,
                    max: ENTRIES_MAX,
                })
            }
            None => (&HotEntry::FILLER, &ColdHistory::FILLER),
        };
        let mut staged = Staged {
            mutation: self.mutation,
            stage: self.stage,
            duplicate: None,
            clears: false,
        };
        if origin == Origin::Client {
            let p = &batch.producer;
            staged.duplicate =
                entry.find_duplicate(cold, p.producer_epoch, p.base_sequence, batch.last_seq());
            if staged.duplicate.is_some() {
                return Ok(staged);
            }
        }
        let current = Current {
            producer_id,
            entry,
            committed_epoch: entry.epoch(),
            txn_first_offset: self.txn_first_offset(producer_id, entry),
        };
        let opens = check_data(&current, batch, origin)?;
        let one = &mut self.staging.one;
        one.producer_id = producer_id;
        one.base_offset = batch.base_offset;
        one.epoch = batch.producer.producer_epoch;
        one.metadata = batch.metadata();
        // Slot indices fit 24 bits (`ENTRIES_MAX`).
        one.slot = slot.map_or(StagedOne::NO_SLOT, |s| s as u32);
        one.opens = opens;
        self.staging.has_one = true;
        Ok(staged)
    }

    #[inline(never)]
    fn stage_batches(
        &mut self,
        batches: &[BatchInfo],
        origin: Origin,
        barrier_clears: &dyn Fn(Offset) -> bool,
    ) -> Result<Staged, ProducerStateError> {
        let mut staged = Staged {
            mutation: self.mutation,
            stage: self.stage,
            duplicate: None,
            clears: false,
        };
        if batches.len() > 1 {
            // Start fetching every producer's slot first (its bucket is read here): the
            // fetches overlap, so a mirrored chunk from many producers pays about one memory
            // latency, not one per batch.
            for batch in batches {
                if let Some(index) = self.table.home_index(batch.producer.producer_id) {
                    crate::io::prefetch_write(self.table.slot_at(index));
                    crate::io::prefetch_write(self.table.cold_at(index));
                }
            }
        }
        for batch in batches {
            let producer_id = batch.producer.producer_id;
            match batch.kind {
                BatchKind::Barrier => {
                    if barrier_clears(batch.base_offset) {
                        // Transactions completed before the barrier stay completed (their
                        // markers are in the log); everything else starts over.
                        self.staging.forget_producers();
                        self.staging.clears = true;
                        staged.clears = true;
                    }
                    continue;
                }
                BatchKind::EmptyControl | BatchKind::OtherControl { .. } => continue,
                BatchKind::Data | BatchKind::TxnMarker { .. } if producer_id < 0 => continue,
                BatchKind::Data | BatchKind::TxnMarker { .. } => {}
            }
            let i = self.pending_index(producer_id).map_err(|()| {
                ProducerStateError::TooManyProducers {
                    producer_id,
                    offset: batch.base_offset,
                    max: ENTRIES_MAX,
                }
            })?;
            let pending = &mut self.staging.pending[i];
            match batch.kind {
                BatchKind::TxnMarker {
                    commit,
                    coordinator_epoch,
                } => {
                    if let Some(done) =
                        stage_marker(pending, batch, origin, commit, coordinator_epoch)?
                    {
                        self.staging.completed.push(done);
                    }
                }
                _ => {
                    let p = &batch.producer;
                    // Always walk the history, even for a batch that follows the last sequence:
                    // a replicated history may hold the same range earlier, and Kafka checks
                    // duplicates first (regression: `in_sequence_batch_repeating_a_replicated_one`).
                    if origin == Origin::Client && batches.len() == 1 {
                        if let Some(original) = pending.entry.find_duplicate(
                            p.producer_epoch,
                            p.base_sequence,
                            batch.last_seq(),
                        ) {
                            self.staging.reset();
                            staged.duplicate = Some(original);
                            return Ok(staged);
                        }
                    }
                    if stage_data(pending, batch, origin)? {
                        self.staging.started.push((batch.base_offset, producer_id));
                    }
                }
            }
        }
        self.staging.clears = staged.clears;
        Ok(staged)
    }

    /// Makes a staged append the state. Returns the transactions it completed, in order.
    ///
    /// # Errors
    /// [`ProducerStateError::StaleStage`] if anything changed since `staged` was produced.
    #[inline(always)]
    pub fn apply(&mut self, staged: Staged) -> Result<&[CompletedTxn], ProducerStateError> {
        if staged.mutation != self.mutation || staged.stage != self.stage {
            return Err(ProducerStateError::StaleStage);
        }
        self.mutation += 1;
        if staged.duplicate.is_some() {
            self.staging.reset();
            return Ok(&[]);
        }
        if self.staging.has_one {
            self.staging.has_one = false;
            self.apply_one();
            return Ok(&[]);
        }
        Ok(self.apply_pending())
    }

    /// [`ProducerStateManager::apply`] of what `stage_batches` staged.
    #[inline(never)]
    fn apply_pending(&mut self) -> &[CompletedTxn] {
        if self.staging.clears {
            self.clear_for_barrier();
        }
        let mut txns_changed = false;
        for p in &self.staging.pending {
            let entry = p.final_entry();
            match p.slot {
                // The slot index is still valid: nothing changed since `stage` (checked above).
                Some(slot) if !self.staging.clears => {
                    let (hot, cold) = self.table.at_mut(slot as usize);
                    *hot = entry.hot;
                    *cold = entry.cold;
                }
                _ => {
                    // `stage` counted new producers against the limit, so this cannot fail.
                    let inserted = self.table.insert(p.producer_id, entry.hot, entry.cold);
                    debug_assert!(inserted.is_ok());
                }
            }
            if p.committed_txn_open && p.txn_first_offset.is_none() {
                self.open.close(p.producer_id);
                txns_changed = true;
            }
        }
        // Transactions opened by this append, in offset order, if still open at its end.
        for &(first, id) in &self.staging.started {
            let still_open = self
                .staging
                .find(id)
                .and_then(|i| self.staging.pending[i].txn_first_offset)
                == Some(first);
            if still_open {
                let opened = self.open.open(id, first);
                debug_assert!(opened.is_ok());
                txns_changed = true;
            }
        }
        // Kafka's lastStableOffset per completed transaction: transactions completed later in
        // the same append still count as open when an earlier one completes.
        let completed = &mut self.staging.completed;
        for i in 0..completed.len() {
            let done = completed[i];
            let later = completed[i + 1..]
                .iter()
                .filter(|c| c.producer_id != done.producer_id)
                .map(|c| c.first_offset)
                .min();
            let open = self.open.first_open_excluding(done.producer_id);
            let next_incomplete = match (open, later) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            completed[i].last_stable_offset =
                next_incomplete.unwrap_or(Offset(done.last_offset.0 + 1));
        }
        if txns_changed {
            self.open.tidy();
        }
        #[cfg(debug_assertions)]
        self.check_invariants();
        &self.staging.completed
    }

    /// [`ProducerStateManager::apply`] of the single data batch `stage_one` validated: it
    /// joins the producer's history in place. A data batch never closes a transaction; it may
    /// open one.
    #[inline(always)]
    fn apply_one(&mut self) {
        let one = &self.staging.one;
        let producer_id = one.producer_id;
        if one.slot == StagedOne::NO_SLOT {
            let mut entry = PackedEntry::FILLER;
            entry
                .hot
                .add_batch(&mut entry.cold, one.epoch, &one.metadata);
            entry.hot.set_txn_open(one.opens);
            // `stage_one` checked the limit, so this cannot fail.
            let inserted = self.table.insert(producer_id, entry.hot, entry.cold);
            debug_assert!(inserted.is_ok());
        } else {
            // Still valid: nothing changed since `stage` (checked by `apply`).
            let (hot, cold) = self.table.at_mut(one.slot as usize);
            hot.add_batch(cold, one.epoch, &one.metadata);
            if one.opens {
                hot.set_txn_open(true);
            }
        }
        if one.opens {
            let opened = self.open.open(producer_id, one.base_offset);
            debug_assert!(opened.is_ok());
            self.open.tidy();
        }
        #[cfg(debug_assertions)]
        self.check_invariants();
    }

    /// Removes every producer entry and all open-transaction tracking, in constant time for the
    /// producer table. Called by `apply` for a barrier in a Local range; public for the log's
    /// truncation paths and tests.
    pub fn clear_for_barrier(&mut self) {
        self.table.clear();
        self.open.clear();
        self.mutation += 1;
    }

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

/// What the data and marker rules read of a producer: its entry as staged so far, and what
/// was committed before this append.
struct Current<'a> {
    producer_id: i64,
    entry: &'a HotEntry,
    /// Its epoch before this append (Kafka's `currentEntry.producerEpoch`).
    committed_epoch: i16,
    /// First offset of its open transaction, as staged.
    txn_first_offset: Option<Offset>,
}

impl Pending {
    fn current(&self) -> Current<'_> {
        Current {
            producer_id: self.producer_id,
            entry: &self.entry.hot,
            committed_epoch: self.committed_epoch,
            txn_first_offset: self.txn_first_offset,
        }
    }
}

/// Kafka's `checkProducerEpoch`.
fn check_epoch(
    p: &Current<'_>,
    batch: &BatchInfo,
    origin: Origin,
) -> Result<(), ProducerStateError> {
    let epoch = batch.producer.producer_epoch;
    let current_epoch = p.entry.epoch();
    if epoch < current_epoch && !origin.accepts_stale_epochs() {
        return Err(ProducerStateError::InvalidProducerEpoch {
            producer_id: p.producer_id,
            offset: batch.base_offset,
            epoch,
            current_epoch,
        });
    }
    Ok(())
}

/// Kafka's `checkSequence` (Client origin only).
fn check_sequence(p: &Current<'_>, batch: &BatchInfo) -> Result<(), ProducerStateError> {
    let epoch = batch.producer.producer_epoch;
    let current_epoch = p.entry.epoch();
    let first_seq = batch.producer.base_sequence;
    let in_order = if epoch != current_epoch {
        // A new epoch starts at 0, unless the producer's epoch is unknown.
        first_seq == 0 || current_epoch == crate::format::NO_PRODUCER_EPOCH
    } else {
        // With no epoch known before this append (no entry, or one whose history was lost to
        // retention), any sequence is accepted.
        p.committed_epoch == crate::format::NO_PRODUCER_EPOCH
            || sequence::in_sequence(p.entry.last_seq(), first_seq)
    };
    if in_order {
        Ok(())
    } else {
        Err(ProducerStateError::OutOfOrderSequence {
            producer_id: p.producer_id,
            offset: batch.base_offset,
            epoch,
            first_seq,
            current_epoch,
            last_seq: p.entry.last_seq(),
        })
    }
}

/// The rules of Kafka's `appendDataBatch`, changing nothing. Returns whether the batch opens a
/// transaction.
fn check_data(
    p: &Current<'_>,
    batch: &BatchInfo,
    origin: Origin,
) -> Result<bool, ProducerStateError> {
    check_epoch(p, batch, origin)?;
    if origin == Origin::Client {
        check_sequence(p, batch)?;
    }
    match (p.txn_first_offset, batch.transactional) {
        (Some(txn_first_offset), false) => Err(ProducerStateError::InvalidTxnState {
            producer_id: p.producer_id,
            offset: batch.base_offset,
            txn_first_offset,
        }),
        (None, true) => Ok(true),
        _ => Ok(false),
    }
}

/// Kafka's `appendDataBatch`'s effect on the entry: the batch joins the history.
fn record_data(entry: &mut HotEntry, cold: &mut ColdHistory, batch: &BatchInfo) {
    entry.add_batch(cold, batch.producer.producer_epoch, &batch.metadata());
}

/// Kafka's `appendDataBatch` on a pending entry. Returns whether the batch opened a
/// transaction.
fn stage_data(
    p: &mut Pending,
    batch: &BatchInfo,
    origin: Origin,
) -> Result<bool, ProducerStateError> {
    let opens = check_data(&p.current(), batch, origin)?;
    record_data(&mut p.entry.hot, &mut p.entry.cold, batch);
    if opens {
        p.txn_first_offset = Some(batch.base_offset);
    }
    Ok(opens)
}

/// Kafka's `appendEndTxnMarker`.
fn stage_marker(
    p: &mut Pending,
    batch: &BatchInfo,
    origin: Origin,
    commit: bool,
    coordinator_epoch: i32,
) -> Result<Option<CompletedTxn>, ProducerStateError> {
    check_epoch(&p.current(), batch, origin)?;
    let current = p.entry.hot.coordinator_epoch();
    if current > coordinator_epoch && !origin.accepts_stale_epochs() {
        return Err(ProducerStateError::CoordinatorFenced {
            producer_id: p.producer_id,
            offset: batch.base_offset,
            coordinator_epoch,
            current_coordinator_epoch: current,
        });
    }
    let completed = p.txn_first_offset.take().map(|first_offset| CompletedTxn {
        producer_id: p.producer_id,
        first_offset,
        last_offset: batch.base_offset,
        aborted: !commit,
        last_stable_offset: Offset(batch.base_offset.0 + 1),
    });
    p.entry.hot.update_epoch(batch.producer.producer_epoch);
    p.entry.hot.set_coordinator_epoch(coordinator_epoch);
    p.entry.hot.set_last_timestamp(batch.timestamp);
    Ok(completed)
}
