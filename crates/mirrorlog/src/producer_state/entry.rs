//! One producer's state: epochs, timestamps and the metadata of its last five batches, in the
//! full-precision form staging works on and the packed form the table stores.
//!
//! Packing keeps the newest batch at full width and each older batch as deltas from the next
//! newer one (`u32` offsets, `i32` milliseconds), which is what brings an entry to 112 bytes with
//! its key: a 64-byte hot part (one cache line: key, epochs, timestamps, the newest batch and
//! the older batches' last sequences) that every append reads, and a 48-byte cold part (the
//! older batches' other fields) that an append only writes, unless its last sequence matches
//! an older batch's.
//! An older batch whose deltas do not fit (more than 4,294,967,295 offsets or about 24.8 days
//! from the next newer batch) is dropped from the history together with anything older: such a
//! batch cannot be a retry within any producer's delivery timeout, so duplicate detection loses
//! nothing a client could ask for.

use crate::format::{sequence, Offset, NO_PRODUCER_EPOCH, NO_SEQUENCE};

/// How many recent batches each producer remembers for duplicate detection (Kafka's 5).
pub const BATCH_HISTORY_LEN: usize = 5;
const OLDER_LEN: usize = BATCH_HISTORY_LEN - 1;

/// The metadata of one appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchMetadata {
    /// Sequence of the batch's last record ([`NO_SEQUENCE`] when the batch had none).
    pub last_seq: i32,
    /// Offset of the batch's last record.
    pub last_offset: Offset,
    /// `lastOffsetDelta`: last offset − first offset, which is also the sequence span.
    pub offset_delta: i32,
    /// The batch's max timestamp.
    pub timestamp: i64,
}

impl BatchMetadata {
    /// Sequence of the batch's first record.
    #[must_use]
    pub fn first_seq(&self) -> i32 {
        if self.last_seq < 0 {
            NO_SEQUENCE
        } else {
            sequence::decrement(self.last_seq, self.offset_delta)
        }
    }

    /// Offset of the batch's first record.
    #[must_use]
    pub fn first_offset(&self) -> Offset {
        Offset(self.last_offset.0 - i64::from(self.offset_delta))
    }
}

const EMPTY_BATCH: BatchMetadata = BatchMetadata {
    last_seq: NO_SEQUENCE,
    last_offset: Offset(-1),
    offset_delta: 0,
    timestamp: -1,
};

/// The last batches of a producer, oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchHistory {
    items: [BatchMetadata; BATCH_HISTORY_LEN],
    len: u8,
}

impl Default for BatchHistory {
    fn default() -> Self {
        BatchHistory {
            items: [EMPTY_BATCH; BATCH_HISTORY_LEN],
            len: 0,
        }
    }
}

impl BatchHistory {
    /// Batches remembered, oldest first.
    #[must_use]
    pub fn as_slice(&self) -> &[BatchMetadata] {
        &self.items[..usize::from(self.len)]
    }

    /// The newest batch.
    #[must_use]
    pub fn last(&self) -> Option<&BatchMetadata> {
        self.as_slice().last()
    }

    /// Whether no batch is remembered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every batch.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Remembers `batch` as the newest, forgetting the oldest beyond five.
    pub fn push(&mut self, batch: BatchMetadata) {
        if usize::from(self.len) == BATCH_HISTORY_LEN {
            self.items.rotate_left(1);
            self.items[BATCH_HISTORY_LEN - 1] = batch;
        } else {
            self.items[usize::from(self.len)] = batch;
            self.len += 1;
        }
    }
}

/// A producer's state, as staging works on it and as [`super::ProducerStateManager::producers`]
/// reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerEntry {
    /// The producer id.
    pub producer_id: i64,
    /// Current epoch ([`NO_PRODUCER_EPOCH`] if never seen).
    pub epoch: i16,
    /// Coordinator epoch of the last marker (−1 if none).
    pub coordinator_epoch: i32,
    /// Timestamp of the last batch or marker (ms).
    pub last_timestamp: i64,
    /// First offset of the open transaction, if any.
    pub current_txn_first_offset: Option<Offset>,
    /// The last five batches, oldest first.
    pub batches: BatchHistory,
}

