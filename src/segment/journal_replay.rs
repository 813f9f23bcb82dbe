//! Replaying the shard journal's entries into one segment before its partition opens (issue
//! 30; the engine does not call it yet). The entries written on top of the segment's newest
//! commit record (the same writer's `segment_id` and that record's sequence: any newer record,
//! a checkpoint's, a truncation's or a replay's, supersedes them), in lsn order from its
//! durable end, are checked as whole batches through the one scanner (the part a large round synced in
//! the segment itself is read where it lies), then written into the segment with a new commit
//! record, synced. Afterwards the segment alone describes everything the journal held for it,
//! and the ordinary open or recovery runs on it. Replaying twice applies nothing the second
//! time.
//!
//! The page holding the old record's end may be rewritten (with the same bytes, which the
//! journal still holds): a journal round wrote it once, unsynced, when it filled.

use super::commit_record::{page_floor, CommitRecord, COMMIT_SLOTS, COMMIT_SLOT_SIZE_BYTES};
use super::scan::{BatchStream, CheckOnly};
use super::{data_region_bytes, log_path, SegmentError};
use crate::format::Offset;
use crate::io::{self, Io, Op, OpenOptions, PAGE_SIZE_BYTES};
use crate::journal::Entry;
use std::path::Path;

/// A journal entry with the lsn of its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayEntry<'a> {
    /// Its block's lsn.
    pub lsn: u64,
    /// The entry.
    pub entry: Entry<'a>,
}

/// What a replay did to one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// Entries written into the segment.
    pub applied: usize,
    /// The segment's durable end afterwards (its newest record's), if it has a record.
    pub data_len: Option<u64>,
    /// The offset after its last batch afterwards, if it has a record.
    pub next_offset: Option<Offset>,
    /// Why later entries were not applied (a gap, bytes that do not validate), if any were
    /// left: their rounds were never acknowledged.
    pub stopped: Option<String>,
}

/// Replays `entries` (any order; those of other segments are ignored) into the active segment
/// `base_offset` of `dir`. A missing or sealed segment, or one without a valid commit record,
/// gets nothing (recovery decides about it).
///
/// # Errors
/// An I/O failure.
pub fn replay_journal(
    io: &mut dyn Io,
    dir: &Path,
    base_offset: Offset,
    segment_bytes: u64,
    entries: &[ReplayEntry<'_>],
) -> Result<Replayed, SegmentError> {
    let mut out = Replayed {
        applied: 0,
        data_len: None,
        next_offset: None,
        stopped: None,
    };
    let file = match io::open(
        io,
        &log_path(dir, base_offset),
        OpenOptions {
            create: false,
            write: true,
            direct: true,
            directory: false,
        },
    ) {
        Ok(f) => f,
        Err(e) if e.is_not_found() => return Ok(out),
        Err(e) => return Err(e.into()),
    };
    let replayed = replay_open(io, file, base_offset, segment_bytes, entries, &mut out);
    let closed = io::run(io, Op::Close { file }, &mut Vec::new());
    replayed?;
    closed?.result?;
    Ok(out)
}

fn replay_open(
    io: &mut dyn Io,
    file: io::FileId,
    base_offset: Offset,
    segment_bytes: u64,
    entries: &[ReplayEntry<'_>],
    out: &mut Replayed,
) -> Result<(), SegmentError> {
    let region = data_region_bytes(segment_bytes);
    if io.file_len(file)? <= region {
        return Ok(()); // sealed: no slots
    }
    let slots = io::read_direct(io, file, region, COMMIT_SLOTS * COMMIT_SLOT_SIZE_BYTES)?;
    let Some(record) = CommitRecord::newest(slots.chunks(COMMIT_SLOT_SIZE_BYTES)) else {
        return Ok(());
    };
    out.data_len = Some(record.data_len);
    out.next_offset = Some(record.next_offset);
    let mut ours: Vec<&ReplayEntry<'_>> = entries
        .iter()
        .filter(|r| {
            r.entry.segment_base == base_offset
                && r.entry.segment_id == record.segment_id
                && r.entry.record_sequence == record.sequence
        })
        .collect();
    ours.sort_by_key(|r| r.lsn);
    let (mut end, mut next, mut applied_any) = (record.data_len, record.next_offset, false);
    let mut added = Vec::new();
    for r in ours {
        let e = &r.entry;
        if e.end <= end {
            continue;
        }
        if e.start != end || e.end > region {
            out.stopped = Some(format!(
                "entry of lsn {} covers [{}, {}), not from the durable end {end}",
                r.lsn, e.start, e.end
            ));
            break;
        }
        let mut bytes = if e.inline_from > e.start {
            io::read_direct(io, file, e.start, (e.inline_from - e.start) as usize)?
        } else {
            Vec::new()
        };
        bytes.extend_from_slice(e.inline);
        let mut stream = BatchStream::new(e.start, next, u64::MAX, segment_bytes);
        let whole = matches!(stream.feed_all(e.start, &bytes, &mut CheckOnly), Ok(true));
        if !whole || stream.next_offset() != e.next_offset {
            out.stopped = Some(format!(
                "entry of lsn {} does not validate: {}",
                r.lsn,
                stream.stop().unwrap_or("its batches end at another offset")
            ));
            break;
        }
        added.extend_from_slice(&bytes);
        (end, next, applied_any) = (e.end, e.next_offset, true);
        out.applied += 1;
    }
    if !applied_any {
        return Ok(());
    }
    // [floor, end): the old record's partial page, then the entries' bytes.
    let floor = page_floor(record.data_len);
    let mut bytes = record.tail.clone();
    bytes.extend_from_slice(&added);
    let pages = (page_floor(end) - floor) as usize;
    let mut others = Vec::new();
    if pages > 0 {
        let mut buf = io.buffer(pages.div_ceil(PAGE_SIZE_BYTES) * PAGE_SIZE_BYTES);
        buf.as_mut_slice()[..pages].copy_from_slice(&bytes[..pages]);
        let done = io::run(
            io,
            Op::Write {
                file,
                offset: floor,
                buf,
                range: 0..pages,
            },
            &mut others,
        )?;
        if let Some(buf) = done.buf {
            io.recycle(buf);
        }
        done.result?;
    }
    let replacement = CommitRecord {
        sequence: record.sequence + 1,
        base_offset,
        data_len: end,
        next_offset: next,
        prev_data_len: record.data_len,
        tail: bytes[pages..].to_vec(),
        segment_id: record.segment_id,
    };
    let mut slot = io.buffer(COMMIT_SLOT_SIZE_BYTES);
    replacement.encode_into(slot.as_mut_slice());
    let position =
        region + (replacement.sequence % COMMIT_SLOTS as u64) * COMMIT_SLOT_SIZE_BYTES as u64;
    let done = io::run(
        io,
        Op::Write {
            file,
            offset: position,
            buf: slot,
            range: 0..COMMIT_SLOT_SIZE_BYTES,
        },
        &mut others,
    )?;
    if let Some(buf) = done.buf {
        io.recycle(buf);
    }
    done.result?;
    io::run(io, Op::Fdatasync { file }, &mut others)?.result?;
    out.data_len = Some(end);
    out.next_offset = Some(next);
    Ok(())
}
