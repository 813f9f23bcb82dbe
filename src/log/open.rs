//! Creating, opening, assembling (from recovery's parts) and closing a partition log.
//!
//! A clean close seals the active segment, snapshots the producer state under the log end and
//! writes the clean-shutdown marker last; a clean open loads what close wrote, reopens the last
//! segment as active (under the segment intent) and removes the marker, so that a crash from then
//! on is seen as unclean.

use super::{
    checkpointed_log_start, classify, clear_intent, finish_interrupted_reopen, load_gaps,
    load_history, mode_of, remove_durably, remove_snapshots, write_intent, EpochCache, LogConfig,
    LogError, Mode, ModeHistory, PartitionLog, Replay, Sealed, CLEAN_SHUTDOWN_MARKER,
    LEADER_EPOCH_CHECKPOINT,
};
use crate::format::Offset;
use crate::io::{self, FileId, Io, Op};
use crate::producer_state::{snapshot_file_name, AbortedTxn, ProducerStateManager};
use crate::segment::{self, SealedSegment, SegmentWriter};
use std::path::{Path, PathBuf};

impl PartitionLog {
    /// Creates an empty log in the existing directory `dir`.
    ///
    /// # Errors
    /// [`LogError::DiskFull`] or another I/O failure creating the first segment.
    pub fn create(io: &mut dyn Io, dir: &Path, config: LogConfig) -> Result<Self, LogError> {
        let active =
            SegmentWriter::create(io, dir, Offset(0), config.segment, 0).map_err(classify)?;
        let log = PartitionLog {
            dir: dir.to_path_buf(),
            config,
            sealed: Vec::new(),
            active,
            psm: ProducerStateManager::new(config.producer),
            aborted: Vec::new(),
            log_start: Offset(0),
            leader_epoch: 0,
            managed_high_watermark: None,
            poisoned: None,
            derived_incomplete: false,
            infos: Vec::new(),
            extents: Vec::new(),
            epochs: EpochCache::default(),
            history: ModeHistory::default(),
            mode: Mode::Local,
            pending_stop: None,
            gaps: Vec::new(),
        };
        log.debug_check_invariants();
        Ok(log)
    }

    /// Opens the log in `dir`: a cleanly closed one (marker present) is loaded — segments
    /// scanned and validated, the last one reopened as active (its partial page copied into a
    /// commit record first), producer state from the newest snapshot plus replay, epoch cache
    /// and aborted transactions from their files; an empty directory starts a new log. The
    /// marker is removed, so a crash from now on is seen as unclean.
    ///
    /// # Errors
    /// [`LogError::NeedsRecovery`] without the marker (recovery is its own issue),
    /// [`LogError::Corrupt`] for damaged files, or an I/O failure.
    pub fn open(io: &mut dyn Io, dir: &Path, config: LogConfig) -> Result<Self, LogError> {
        finish_interrupted_reopen(io, dir)?;
        let names = io.list_dir(dir).map_err(|e| LogError::Segment(e.into()))?;
        let bases = segment::offsets_named(&names, "log");
        if bases.is_empty() {
            return Self::create(io, dir, config);
        }
        if !names.iter().any(|n| n == CLEAN_SHUTDOWN_MARKER) {
            return Err(LogError::NeedsRecovery {
                dir: dir.to_path_buf(),
            });
        }
        // The marker goes first, durably, as Kafka deletes it before loading: from here a crash
        // (the last segment reopened and preallocated, half a snapshot read) is an unclean stop
        // the next open recovers from, never a "clean" log whose files are mid-change.
        remove_durably(io, dir, CLEAN_SHUTDOWN_MARKER).map_err(classify)?;
        let names = super::tidy_partition_dir(io, dir).map_err(classify)?;
        let corrupt = |file: PathBuf, what: String| LogError::Corrupt { file, what };
        let mut sealed = Vec::new();
        let mut aborted = Vec::new();
        let mut last_end = (Offset(0), 0u64);
        let gaps = load_gaps(io, dir)?;
        let mut expected = bases[0];
        for (i, &base) in bases.iter().enumerate() {
            let path = segment::log_path(dir, base);
            let file = segment::open_for_reads(io, dir, base).map_err(classify)?;
            let bytes = io::read_direct_all(io, file).map_err(classify)?;
            let (next, indexes) =
                segment::index_batches(&bytes, base, config.segment.index_interval_bytes)
                    .map_err(|what| corrupt(path.clone(), what))?;
            // A segment starts where the previous one ends, or past it where `segment-gaps`
            // says so (a truncation into an offset gap, a relative-offset overflow).
            if i > 0 && base != expected && !(base > expected && gaps.contains(&base)) {
                return Err(corrupt(
                    path,
                    format!("segment starts at {base}, the previous one ends at {expected}"),
                ));
            }
            expected = next;
            if let Ok(txn) = io::read_file(io, &segment::txn_index_path(dir, base)) {
                let entries = crate::producer_state::decode_txn_index(&txn)
                    .map_err(|e| corrupt(segment::txn_index_path(dir, base), e.to_string()))?;
                aborted.extend(entries);
            }
            if i + 1 == bases.len() {
                last_end = (next, bytes.len() as u64);
                let mut others = Vec::new();
                io::run(io, Op::Close { file }, &mut others)
                    .and_then(|c| c.result)
                    .map_err(|e| LogError::Segment(e.into()))?;
            } else {
                sealed.push(Sealed {
                    meta: SealedSegment {
                        base_offset: base,
                        next_offset: next,
                        data_len: bytes.len() as u64,
                        indexes,
                    },
                    file,
                });
            }
        }
        let last_base = *bases.last().unwrap_or(&Offset(0));
        write_intent(io, dir, last_base, last_end.1)?;
        let active = SegmentWriter::reopen(
            io,
            dir,
            last_base,
            config.segment,
            0,
            last_end.1,
            last_end.0,
        )
        .map_err(classify)?;
        clear_intent(io, dir)?;
        let epochs = match io::read_file(io, &dir.join(LEADER_EPOCH_CHECKPOINT)) {
            Ok(bytes) => EpochCache::decode(&String::from_utf8_lossy(&bytes))
                .map_err(|e| corrupt(dir.join(LEADER_EPOCH_CHECKPOINT), e.to_string()))?,
            Err(_) => EpochCache::default(),
        };
        let log_start = checkpointed_log_start(io, dir, bases[0], active.next_offset());
        let history = load_history(io, dir, active.next_offset())?;
        let mut log = Self::with_parts(
            io, dir, config, sealed, active, aborted, epochs, log_start, history, gaps,
        );
        let snapshots = segment::offsets_named(&names, "snapshot");
        let end = log.log_end();
        log.rebuild_producer_state(io, end, &snapshots)?;
        log.finish_interrupted_stop(io)?;
        log.debug_check_invariants();
        Ok(log)
    }

