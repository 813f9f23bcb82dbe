//! Kafka's sparse segment indexes: `.index` (8-byte entries: relative offset i32, position i32)
//! and `.timeindex` (12-byte entries: timestamp i64, relative offset i32), big-endian.
//!
//! As Kafka's `LogSegment.append`, an offset-index entry maps the *last* offset of the first
//! batch appended after more than `index.interval.bytes` bytes to that batch's start position;
//! a time-index entry records the largest timestamp so far and the offset of the batch holding
//! it, when it grew. Lookups return the greatest entry at or below the target; the reader scans
//! forward from there.

use crate::format::reader::Reader;
use crate::format::Offset;

/// Bytes per `.index` entry.
pub const OFFSET_INDEX_ENTRY_SIZE_BYTES: usize = 8;
/// Bytes per `.timeindex` entry.
pub const TIME_INDEX_ENTRY_SIZE_BYTES: usize = 12;

/// One `.index` entry, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEntry {
    /// Absolute offset.
    pub offset: Offset,
    /// File position of the batch.
    pub position: u32,
}

/// One `.timeindex` entry, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    /// Largest timestamp so far.
    pub timestamp: i64,
    /// Offset of the batch that holds it.
    pub offset: Offset,
}

/// Why index bytes could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// The size is not a whole number of entries.
    #[error("index of {size_bytes} bytes is not a multiple of {entry_size_bytes}-byte entries")]
    PartialEntry {
        /// File size.
        size_bytes: usize,
        /// Entry size.
        entry_size_bytes: usize,
    },
    /// Entries go backwards (offsets or positions decrease).
    #[error("index entry {index} goes backwards")]
    NotMonotonic {
        /// Entry number.
        index: usize,
    },
    /// The base offset and an entry's relative offset add up past the largest offset.
    #[error("index entry {index}: base offset plus relative offset overflows")]
    OffsetOverflow {
        /// Entry number.
        index: usize,
    },
}

/// The two indexes of one segment, built while appending.
#[derive(Debug, Clone)]
pub struct SegmentIndexes {
    base_offset: Offset,
    interval_bytes: u32,
    bytes_since_entry: u64,
    offsets: Vec<OffsetEntry>,
    times: Vec<TimeEntry>,
    max_timestamp: i64,
    offset_of_max_timestamp: Offset,
    /// Max timestamp of the first batch (Kafka's time-based roll measures from it).
    first_batch_timestamp: Option<i64>,
}

impl SegmentIndexes {
    /// Empty indexes for the segment at `base_offset`, one entry per `interval_bytes`.
    #[must_use]
    pub fn new(base_offset: Offset, interval_bytes: u32) -> Self {
        SegmentIndexes {
            base_offset,
            interval_bytes,
            bytes_since_entry: 0,
            offsets: Vec::new(),
            times: Vec::new(),
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            first_batch_timestamp: None,
        }
    }

    /// The indexes of a segment as its `.index` and `.timeindex` files hold them (already
    /// checked against the segment: [`decode_offset_index`], [`decode_time_index`]): the
    /// largest timestamp is the time index's last entry (a sealed segment's file ends with
    /// it). Feeding [`SegmentIndexes::on_append`] the batches from the last offset entry's
    /// batch on (from position 0 without entries) brings them to the state appending built;
    /// the first batch's timestamp is unknown until
    /// [`SegmentIndexes::set_first_batch_timestamp`].
    #[must_use]
    pub fn from_entries(
        base_offset: Offset,
        interval_bytes: u32,
        offsets: Vec<OffsetEntry>,
        times: Vec<TimeEntry>,
    ) -> Self {
        let (max_timestamp, offset_of_max_timestamp) = times
            .last()
            .map_or((-1, base_offset), |t| (t.timestamp, t.offset));
        SegmentIndexes {
            base_offset,
            interval_bytes,
            bytes_since_entry: 0,
            offsets,
            times,
            max_timestamp,
            offset_of_max_timestamp,
            first_batch_timestamp: None,
        }
    }

    /// Drops the entry sealing appended to the time index (the segment's largest timestamp,
    /// when it grew after the last offset entry), so that appends to a reopened segment build
    /// what appending all its batches would have: the next seal appends it again. It is that
    /// entry exactly when it names an offset past the last offset entry's (an entry the interval
    /// rule adds never does: it is added with an offset entry, for a batch at or before it).
    pub fn forget_sealing_entry(&mut self) {
        let last_entry = self.offsets.last().map(|e| e.offset);
        if self
            .times
            .last()
            .is_some_and(|t| last_entry.is_none_or(|o| t.offset > o))
        {
            self.times.pop();
            (self.max_timestamp, self.offset_of_max_timestamp) = self
                .times
                .last()
                .map_or((-1, self.base_offset), |t| (t.timestamp, t.offset));
        }
    }

