//! Open-time recovery of a partition that was not closed cleanly (design.md §Recovery), as a table of
//! cases. Before it, at the engine's open, the shard journals were replayed into the active
//! segments (`shard/replay.rs`, `segment/journal_replay.rs`), with the journal's own rows:
//!
//! | facts about a journal entry and its segment                                  | action |
//! |-------------------------------------------------------------------------------|--------|
//! | another writer's or another record's entry (a newer record, a re-created or sealed segment, a deleted partition) | superseded: skipped |
//! | entries follow the older record of one writer, and the newest record's bytes past it do not validate (a checkpoint cut after its record landed, before its unsynced pages did) | build on the older record |
//! | an entry ending at or below the durable end                                   | already there: skipped |
//! | an entry starting past the durable end (a gap)                                | never acknowledged: it and later entries left |
//! | an entry whose bytes are not whole batches ending at its next offset          | never acknowledged: it and later entries left |
//! | an entry continuing the durable end, validated                                | written into the segment with a new commit record (one `syncfs` for all) |
//!
//! Then, here, a reopen that a crash interrupted (a truncation or an open reopening a sealed
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
//! | damage before a segment's durable end, or a gap between segments that `segment-gaps` does not record | corruption: fail with the file and position, never truncate silently  |
//!
//! Anything past the durable end was never acknowledged and is cut. Everything derived from the
//! scanned segments is rebuilt from their batches, not from files that may be missing or
//! damaged: the leader-epoch cache (from each batch's partitionLeaderEpoch), the producer state
//! and the aborted transactions, and each scanned sealed segment's `.index`, `.timeindex` and
//! `.txnindex` and the epoch checkpoint are rewritten.
//!
//! **The recovery point** (`log/recovery_point.rs`, Kafka's `recovery-point-offset-checkpoint`):
//! the segments below it were sealed and synced with their derived files and the producer state
//! snapshotted at the point, so they are opened unread, as a clean open opens its sealed segments
//! (`log::open_trusted`), and the scan starts at the point from that snapshot, with the epoch
//! checkpoint's entries below it. A point that names no segment or whose snapshot does not load
//! is ignored. Open cost is then proportional to what lies above the point (the active segment,
//! after a crash in steady state), not to the bytes stored (design.md §Recovery).
//!
//! Recovery reads every byte above the point once (`scan`): each segment file streams in with
//! large O_DIRECT reads, several in flight, and every batch is validated, indexed and replayed
//! into the producer state as it arrives. Without a usable point, the producer state is
//! replayed from the first segment's first batch, starting from the snapshot named by that
//! segment's base (written when the log rolled to it, it holds the producers of segments already
//! deleted): only a replay rebuilds the aborted-transaction list without trusting `.txnindex`
//! files, which carry no checksum.
//!
//! Proven by `tests/recovery_crash.rs` (power cuts at random operations of seeded workloads,
//! with unsynced writes dropped, or kept / lost / torn at 512-byte sectors, then a second power
//! cut right after recovery), `tests/recovery_damage.rs` (the torn-tail matrix, damage before
//! the durable end), `tests/recovery_kafka_scenarios.rs` and `tests/recovery_files.rs`.
//!
//! Files: `mod.rs` (the pass over a partition), `table.rs` (the decision table and its
//! exhaustiveness test), `scan.rs` (one streaming pass per segment).

use crate::format::Offset;
use crate::io::{self, Io};
use crate::log::{EpochCache, LogConfig, LogError, PartitionLog, Replay};
use crate::producer_state::{snapshot_file_name, ProducerStateManager};
use crate::segment::{self, SealedSegment, SegmentWriter};
use std::path::Path;

mod scan;
mod table;

use scan::{Replayer, Scanned};
pub use scan::{READS_IN_FLIGHT, READ_BYTES};
pub use table::{decide, Action, Facts, Row, TABLE};

fn corrupt(file: &Path, what: String) -> LogError {
    LogError::Corrupt {
        file: file.to_path_buf(),
        what,
    }
}