    /// A log over opened or recovered parts; the producer state starts empty (the callers
    /// rebuild it) and the mode comes from the history (and `mirror-mode`).
    #[allow(clippy::too_many_arguments)]
    fn with_parts(
        io: &mut dyn Io,
        dir: &Path,
        config: LogConfig,
        sealed: Vec<Sealed>,
        active: SegmentWriter,
        aborted: Vec<AbortedTxn>,
        epochs: EpochCache,
        log_start: Offset,
        history: ModeHistory,
        gaps: Vec<Offset>,
    ) -> Self {
        PartitionLog {
            dir: dir.to_path_buf(),
            config,
            sealed,
            active,
            psm: ProducerStateManager::new(config.producer),
            aborted,
            log_start,
            leader_epoch: epochs.latest_epoch().unwrap_or(0),
            managed_high_watermark: None,
            poisoned: None,
            derived_incomplete: false,
            infos: Vec::new(),
            extents: Vec::new(),
            epochs,
            mode: mode_of(io, dir, &history),
            history,
            pending_stop: None,
            gaps,
        }
    }

    /// Assembles a log from recovered parts (used by `recovery`): sealed segments with their
    /// open read handles, the active writer, aborted transactions and the epoch cache. The
    /// producer state is then rebuilt from snapshots and a replay.
    ///
    /// # Errors
    /// An I/O failure while rebuilding the producer state.
    pub fn assemble(
        io: &mut dyn Io,
        dir: &Path,
        config: LogConfig,
        sealed: Vec<(SealedSegment, FileId)>,
        active: SegmentWriter,
        aborted: Vec<AbortedTxn>,
        epochs: EpochCache,
    ) -> Result<Self, LogError> {
        Self::assemble_with(
            io,
            dir,
            config,
            sealed,
            active,
            aborted,
            epochs,
            Replay::FromSnapshot,
        )
    }

