//! Commit records: the durable home of a segment's partial last page.
//!
//! design.md §Durability: a page of the `.log` is written only once full (or at seal/clean close); the bytes
//! of the partial tail page go into a commit record instead, alternating between two slots
//! placed past the data region of the active segment file, so the newest valid record is never
//! touched by the write that replaces it. The newest valid record is the authoritative durable
//! end of the partition.
//!
//! Slot layout (big-endian), [`COMMIT_SLOT_SIZE_BYTES`] bytes, version 2 (what this engine
//! writes):
//!
//! ```text
//!  0 magic u32 "MLCR"      4 version u16 (2)      6 crc u32: CRC-32C of [10, 64 + tail_len)
//! 10 sequence u64          18 base_offset i64     26 data_len u64 (valid bytes in the segment)
//! 34 next_offset i64       42 prev_data_len u64   50 tail_len u16
//! 52 segment_id u64        60 reserved u32 (0)
//! 64 tail bytes (the data of [page_floor(data_len), data_len)), then zeroes
//! ```
//!
//! `segment_id`: drawn afresh by every writer of the file (creation, each reopen), so a shard
//! journal's entry applies only to the writer that wrote it, and only on top of the record it
//! was written after (the entry names both: see `journal`). Version 1 (still read) had no
//! `segment_id` (0): its tail starts at 56, after a reserved u32 at 52.
//!
//! A round writes its full pages and its record concurrently and syncs both with one
//! fdatasync, so a crash before that sync completes may leave the new record durable without
//! its pages. That round was never acknowledged: recovery takes the newest record only if the
//! batches of `[prev_data_len, data_len)` validate, and otherwise falls back to the older slot,
//! which the round never touched (`prev_data_len` is that older record's `data_len`).
//!
//! Worked example: `data_len = 10_000` → the tail page starts at 8192, `tail_len = 1808`,
//! and bytes 8192..10000 of the segment live in the record until a later round fills that page.

use crate::format::reader::Reader;
use crate::format::{crc32c, Offset};
use crate::io::PAGE_SIZE_BYTES;

/// Size of one commit-record slot: a header and up to one page of tail bytes, rounded to pages.
pub const COMMIT_SLOT_SIZE_BYTES: usize = 2 * PAGE_SIZE_BYTES;
/// Slots per segment (two alternate: one may be torn while the other stays valid).
pub const COMMIT_SLOTS: usize = 2;
/// Header bytes before the tail (version 2).
pub const COMMIT_HEADER_SIZE_BYTES: usize = 64;
/// Header bytes before the tail in version 1.
pub const COMMIT_HEADER_V1_SIZE_BYTES: usize = 56;
const MAGIC: u32 = u32::from_be_bytes(*b"MLCR");
const VERSION: u16 = 2;
const CRC_START: usize = 10;

const _: () = assert!(COMMIT_HEADER_SIZE_BYTES + PAGE_SIZE_BYTES <= COMMIT_SLOT_SIZE_BYTES);
const _: () = assert!(COMMIT_SLOT_SIZE_BYTES.is_multiple_of(PAGE_SIZE_BYTES));

/// A decoded commit record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRecord {
    /// Increases by one per commit round of the partition; the newest valid record wins.
    pub sequence: u64,
    /// The segment it belongs to.
    pub base_offset: Offset,
    /// Valid bytes in the segment (the durable end position).
    pub data_len: u64,
    /// The offset after the last durable batch.
    pub next_offset: Offset,
    /// `data_len` of the record this one supersedes (what was acknowledged before its round).
    pub prev_data_len: u64,
    /// The bytes of the partial last page: `[page_floor(data_len), data_len)`.
    pub tail: Vec<u8>,
    /// The writer's identity (see the module docs; 0 in version 1).
    pub segment_id: u64,
}

/// Why a slot holds no valid record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommitRecordError {
    /// Never written (all zero).
    #[error("commit slot is empty")]
    Empty,
    /// Shorter than a header.
    #[error("commit slot is truncated ({size_bytes} bytes)")]
    Truncated {
        /// Bytes present.
        size_bytes: usize,
    },
    /// Not a commit record.
    #[error("commit slot has magic {magic:#010x}")]
    BadMagic {
        /// Stored magic.
        magic: u32,
    },
    /// A version this engine does not read.
    #[error("commit record version {version}")]
    UnsupportedVersion {
        /// Stored version.
        version: u16,
    },
    /// Torn or damaged.
    #[error("commit record crc stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// Stored CRC.
        stored: u32,
        /// Computed CRC.
        computed: u32,
    },
    /// The tail length disagrees with `data_len`, or `prev_data_len` exceeds it.
    #[error("commit record tail of {tail_len} bytes does not match data_len {data_len}")]
    InconsistentTail {
        /// Stored tail length.
        tail_len: u16,
        /// Stored data length.
        data_len: u64,
    },
}