impl ProducerEntry {
    /// The state of a producer with no entry.
    #[must_use]
    pub fn empty(producer_id: i64) -> Self {
        ProducerEntry {
            producer_id,
            epoch: NO_PRODUCER_EPOCH,
            coordinator_epoch: -1,
            last_timestamp: -1,
            current_txn_first_offset: None,
            batches: BatchHistory::default(),
        }
    }

    /// Last sequence of the newest batch, or [`NO_SEQUENCE`].
    #[must_use]
    pub fn last_seq(&self) -> i32 {
        self.batches.last().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// Last offset of the newest batch, or −1.
    #[must_use]
    pub fn last_data_offset(&self) -> Offset {
        self.batches.last().map_or(Offset(-1), |b| b.last_offset)
    }

    /// The remembered batch with exactly this epoch and sequence range, if any (a retry).
    #[must_use]
    pub fn find_duplicate(
        &self,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
    ) -> Option<BatchMetadata> {
        if epoch != self.epoch {
            return None;
        }
        self.batches
            .as_slice()
            .iter()
            .find(|b| b.first_seq() == first_seq && b.last_seq == last_seq)
            .copied()
    }

    /// Moves to `epoch`; a different epoch forgets the batch history (Kafka's
    /// `maybeUpdateProducerEpoch`).
    pub fn update_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
    }

    /// Records a data batch (Kafka's `addBatch`).
    pub fn add_batch(&mut self, epoch: i16, batch: BatchMetadata) {
        self.update_epoch(epoch);
        self.batches.push(batch);
        self.last_timestamp = batch.timestamp;
    }
}

/// An older batch's cold fields: what duplicate detection needs only once its last sequence
/// matched, as deltas from the next newer batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct OlderCold {
    offset_delta: i32,
    /// Next newer batch's last offset − this one's.
    offset_back: u32,
    /// Next newer batch's timestamp − this one's.
    timestamp_back: i32,
}

const EMPTY_OLDER: OlderCold = OlderCold {
    offset_delta: 0,
    offset_back: 0,
    timestamp_back: 0,
};

/// The part of a producer's entry every append reads: with the key, one 64-byte table slot
/// (one cache line). The four older batches are a ring: logical older batch `i` (0 = the one
/// before the newest) is at position `(head + i) % 4` here (its last sequence) and in
/// [`ColdHistory`] (the rest), so remembering a batch writes one place of each and moves
/// nothing.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub(crate) struct HotEntry {
    last_offset: i64,
    last_timestamp: i64,
    batch_timestamp: i64,
    last_seq: i32,
    offset_delta: i32,
    coordinator_epoch: i32,
    older_last_seq: [i32; OLDER_LEN],
    epoch: i16,
    /// Batches remembered, 0..=5.
    batch_count: u8,
    /// Bit 0: a transaction is open. Bits 1–2: the ring's head.
    flags: u8,
}

/// The older batches' other fields, in the table's cold column: read when an append's last
/// sequence matches an older batch's (a suspected retry) and when the entry is unpacked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ColdHistory {
    older: [OlderCold; OLDER_LEN],
}

/// A producer's entry as the table stores it: [`ProducerEntry`] minus the key and the
/// transaction offset (held by the open-transaction index), with the history packed. 56 + 48
/// bytes; 64 + 48 with the key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PackedEntry {
    pub(crate) hot: HotEntry,
    pub(crate) cold: ColdHistory,
}

const FLAG_TXN_OPEN: u8 = 1;
const HEAD_SHIFT: u32 = 1;
const HEAD_MASK: u8 = 0b110;
const RING_MASK: usize = OLDER_LEN - 1;

const _: () = assert!(OLDER_LEN.is_power_of_two());
const _: () = assert!(std::mem::size_of::<HotEntry>() == 56);
const _: () = assert!(std::mem::size_of::<ColdHistory>() == 48);
const _: () = assert!(std::mem::size_of::<super::table::Slot<HotEntry>>() == 64);

const HOT_FILLER: HotEntry = HotEntry {
    last_offset: -1,
    last_timestamp: -1,
    batch_timestamp: -1,
    last_seq: NO_SEQUENCE,
    offset_delta: 0,
    coordinator_epoch: -1,
    older_last_seq: [NO_SEQUENCE; OLDER_LEN],
    epoch: NO_PRODUCER_EPOCH,
    batch_count: 0,
    flags: 0,
};

impl ColdHistory {
    pub(crate) const FILLER: ColdHistory = ColdHistory {
        older: [EMPTY_OLDER; OLDER_LEN],
    };
}

