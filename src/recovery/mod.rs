//! Open-time recovery of a partition that was not closed cleanly (SPEC §5), as a table of
//! cases. First, a reopen that a crash interrupted (a truncation or an open reopening a sealed
//! segment leaves a synced `segment-intent` first) is finished: later segments deleted, the
//! segment cut back to its kept batches. Then, for every segment file, in offset order:
//!
//! | facts about the segment file                                   | action                                                                 |
//! |----------------------------------------------------------------|------------------------------------------------------------------------|
//! | the whole file scans as valid batches                          | *sealed*                                                               |
//! | its last 16 KiB hold a valid commit record for its base offset | *open*: the newest record whose `[0, data_len)` validates is the durable end (an older one wins when the newest round's pages were lost: never acknowledged); the tail comes from the record |
//! | no commit record at all, newest segment, predecessor unsealed   | *creation never finished* (every segment syncs a creation record before use): empty |
//! | none of these                                                   | corruption (see the last row)                                          |
//! | an open segment that is not the last                            | crash during a roll: restore its tail and seal it now                  |
//! | an empty segment starting past the previous durable end        | a roll cut short before the previous data was durable: delete it      |
//! | the last segment                                                | reopen as the active segment (tail into a synced commit record first) |
//! | damage before a segment's durable end, or a gap between segments | corruption: fail with the file and position, never truncate silently  |
//!
//! Anything past the durable end was never acknowledged and is cut. Everything derived is then
//! rebuilt from the batches themselves, not from files that may be missing or damaged: the
//! leader-epoch cache (from each batch's partitionLeaderEpoch), the producer state and the
//! aborted transactions (a replay from the first batch; recovery has read every byte anyway),
//! and each sealed segment's `.index`, `.timeindex` and `.txnindex` and the epoch checkpoint
//! are rewritten (`PartitionLog::assemble_with(.., Replay::FromStart)`).
//!
//! Proven by `tests/recovery_crash.rs`: power cuts at random operations of seeded workloads,
//! with unsynced writes dropped, or kept / lost / torn at 512-byte sectors. Not built yet (issue
//! "Recovery"): index-based fast paths, the exhaustive decision-table test, named tests for
//! missing or corrupt index, snapshot and checkpoint files.

use crate::format::Offset;
use crate::io::{self, FileId, Io};
use crate::log::{EpochCache, LogConfig, LogError, PartitionLog, Replay};
use crate::segment::commit_record::{page_floor, CommitRecord};
use crate::segment::{
    self, SealedSegment, SegmentIndexes, SegmentWriter, COMMIT_SLOTS, COMMIT_SLOT_SIZE_BYTES,
};
use std::path::Path;

const SLOTS_BYTES: usize = COMMIT_SLOTS * COMMIT_SLOT_SIZE_BYTES;

mod table;

pub use table::{decide, Action, Facts, Row, TABLE};

/// What the scan of one segment file found.
#[derive(Debug)]
struct Scanned {
    base: Offset,
    file: FileId,
    /// Durable data: `[0, data_len)`.
    data_len: u64,
    next_offset: Offset,
    /// For a segment that was never sealed: the tail from its commit record.
    open_tail: Option<Vec<u8>>,
    indexes: SegmentIndexes,
    whole_batches: bool,
    record_validates: bool,
    record_present: bool,
    /// `(leader epoch, base offset)` of every batch whose epoch is newer than the one before.
    epochs: Vec<(i32, Offset)>,
    /// Why neither a sealed nor an open reading works, for the corruption error.
    problem: String,
}

fn corrupt(file: &Path, what: String) -> LogError {
    LogError::Corrupt {
        file: file.to_path_buf(),
        what,
    }
}

/// Leader-epoch changes in whole batches, as the epoch cache records them.
fn epochs_of(data: &[u8]) -> Vec<(i32, Offset)> {
    let mut out: Vec<(i32, Offset)> = Vec::new();
    for b in crate::format::BatchIter::new(data, 0) {
        let h = b.header();
        if h.partition_leader_epoch >= 0
            && out
                .last()
                .is_none_or(|&(e, _)| h.partition_leader_epoch > e)
        {
            out.push((h.partition_leader_epoch, h.base_offset));
        }
    }
    out
}