    /// [`PartitionLog::assemble`] choosing how the producer state is rebuilt. Recovery replays
    /// from the start: it has read every byte anyway, and the result does not depend on
    /// snapshot or `.txnindex` files that may be missing or damaged; it then rewrites the
    /// epoch checkpoint and every sealed segment's `.txnindex`, `.index` and `.timeindex`.
    ///
    /// # Errors
    /// An I/O failure while rebuilding or rewriting.
    #[allow(clippy::too_many_arguments)]
    pub fn assemble_with(
        io: &mut dyn Io,
        dir: &Path,
        config: LogConfig,
        sealed: Vec<(SealedSegment, FileId)>,
        active: SegmentWriter,
        aborted: Vec<AbortedTxn>,
        mut epochs: EpochCache,
        replay: Replay,
    ) -> Result<Self, LogError> {
        let first_base = sealed
            .first()
            .map_or(active.base_offset(), |(s, _)| s.base_offset);
        let end = active.next_offset();
        let log_start = checkpointed_log_start(io, dir, first_base, end);
        let history = load_history(io, dir, end)?;
        let epochs_cut = epochs.truncate_from_end(end);
        let sealed = sealed
            .into_iter()
            .map(|(meta, file)| Sealed { meta, file })
            .collect();
        let gaps = load_gaps(io, dir)?;
        let mut log = Self::with_parts(
            io, dir, config, sealed, active, aborted, epochs, log_start, history, gaps,
        );
        log.aborted.retain(|a| a.last_offset < end);
        let snapshots = log.snapshot_offsets(io)?;
        match replay {
            Replay::FromSnapshot => {
                if epochs_cut {
                    log.write_epoch_checkpoint(io)?;
                }
                log.rebuild_producer_state(io, end, &snapshots)?;
            }
            Replay::FromStart | Replay::Rebuilt(_) => {
                log.write_epoch_checkpoint(io)?;
                // Stray snapshots: past the recovered end (records that never became durable, or
                // a truncation cut short) or before the first segment (its records are gone).
                remove_snapshots(
                    io,
                    dir,
                    snapshots.into_iter().filter(|&b| b > end || b < first_base),
                )
                .map_err(classify)?;
                log.aborted.clear();
                if let Replay::Rebuilt(rebuilt) = replay {
                    let (psm, aborted) = *rebuilt;
                    log.psm = psm;
                    log.aborted = aborted;
                } else {
                    log.rebuild_producer_state(io, end, &[])?;
                }
                for i in 0..log.sealed.len() {
                    let meta = &log.sealed[i].meta;
                    let base = meta.base_offset;
                    let files = [
                        (
                            segment::txn_index_path(dir, base),
                            log.txn_index_bytes(meta),
                        ),
                        (
                            segment::offset_index_path(dir, base),
                            meta.indexes.encode_offset_index(),
                        ),
                        (
                            segment::time_index_path(dir, base),
                            meta.indexes.encode_time_index(),
                        ),
                    ];
                    for (path, bytes) in files {
                        io::write_file(io, &path, &bytes).map_err(classify)?;
                    }
                }
            }
        }
        log.finish_interrupted_stop(io)?;
        log.debug_check_invariants();
        Ok(log)
    }

    /// Closes cleanly: commits, seals the active segment (last page written, file trimmed,
    /// indexes written), snapshots the producer state under the log end, and writes the
    /// clean-shutdown marker last.
    ///
    /// # Errors
    /// Any I/O failure; the marker is then not written and the next open needs recovery.
    pub fn close(mut self, io: &mut dyn Io) -> Result<(), LogError> {
        self.check()?;
        self.commit(io)?;
        let end = self.log_end();
        let placeholder = SegmentWriter::placeholder(self.active.base_offset());
        let active = std::mem::replace(&mut self.active, placeholder);
        let sealed = active.seal(io).map_err(classify)?;
        sealed.write_indexes(io, &self.dir).map_err(classify)?;
        let txn_entries = self.txn_index_bytes(&sealed);
        io::write_file(
            io,
            &segment::txn_index_path(&self.dir, sealed.base_offset),
            &txn_entries,
        )
        .map_err(classify)?;
        io::write_file_atomically(
            io,
            &self.dir,
            &snapshot_file_name(end),
            &self.psm.snapshot(),
        )
        .map_err(classify)?;
        io::write_file_atomically(
            io,
            &self.dir,
            LEADER_EPOCH_CHECKPOINT,
            self.epochs.encode().as_bytes(),
        )
        .map_err(classify)?;
        let mut others = Vec::new();
        for s in self.sealed.drain(..) {
            io::run(io, Op::Close { file: s.file }, &mut others)
                .and_then(|c| c.result)
                .map_err(|e| LogError::Segment(e.into()))?;
        }
        if self.derived_incomplete {
            // A roll could not write some derived files: without the marker the next open
            // recovers, which rewrites every one of them.
            return Ok(());
        }
        io::write_file_atomically(io, &self.dir, CLEAN_SHUTDOWN_MARKER, b"").map_err(classify)?;
        Ok(())
    }
}