    /// Sets the max timestamp of the segment's first batch (read from its header).
    pub fn set_first_batch_timestamp(&mut self, timestamp: Option<i64>) {
        self.first_batch_timestamp = timestamp;
    }

    /// The last offset-index entry's position (where appends resume indexing), or 0.
    #[must_use]
    pub fn last_entry_position(&self) -> u32 {
        self.offsets.last().map_or(0, |e| e.position)
    }

    /// Records a batch of `size` bytes at `position` whose last offset is `last_offset`.
    pub fn on_append(&mut self, position: u32, size: u32, last_offset: Offset, max_timestamp: i64) {
        self.first_batch_timestamp.get_or_insert(max_timestamp);
        if max_timestamp > self.max_timestamp {
            self.max_timestamp = max_timestamp;
            self.offset_of_max_timestamp = last_offset;
        }
        if self.bytes_since_entry > u64::from(self.interval_bytes) {
            self.offsets.push(OffsetEntry {
                offset: last_offset,
                position,
            });
            if self
                .times
                .last()
                .is_none_or(|t| self.max_timestamp > t.timestamp)
            {
                self.times.push(TimeEntry {
                    timestamp: self.max_timestamp,
                    offset: self.offset_of_max_timestamp,
                });
            }
            self.bytes_since_entry = 0;
        }
        self.bytes_since_entry += u64::from(size);
    }

    /// Offset-index entries.
    #[must_use]
    pub fn offset_entries(&self) -> &[OffsetEntry] {
        &self.offsets
    }

    /// Time-index entries.
    #[must_use]
    pub fn time_entries(&self) -> &[TimeEntry] {
        &self.times
    }

    /// Max timestamp of the segment's first batch, if any.
    #[must_use]
    pub fn first_batch_timestamp(&self) -> Option<i64> {
        self.first_batch_timestamp
    }

    /// Largest timestamp appended.
    #[must_use]
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// Position to start scanning for `offset`: the greatest entry at or below it, else 0.
    #[must_use]
    pub fn lookup(&self, offset: Offset) -> u32 {
        let i = self.offsets.partition_point(|e| e.offset <= offset);
        i.checked_sub(1).map_or(0, |i| self.offsets[i].position)
    }

    /// The `.index` file bytes.
    #[must_use]
    pub fn encode_offset_index(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.offsets.len() * OFFSET_INDEX_ENTRY_SIZE_BYTES);
        for e in &self.offsets {
            out.extend_from_slice(&((e.offset.0 - self.base_offset.0) as i32).to_be_bytes());
            out.extend_from_slice(&(e.position as i32).to_be_bytes());
        }
        out
    }

    /// The `.timeindex` file bytes of the sealed segment, as Kafka holds them: the entries
    /// built while appending, then the segment's largest timestamp and the offset of the batch
    /// holding it when that is larger than the last entry's (Kafka's roll and close append it,
    /// `timeIndex.maybeAppend(maxTimestampSoFar, shallowOffsetOfMaxTimestampSoFar, true)`), so
    /// a broker reading the file finds the segment's largest timestamp in its last entry.
    #[must_use]
    pub fn encode_time_index(&self) -> Vec<u8> {
        let last = self.times.last().map_or(-1, |t| t.timestamp);
        let fin = (self.max_timestamp > last).then_some(TimeEntry {
            timestamp: self.max_timestamp,
            offset: self.offset_of_max_timestamp,
        });
        let entries = self.times.iter().chain(fin.as_ref());
        let mut out = Vec::with_capacity((self.times.len() + 1) * TIME_INDEX_ENTRY_SIZE_BYTES);
        for e in entries {
            out.extend_from_slice(&e.timestamp.to_be_bytes());
            out.extend_from_slice(&((e.offset.0 - self.base_offset.0) as i32).to_be_bytes());
        }
        out
    }
}

