//! Staging: validating an append against the rules of its origin and computing its effect in
//! reusable scratch, without changing any observable state. A single data batch (the common
//! case: clients, replication, recovery's replay) is staged in place; longer appends go
//! through an overlay of pending entries found by linear search or a per-append index.

use super::table;
use super::{
    check_data, stage_data, stage_marker, BatchInfo, BatchMetadata, ColdHistory, CompletedTxn,
    Current, HotEntry, Origin, PackedEntry, ProducerStateError, ProducerStateManager, ENTRIES_MAX,
};
use crate::format::{BatchKind, Offset};

/// The result of a successful [`ProducerStateManager::stage`]; hand it to
/// [`ProducerStateManager::apply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a staged append changes nothing until applied"]
pub struct Staged {
    pub(super) mutation: u64,
    pub(super) stage: u64,
    /// A Client duplicate: the original batch. Nothing is to be written or applied.
    pub duplicate: Option<BatchMetadata>,
    /// Whether a barrier in the append clears the state.
    pub clears: bool,
}

/// A producer's entry being staged (packed, as the table holds it), with what staging needs to
/// know of its committed state.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    pub(super) producer_id: i64,
    pub(super) entry: PackedEntry,
    /// First offset of its open transaction, as staged.
    pub(super) txn_first_offset: Option<Offset>,
    /// Its epoch before this append (Kafka's `currentEntry.producerEpoch`, which the client
    /// sequence rule consults); −1 for a producer with no entry.
    pub(super) committed_epoch: i16,
    /// Its slot in the table, when it has one (valid until the table changes; `apply` checks).
    pub(super) slot: Option<u32>,
    /// Whether the committed entry has an open transaction.
    pub(super) committed_txn_open: bool,
}