/// `position` rounded down to a page.
#[must_use]
pub fn page_floor(position: u64) -> u64 {
    position - position % PAGE_SIZE_BYTES as u64
}

impl CommitRecord {
    /// Writes the slot image into `out` (at least [`COMMIT_SLOT_SIZE_BYTES`] long).
    ///
    /// # Panics
    /// If `out` is too short or the tail is not `data_len`'s partial page (caller bugs).
    pub fn encode_into(&self, out: &mut [u8]) {
        let tail_len = self.data_len - page_floor(self.data_len);
        assert_eq!(
            self.tail.len() as u64,
            tail_len,
            "tail must be the partial page"
        );
        let out = &mut out[..COMMIT_SLOT_SIZE_BYTES];
        out.fill(0);
        out[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        out[4..6].copy_from_slice(&VERSION.to_be_bytes());
        out[10..18].copy_from_slice(&self.sequence.to_be_bytes());
        out[18..26].copy_from_slice(&self.base_offset.0.to_be_bytes());
        out[26..34].copy_from_slice(&self.data_len.to_be_bytes());
        out[34..42].copy_from_slice(&self.next_offset.0.to_be_bytes());
        out[42..50].copy_from_slice(&self.prev_data_len.to_be_bytes());
        out[50..52].copy_from_slice(&(tail_len as u16).to_be_bytes());
        out[52..60].copy_from_slice(&self.segment_id.to_be_bytes());
        let end = COMMIT_HEADER_SIZE_BYTES + self.tail.len();
        out[COMMIT_HEADER_SIZE_BYTES..end].copy_from_slice(&self.tail);
        let crc = crc32c(&out[CRC_START..end]);
        out[6..10].copy_from_slice(&crc.to_be_bytes());
    }

    /// Decodes a slot image.
    ///
    /// # Errors
    /// [`CommitRecordError`] when the slot holds no valid record.
    pub fn decode(slot: &[u8]) -> Result<Self, CommitRecordError> {
        let header =
            slot.get(..COMMIT_HEADER_V1_SIZE_BYTES)
                .ok_or(CommitRecordError::Truncated {
                    size_bytes: slot.len(),
                })?;
        if header.iter().all(|&b| b == 0) {
            return Err(CommitRecordError::Empty);
        }
        let mut r = Reader::new(header);
        let magic = r.u32().unwrap_or_default();
        if magic != MAGIC {
            return Err(CommitRecordError::BadMagic { magic });
        }
        let version = r.array::<2>().map(u16::from_be_bytes).unwrap_or_default();
        let header_bytes = match version {
            1 => COMMIT_HEADER_V1_SIZE_BYTES,
            VERSION => COMMIT_HEADER_SIZE_BYTES,
            _ => return Err(CommitRecordError::UnsupportedVersion { version }),
        };
        let stored = r.u32().unwrap_or_default();
        let sequence = r.i64().unwrap_or_default() as u64;
        let base_offset = Offset(r.i64().unwrap_or_default());
        let data_len = r.i64().unwrap_or_default() as u64;
        let next_offset = Offset(r.i64().unwrap_or_default());
        let prev_data_len = r.i64().unwrap_or_default() as u64;
        let tail_len = r.array::<2>().map(u16::from_be_bytes).unwrap_or_default();
        let segment_id = match version {
            1 => 0,
            _ => slot
                .get(52..60)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_be_bytes),
        };
        let end = header_bytes + usize::from(tail_len);
        let covered = slot
            .get(CRC_START..end)
            .ok_or(CommitRecordError::Truncated {
                size_bytes: slot.len(),
            })?;
        let computed = crc32c(covered);
        if computed != stored {
            return Err(CommitRecordError::CrcMismatch { stored, computed });
        }
        if u64::from(tail_len) != data_len - page_floor(data_len) || prev_data_len > data_len {
            return Err(CommitRecordError::InconsistentTail { tail_len, data_len });
        }
        Ok(CommitRecord {
            sequence,
            base_offset,
            data_len,
            next_offset,
            prev_data_len,
            tail: slot.get(header_bytes..end).unwrap_or_default().to_vec(),
            segment_id,
        })
    }