/// Recovers the partition in `dir` after an unclean stop and returns it open.
///
/// # Errors
/// [`LogError::Corrupt`] for damage before a durable end or a gap between segments (the
/// partition must not be served), or an I/O failure.
pub fn recover(io: &mut dyn Io, dir: &Path, config: LogConfig) -> Result<PartitionLog, LogError> {
    // A reopen (truncation, open) the crash interrupted is finished first.
    crate::log::finish_interrupted_reopen(io, dir)?;
    crate::log::finish_interrupted_clean(io, dir)?;
    let names = crate::log::tidy_partition_dir(io, dir).map_err(|e| LogError::Segment(e.into()))?;
    let bases = segment::offsets_named(&names, "log");
    if bases.is_empty() {
        return PartitionLog::create(io, dir, config);
    }
    // Below the recovery point every segment is sealed, synced and indexed, and the producer
    // state was snapshotted at the point: those segments are opened unread, as a clean open
    // does, and the scan starts at the point from that snapshot. A point that names no
    // segment, or whose snapshot does not load, is ignored: everything is scanned.
    let gaps = crate::log::load_gaps(io, dir)?;
    let interval = config.segment.index_interval_bytes;
    let mut psm = ProducerStateManager::new(config.producer);
    // What the segments below the point need from the directory: their `.index`, `.timeindex`
    // and `.txnindex` (a roll writes all three before it moves the point; one missing is damage
    // recovery repairs by scanning) and a readable epoch checkpoint.
    let derived_present = |p: Offset| {
        bases.iter().take_while(|&&b| b < p).all(|&b| {
            ["index", "timeindex", "txnindex"]
                .iter()
                .all(|ext| names.contains(&format!("{:020}.{ext}", b.0)))
        })
    };
    // A checkpoint that exists but cannot be read fails the partition: epochs set without a
    // batch since (KIP-1279's jumps) live only there. A damaged one is not trusted (below).
    let checkpoint =
        crate::log::read_if_present(io, &dir.join(crate::log::LEADER_EPOCH_CHECKPOINT))?
            .and_then(|b| EpochCache::decode(&String::from_utf8_lossy(&b)).ok());
    let point = crate::log::load_recovery_point(io, dir)
        .filter(|p| *p > bases[0] && bases.contains(p) && derived_present(*p))
        .filter(|_| checkpoint.is_some());
    // The point's snapshot: unreadable fails (as any snapshot does); missing or damaged, the
    // point is not used and everything is scanned.
    let point = match point {
        Some(p) => crate::log::read_if_present(io, &dir.join(snapshot_file_name(p)))?
            .filter(|bytes| {
                psm.load_snapshot(bytes, ProducerStateManager::LOAD_WITHOUT_EXPIRING_MS)
                    .is_ok()
            })
            .map(|_| p),
        None => None,
    };
    let first_scanned = point.map_or(0, |p| bases.partition_point(|&b| b < p));
    let trusted = match point {
        Some(p) => crate::log::open_trusted(io, dir, &bases[..first_scanned], p, &gaps, interval)?,
        None => {
            // One pass over everything: every batch is validated, indexed and replayed into
            // the producer state as it streams in. The replay starts at the first segment.
            // Producers whose batches were all in segments already deleted (retention,
            // delete-records) live on in the snapshot written when that segment was rolled
            // to, named by its base: start from it when it loads.
            psm = ProducerStateManager::new(config.producer);
            if let Some(bytes) =
                crate::log::read_if_present(io, &dir.join(snapshot_file_name(bases[0])))?
            {
                if psm
                    .load_snapshot(&bytes, ProducerStateManager::LOAD_WITHOUT_EXPIRING_MS)
                    .is_err()
                {
                    // Corrupt or truncated: deleted, durably (design.md §Producer state); the producers of
                    // deleted segments it held are gone with it, as in Kafka.
                    psm = ProducerStateManager::new(config.producer);
                    crate::log::remove_snapshots(io, dir, [bases[0]])
                        .map_err(|e| LogError::Segment(e.into()))?;
                }
            }
            Vec::new()
        }
    };
    let scan_bases = &bases[first_scanned..];
    // The barrier rule needs the ranges before the replay; entries past the recovered end
    // cannot matter to it (every replayed batch lies below that end).
    let history = crate::log::load_history(io, dir, Offset(i64::MAX))?;
    let mut replayer = Replayer {
        psm,
        aborted: Vec::new(),
        history,
    };
    let mut scanned: Vec<Scanned> = Vec::with_capacity(scan_bases.len());
    let snapshots = segment::offsets_named(&names, "snapshot");
    let mut rebuilt_snapshots = false;
    for &base in scan_bases {
        // A missing snapshot at a segment base is rebuilt (design.md §Recovery): when every batch before
        // it took effect (the previous segment is whole batches), the replay's state here is
        // exactly what the roll to this segment wrote.
        if let Some(previous) = scanned.last() {
            if previous.whole_batches && !previous.replay_spoiled && !snapshots.contains(&base) {
                io::write_file_atomically(
                    io,
                    dir,
                    &snapshot_file_name(base),
                    &replayer.psm.snapshot(),
                )
                .map_err(|e| LogError::Segment(e.into()))?;
                rebuilt_snapshots = true;
            }
        }
        scanned.push(scan::scan_segment(io, dir, base, &config, &mut replayer)?);
    }
    if rebuilt_snapshots {
        tracing::info!(dir = %dir.display(), "recovery rebuilt missing snapshots");
    }
    let replay_spoiled = scanned.iter().any(|s| s.replay_spoiled);
    // Records written from here on (a reopened tail, a seal) must outrank every record on disk,
    // or a second crash would bring back an older durable end.
    let sequence = scanned.iter().map(|s| s.sequence).max().unwrap_or(0);
    // Segments deleted as unfinished rolls do not count when deciding which one is last.
    let mut actions = Vec::with_capacity(scanned.len());
    let mut prev_end: Option<Offset> = trusted.last().map(|t| t.next_offset);
    for s in &scanned {
        // Nothing in it (zeros from its start: a roll's new segment with only its creation
        // record), past the previous durable end — unless it was started there on purpose (a
        // truncation into an offset gap made its base the log end).
        let empty_past_end = s.accepted.end == 0
            && s.starts_zeroed
            && prev_end.is_some_and(|end| end < s.base)
            && !gaps.contains(&s.base);
        actions.push(empty_past_end);
        if !empty_past_end {
            prev_end = Some(s.accepted.next);
        }
    }
    let last_kept = actions.iter().rposition(|&deleted| !deleted);
    let mut sealed = Vec::new();
    let mut active = None;
    let mut expected: Option<(Offset, Offset)> =
        trusted.last().map(|t| (t.next_offset, t.base_offset));
    let mut predecessor_open = trusted.is_empty();
    // The epoch cache is rebuilt from the scanned batches themselves, whatever the checkpoint
    // says about them; below the recovery point it is the checkpoint's.
    let mut epochs = match (point, checkpoint) {
        (Some(p), Some(mut below)) => {
            below.truncate_from_end(p);
            below
        }
        _ => EpochCache::default(),
    };
    for (i, s) in scanned.into_iter().enumerate() {
        let facts = Facts {
            whole_batches: s.whole_batches,
            record_validates: s.record_validates,
            record_present: s.record_present,
            empty_past_end: actions[i],
            is_last: Some(i) == last_kept,
            predecessor_open,
            untouched: s.untouched,
        };
        if !actions[i] {
            predecessor_open = !s.whole_batches;
        }
        let path = segment::log_path(dir, s.base);
        let action = decide(&facts);
        if action != Action::DeleteUnfinishedRoll && action != Action::NeverCommitted {
            for &(epoch, start) in &s.accepted.epochs {
                epochs.assign(epoch, start);
            }
        }
        if action != Action::DeleteUnfinishedRoll {
            if let Some((end, previous)) = expected {
                if end != s.base && !(s.base > end && gaps.contains(&s.base)) {
                    // A missing segment, or a damaged base offset (no CRC covers it) at the
                    // end of the previous one: name both files. (A gap recorded in
                    // `segment-gaps` is the log's own.)
                    return Err(corrupt(
                        &path,
                        format!(
                            "segment starts at {} but the previous one ({}) ends at {end}",
                            s.base,
                            segment::log_path(dir, previous).display()
                        ),
                    ));
                }
            }
            expected = Some((s.accepted.next, s.base));
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
                        next_offset: s.accepted.next,
                        data_len: s.accepted.end,
                        indexes: s.accepted.indexes,
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
                    sequence,
                    s.accepted.end,
                    s.accepted.next,
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
                    crate::log::write_intent(io, dir, s.base, s.accepted.end)?;
                }
                active = Some(
                    SegmentWriter::reopen_with_tail(
                        io,
                        dir,
                        s.base,
                        config.segment,
                        sequence,
                        s.accepted.end,
                        s.accepted.next,
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
        if !trusted.is_empty() {
            // Segments below the point exist, so one at or past it does too (the last is
            // always kept): unreachable unless the directory changed under us.
            return Err(corrupt(
                dir,
                "no active segment past the recovery point".to_string(),
            ));
        }
        return PartitionLog::create(io, dir, config);
    };
    // Aborted transactions come from the full replay, not from possibly damaged .txnindex files.
    let replay = if replay_spoiled {
        // A file that is neither whole nor readable through a commit record fed batches that
        // are not durable data: replay again from the kept segments.
        Replay::FromStart
    } else {
        Replay::Rebuilt(Box::new((replayer.psm, replayer.aborted)))
    };
    PartitionLog::assemble_with(
        io,
        dir,
        config,
        trusted,
        sealed,
        active,
        Vec::new(),
        epochs,
        replay,
    )
}