fn validate(
    data: &[u8],
    base: Offset,
    interval_bytes: u32,
) -> Result<(Offset, SegmentIndexes), String> {
    segment::index_batches(data, base, interval_bytes)
}

fn scan_segment(
    io: &mut dyn Io,
    dir: &Path,
    base: Offset,
    config: &LogConfig,
) -> Result<Scanned, LogError> {
    let file = segment::open_for_reads(io, dir, base).map_err(|e| LogError::Segment(e.into()))?;
    let bytes = io::read_direct_all(io, file).map_err(|e| LogError::Segment(e.into()))?;
    let interval = config.segment.index_interval_bytes;
    let mut scanned = Scanned {
        base,
        file,
        data_len: 0,
        next_offset: base,
        open_tail: None,
        indexes: SegmentIndexes::new(base, interval),
        whole_batches: false,
        record_validates: false,
        record_present: false,
        epochs: Vec::new(),
        problem: String::new(),
    };
    // A sealed file is whole batches to its last byte. (The table checks this first: a sealed
    // segment whose last batch ends in 16 KiB of zero-valued record bytes must not pass for an
    // open segment that never committed.)
    match validate(&bytes, base, interval) {
        Ok((next, indexes)) => {
            scanned.whole_batches = true;
            scanned.epochs = epochs_of(&bytes);
            scanned.data_len = bytes.len() as u64;
            scanned.next_offset = next;
            scanned.indexes = indexes;
            return Ok(scanned);
        }
        Err(e) => scanned.problem = e,
    }
    if bytes.len() >= SLOTS_BYTES {
        let slots_at = bytes.len() - SLOTS_BYTES;
        let slots = &bytes[slots_at..];
        let mut records: Vec<CommitRecord> = slots
            .chunks(COMMIT_SLOT_SIZE_BYTES)
            .filter_map(|s| CommitRecord::decode(s).ok())
            .filter(|r| r.base_offset == base && r.data_len as usize <= slots_at)
            .collect();
        scanned.record_present = !records.is_empty();
        // The newest record whose data validates is the durable end; an older one wins when
        // the newest round's pages were lost (that round was never acknowledged).
        records.sort_by_key(|r| std::cmp::Reverse(r.sequence));
        for r in &records {
            let floor = page_floor(r.data_len) as usize;
            let mut data = bytes[..floor].to_vec();
            data.extend_from_slice(&r.tail);
            match validate(&data, base, interval) {
                Ok((next, indexes)) => {
                    scanned.record_validates = true;
                    scanned.epochs = epochs_of(&data);
                    scanned.data_len = r.data_len;
                    scanned.next_offset = next;
                    scanned.indexes = indexes;
                    scanned.open_tail = Some(r.tail.clone());
                    return Ok(scanned);
                }
                Err(e) => scanned.problem = format!("no commit record's data validates: {e}"),
            }
        }
    }
    Ok(scanned)
}