/// Decodes a `.index` file of the segment at `base_offset`.
///
/// # Errors
/// [`IndexError`] for a partial entry or entries that go backwards.
pub fn decode_offset_index(
    bytes: &[u8],
    base_offset: Offset,
) -> Result<Vec<OffsetEntry>, IndexError> {
    if !bytes.len().is_multiple_of(OFFSET_INDEX_ENTRY_SIZE_BYTES) {
        return Err(IndexError::PartialEntry {
            size_bytes: bytes.len(),
            entry_size_bytes: OFFSET_INDEX_ENTRY_SIZE_BYTES,
        });
    }
    let mut r = Reader::new(bytes);
    let mut out: Vec<OffsetEntry> = Vec::with_capacity(bytes.len() / OFFSET_INDEX_ENTRY_SIZE_BYTES);
    while let (Some(relative), Some(position)) = (r.i32(), r.i32()) {
        // A base offset from a file name near i64::MAX must not overflow (found by the
        // decoders' proptest with overflow checks on).
        let Some(offset) = base_offset.0.checked_add(i64::from(relative)) else {
            return Err(IndexError::OffsetOverflow { index: out.len() });
        };
        let entry = OffsetEntry {
            offset: Offset(offset),
            position: position as u32,
        };
        if position < 0
            || out
                .last()
                .is_some_and(|l| l.offset > entry.offset || l.position > entry.position)
        {
            return Err(IndexError::NotMonotonic { index: out.len() });
        }
        out.push(entry);
    }
    Ok(out)
}

/// Decodes a `.timeindex` file of the segment at `base_offset`.
///
/// # Errors
/// [`IndexError`] for a partial entry, entries that go backwards, or an overflowing offset.
pub fn decode_time_index(bytes: &[u8], base_offset: Offset) -> Result<Vec<TimeEntry>, IndexError> {
    if !bytes.len().is_multiple_of(TIME_INDEX_ENTRY_SIZE_BYTES) {
        return Err(IndexError::PartialEntry {
            size_bytes: bytes.len(),
            entry_size_bytes: TIME_INDEX_ENTRY_SIZE_BYTES,
        });
    }
    let mut r = Reader::new(bytes);
    let mut out: Vec<TimeEntry> = Vec::with_capacity(bytes.len() / TIME_INDEX_ENTRY_SIZE_BYTES);
    while let (Some(timestamp), Some(relative)) = (r.i64(), r.i32()) {
        let Some(offset) = base_offset.0.checked_add(i64::from(relative)) else {
            return Err(IndexError::OffsetOverflow { index: out.len() });
        };
        let entry = TimeEntry {
            timestamp,
            offset: Offset(offset),
        };
        if relative < 0
            || out
                .last()
                .is_some_and(|l| l.timestamp > entry.timestamp || l.offset > entry.offset)
        {
            return Err(IndexError::NotMonotonic { index: out.len() });
        }
        out.push(entry);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_follow_kafka_interval_rule_and_round_trip() {
        let mut ix = SegmentIndexes::new(Offset(1000), 4096);
        let mut position = 0u32;
        for i in 0..100i64 {
            ix.on_append(position, 1000, Offset(1000 + i * 10 + 9), 5_000 + i);
            position += 1000;
        }
        // After the first 5 batches (5000 bytes > 4096), every 5th batch gets an entry.
        let e = ix.offset_entries();
        assert_eq!(
            e[0],
            OffsetEntry {
                offset: Offset(1059),
                position: 5000
            }
        );
        assert_eq!(e[1].position, 10_000);
        assert_eq!(e.len(), 19);
        let bytes = ix.encode_offset_index();
        assert_eq!(bytes.len(), 19 * 8);
        assert_eq!(&bytes[..8], &[0, 0, 0, 59, 0, 0, 0x13, 0x88]);
        assert_eq!(decode_offset_index(&bytes, Offset(1000)).unwrap(), e);
        assert_eq!(ix.lookup(Offset(1000)), 0);
        assert_eq!(ix.lookup(Offset(1059)), 5000);
        assert_eq!(ix.lookup(Offset(1075)), 5000);
        assert_eq!(ix.lookup(Offset(5000)), e.last().unwrap().position);
        assert_eq!(ix.time_entries().len(), 19);
        // The sealed file ends with the largest timestamp (5099, in the last batch).
        let time = ix.encode_time_index();
        assert_eq!(time.len(), 20 * 12);
        assert_eq!(&time[19 * 12..19 * 12 + 8], &5099i64.to_be_bytes());
        assert_eq!(&time[19 * 12 + 8..], &999i32.to_be_bytes());
        assert!(matches!(
            decode_offset_index(&bytes[..9], Offset(0)),
            Err(IndexError::PartialEntry { .. })
        ));
    }
}
