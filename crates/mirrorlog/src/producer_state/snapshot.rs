//! Kafka's producer-state `.snapshot` file format.
//!
//! ```text
//! version i16 (1) | crc u32: CRC-32C of bytes [6, EOF) | entry count i32 | entries…
//! entry (46 bytes): producerId i64, epoch i16, lastSequence i32, lastOffset i64,
//!                   offsetDelta i32, timestamp i64, coordinatorEpoch i32,
//!                   currentTxnFirstOffset i64 (−1 where absent)
//! ```
//!
//! The file is named after the next offset it covers, in 20 digits (`00000000000000001234.snapshot`).
//! Decoding never panics; every way a file can be wrong is a [`SnapshotError`], after which the
//! caller deletes it and falls back to an older snapshot or an empty state.

use super::entry::{BatchMetadata, ProducerEntry};
use crate::format::reader::Reader;
use crate::format::{crc32c, Offset};

/// The snapshot version this engine reads and writes.
pub const SNAPSHOT_VERSION: i16 = 1;
/// Bytes before the entries: version, crc, count.
pub const SNAPSHOT_HEADER_SIZE_BYTES: usize = 10;
/// Bytes per entry.
pub const SNAPSHOT_ENTRY_SIZE_BYTES: usize = 46;
/// The CRC covers everything from here on.
const CRC_START: usize = 6;

/// Why bytes are not a valid snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The file is shorter than its 10-byte header (an empty file included).
    #[error("snapshot is truncated: {size_bytes} bytes, the header alone is 10")]
    Truncated {
        /// File size.
        size_bytes: usize,
    },
    /// Version other than 1.
    #[error("snapshot version {version}, expected 1")]
    UnsupportedVersion {
        /// Stored version.
        version: i16,
    },
    /// The CRC does not match.
    #[error("snapshot crc stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// Stored CRC.
        stored: u32,
        /// Computed CRC.
        computed: u32,
    },
    /// The entry count disagrees with the file size.
    #[error("snapshot declares {declared} entries but holds {entry_bytes} bytes of entries")]
    EntryCountMismatch {
        /// Declared count.
        declared: i32,
        /// Bytes after the header.
        entry_bytes: usize,
    },
}

/// The snapshot file name for the state up to (excluding) `next_offset`.
#[must_use]
pub fn snapshot_file_name(next_offset: Offset) -> String {
    format!("{:020}.snapshot", next_offset.0)
}

/// Encodes `entries` as a snapshot file.
#[must_use]
pub fn encode_snapshot<'a>(entries: impl ExactSizeIterator<Item = &'a ProducerEntry>) -> Vec<u8> {
    let count = entries.len();
    let mut out =
        Vec::with_capacity(SNAPSHOT_HEADER_SIZE_BYTES + count * SNAPSHOT_ENTRY_SIZE_BYTES);
    out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(count as i32).to_be_bytes());
    for e in entries {
        let last = e.batches.last();
        out.extend_from_slice(&e.producer_id.to_be_bytes());
        out.extend_from_slice(&e.epoch.to_be_bytes());
        out.extend_from_slice(&e.last_seq().to_be_bytes());
        out.extend_from_slice(&e.last_data_offset().0.to_be_bytes());
        out.extend_from_slice(&last.map_or(0, |b| b.offset_delta).to_be_bytes());
        out.extend_from_slice(&e.last_timestamp.to_be_bytes());
        out.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        out.extend_from_slice(&e.current_txn_first_offset.map_or(-1, |o| o.0).to_be_bytes());
    }
    let crc = crc32c(&out[CRC_START..]);
    out[2..6].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Decodes a snapshot file into entries (each with at most its newest batch, as Kafka stores).
///
/// # Errors
/// [`SnapshotError`] for any malformed file.
pub fn decode_snapshot(bytes: &[u8]) -> Result<Vec<ProducerEntry>, SnapshotError> {
    let truncated = SnapshotError::Truncated {
        size_bytes: bytes.len(),
    };
    let mut r = Reader::new(bytes);
    let (Some(version), Some(stored), Some(declared)) = (r.i16(), r.u32(), r.i32()) else {
        return Err(truncated);
    };
    if version != SNAPSHOT_VERSION {
        return Err(SnapshotError::UnsupportedVersion { version });
    }
    let computed = crc32c(bytes.get(CRC_START..).unwrap_or_default());
    if computed != stored {
        return Err(SnapshotError::CrcMismatch { stored, computed });
    }
    let entry_bytes = r.remaining();
    let count_matches = usize::try_from(declared)
        .ok()
        .and_then(|n| n.checked_mul(SNAPSHOT_ENTRY_SIZE_BYTES))
        == Some(entry_bytes);
    if !count_matches {
        return Err(SnapshotError::EntryCountMismatch {
            declared,
            entry_bytes,
        });
    }
    let mut entries = Vec::with_capacity(entry_bytes / SNAPSHOT_ENTRY_SIZE_BYTES);
    while r.remaining() >= SNAPSHOT_ENTRY_SIZE_BYTES {
        let (Some(producer_id), Some(epoch), Some(last_seq), Some(last_offset)) =
            (r.i64(), r.i16(), r.i32(), r.i64())
        else {
            return Err(truncated);
        };
        let (Some(offset_delta), Some(timestamp), Some(coordinator_epoch), Some(txn_first)) =
            (r.i32(), r.i64(), r.i32(), r.i64())
        else {
            return Err(truncated);
        };
        let mut entry = ProducerEntry::empty(producer_id);
        entry.epoch = epoch;
        entry.coordinator_epoch = coordinator_epoch;
        entry.last_timestamp = timestamp;
        entry.current_txn_first_offset = (txn_first >= 0).then_some(Offset(txn_first));
        if last_offset >= 0 {
            entry.batches.push(BatchMetadata {
                last_seq,
                last_offset: Offset(last_offset),
                offset_delta,
                timestamp,
            });
        }
        entries.push(entry);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_name_has_20_digits() {
        assert_eq!(
            snapshot_file_name(Offset(1234)),
            "00000000000000001234.snapshot"
        );
    }

    #[test]
    fn layout_matches_kafka() {
        let mut e = ProducerEntry::empty(0x0102);
        e.add_batch(
            3,
            BatchMetadata {
                last_seq: 9,
                last_offset: Offset(99),
                offset_delta: 4,
                timestamp: 5,
            },
        );
        e.coordinator_epoch = 7;
        let bytes = encode_snapshot([e].iter());
        assert_eq!(bytes.len(), 10 + 46);
        assert_eq!(&bytes[..2], &[0, 1]);
        assert_eq!(&bytes[6..10], &[0, 0, 0, 1]);
        assert_eq!(&bytes[10..18], &0x0102i64.to_be_bytes());
        assert_eq!(
            &bytes[48..56],
            &(-1i64).to_be_bytes(),
            "no open transaction"
        );
        assert_eq!(crc32c(&bytes[6..]).to_be_bytes(), bytes[2..6]);
        assert_eq!(decode_snapshot(&bytes).unwrap(), vec![e]);
    }
}
