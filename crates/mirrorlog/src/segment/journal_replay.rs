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

/// How a replay makes what it wrote durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplaySync {
    /// An fdatasync of the segment.
    Fdatasync,
    /// Nothing: the caller syncs the filesystem once after replaying every segment
    /// (`Io::syncfs`), before the journal that still holds the entries is discarded. A power
    /// cut before that leaves the journal, and the next open replays again (on the older
    /// record, should the new one have landed without its pages).
    Caller,
}

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
    sync: ReplaySync,
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
    let replayed = replay_open(
        io,
        file,
        base_offset,
        segment_bytes,
        entries,
        sync,
        &mut out,
    );
    let closed = io::run(io, Op::Close { file }, &mut Vec::new());
    replayed?;
    closed?.result?;
    Ok(out)
}

/// What the journal adds to one segment (see the module docs): the record it builds on and the
/// bytes past that record's end, as whole validated batches. [`replay_journal`] writes it into
/// the segment; the offline tools (`inspect`) read a crashed directory through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continuation {
    /// The commit record the entries follow: the newest, or the older one when the newest
    /// covers pages a power cut lost (`base_record`).
    pub record: CommitRecord,
    /// The bytes the applied entries add past `record.data_len`.
    pub added: Vec<u8>,
    /// Entries applied.
    pub applied: usize,
    /// The segment's end and next offset with them.
    pub end: u64,
    /// The offset after the last added batch.
    pub next_offset: Offset,
    /// Why later entries were not applied, if any were left.
    pub stopped: Option<String>,
}