impl Pending {
    /// A producer with no entry.
    pub(super) fn new(producer_id: i64) -> Self {
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
    pub(super) fn final_entry(&self) -> PackedEntry {
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
pub(super) struct PendingIndex {
    pub(super) places: Vec<(i64, u32)>,
}

impl PendingIndex {
    const FREE: (i64, u32) = (-1, 0);

    /// Empties the index and sizes it for `producers` entries.
    pub(super) fn reset(&mut self, producers: usize) {
        let len = (producers * 2).next_power_of_two().max(16);
        self.places.clear();
        self.places.resize(len, Self::FREE);
    }

    #[inline]
    pub(super) fn home(&self, producer_id: i64) -> usize {
        (table::hash(producer_id) >> (64 - self.places.len().trailing_zeros())) as usize
    }

    pub(super) fn get(&self, producer_id: i64) -> Option<usize> {
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
    pub(super) fn insert(&mut self, producer_id: i64, at: usize) {
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
pub(super) struct Staging {
    pub(super) index: PendingIndex,
    /// Batches in the append being staged: bounds the producers `index` must hold.
    pub(super) batches: usize,
    pub(super) pending: Vec<Pending>,
    pub(super) started: Vec<(Offset, i64)>,
    pub(super) completed: Vec<CompletedTxn>,
    pub(super) clears: bool,
    pub(super) new_producers: usize,
    /// An append of one data batch (clients, replication, recovery's replay) is staged here
    /// instead of in `pending`: validated against the producer's entry where it lies, and
    /// recorded into it by `apply`. Valid when `has_one`.
    pub(super) one: StagedOne,
    pub(super) has_one: bool,
    /// An append of data batches from pairwise distinct producers (the usual mirrored chunk):
    /// each staged like `one`, in order. Valid when `has_many`.
    pub(super) many: Vec<StagedOne>,
    pub(super) has_many: bool,
}

/// A single data batch, validated: what `apply` records. Written and read field by field (not
/// copied whole) on the hot path: a wide load of fields just written by narrow stores cannot
/// take them from the store buffer and waits until they reach the cache, which is after the
/// producer's entry arrived from memory.
#[derive(Debug, Clone, Copy)]
pub(super) struct StagedOne {
    pub(super) producer_id: i64,
    /// The batch's first offset (where a transaction it opens starts).
    pub(super) base_offset: Offset,
    pub(super) epoch: i16,
    pub(super) metadata: BatchMetadata,
    /// The producer's slot, or [`StagedOne::NO_SLOT`] if it has no entry (valid until the
    /// table changes; `apply` checks).
    pub(super) slot: u32,
    /// Whether the batch opens a transaction.
    pub(super) opens: bool,
}

impl StagedOne {
    pub(super) const NO_SLOT: u32 = u32::MAX;
    pub(super) const EMPTY: StagedOne = StagedOne {
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
    pub(super) fn reset(&mut self) {
        self.has_one = false;
        self.has_many = false;
        self.many.clear();
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

    pub(super) fn find(&self, producer_id: i64) -> Option<usize> {
        if self.pending.len() <= PENDING_LINEAR_MAX {
            self.pending
                .iter()
                .position(|p| p.producer_id == producer_id)
        } else {
            self.index.get(producer_id)
        }
    }

    pub(super) fn push(&mut self, pending: Pending) {
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

impl ProducerStateManager {
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
    /// log's mode history decides; design.md §Mirroring).
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
        if batches.len() > 1 {
            // Start fetching every producer's slot first (its bucket is read here), once for
            // whichever path stages the append: the fetches overlap, so a mirrored chunk from
            // many producers pays about one memory latency, not one per batch.
            self.prefetch_producers(batches.iter().map(|b| b.producer.producer_id));
            if let Some(result) = self.stage_distinct(batches, origin) {
                return result;
            }
        }
        let result = self.stage_batches(batches, origin, &barrier_clears);
        if result.is_err() {
            self.staging.reset();
        }
        result
    }

    /// The lookahead of a turn: starts fetching the table slots of `producer_ids` (the hot line
    /// staging reads and the cold line `apply` writes) without waiting for it, so that the
    /// misses of many appends overlap instead of each append waiting for its own. Call it for
    /// every append of a turn (a shard's queue drained at once, a recovery read's batches)
    /// before staging the first; it reads the producer's home bucket and changes nothing
    /// observable (a producer with no entry, or a home bucket holding another producer's slot,
    /// just warms that slot).
    #[inline]
    pub fn prefetch_producers(&self, producer_ids: impl Iterator<Item = i64> + Clone) {
        // Two stages: the home buckets first (pure hints, nothing waits), then each bucket is
        // read — by now arriving — and its slot's lines are hinted.
        for id in producer_ids.clone().filter(|&id| id >= 0) {
            self.table.prefetch_home(id);
        }
        for id in producer_ids {
            self.prefetch_producer(id);
        }
    }

    /// The first stage of [`ProducerStateManager::prefetch_producers`] for one producer (its
    /// home bucket hinted, not read), for callers whose producers come from several places.
    #[inline]
    pub fn prefetch_home(&self, producer_id: i64) {
        if producer_id >= 0 {
            self.table.prefetch_home(producer_id);
        }
    }

    /// [`ProducerStateManager::prefetch_producers`] for one producer, in one stage (its home
    /// bucket is read here).
    #[inline]
    pub fn prefetch_producer(&self, producer_id: i64) {
        if producer_id < 0 {
            return;
        }
        if let Some(index) = self.table.home_index(producer_id) {
            crate::mem::prefetch_write(self.table.slot_at(index));
            crate::mem::prefetch_write(self.table.cold_at(index));
        }
    }

    /// [`ProducerStateManager::stage`] for an append of one data batch with a producer id: the
    /// same rules on the producer's entry, without the overlay a multi-batch append needs.
    #[inline(always)]
    pub(super) fn stage_one(
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
                crate::mem::prefetch_write(cold);
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

    /// [`ProducerStateManager::stage`] for an append of data batches whose producers are
    /// pairwise distinct (no markers, barriers or other control batches; batches without a
    /// producer id are skipped): each batch is validated against its producer's entry where it
    /// lies, as a single batch is, with no overlay — the same rules and the same first error as
    /// the general path, whose overlay only matters when a producer appears twice or a barrier
    /// or marker intervenes. `None`: the append is not of that shape (nothing staged; the
    /// general path takes it).
    #[inline(never)]
    fn stage_distinct(
        &mut self,
        batches: &[BatchInfo],
        origin: Origin,
    ) -> Option<Result<Staged, ProducerStateError>> {
        if batches.iter().any(|b| b.kind != BatchKind::Data) {
            return None;
        }
        self.staging.many.clear();
        // Producers seen so far, as a 1024-bit filter of their hashes: a bit already set is
        // checked exactly against the batches staged before (rare when producers are distinct).
        let mut seen = [0u64; 16];
        let mut new_producers = 0usize;
        for batch in batches {
            let producer_id = batch.producer.producer_id;
            if producer_id < 0 {
                continue;
            }
            let bit = (table::hash(producer_id) >> 54) as usize;
            let (word, mask) = (bit >> 6, 1u64 << (bit & 63));
            if seen[word] & mask != 0
                && self
                    .staging
                    .many
                    .iter()
                    .any(|o| o.producer_id == producer_id)
            {
                self.staging.many.clear();
                return None;
            }
            seen[word] |= mask;
            let slot = self.table.find_slot(producer_id);
            let entry = match slot {
                Some(slot) => self.table.hot_at(slot),
                None => {
                    new_producers += 1;
                    if self.table.len() + new_producers > ENTRIES_MAX {
                        self.staging.many.clear();
                        return Some(Err(ProducerStateError::TooManyProducers {
                            producer_id,
                            offset: batch.base_offset,
                            max: ENTRIES_MAX,
                        }));
                    }
                    &HotEntry::FILLER
                }
            };
            let current = Current {
                producer_id,
                entry,
                committed_epoch: entry.epoch(),
                txn_first_offset: self.txn_first_offset(producer_id, entry),
            };
            let opens = match check_data(&current, batch, origin) {
                Ok(opens) => opens,
                Err(e) => {
                    self.staging.many.clear();
                    return Some(Err(e));
                }
            };
            self.staging.many.push(StagedOne {
                producer_id,
                base_offset: batch.base_offset,
                epoch: batch.producer.producer_epoch,
                metadata: batch.metadata(),
                // Slot indices fit 24 bits (`ENTRIES_MAX`); inserts in `apply` append slots and
                // never move existing ones.
                slot: slot.map_or(StagedOne::NO_SLOT, |s| s as u32),
                opens,
            });
        }
        self.staging.has_many = true;
        Some(Ok(Staged {
            mutation: self.mutation,
            stage: self.stage,
            duplicate: None,
            clears: false,
        }))
    }

    #[inline(never)]
    pub(super) fn stage_batches(
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
                BatchKind::OtherControl { .. } => continue,
                _ if producer_id < 0 => continue,
                BatchKind::EmptyControl => {
                    // Kafka's `ProducerAppendInfo.append` skips an empty control batch (its
                    // transaction was cleaned from the log) but the producer's entry is still
                    // created, unchanged if it existed (`prepareUpdate` + `update`).
                    self.pending_index(producer_id).map_err(|()| {
                        ProducerStateError::TooManyProducers {
                            producer_id,
                            offset: batch.base_offset,
                            max: ENTRIES_MAX,
                        }
                    })?;
                    continue;
                }
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
}
