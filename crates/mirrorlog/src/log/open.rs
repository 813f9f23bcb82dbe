//! Creating, opening, assembling (from recovery's parts) and closing a partition log.
//!
//! A clean close seals the active segment, snapshots the producer state under the log end and
//! writes the clean-shutdown marker last; a clean open loads what close wrote, reopens the last
//! segment as active (under the segment intent) and removes the marker, so that a crash from then
//! on is seen as unclean.

use super::{
    checkpointed_log_start, classify, clear_intent, end_and_indexes, finish_interrupted_reopen,
    load_gaps, load_high_watermark, load_history, mode_of, open_trusted, remove_durably,
    remove_snapshots, write_intent, EpochCache, LogConfig, LogError, Mode, ModeHistory,
    PartitionLog, Replay, Sealed, TrustedSegment, CLEAN_SHUTDOWN_MARKER, LEADER_EPOCH_CHECKPOINT,
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
        let mut log = PartitionLog {
            dir: dir.to_path_buf(),
            config,
            sealed: Vec::new(),
            active,
            psm: ProducerStateManager::new(config.producer),
            aborted: Vec::new(),
            log_start: Offset(0),
            leader_epoch: 0,
            managed_high_watermark: None,
            high_watermark_checkpointed: None,
            poisoned: None,
            derived_incomplete: false,
            infos: Vec::new(),
            extents: Vec::new(),
            epochs: EpochCache::default(),
            history: ModeHistory::default(),
            mode: Mode::Local,
            pending_stop: None,
            gaps: Vec::new(),
            recovery_point: Offset(0),
            segments_generation: 0,
        };
        // Opened, not written to: no append buffer until the first append.
        log.active.release_buffers(io);
        log.debug_check_invariants();
        Ok(log)
    }

    /// Opens the log in `dir`: a cleanly closed one (marker present) is loaded without reading
    /// its sealed segments (design.md §Recovery) — their sizes from the files, their ends from the next
    /// segment's base, their indexes and aborted transactions on demand — and the last segment
    /// reopened as active from its index files and the batches after their last entry (its
    /// partial page copied into a commit record first); producer state from the newest
    /// snapshot (plus a replay if it is older than the end), the epoch cache and the active
    /// segment's aborted transactions from their files. An empty directory starts a new log.
    /// The marker is removed first, so a crash from then on is seen as unclean.
    ///
    /// # Errors
    /// [`LogError::NeedsRecovery`] without the marker (recovery is its own issue),
    /// [`LogError::Corrupt`] for damaged files, or an I/O failure.
    pub fn open(io: &mut dyn Io, dir: &Path, config: LogConfig) -> Result<Self, LogError> {
        finish_interrupted_reopen(io, dir)?;
        super::finish_interrupted_clean(io, dir)?;
        let names = io.list_dir(dir).map_err(|e| LogError::Segment(e.into()))?;
        let bases = segment::offsets_named(&names, "log");
        if bases.is_empty() {
            // Index files and snapshots left without their `.log` go first, as Kafka's
            // `LogLoader` deletes them: a new log must not inherit them.
            super::tidy_partition_dir(io, dir).map_err(classify)?;
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
        let interval = config.segment.index_interval_bytes;
        let gaps = load_gaps(io, dir)?;
        // Sealed segments are not read (design.md §Recovery): see `open_trusted`.
        let (last_base, earlier) = bases.split_last().unwrap_or((&bases[0], &[]));
        let sealed = open_trusted(io, dir, earlier, *last_base, &gaps, interval)?
            .into_iter()
            .map(Sealed::trusted)
            .collect();
        // The last segment becomes the active one: its indexes from its files, brought to its
        // end by the batches after the last entry (all its batches when a file is missing or
        // damaged); only the partial last page is read to reopen it.
        let last_base = *last_base;
        let file = segment::open_for_reads(io, dir, last_base).map_err(classify)?;
        let data_len = io.file_len(file).map_err(classify)?;
        let (next, indexes) = end_and_indexes(io, dir, last_base, file, data_len, interval, true)?;
        let mut others = Vec::new();
        io::run(io, Op::Close { file }, &mut others)
            .and_then(|c| c.result)
            .map_err(|e| LogError::Segment(e.into()))?;
        let txn_path = segment::txn_index_path(dir, last_base);
        let aborted = match io::read_file_if_present(io, &txn_path) {
            Ok(Some(bytes)) => crate::producer_state::decode_txn_index(&bytes)
                .map_err(|e| corrupt(txn_path.clone(), e.to_string()))?,
            Ok(None) => Vec::new(),
            Err(error) => {
                // Derivable from the `.log`: recovery rebuilds the active segment's aborted
                // transactions by replaying it (the marker is already gone, nothing is written
                // yet). Taking the failure for absence would serve aborted records to
                // read_committed consumers.
                tracing::warn!(file = %txn_path.display(), %error,
                    "transaction index unreadable: recovering the partition to rebuild it");
                return Err(LogError::NeedsRecovery {
                    dir: dir.to_path_buf(),
                });
            }
        };
        write_intent(io, dir, last_base, data_len)?;
        let active = SegmentWriter::reopen_indexed(
            io,
            dir,
            last_base,
            config.segment,
            0,
            data_len,
            next,
            indexes,
        )
        .map_err(classify)?;
        clear_intent(io, dir)?;
        let epochs = match super::read_if_present(io, &dir.join(LEADER_EPOCH_CHECKPOINT))? {
            Some(bytes) => EpochCache::decode(&String::from_utf8_lossy(&bytes))
                .map_err(|e| corrupt(dir.join(LEADER_EPOCH_CHECKPOINT), e.to_string()))?,
            None => EpochCache::default(),
        };
        let log_start = checkpointed_log_start(io, dir, bases[0], active.next_offset())?;
        let history = load_history(io, dir, active.next_offset())?;
        let mut log = Self::with_parts(
            io, dir, config, sealed, active, aborted, epochs, log_start, history, gaps,
        )?;
        let snapshots = segment::offsets_named(&names, "snapshot");
        let end = log.log_end();
        log.rebuild_producer_state(io, end, &snapshots)?;
        log.finish_interrupted_stop(io)?;
        log.finish_interrupted_alignment(io)?;
        log.active.release_buffers(io);
        log.debug_check_invariants();
        Ok(log)
    }

    /// A log over opened or recovered parts; the producer state starts empty (the callers
    /// rebuild it) and the mode comes from the history (and `mirror-mode`).
    ///
    /// # Errors
    /// [`LogError::Unreadable`] for a `mirror-mode` file that cannot be read.
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
    ) -> Result<Self, LogError> {
        let high_watermark = load_high_watermark(io, dir)?;
        Ok(PartitionLog {
            dir: dir.to_path_buf(),
            config,
            sealed,
            active,
            psm: ProducerStateManager::new(config.producer),
            aborted,
            log_start,
            leader_epoch: epochs.latest_epoch().unwrap_or(0),
            managed_high_watermark: high_watermark,
            high_watermark_checkpointed: high_watermark,
            poisoned: None,
            derived_incomplete: false,
            infos: Vec::new(),
            extents: Vec::new(),
            epochs,
            mode: mode_of(io, dir, &history)?,
            history,
            pending_stop: None,
            gaps,
            recovery_point: super::load_recovery_point(io, dir).unwrap_or(Offset(0)),
            segments_generation: 0,
        })
    }

    /// Assembles a log from recovered parts (used by `recovery`): the sealed segments below the
    /// recovery point, trusted unread (`trusted`), then those recovery scanned with their open
    /// read handles, the active writer, aborted transactions and the epoch cache; `replay` says
    /// how the producer state is rebuilt. Recovery replays what it scanned: the result does not
    /// depend on snapshot or `.txnindex` files that may be missing or damaged above the
    /// recovery point; it then rewrites the epoch checkpoint and every scanned sealed segment's
    /// `.txnindex`, `.index` and `.timeindex`, and moves the recovery point to the active
    /// segment.
    ///
    /// # Errors
    /// An I/O failure while rebuilding or rewriting.
    #[allow(clippy::too_many_arguments)]
    pub fn assemble_with(
        io: &mut dyn Io,
        dir: &Path,
        config: LogConfig,
        trusted: Vec<TrustedSegment>,
        sealed: Vec<(SealedSegment, FileId)>,
        active: SegmentWriter,
        aborted: Vec<AbortedTxn>,
        mut epochs: EpochCache,
        replay: Replay,
    ) -> Result<Self, LogError> {
        let first_base = trusted.first().map(|t| t.base_offset).unwrap_or_else(|| {
            sealed
                .first()
                .map_or(active.base_offset(), |(s, _)| s.base_offset)
        });
        // The replay of what was scanned starts at the first scanned segment, from the
        // snapshot the roll to it wrote (recovery loaded it to trust what lies below).
        let scanned_from = (!trusted.is_empty()).then(|| {
            sealed
                .first()
                .map_or(active.base_offset(), |(s, _)| s.base_offset)
        });
        let trusted_count = trusted.len();
        let end = active.next_offset();
        let log_start = checkpointed_log_start(io, dir, first_base, end)?;
        let history = load_history(io, dir, end)?;
        // The epochs end at the log end and start at the log start, as Kafka's `LogLoader`
        // leaves them (`truncateFromEnd`, then `truncateFromStart` at the checkpointed log
        // start): a scan from a segment base below the log start finds the epoch of records
        // `delete_records` already removed.
        let epochs_cut = epochs.truncate_from_end(end) | epochs.truncate_from_start(log_start);
        // Each sealed segment keeps the aborts whose marker it holds; the active one the rest.
        let mut aborted = aborted;
        aborted.retain(|a| a.last_offset < end);
        let sealed = trusted
            .into_iter()
            .map(Sealed::trusted)
            .chain(sealed.into_iter().map(|(meta, file)| {
                let own = aborted
                    .iter()
                    .filter(|a| {
                        a.last_offset >= meta.base_offset && a.last_offset < meta.next_offset
                    })
                    .copied()
                    .collect();
                Sealed::from_segment(meta, file, own)
            }))
            .collect();
        let active_base = active.base_offset();
        aborted.retain(|a| a.last_offset >= active_base);
        let gaps = load_gaps(io, dir)?;
        let mut log = Self::with_parts(
            io, dir, config, sealed, active, aborted, epochs, log_start, history, gaps,
        )?;
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
                let all = if let Replay::Rebuilt(rebuilt) = replay {
                    let (psm, aborted) = *rebuilt;
                    log.psm = psm;
                    aborted
                } else {
                    let from: Vec<Offset> = scanned_from.into_iter().collect();
                    let mut all = log.rebuild_producer_state(io, end, &from)?;
                    all.append(&mut log.aborted);
                    all
                };
                log.distribute_aborted(all, trusted_count);
                for s in &log.sealed {
                    let base = s.base_offset;
                    let (Some(indexes), Some(aborted)) = (s.loaded_indexes(), s.loaded_aborted())
                    else {
                        continue;
                    };
                    let files = [
                        (
                            segment::txn_index_path(dir, base),
                            super::encode_txn_index(aborted),
                        ),
                        (
                            segment::offset_index_path(dir, base),
                            indexes.encode_offset_index(),
                        ),
                        (
                            segment::time_index_path(dir, base),
                            indexes.encode_time_index(),
                        ),
                    ];
                    for (path, bytes) in files {
                        io::write_file(io, &path, &bytes).map_err(classify)?;
                    }
                }
            }
        }
        log.finish_interrupted_stop(io)?;
        log.finish_interrupted_alignment(io)?;
        // Everything sealed is verified or trusted now: a later crash scans the active segment.
        let point = log.active.base_offset();
        log.advance_recovery_point(io, point)?;
        log.active.release_buffers(io);
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
        let txn_entries = super::encode_txn_index(&self.aborted);
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
        self.checkpoint_high_watermark(io)?;
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