impl HotEntry {
    pub(crate) const FILLER: HotEntry = HOT_FILLER;

    /// Ring position of logical older batch `i`.
    #[inline]
    fn ring(&self, i: usize) -> usize {
        (usize::from((self.flags & HEAD_MASK) >> HEAD_SHIFT) + i) & RING_MASK
    }

    #[inline]
    fn newest(&self) -> BatchMetadata {
        BatchMetadata {
            last_seq: self.last_seq,
            last_offset: Offset(self.last_offset),
            offset_delta: self.offset_delta,
            timestamp: self.batch_timestamp,
        }
    }

    /// The remembered batches newest first, rebuilt from both parts.
    fn newest_first(&self, cold: &ColdHistory) -> impl Iterator<Item = BatchMetadata> + '_ {
        let cold = *cold;
        let count = usize::from(self.batch_count);
        let mut next = (count > 0).then(|| self.newest());
        let mut i = 0;
        std::iter::from_fn(move || {
            let batch = next?;
            next = (i + 1 < count).then(|| {
                let at = self.ring(i);
                let o = cold.older[at];
                BatchMetadata {
                    last_seq: self.older_last_seq[at],
                    last_offset: Offset(batch.last_offset.0 - i64::from(o.offset_back)),
                    offset_delta: o.offset_delta,
                    timestamp: batch.timestamp - i64::from(o.timestamp_back),
                }
            });
            i += 1;
            Some(batch)
        })
    }

    pub(crate) fn txn_open(&self) -> bool {
        self.flags & FLAG_TXN_OPEN != 0
    }

    pub(crate) fn set_txn_open(&mut self, open: bool) {
        if open {
            self.flags |= FLAG_TXN_OPEN;
        } else {
            self.flags &= !FLAG_TXN_OPEN;
        }
    }

    pub(crate) fn last_timestamp(&self) -> i64 {
        self.last_timestamp
    }

    pub(crate) fn set_last_timestamp(&mut self, timestamp: i64) {
        self.last_timestamp = timestamp;
    }

    pub(crate) fn epoch(&self) -> i16 {
        self.epoch
    }

    pub(crate) fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }

    pub(crate) fn set_coordinator_epoch(&mut self, coordinator_epoch: i32) {
        self.coordinator_epoch = coordinator_epoch;
    }

    /// Last sequence of the newest batch, or [`NO_SEQUENCE`].
    pub(crate) fn last_seq(&self) -> i32 {
        if self.batch_count == 0 {
            NO_SEQUENCE
        } else {
            self.last_seq
        }
    }

    /// [`ProducerEntry::update_epoch`] on the packed form.
    pub(crate) fn update_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.batch_count = 0;
            self.epoch = epoch;
        }
    }

    /// [`ProducerEntry::add_batch`] on the packed form: the newest batch becomes the first
    /// older one (as deltas from `batch`) at the ring's new head, over the oldest beyond
    /// five. Writes one place of `cold` and reads none of it.
    #[inline]
    pub(crate) fn add_batch(&mut self, cold: &mut ColdHistory, epoch: i16, batch: &BatchMetadata) {
        self.update_epoch(epoch);
        if self.batch_count > 0 {
            let offset_back = u32::try_from(batch.last_offset.0 - self.last_offset);
            let timestamp_back = batch
                .timestamp
                .checked_sub(self.batch_timestamp)
                .and_then(|d| i32::try_from(d).ok());
            if let (Ok(offset_back), Some(timestamp_back)) = (offset_back, timestamp_back) {
                let head = self.ring(RING_MASK);
                self.older_last_seq[head] = self.last_seq;
                cold.older[head] = OlderCold {
                    offset_delta: self.offset_delta,
                    offset_back,
                    timestamp_back,
                };
                self.flags = (self.flags & !HEAD_MASK) | ((head as u8) << HEAD_SHIFT);
                self.batch_count = (self.batch_count + 1).min(BATCH_HISTORY_LEN as u8);
            } else {
                // Too far apart to be a retry target: forget the older history.
                self.batch_count = 1;
            }
        } else {
            self.batch_count = 1;
        }
        self.last_offset = batch.last_offset.0;
        self.batch_timestamp = batch.timestamp;
        self.last_seq = batch.last_seq;
        self.offset_delta = batch.offset_delta;
        self.last_timestamp = batch.timestamp;
    }

    /// [`ProducerEntry::find_duplicate`] on the packed form. Compares last sequences here and
    /// reads `cold` only for a batch whose last sequence matches.
    #[inline]
    pub(crate) fn find_duplicate(
        &self,
        cold: &ColdHistory,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
    ) -> Option<BatchMetadata> {
        if epoch != self.epoch || self.batch_count == 0 {
            return None;
        }
        let older = usize::from(self.batch_count) - 1;
        let matches_older = (0..older).any(|i| self.older_last_seq[self.ring(i)] == last_seq);
        if !matches_older {
            // Only the newest can match: no need for the cold part.
            let newest = self.newest();
            return (newest.last_seq == last_seq && newest.first_seq() == first_seq)
                .then_some(newest);
        }
        // Kafka returns the oldest match (replicated histories may repeat a range).
        self.newest_first(cold)
            .filter(|b| b.last_seq == last_seq && b.first_seq() == first_seq)
            .last()
    }
}