/// The continuation of the segment `base_offset` whose commit slots hold `slots`, reading its
/// data region with `read(position, len)` (whole pages; a short answer is a missing page).
/// `None` without a valid record (recovery decides about such a segment).
///
/// # Errors
/// `read`'s.
pub fn continuation<E>(
    slots: &[u8],
    base_offset: Offset,
    segment_bytes: u64,
    entries: &[ReplayEntry<'_>],
    read: &mut dyn FnMut(u64, usize) -> Result<Vec<u8>, E>,
) -> Result<Option<Continuation>, E> {
    let region = data_region_bytes(segment_bytes);
    let Some(record) = base_record(slots, base_offset, segment_bytes, entries, read)? else {
        return Ok(None);
    };
    let mut ours: Vec<&ReplayEntry<'_>> = entries
        .iter()
        .filter(|r| {
            r.entry.segment_base == base_offset
                && r.entry.segment_id == record.segment_id
                && r.entry.record_sequence == record.sequence
        })
        .collect();
    ours.sort_by_key(|r| r.lsn);
    let mut out = Continuation {
        added: Vec::new(),
        applied: 0,
        end: record.data_len,
        next_offset: record.next_offset,
        stopped: None,
        record,
    };
    for r in ours {
        let e = &r.entry;
        if e.end <= out.end {
            continue;
        }
        if e.start != out.end || e.end > region {
            out.stopped = Some(format!(
                "entry of lsn {} covers [{}, {}), not from the durable end {}",
                r.lsn, e.start, e.end, out.end
            ));
            break;
        }
        let mut bytes = if e.inline_from > e.start {
            read(e.start, (e.inline_from - e.start) as usize)?
        } else {
            Vec::new()
        };
        bytes.extend_from_slice(e.inline);
        let mut stream = BatchStream::new(e.start, out.next_offset, u64::MAX, segment_bytes);
        let whole = matches!(stream.feed_all(e.start, &bytes, &mut CheckOnly), Ok(true));
        if !whole || stream.next_offset() != e.next_offset {
            out.stopped = Some(format!(
                "entry of lsn {} does not validate: {}",
                r.lsn,
                stream.stop().unwrap_or("its batches end at another offset")
            ));
            break;
        }
        out.added.extend_from_slice(&bytes);
        (out.end, out.next_offset) = (e.end, e.next_offset);
        out.applied += 1;
    }
    Ok(Some(out))
}

/// The commit record replay builds on: the newest, unless entries follow the older one of the
/// same writer and the newest's bytes past it do not validate. That is a checkpoint (or a wait
/// in place) cut by the power: its record reached the disk but the pages it covers, written
/// unsynced by journal rounds, did not. The older record, with the entries that follow it,
/// then describes what was acknowledged, as recovery's own fallback to the older slot would.
fn base_record<E>(
    slots: &[u8],
    base_offset: Offset,
    segment_bytes: u64,
    entries: &[ReplayEntry<'_>],
    read: &mut dyn FnMut(u64, usize) -> Result<Vec<u8>, E>,
) -> Result<Option<CommitRecord>, E> {
    let mut records: Vec<CommitRecord> = slots
        .chunks(COMMIT_SLOT_SIZE_BYTES)
        .filter_map(|s| CommitRecord::decode(s).ok())
        .filter(|r| r.base_offset == base_offset)
        .collect();
    records.sort_by_key(|r| std::cmp::Reverse(r.sequence));
    let Some(newest) = records.first().cloned() else {
        return Ok(None);
    };
    let follows = |r: &CommitRecord| {
        entries.iter().any(|e| {
            e.entry.segment_base == base_offset
                && e.entry.segment_id == r.segment_id
                && e.entry.record_sequence == r.sequence
        })
    };
    let Some(older) = records
        .get(1)
        .filter(|o| o.segment_id == newest.segment_id && follows(o) && !follows(&newest))
        .cloned()
    else {
        return Ok(Some(newest));
    };
    if newest.data_len <= older.data_len {
        return Ok(Some(newest));
    }
    // The bytes the newest record adds past the older one: whole batches from the older
    // record's end and next offset to its own?
    let floor = page_floor(older.data_len);
    let pages_end = page_floor(newest.data_len);
    let mut bytes = if pages_end > floor {
        read(floor, (pages_end - floor) as usize)?
    } else {
        Vec::new()
    };
    if (bytes.len() as u64) < pages_end - floor {
        return Ok(Some(older));
    }
    bytes.extend_from_slice(&newest.tail);
    let skip = (older.data_len - floor) as usize;
    let Some(added) = bytes.get(skip..) else {
        return Ok(Some(older));
    };
    let mut stream = BatchStream::new(older.data_len, older.next_offset, u64::MAX, segment_bytes);
    let whole = matches!(
        stream.feed_all(older.data_len, added, &mut CheckOnly),
        Ok(true)
    );
    Ok(Some(
        if whole && stream.next_offset() == newest.next_offset {
            newest
        } else {
            older
        },
    ))
}

fn replay_open(
    io: &mut dyn Io,
    file: io::FileId,
    base_offset: Offset,
    segment_bytes: u64,
    entries: &[ReplayEntry<'_>],
    sync: ReplaySync,
    out: &mut Replayed,
) -> Result<(), SegmentError> {
    let region = data_region_bytes(segment_bytes);
    if io.file_len(file)? <= region {
        return Ok(()); // sealed: no slots
    }
    let slots = io::read_direct(io, file, region, COMMIT_SLOTS * COMMIT_SLOT_SIZE_BYTES)?;
    let mut read = |position: u64, len: usize| io::read_direct(io, file, position, len);
    let Some(plan) = continuation(&slots, base_offset, segment_bytes, entries, &mut read)? else {
        return Ok(());
    };
    out.data_len = Some(plan.record.data_len);
    out.next_offset = Some(plan.record.next_offset);
    out.applied = plan.applied;
    out.stopped = plan.stopped.clone();
    if plan.applied == 0 {
        return Ok(());
    }
    let (record, added, end, next) = (plan.record, plan.added, plan.end, plan.next_offset);
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
    if sync == ReplaySync::Fdatasync {
        io::run(io, Op::Fdatasync { file }, &mut others)?.result?;
    }
    out.data_len = Some(end);
    out.next_offset = Some(next);
    Ok(())
}
