//! Read-only inspection of mirrorlog's files and partition directories: what the `mirrorlog`
//! tool prints (`dump`, `verify`, `stat`). `dump` needs the `dump` feature (its JSON uses
//! `serde_json`); the tools enable it.
//!
//! Contract: nothing here writes, and no file content can make it panic — every decoder it
//! calls returns a `Result`, and a file that does not decode is reported, never trusted. It
//! reads with `std::fs` (an offline tool has no ring to share); for `verify` and `stat` to be
//! exact the engine must not be writing to the directory at the same time.
//!
//! A segment's durable bytes are what recovery would keep: for a sealed segment (truncated to
//! its data, no commit slots) the whole file; for the active segment, the full pages of the
//! file up to the newest commit record whose batches validate, then that record's tail (the
//! partial last page lives only in the record until the page fills; see
//! `segment/commit_record.rs`).
//!
//! Files: `dump.rs` (every file kind, text or JSON), `partition.rs` (one pass per partition for
//! `verify` and `stat`), `journal.rs` (the shard journals: read for the segments, held against
//! them by `verify`).

#[cfg(feature = "dump")]
pub mod dump;
pub mod journal;
pub mod partition;

#[cfg(feature = "dump")]
pub use dump::{dump_file, DumpOptions};
pub use journal::verify_journals;
pub use partition::{
    inspect_partition, partition_dirs, DataDirError, PartitionReport, PartitionStat, Problem,
};

use crate::format::{BatchIter, Offset, ScanEnd};
use crate::segment::commit_record::page_floor;
use crate::segment::{CommitRecord, CommitRecordError, COMMIT_SLOTS, COMMIT_SLOT_SIZE_BYTES};

/// The kinds of file a partition directory holds, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// `B.log`: a segment's batches (and, while active, its commit-record slots).
    Log,
    /// `B.index`: offset index.
    OffsetIndex,
    /// `B.timeindex`: time index.
    TimeIndex,
    /// `B.txnindex`: aborted transactions whose ABORT marker is in the segment.
    TxnIndex,
    /// `N.snapshot`: producer state at offset `N`.
    Snapshot,
    /// `leader-epoch-checkpoint`.
    LeaderEpochCheckpoint,
    /// `mirror-checkpoint`: the mode history.
    MirrorCheckpoint,
    /// `mirror-mode`: Paused / Failed.
    MirrorMode,
    /// `log-start-offset`.
    LogStartOffset,
    /// `partition.config`.
    PartitionConfig,
    /// `clean-shutdown`: the marker of a clean close.
    CleanShutdown,
    /// `segment-gaps`: the segments that start past their predecessor's end on purpose.
    SegmentGaps,
    /// `recovery-point-offset-checkpoint`: the first segment an unclean open scans.
    RecoveryPoint,
    /// `replication-offset-checkpoint`: the broker-managed high watermark.
    HighWatermark,
    /// `journal-N.mlj` (in the data directory): a shard's journal.
    Journal,
    /// Anything else.
    Unknown,
}

/// The kind of the file named `name` (the last path component).
#[must_use]
pub fn file_kind(name: &str) -> FileKind {
    match name {
        crate::log::MIRROR_CHECKPOINT => return FileKind::MirrorCheckpoint,
        crate::log::MIRROR_MODE_FILE => return FileKind::MirrorMode,
        crate::log::LOG_START_CHECKPOINT => return FileKind::LogStartOffset,
        crate::log::LEADER_EPOCH_CHECKPOINT => return FileKind::LeaderEpochCheckpoint,
        "partition.config" => return FileKind::PartitionConfig,
        "clean-shutdown" => return FileKind::CleanShutdown,
        crate::log::SEGMENT_GAPS => return FileKind::SegmentGaps,
        crate::log::RECOVERY_POINT_CHECKPOINT => return FileKind::RecoveryPoint,
        crate::log::HIGH_WATERMARK_CHECKPOINT => return FileKind::HighWatermark,
        _ => {}
    }
    if crate::journal::shard_of(name).is_some() {
        return FileKind::Journal;
    }
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("log") => FileKind::Log,
        Some("index") => FileKind::OffsetIndex,
        Some("timeindex") => FileKind::TimeIndex,
        Some("txnindex") => FileKind::TxnIndex,
        Some("snapshot") => FileKind::Snapshot,
        _ => FileKind::Unknown,
    }
}

/// The offset in a Kafka file name (`00000000000000000042.log` → 42), if it has one.
#[must_use]
pub fn offset_in_name(name: &str) -> Option<Offset> {
    let (stem, _) = name.split_once('.')?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok().map(Offset))
        .flatten()
}

/// What a commit slot of an active segment holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// A record that decodes (it may still be older than the one in use).
    Record(CommitRecord),
    /// A record that decodes but belongs to another segment or points past the data region
    /// (left in reused blocks): ignored.
    Foreign(CommitRecord),
    /// Nothing valid: never written, or torn.
    Invalid(CommitRecordError),
}

/// A segment file read as recovery would read it.
#[derive(Debug, Clone)]
pub struct SegmentData {
    /// The durable bytes: whole batches, then possibly zeroes or a torn tail that the scan of
    /// [`SegmentData::data`] reports.
    pub data: Vec<u8>,
    /// The commit record in use (active segments).
    pub record: Option<CommitRecord>,
    /// Both slots as found (empty for a sealed segment).
    pub slots: Vec<(u64, Slot)>,
    /// Entries of the data directory's shard journals that continue the record in use (their
    /// bytes are at the end of `data`), as the next open will replay them.
    pub journal_entries: usize,
}

/// Bytes of both commit slots at the end of an active segment's file.
const SLOTS_BYTES: usize = COMMIT_SLOTS * COMMIT_SLOT_SIZE_BYTES;