impl PackedEntry {
    pub(crate) const FILLER: PackedEntry = PackedEntry {
        hot: HOT_FILLER,
        cold: ColdHistory::FILLER,
    };

    /// Packs `entry`, dropping older batches whose deltas do not fit (see module docs).
    pub(crate) fn pack(entry: &ProducerEntry) -> Self {
        let mut packed = PackedEntry::FILLER;
        let hot = &mut packed.hot;
        hot.last_timestamp = entry.last_timestamp;
        hot.coordinator_epoch = entry.coordinator_epoch;
        hot.epoch = entry.epoch;
        hot.set_txn_open(entry.current_txn_first_offset.is_some());
        let batches = entry.batches.as_slice();
        let Some((newest, older)) = batches.split_last() else {
            return packed;
        };
        hot.last_offset = newest.last_offset.0;
        hot.batch_timestamp = newest.timestamp;
        hot.last_seq = newest.last_seq;
        hot.offset_delta = newest.offset_delta;
        hot.batch_count = 1;
        // The ring's head is 0: logical older batch `i` sits at position `i`.
        let mut newer = newest;
        for (i, batch) in older.iter().rev().enumerate() {
            let offset_back = u32::try_from(newer.last_offset.0 - batch.last_offset.0);
            let timestamp_back = newer
                .timestamp
                .checked_sub(batch.timestamp)
                .and_then(|d| i32::try_from(d).ok());
            let (Ok(offset_back), Some(timestamp_back)) = (offset_back, timestamp_back) else {
                break;
            };
            hot.older_last_seq[i] = batch.last_seq;
            packed.cold.older[i] = OlderCold {
                offset_delta: batch.offset_delta,
                offset_back,
                timestamp_back,
            };
            hot.batch_count += 1;
            newer = batch;
        }
        packed
    }

    /// Unpacks; the transaction offset comes from the open-transaction index.
    pub(crate) fn unpack(
        hot: &HotEntry,
        cold: &ColdHistory,
        producer_id: i64,
        txn_first_offset: Option<Offset>,
    ) -> ProducerEntry {
        let mut entry = ProducerEntry {
            producer_id,
            epoch: hot.epoch,
            coordinator_epoch: hot.coordinator_epoch,
            last_timestamp: hot.last_timestamp,
            current_txn_first_offset: txn_first_offset,
            batches: BatchHistory::default(),
        };
        let mut newest_first = [EMPTY_BATCH; BATCH_HISTORY_LEN];
        let mut count = 0;
        for (place, batch) in newest_first.iter_mut().zip(hot.newest_first(cold)) {
            *place = batch;
            count += 1;
        }
        for batch in newest_first[..count].iter().rev() {
            entry.batches.push(*batch);
        }
        entry
    }

    /// [`HotEntry::find_duplicate`] on this entry.
    pub(crate) fn find_duplicate(
        &self,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
    ) -> Option<BatchMetadata> {
        self.hot
            .find_duplicate(&self.cold, epoch, first_seq, last_seq)
    }