    /// The newest valid record among slot images (the durable end), if any.
    #[must_use]
    pub fn newest<'a>(slots: impl IntoIterator<Item = &'a [u8]>) -> Option<CommitRecord> {
        slots
            .into_iter()
            .filter_map(|s| CommitRecord::decode(s).ok())
            .max_by_key(|r| r.sequence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(sequence: u64, data_len: u64) -> CommitRecord {
        let tail_len = (data_len - page_floor(data_len)) as usize;
        CommitRecord {
            sequence,
            base_offset: Offset(1000),
            data_len,
            next_offset: Offset(1042),
            prev_data_len: data_len / 2,
            tail: (0..tail_len).map(|i| i as u8).collect(),
            segment_id: sequence * 1000,
        }
    }

    #[test]
    fn round_trip_and_worked_example() {
        let r = record(7, 10_000);
        assert_eq!(r.tail.len(), 1808);
        let mut slot = vec![0u8; COMMIT_SLOT_SIZE_BYTES];
        r.encode_into(&mut slot);
        assert_eq!(CommitRecord::decode(&slot), Ok(r));
        // A page-aligned end has an empty tail; the largest tail is a page minus one byte.
        for len in [8192, 8192 + 4095, 0] {
            let r = record(1, len);
            r.encode_into(&mut slot);
            assert_eq!(CommitRecord::decode(&slot), Ok(r));
        }
    }

    /// A version-1 slot (written before the journal): tail at 56, no `segment_id`.
    #[test]
    fn version_one_records_still_decode() {
        let r = record(3, 10_000);
        let mut slot = vec![0u8; COMMIT_SLOT_SIZE_BYTES];
        slot[0..4].copy_from_slice(b"MLCR");
        slot[4..6].copy_from_slice(&1u16.to_be_bytes());
        slot[10..18].copy_from_slice(&r.sequence.to_be_bytes());
        slot[18..26].copy_from_slice(&r.base_offset.0.to_be_bytes());
        slot[26..34].copy_from_slice(&r.data_len.to_be_bytes());
        slot[34..42].copy_from_slice(&r.next_offset.0.to_be_bytes());
        slot[42..50].copy_from_slice(&r.prev_data_len.to_be_bytes());
        slot[50..52].copy_from_slice(&(r.tail.len() as u16).to_be_bytes());
        let end = COMMIT_HEADER_V1_SIZE_BYTES + r.tail.len();
        slot[COMMIT_HEADER_V1_SIZE_BYTES..end].copy_from_slice(&r.tail);
        let crc = crc32c(&slot[CRC_START..end]);
        slot[6..10].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            CommitRecord::decode(&slot),
            Ok(CommitRecord { segment_id: 0, ..r })
        );
        slot[4..6].copy_from_slice(&3u16.to_be_bytes());
        assert_eq!(
            CommitRecord::decode(&slot),
            Err(CommitRecordError::UnsupportedVersion { version: 3 })
        );
    }

    #[test]
    fn torn_and_empty_slots_are_rejected_and_the_newest_valid_wins() {
        let mut a = vec![0u8; COMMIT_SLOT_SIZE_BYTES];
        let mut b = vec![0u8; COMMIT_SLOT_SIZE_BYTES];
        assert_eq!(CommitRecord::decode(&a), Err(CommitRecordError::Empty));
        record(4, 5000).encode_into(&mut a);
        record(5, 6000).encode_into(&mut b);
        assert_eq!(
            CommitRecord::newest([&a[..], &b[..]]).map(|r| r.sequence),
            Some(5)
        );
        // Tear the newer one: the older stays authoritative.
        b[100] ^= 0xff;
        assert!(matches!(
            CommitRecord::decode(&b),
            Err(CommitRecordError::CrcMismatch { .. })
        ));
        assert_eq!(
            CommitRecord::newest([&a[..], &b[..]]).map(|r| r.sequence),
            Some(4)
        );
        assert!(matches!(
            CommitRecord::decode(&a[..20]),
            Err(CommitRecordError::Truncated { .. })
        ));
        a[0] = b'X';
        assert!(matches!(
            CommitRecord::decode(&a),
            Err(CommitRecordError::BadMagic { .. })
        ));
    }
}
