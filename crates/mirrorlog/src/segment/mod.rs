//! One segment of a partition log: the active segment's writer (write-once pages, commit
//! records, sealing), Kafka's sparse indexes, and the file layout.
//!
//! Files of the segment at base offset `B` (20 digits, Kafka's names): `B.log`, `B.index`,
//! `B.timeindex`, `B.txnindex`. Sealed segments are byte-identical to what Kafka holds.
//!
//! Files: `writer/` (the active segment: appends and invariants in `mod.rs`, commit rounds in
//! `round.rs`, journal rounds in `journal_round.rs`, reopen and in-place truncation in
//! `reopen.rs`, sealing in `seal.rs`), `commit_record.rs` (the two alternating slots),
//! `index.rs` and `index_files.rs` (Kafka's `.index`/`.timeindex`), `scan.rs` (the one scanner
//! of a segment's bytes: recovery, the clean open's tail scan, index rebuilds and journal
//! replay run it), `journal_replay.rs` (the shard journal's entries written into a segment at
//! open).

pub mod commit_record;
pub mod index;
mod index_files;
pub mod scan;
mod writer;

pub use commit_record::{CommitRecord, CommitRecordError, COMMIT_SLOTS, COMMIT_SLOT_SIZE_BYTES};
pub use index::{
    decode_offset_index, decode_time_index, IndexError, OffsetEntry, SegmentIndexes, TimeEntry,
};
mod journal_replay;
pub use index_files::{read_derivable, read_index_files, scan_tail, TailError};
pub use journal_replay::{
    continuation, replay_journal, Continuation, ReplayEntry, ReplaySync, Replayed,
};
pub use scan::{scan_file, BatchSink, BatchStream, CheckOnly, IndexSink, ScanError};
pub use writer::{
    Durable, JournalStart, SealedSegment, SegmentConfig, SegmentWriter, DEFERRED_PAGES_MAX_BYTES,
    DIRECT_ROUND_BYTES, PREALLOCATE_FIRST_STEP_BYTES, PREALLOCATE_STEP_BYTES_DEFAULT,
    ROUND_OPS_MAX,
};

use crate::format::Offset;
use crate::io::IoError;
use std::path::{Path, PathBuf};

/// Why a segment operation failed. `#[non_exhaustive]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SegmentError {
    /// An I/O operation failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// An earlier write or fdatasync failed; the segment accepts nothing more.
    #[error("segment is poisoned by an earlier failure: {0}")]
    Poisoned(Box<SegmentError>),
    /// The batch does not fit in `segment.bytes`: roll.
    #[error(
        "segment {base_offset} holds {data_len} bytes; a {batch_bytes}-byte batch does not fit"
    )]
    SegmentFull {
        /// The segment.
        base_offset: Offset,
        /// Its bytes.
        data_len: u64,
        /// The batch.
        batch_bytes: u64,
    },
    /// An offset of the batch is below the segment's base or more than `i32::MAX` past it,
    /// which its indexes cannot hold (Kafka's `LogSegmentOffsetOverflowException`): roll.
    #[error(
        "offset {offset} is outside the range of segment {base_offset} (base to base + 2^31 - 1)"
    )]
    OffsetOutOfRange {
        /// The segment.
        base_offset: Offset,
        /// The offset that does not fit.
        offset: Offset,
    },
    /// The append buffer is full: commit before appending more.
    #[error("append buffer has {room_bytes} bytes free; a {batch_bytes}-byte batch does not fit")]
    BufferFull {
        /// Free bytes.
        room_bytes: usize,
        /// The batch.
        batch_bytes: u64,
    },
    /// The writer handed its append buffer back while idle: attach one before appending
    /// ([`SegmentWriter::attach_buffer`]).
    #[error("the segment's append buffer was handed back: attach one before appending")]
    BufferDetached,
    /// A read returned fewer bytes than the durable data holds.
    #[error("read at position {position} returned {got_bytes} of {wanted_bytes} bytes")]
    ShortRead {
        /// Where.
        position: u64,
        /// Asked.
        wanted_bytes: usize,
        /// Got.
        got_bytes: usize,
    },
}

fn file_name(base_offset: Offset, extension: &str) -> String {
    format!("{:020}.{extension}", base_offset.0)
}