/// Whether a segment file is as its preallocation left it, as recovery decides it: zeros from
/// its first byte (the caller's scan says so) and longer than the data region for
/// `segment_bytes` (a sealed segment never is).
fn untouched(file: &[u8], segment_bytes: u64) -> bool {
    file.len() as u64 > crate::segment::data_region_bytes(segment_bytes)
}

/// Reads the segment whose file is `file`, with base offset `base`.
#[must_use]
pub fn segment_data(file: &[u8], base: Offset) -> SegmentData {
    let Some(slots_at) = file.len().checked_sub(SLOTS_BYTES) else {
        return SegmentData {
            data: file.to_vec(),
            record: None,
            slots: Vec::new(),
            journal_entries: 0,
        };
    };
    let slots: Vec<(u64, Slot)> = file
        .get(slots_at..)
        .unwrap_or_default()
        .chunks(COMMIT_SLOT_SIZE_BYTES)
        .enumerate()
        .map(|(i, bytes)| {
            let position = (slots_at + i * COMMIT_SLOT_SIZE_BYTES) as u64;
            match CommitRecord::decode(bytes) {
                Ok(r) if r.base_offset == base && r.data_len <= slots_at as u64 => {
                    (position, Slot::Record(r))
                }
                Ok(r) => (position, Slot::Foreign(r)),
                Err(e) => (position, Slot::Invalid(e)),
            }
        })
        .collect();
    let mut records: Vec<&CommitRecord> = slots
        .iter()
        .filter_map(|(_, s)| match s {
            Slot::Record(r) => Some(r),
            Slot::Foreign(_) | Slot::Invalid(_) => None,
        })
        .collect();
    if records.is_empty() {
        // A file as long as the slots but without one: a sealed segment.
        return SegmentData {
            data: file.to_vec(),
            record: None,
            slots: Vec::new(),
            journal_entries: 0,
        };
    }
    records.sort_by_key(|r| std::cmp::Reverse(r.sequence));
    // The newest record whose batches validate (an older one wins only when the newest
    // round's pages never reached the disk: that round was never acknowledged).
    let assembled = |r: &CommitRecord| {
        let floor = page_floor(r.data_len) as usize;
        let mut data = file.get(..floor).unwrap_or_default().to_vec();
        data.extend_from_slice(&r.tail);
        data.truncate(r.data_len as usize);
        data
    };
    for r in &records {
        let data = assembled(r);
        let mut scan = BatchIter::new(&data, 0);
        for _ in scan.by_ref() {}
        if scan.end() == Some(&ScanEnd::Clean) {
            return SegmentData {
                data,
                record: Some((*r).clone()),
                slots,
                journal_entries: 0,
            };
        }
    }
    // None validates: show the newest, and let the scan report where it breaks.
    let newest = records[0].clone();
    SegmentData {
        data: assembled(&newest),
        record: Some(newest),
        slots,
        journal_entries: 0,
    }
}

/// The segment at `path` (whose bytes are `file`, base offset `base`) as the next open will
/// see it: its durable bytes, continued by the entries of its data directory's shard journals
/// (`journal-N.mlj` beside the partition directory) that the open's replay would write into it
/// (`segment::continuation`: the same record chosen, the same entries applied). A directory
/// without journals, a sealed segment or one no entry continues reads as [`segment_data`].
#[must_use]
pub fn segment_data_at(path: &std::path::Path, file: &[u8], base: Offset) -> SegmentData {
    let plain = segment_data(file, base);
    if plain.slots.is_empty() {
        return plain;
    }
    let Some(dir) = path.parent() else {
        return plain;
    };
    let (Some(key), Some(data_dir)) = (dir.file_name(), dir.parent()) else {
        return plain;
    };
    let key = key.to_string_lossy();
    let journals = journal::Journals::read(data_dir);
    let entries: Vec<_> = journal::entries_for(&journals, &key)
        .into_iter()
        .filter(|e| e.entry.segment_base == base)
        .collect();
    if entries.is_empty() {
        return plain;
    }
    let segment_bytes = std::fs::read_to_string(dir.join(crate::api::PARTITION_CONFIG_FILE))
        .ok()
        .and_then(|t| crate::api::PartitionConfig::decode(&t).ok())
        .unwrap_or_default()
        .log_config()
        .segment
        .segment_bytes;
    let Some(slots) = file
        .len()
        .checked_sub(SLOTS_BYTES)
        .and_then(|at| file.get(at..))
    else {
        return plain;
    };
    let mut read = |position: u64, len: usize| -> Result<Vec<u8>, ()> {
        let from = (position as usize).min(file.len());
        let to = from.saturating_add(len).min(file.len());
        Ok(file[from..to].to_vec())
    };
    let Ok(Some(c)) = crate::segment::continuation(slots, base, segment_bytes, &entries, &mut read)
    else {
        return plain;
    };
    if c.applied == 0 {
        return plain;
    }
    let floor = page_floor(c.record.data_len) as usize;
    let mut data = file.get(..floor).unwrap_or_default().to_vec();
    data.extend_from_slice(&c.record.tail);
    data.truncate(c.record.data_len as usize);
    data.extend_from_slice(&c.added);
    // The record in use is the one the replay will write: the base record's successor,
    // covering the entries' bytes.
    let end = c.end as usize;
    let record = CommitRecord {
        sequence: c.record.sequence + 1,
        prev_data_len: c.record.data_len,
        data_len: c.end,
        next_offset: c.next_offset,
        tail: data
            .get(page_floor(c.end) as usize..end)
            .unwrap_or_default()
            .to_vec(),
        ..c.record
    };
    SegmentData {
        data,
        record: Some(record),
        slots: plain.slots,
        journal_entries: c.applied,
    }
}
