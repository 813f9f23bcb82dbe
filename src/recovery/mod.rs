//! Open-time recovery of a partition that was not closed cleanly (SPEC §5), as a table of
//! cases. For every segment file, in offset order:
//!
//! | facts about the segment file                                   | action                                                                 |
//! |----------------------------------------------------------------|------------------------------------------------------------------------|
//! | the whole file scans as valid batches                          | *sealed*                                                               |
//! | its last 16 KiB hold a valid commit record for its base offset | *open*: the newest record whose `[0, data_len)` validates is the durable end (an older one wins when the newest round's pages were lost: never acknowledged); the tail comes from the record |
//! | its last 16 KiB are all zero                                    | *open, never committed*: durable end 0                                |
//! | none of these                                                   | corruption (see the last row)                                          |
//! | an open segment that is not the last                            | crash during a roll: restore its tail and seal it now                  |
//! | an empty segment starting past the previous durable end        | a roll cut short before the previous data was durable: delete it      |
//! | the last segment                                                | reopen as the active segment (tail into a synced commit record first) |
//! | damage before a segment's durable end, or a gap between segments | corruption: fail with the file and position, never truncate silently  |
//!
//! Anything past the durable end was never acknowledged and is cut. The producer state is then
//! rebuilt from the newest snapshot at or below the end plus a replay (`PartitionLog::assemble`).
//!
//! Proven by `tests/recovery_crash.rs`: power cuts at random operations of seeded workloads,
//! with unsynced writes dropped, or kept / lost / torn at 512-byte sectors. Not built yet (issue
//! "Recovery"): index-based fast paths, the exhaustive decision-table test, named tests for
//! missing or corrupt index, snapshot and checkpoint files.

use crate::format::Offset;
use crate::io::{self, FileId, Io, OpenOptions};
use crate::log::{EpochCache, LogConfig, LogError, PartitionLog, LEADER_EPOCH_CHECKPOINT};
use crate::producer_state::{AbortedTxn, ABORTED_TXN_SIZE_BYTES};
use crate::segment::commit_record::{page_floor, CommitRecord};
use crate::segment::{
    self, SealedSegment, SegmentIndexes, SegmentWriter, COMMIT_SLOTS, COMMIT_SLOT_SIZE_BYTES,
};
use std::path::Path;

const SLOTS_BYTES: usize = COMMIT_SLOTS * COMMIT_SLOT_SIZE_BYTES;

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
}

fn corrupt(file: &Path, what: String) -> LogError {
    LogError::Corrupt {
        file: file.to_path_buf(),
        what,
    }
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
    let path = segment::log_path(dir, base);
    let file = io::open(
        io,
        &path,
        OpenOptions {
            direct: true,
            ..OpenOptions::default()
        },
    )
    .map_err(|e| LogError::Segment(e.into()))?;
    let bytes = io::read_direct_all(io, file).map_err(|e| LogError::Segment(e.into()))?;
    let interval = config.segment.index_interval_bytes;
    // A sealed file is whole batches to its last byte. (Checked first: a sealed segment whose
    // last batch ends in 16 KiB of zero-valued record bytes must not pass for an open segment
    // that never committed.)
    let sealed_scan = validate(&bytes, base, interval);
    if let Ok((next, indexes)) = sealed_scan {
        return Ok(Scanned {
            base,
            file,
            data_len: bytes.len() as u64,
            next_offset: next,
            open_tail: None,
            indexes,
        });
    }
    if bytes.len() >= SLOTS_BYTES {
        let slots_at = bytes.len() - SLOTS_BYTES;
        let slots = &bytes[slots_at..];
        let mut records: Vec<CommitRecord> = slots
            .chunks(COMMIT_SLOT_SIZE_BYTES)
            .filter_map(|s| CommitRecord::decode(s).ok())
            .filter(|r| r.base_offset == base && r.data_len as usize <= slots_at)
            .collect();
        let never_committed = slots.iter().all(|&b| b == 0);
        if !records.is_empty() || never_committed {
            records.sort_by_key(|r| std::cmp::Reverse(r.sequence));
            let mut last_error = None;
            for r in &records {
                let floor = page_floor(r.data_len) as usize;
                let mut data = bytes[..floor].to_vec();
                data.extend_from_slice(&r.tail);
                match validate(&data, base, interval) {
                    Ok((next, indexes)) => {
                        return Ok(Scanned {
                            base,
                            file,
                            data_len: r.data_len,
                            next_offset: next,
                            open_tail: Some(r.tail.clone()),
                            indexes,
                        })
                    }
                    Err(e) => last_error = Some(e),
                }
            }
            if let Some(e) = last_error {
                return Err(corrupt(
                    &path,
                    format!("no commit record's data validates: {e}"),
                ));
            }
            return Ok(Scanned {
                base,
                file,
                data_len: 0,
                next_offset: base,
                open_tail: Some(Vec::new()),
                indexes: SegmentIndexes::new(base, interval),
            });
        }
    }
    let error = sealed_scan.err().unwrap_or_default();
    Err(corrupt(
        &path,
        format!("neither whole batches nor an open segment with a valid commit record: {error}"),
    ))
}