    /// [`HotEntry::add_batch`] on this entry.
    #[cfg(test)]
    pub(crate) fn add_batch(&mut self, epoch: i16, batch: BatchMetadata) {
        self.hot.add_batch(&mut self.cold, epoch, &batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unpack(p: &PackedEntry, producer_id: i64, txn: Option<Offset>) -> ProducerEntry {
        PackedEntry::unpack(&p.hot, &p.cold, producer_id, txn)
    }

    fn batch(last_seq: i32, last_offset: i64, delta: i32, ts: i64) -> BatchMetadata {
        BatchMetadata {
            last_seq,
            last_offset: Offset(last_offset),
            offset_delta: delta,
            timestamp: ts,
        }
    }

    #[test]
    fn pack_round_trips_five_batches() {
        let mut e = ProducerEntry::empty(9);
        e.coordinator_epoch = 4;
        for i in 0..7i64 {
            e.add_batch(
                3,
                batch(
                    i as i32 * 10 + 9,
                    i * 100 + 9,
                    9,
                    1_000 + i * 7 - (i % 2) * 50,
                ),
            );
        }
        e.current_txn_first_offset = Some(Offset(500));
        assert_eq!(e.batches.as_slice().len(), 5);
        let packed = PackedEntry::pack(&e);
        assert!(packed.hot.txn_open());
        assert_eq!(unpack(&packed, 9, Some(Offset(500))), e);
    }

    #[test]
    fn history_beyond_representable_deltas_is_dropped() {
        let mut e = ProducerEntry::empty(1);
        e.add_batch(0, batch(0, 10, 0, 1_000));
        e.add_batch(0, batch(1, 11 + (1 << 33), 0, 1_001));
        e.add_batch(0, batch(2, 12 + (1 << 33), 0, 1_002));
        let unpacked = unpack(&PackedEntry::pack(&e), 1, None);
        assert_eq!(unpacked.batches.as_slice(), &e.batches.as_slice()[1..]);
        let mut e = ProducerEntry::empty(1);
        e.add_batch(0, batch(0, 10, 0, 0));
        e.add_batch(0, batch(1, 11, 0, 40 * 86_400_000));
        assert_eq!(
            unpack(&PackedEntry::pack(&e), 1, None)
                .batches
                .as_slice()
                .len(),
            1
        );
    }

    #[test]
    fn duplicate_needs_same_epoch_and_range() {
        let mut e = ProducerEntry::empty(1);
        e.add_batch(2, batch(4, 104, 4, 0));
        e.add_batch(2, batch(9, 109, 4, 0));
        assert_eq!(
            e.find_duplicate(2, 0, 4).map(|b| b.last_offset),
            Some(Offset(104))
        );
        assert_eq!(
            e.find_duplicate(2, 5, 9).map(|b| b.first_offset()),
            Some(Offset(105))
        );
        assert_eq!(e.find_duplicate(1, 0, 4), None);
        assert_eq!(e.find_duplicate(2, 0, 5), None);
    }

    #[test]
    fn packed_operations_agree_with_unpacked_ones() {
        let mut e = ProducerEntry::empty(4);
        let mut packed = PackedEntry::pack(&e);
        let steps: [(i16, BatchMetadata); 9] = [
            (0, batch(4, 10, 4, 100)),
            (0, batch(9, 20, 4, 90)),
            (0, batch(12, 23, 2, 95)),
            (1, batch(0, 30, 0, 96)),
            (1, batch(3, 40, 2, 97)),
            (1, batch(5, 42, 1, 98)),
            (1, batch(6, 43 + (1 << 33), 0, 99)),
            (1, batch(8, 45 + (1 << 33), 1, 100)),
            (1, batch(9, 46 + (1 << 33), 0, 101)),
        ];
        for (epoch, b) in steps {
            e.add_batch(epoch, b);
            packed.add_batch(epoch, b);
            // The packed form may only forget batches too far from their successor.
            let unpacked = unpack(&packed, 4, None);
            let kept = unpacked.batches.as_slice();
            let all = e.batches.as_slice();
            assert_eq!(kept, &all[all.len() - kept.len()..]);
            for b in kept {
                assert_eq!(
                    packed.find_duplicate(epoch, b.first_seq(), b.last_seq),
                    Some(*b)
                );
            }
            assert_eq!(packed.hot.last_seq(), e.last_seq());
        }
    }

    #[test]
    fn first_seq_wraps() {
        assert_eq!(batch(2, 10, 4, 0).first_seq(), i32::MAX - 1);
        assert_eq!(batch(-1, 10, 4, 0).first_seq(), NO_SEQUENCE);
    }
}
