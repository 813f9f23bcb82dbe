//! A segment's indexes from its `.index` and `.timeindex` files instead of from its data: what a
//! clean open and on-demand lookups use, so that opening a log never reads its sealed segments
//! (design.md §Recovery). The files pass Kafka's sanity checks against the segment (whole entries, entries in
//! order, inside the data and the offsets) or are not used: the caller rebuilds from the `.log`.
//! The batches after the last offset entry (at most `index.interval.bytes` and a batch) can be
//! scanned to find the segment's end and bring the indexes to the state appending left.

use super::{decode_offset_index, decode_time_index};
use super::{offset_index_path, time_index_path, SegmentIndexes};
use super::{scan_file, BatchStream, IndexSink, ScanError};
use crate::format::{self, Offset};
use crate::io::{self, FileId, Io};
use std::path::Path;

/// The indexes of the segment at `base` (`data_len` bytes; `next`, the offset after its last
/// batch, when known) from its index files, or `None` when a file is missing or fails a check.
pub fn read_index_files(
    io: &mut dyn Io,
    dir: &Path,
    base: Offset,
    data_len: u64,
    next: Option<Offset>,
    interval_bytes: u32,
) -> Option<SegmentIndexes> {
    let offsets = read_derivable(io, &offset_index_path(dir, base))?;
    let offsets = decode_offset_index(&offsets, base).ok()?;
    let times = read_derivable(io, &time_index_path(dir, base))?;
    let times = decode_time_index(&times, base).ok()?;
    let below_next = |o: Offset| next.is_none_or(|n| o < n);
    let offsets_fit = offsets
        .iter()
        .all(|e| e.offset >= base && below_next(e.offset) && u64::from(e.position) < data_len);
    let times_fit = times
        .iter()
        .all(|t| t.offset >= base && below_next(t.offset));
    // A non-empty segment's time index is never empty once sealed (its largest timestamp
    // closes it), unless no batch carried a timestamp: an empty one is rebuilt, so that the
    // largest timestamp retention judges by is never an emptied file's -1.
    let times_present = data_len == 0 || !times.is_empty();
    (offsets_fit && times_fit && times_present)
        .then(|| SegmentIndexes::from_entries(base, interval_bytes, offsets, times))
}

/// The bytes of a file derivable from the segment's `.log` (an index), or `None` when the
/// caller must rebuild it: missing, or present but unreadable. The second is logged: it is a
/// failing disk, not a crash's leftover, and an operator wants to know; the rebuild from the
/// `.log` gives exactly what the file held (Kafka rebuilds a damaged index the same way).
pub fn read_derivable(io: &mut dyn Io, path: &Path) -> Option<Vec<u8>> {
    match io::read_file_if_present(io, path) {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::warn!(file = %path.display(), %error, "unreadable: rebuilt from the .log");
            None
        }
    }
}

/// Scans the batches of the segment's `file` from its last offset entry (a batch boundary) to
/// `data_len` with the one scanner ([`super::scan`]), feeding them to `indexes`, and sets the
/// first batch's timestamp. Returns the offset after the last batch. Reads only the scanned
/// bytes and the first batch's header.
///
/// # Errors
/// What is wrong and where (for a message naming the file), or the read's failure.
pub fn scan_tail(
    io: &mut dyn Io,
    file: FileId,
    base: Offset,
    data_len: u64,
    indexes: &mut SegmentIndexes,
) -> Result<Offset, TailError> {
    let from = u64::from(indexes.last_entry_position());
    // From position 0 the first batch's timestamp is set by appending it; from an index entry
    // it is read from the first header below.
    let mut stream = BatchStream::new(from, base, u64::MAX, u64::MAX);
    match scan_file(
        io,
        file,
        from,
        data_len,
        &mut stream,
        &mut IndexSink(indexes),
    ) {
        Ok(()) => {}
        Err(ScanError::Io(e)) => return Err(e.into()),
        Err(ScanError::Sink(never)) => match never {},
    }
    if !stream.whole_to(data_len) {
        return Err(TailError::Damaged(format!(
            "{} (from position {from} to {data_len})",
            stream.stop().unwrap_or("the batches end early")
        )));
    }
    let next = stream.next_offset();
    if from > 0 {
        let header = io::read_direct(io, file, 0, format::BATCH_HEADER_SIZE_BYTES)?;
        let first = <&[u8; format::BATCH_HEADER_SIZE_BYTES]>::try_from(header.as_slice())
            .map(format::BatchHeader::decode)
            .map_err(|_| TailError::Damaged("no first batch header".into()))?;
        indexes.set_first_batch_timestamp(Some(first.max_timestamp));
    }
    Ok(next)
}

/// Why [`scan_tail`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TailError {
    /// The bytes are not whole valid batches.
    #[error("{0}")]
    Damaged(String),
    /// The read failed.
    #[error(transparent)]
    Io(#[from] io::IoError),
}