/// The data region of a segment file for `segment.bytes` = `segment_bytes`: page-rounded; the
/// commit slots follow it. A sealed segment is trimmed to its batches, never longer than this;
/// an active one (or one whose creation was cut short after a slot write) is longer.
#[must_use]
pub fn data_region_bytes(segment_bytes: u64) -> u64 {
    let page = crate::io::PAGE_SIZE_BYTES as u64;
    segment_bytes.div_ceil(page) * page
}

/// The size of an active segment's file: the data region (reserved on disk in steps) and both
/// commit slots after it.
#[must_use]
pub fn preallocated_bytes(segment_bytes: u64) -> u64 {
    data_region_bytes(segment_bytes) + (COMMIT_SLOTS * COMMIT_SLOT_SIZE_BYTES) as u64
}

/// `<dir>/<base>.log`.
#[must_use]
pub fn log_path(dir: &Path, base_offset: Offset) -> PathBuf {
    dir.join(file_name(base_offset, "log"))
}

/// `<dir>/<base>.index`.
#[must_use]
pub fn offset_index_path(dir: &Path, base_offset: Offset) -> PathBuf {
    dir.join(file_name(base_offset, "index"))
}

/// `<dir>/<base>.timeindex`.
#[must_use]
pub fn time_index_path(dir: &Path, base_offset: Offset) -> PathBuf {
    dir.join(file_name(base_offset, "timeindex"))
}

/// Every file of the segment at `base`: `.log`, `.index`, `.timeindex`, `.txnindex`.
#[must_use]
pub fn file_paths(dir: &Path, base_offset: Offset) -> [PathBuf; 4] {
    [
        log_path(dir, base_offset),
        offset_index_path(dir, base_offset),
        time_index_path(dir, base_offset),
        txn_index_path(dir, base_offset),
    ]
}

/// Opens the segment's `.log` for direct reads.
///
/// # Errors
/// The open's failure.
pub fn open_for_reads(
    io: &mut dyn crate::io::Io,
    dir: &Path,
    base_offset: Offset,
) -> Result<crate::io::FileId, IoError> {
    crate::io::open(
        io,
        &log_path(dir, base_offset),
        crate::io::OpenOptions {
            direct: true,
            ..crate::io::OpenOptions::default()
        },
    )
}

/// `<dir>/<base>.txnindex`.
#[must_use]
pub fn txn_index_path(dir: &Path, base_offset: Offset) -> PathBuf {
    dir.join(file_name(base_offset, "txnindex"))
}

/// The offsets named by the entries of a directory listing that end in `.{extension}`
/// (`00000000000000001234.log` → 1234), sorted.
#[must_use]
pub fn offsets_named(names: &[String], extension: &str) -> Vec<Offset> {
    let suffix = format!(".{extension}");
    let mut offsets: Vec<Offset> = names
        .iter()
        .filter_map(|n| n.strip_suffix(suffix.as_str()))
        .filter_map(|n| n.parse::<i64>().ok())
        .map(Offset)
        .collect();
    offsets.sort();
    offsets
}

/// Checks that `data` is whole valid batches with increasing offsets from `base` on, building
/// the segment's indexes on the way. Returns the offset after the last batch.
///
/// # Errors
/// What is wrong and where, for a message naming the file.
pub fn index_batches(
    data: &[u8],
    base: Offset,
    interval_bytes: u32,
) -> Result<(Offset, SegmentIndexes), String> {
    let mut indexes = SegmentIndexes::new(base, interval_bytes);
    let next = index_into(data, 0, base, &mut indexes)?;
    Ok((next, indexes))
}

/// Feeds `indexes` the batches of `data` (the segment's bytes from file position `position`, a
/// batch boundary), checking with the one scanner ([`BatchStream`]) that they are whole, valid
/// and at or past `next`, as appending them would. Returns the offset after the last batch.
///
/// # Errors
/// What is wrong and where.
pub(crate) fn index_into(
    data: &[u8],
    position: u64,
    next: Offset,
    indexes: &mut SegmentIndexes,
) -> Result<Offset, String> {
    let mut stream = BatchStream::new(position, next, u64::MAX, u64::MAX);
    let Ok(whole) = stream.feed_all(position, data, &mut IndexSink(indexes));
    if whole {
        Ok(stream.next_offset())
    } else {
        Err(stream.stop().unwrap_or("no batches").to_string())
    }
}