/// Recovers the partition in `dir` after an unclean stop and returns it open.
///
/// # Errors
/// [`LogError::Corrupt`] for damage before a durable end or a gap between segments (the
/// partition must not be served), or an I/O failure.
pub fn recover(io: &mut dyn Io, dir: &Path, config: LogConfig) -> Result<PartitionLog, LogError> {
    let names = io.list_dir(dir).map_err(|e| LogError::Segment(e.into()))?;
    let bases = segment::offsets_named(&names, "log");
    if bases.is_empty() {
        return PartitionLog::create(io, dir, config);
    }
    let mut scanned: Vec<Scanned> = Vec::with_capacity(bases.len());
    for &base in &bases {
        let s = scan_segment(io, dir, base, &config)?;
        if let Some(prev) = scanned.last() {
            if s.data_len == 0 && prev.next_offset < base {
                // An empty segment past the durable end: a roll created it and the crash came
                // before the previous segment's data was durable. It holds nothing: delete it.
                let mut others = Vec::new();
                io::run(io, io::Op::Close { file: s.file }, &mut others)
                    .and_then(|c| c.result)
                    .map_err(|e| LogError::Segment(e.into()))?;
                io::run(
                    io,
                    io::Op::Unlink {
                        path: segment::log_path(dir, base),
                    },
                    &mut others,
                )
                .and_then(|c| c.result)
                .map_err(|e| LogError::Segment(e.into()))?;
                continue;
            }
            if prev.next_offset != base {
                return Err(corrupt(
                    &segment::log_path(dir, base),
                    format!(
                        "segment starts at {base} but the previous one ends at {}",
                        prev.next_offset
                    ),
                ));
            }
        }
        scanned.push(s);
    }
    let mut sealed = Vec::new();
    let mut aborted = Vec::new();
    let last = scanned.pop();
    for s in scanned {
        let mut others = Vec::new();
        let meta = if s.open_tail.is_some() {
            // A roll was cut short: restore the tail and seal the segment now.
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
            let file = io::open(
                io,
                &segment::log_path(dir, s.base),
                OpenOptions {
                    direct: true,
                    ..OpenOptions::default()
                },
            )
            .map_err(|e| LogError::Segment(e.into()))?;
            (meta, file)
        } else {
            (
                SealedSegment {
                    base_offset: s.base,
                    next_offset: s.next_offset,
                    data_len: s.data_len,
                    indexes: s.indexes,
                },
                s.file,
            )
        };
        if let Ok(txn) = io::read_file(io, &segment::txn_index_path(dir, s.base)) {
            // A damaged .txnindex is rebuilt by the replay when its range is replayed; entries
            // that decode are kept.
            aborted.extend(txn.chunks(ABORTED_TXN_SIZE_BYTES).enumerate().filter_map(
                |(k, entry)| AbortedTxn::decode(entry, (k * ABORTED_TXN_SIZE_BYTES) as u64).ok(),
            ));
        }
        sealed.push(meta);
    }
    let Some(last) = last else {
        return PartitionLog::create(io, dir, config);
    };
    let mut others = Vec::new();
    io::run(io, io::Op::Close { file: last.file }, &mut others)
        .and_then(|c| c.result)
        .map_err(|e| LogError::Segment(e.into()))?;
    let active = SegmentWriter::reopen_with_tail(
        io,
        dir,
        last.base,
        config.segment,
        0,
        last.data_len,
        last.next_offset,
        last.open_tail,
    )
    .map_err(LogError::Segment)?;
    let epochs = io::read_file(io, &dir.join(LEADER_EPOCH_CHECKPOINT))
        .ok()
        .and_then(|b| EpochCache::decode(&String::from_utf8_lossy(&b)).ok())
        .unwrap_or_default();
    PartitionLog::assemble(io, dir, config, sealed, active, aborted, epochs)
}