/// Recovers the partition in `dir` after an unclean stop and returns it open.
///
/// # Errors
/// [`LogError::Corrupt`] for damage before a durable end or a gap between segments (the
/// partition must not be served), or an I/O failure.
pub fn recover(io: &mut dyn Io, dir: &Path, config: LogConfig) -> Result<PartitionLog, LogError> {
    // A reopen (truncation, open) the crash interrupted is finished first.
    crate::log::finish_interrupted_reopen(io, dir)?;
    let names = io.list_dir(dir).map_err(|e| LogError::Segment(e.into()))?;
    let bases = segment::offsets_named(&names, "log");
    if bases.is_empty() {
        return PartitionLog::create(io, dir, config);
    }
    let mut scanned: Vec<Scanned> = Vec::with_capacity(bases.len());
    for &base in &bases {
        scanned.push(scan_segment(io, dir, base, &config)?);
    }
    // Segments deleted as unfinished rolls do not count when deciding which one is last.
    let mut actions = Vec::with_capacity(scanned.len());
    let mut prev_end: Option<Offset> = None;
    for s in &scanned {
        let empty_past_end = s.data_len == 0 && prev_end.is_some_and(|end| end < s.base);
        actions.push(empty_past_end);
        if !empty_past_end {
            prev_end = Some(s.next_offset);
        }
    }
    let last_kept = actions.iter().rposition(|&deleted| !deleted);
    let mut sealed = Vec::new();
    let mut active = None;
    let mut expected: Option<Offset> = None;
    let mut predecessor_open = true;
    // The epoch cache is rebuilt from the batches themselves, whatever the checkpoint says.
    let mut epochs = EpochCache::default();
    for (i, s) in scanned.into_iter().enumerate() {
        let facts = Facts {
            whole_batches: s.whole_batches,
            record_validates: s.record_validates,
            record_present: s.record_present,
            empty_past_end: actions[i],
            is_last: Some(i) == last_kept,
            predecessor_open,
        };
        if !actions[i] {
            predecessor_open = !s.whole_batches;
        }
        let path = segment::log_path(dir, s.base);
        let action = decide(&facts);
        if action != Action::DeleteUnfinishedRoll && action != Action::NeverCommitted {
            for &(epoch, start) in &s.epochs {
                epochs.assign(epoch, start);
            }
        }
        if action != Action::DeleteUnfinishedRoll {
            if let Some(end) = expected {
                if end != s.base {
                    return Err(corrupt(
                        &path,
                        format!(
                            "segment starts at {} but the previous one ends at {end}",
                            s.base
                        ),
                    ));
                }
            }
            expected = Some(s.next_offset);
        }
        let mut others = Vec::new();
        match action {
            Action::Corrupt => {
                return Err(corrupt(
                    &path,
                    format!(
                        "neither whole batches nor an open segment with a valid commit record: {}",
                        s.problem
                    ),
                ));
            }
            Action::DeleteUnfinishedRoll => {
                io::run(io, io::Op::Close { file: s.file }, &mut others)
                    .and_then(|c| c.result)
                    .map_err(|e| LogError::Segment(e.into()))?;
                io::run(io, io::Op::Unlink { path }, &mut others)
                    .and_then(|c| c.result)
                    .map_err(|e| LogError::Segment(e.into()))?;
            }
            Action::KeepSealed => {
                sealed.push((
                    SealedSegment {
                        base_offset: s.base,
                        next_offset: s.next_offset,
                        data_len: s.data_len,
                        indexes: s.indexes,
                    },
                    s.file,
                ));
            }
            Action::SealUnfinishedRoll => {
                io::run(io, io::Op::Close { file: s.file }, &mut others)
                    .and_then(|c| c.result)
                    .map_err(|e| LogError::Segment(e.into()))?;
                let w = SegmentWriter::reopen_with_tail(
                    io,
                    dir,
                    s.base,
                    config.segment,
                    0,
                    s.data_len,
                    s.next_offset,
                    s.open_tail,
                )
                .map_err(LogError::Segment)?;
                let meta = w.seal(io).map_err(LogError::Segment)?;
                let file = segment::open_for_reads(io, dir, s.base)
                    .map_err(|e| LogError::Segment(e.into()))?;
                sealed.push((meta, file));
            }
            Action::ReopenSealed | Action::ReopenOpen | Action::NeverCommitted => {
                io::run(io, io::Op::Close { file: s.file }, &mut others)
                    .and_then(|c| c.result)
                    .map_err(|e| LogError::Segment(e.into()))?;
                // Reopening a sealed file extends it: a crash in between must find the intent.
                let sealed_before = action == Action::ReopenSealed;
                if sealed_before {
                    crate::log::write_intent(io, dir, s.base, s.data_len)?;
                }
                active = Some(
                    SegmentWriter::reopen_with_tail(
                        io,
                        dir,
                        s.base,
                        config.segment,
                        0,
                        s.data_len,
                        s.next_offset,
                        s.open_tail,
                    )
                    .map_err(LogError::Segment)?,
                );
                if sealed_before {
                    crate::log::clear_intent(io, dir)?;
                }
            }
        }
    }
    let Some(active) = active else {
        return PartitionLog::create(io, dir, config);
    };
    // Aborted transactions come from the full replay, not from possibly damaged .txnindex files.
    PartitionLog::assemble_with(
        io,
        dir,
        config,
        sealed,
        active,
        Vec::new(),
        epochs,
        Replay::FromStart,
    )
}
