//! The mirroring sequences: start, pause, resume and stop, in design.md §Mirroring's order, each durable
//! before it returns, and the persistence of the mode and the mode history they change.

use super::{
    classify, remove_durably, LogError, Mode, ModeHistory, PartitionLog, RangeKind, StopIntent,
    MIRROR_CHECKPOINT, MIRROR_MODE_FILE, STOP_INTENT,
};
use crate::format::{self, Offset};
use crate::io::{self, Io};
use crate::producer_state::Origin;

/// Where `start_mirroring` truncates before mirroring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MirrorStart {
    /// The local last stable offset.
    LastStableOffset,
    /// An explicit offset (failback: the other side's `last_mirrored_offset`).
    Offset(Offset),
    /// The end offset of leader epoch `e` in the epoch cache.
    EpochEnd(i32),
    /// Log alignment (design.md §Mirroring): every local segment removed, the log starting at this offset
    /// (Kafka's `truncateFullyAndStartAt`), for a source whose log start is past the
    /// destination's end, or a diverged destination. At or past the log start.
    StartAt(Offset),
}

/// What `stop_mirroring` does with transactions still open in the mirrored data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OpenTransactions {
    /// Append one ABORT marker per producer with an open transaction (the default).
    #[default]
    Abort,
    /// Truncate the log to the last stable offset first.
    TruncateToLso,
}

/// What `stop_mirroring` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopOutcome {
    /// The log end when mirroring stopped (the other side truncates to it on failback).
    pub last_mirrored_offset: Offset,
    /// Producers whose open transactions got an ABORT marker.
    pub aborted_producers: Vec<i64>,
    /// Where the barrier went.
    pub barrier_offset: Offset,
}

impl PartitionLog {
    /// The partition's mode.
    #[must_use]
    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// The mode history (the barrier rule's ranges).
    #[must_use]
    pub fn mode_history(&self) -> &ModeHistory {
        &self.history
    }

    /// Persists Paused / Failed (or removes the file for Local / Mirroring).
    pub(super) fn write_mode(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        let text = match &self.mode {
            Mode::Paused { .. } => "paused\n".to_string(),
            Mode::Failed { reason } => format!("failed\n{reason}"),
            Mode::Local | Mode::Mirroring { .. } => {
                // Durably: a `paused` left behind by a power cut would pause it again.
                return remove_durably(io, &self.dir, MIRROR_MODE_FILE)
                    .map_err(|e| self.poison(classify(e)));
            }
        };
        io::write_file_atomically(io, &self.dir, MIRROR_MODE_FILE, text.as_bytes())
            .map_err(|e| self.poison(classify(e)))
    }

    pub(super) fn write_history(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        let text = self.history.encode();
        io::write_file_atomically(io, &self.dir, MIRROR_CHECKPOINT, text.as_bytes())
            .map_err(|e| self.poison(classify(e)))
    }

    /// Starts mirroring from `source` (initial mirroring or failback): truncates to `start`,
    /// records `(log end, mirror <source>)` durably, and accepts Mirror appends from the log end
    /// on. From Local or Failed.
    ///
    /// # Errors
    /// [`LogError::ModeTransition`], [`LogError::UnknownEpoch`], [`LogError::StartPastLogEnd`]
    /// for an `Offset` past the log end (before anything changes), or the truncation's errors.
    pub fn start_mirroring(
        &mut self,
        io: &mut dyn Io,
        source: &str,
        start: MirrorStart,
    ) -> Result<Offset, LogError> {
        self.check()?;
        validate_source(source)?;
        if !matches!(self.mode, Mode::Local | Mode::Failed { .. }) {
            return Err(LogError::ModeTransition {
                what: "start mirroring",
                mode: self.mode.clone(),
            });
        }
        if let MirrorStart::Offset(asked) = start {
            // Appends staged but not yet committed count: the check is against the log end.
            if asked > self.log_end() {
                return Err(LogError::StartPastLogEnd {
                    asked,
                    log_end: self.log_end(),
                });
            }
        }
        self.abandon_pending_stop(io)?;
        self.commit(io)?;
        let to = match start {
            MirrorStart::LastStableOffset => self.last_stable_offset(),
            MirrorStart::Offset(o) => o,
            MirrorStart::EpochEnd(e) => {
                self.epoch_end_offset(e).ok_or(LogError::UnknownEpoch(e))?
            }
            MirrorStart::StartAt(o) => {
                self.truncate_fully_and_start_at(io, o)?;
                o
            }
        };
        if to < self.log_end() {
            self.truncate_to(io, to)?;
        }
        let end = self.log_end();
        self.history
            .record(end, RangeKind::Mirror(source.to_string()));
        self.write_history(io)?;
        self.mode = Mode::Mirroring {
            source: source.to_string(),
        };
        self.write_mode(io)?;
        self.debug_check_invariants();
        Ok(end)
    }

    /// Realigns a mirroring (or paused) partition at `at`, past its log end: the source's
    /// retention moved its log start beyond the destination's end (the fetcher got
    /// `OffsetOutOfRange`), so every local segment goes and the log starts at `at` (design.md §Mirroring,
    /// [`PartitionLog::truncate_fully_and_start_at`]). The mode and the mirrored range stay.
    ///
    /// # Errors
    /// [`LogError::ModeTransition`] unless Mirroring or Paused; [`LogError::OffsetOutOfRange`]
    /// for an `at` below the log end (that is a truncation, not an alignment); an I/O failure.
    pub fn realign_mirror(&mut self, io: &mut dyn Io, at: Offset) -> Result<Offset, LogError> {
        self.check()?;
        if !matches!(self.mode, Mode::Mirroring { .. } | Mode::Paused { .. }) {
            return Err(LogError::ModeTransition {
                what: "realign mirroring",
                mode: self.mode.clone(),
            });
        }
        if at < self.log_end() {
            return Err(LogError::OffsetOutOfRange {
                offset: at,
                log_start: self.log_start,
                log_end: self.log_end(),
            });
        }
        self.abandon_pending_stop(io)?;
        self.truncate_fully_and_start_at(io, at)?;
        self.debug_check_invariants();
        Ok(at)
    }

    /// Suspends mirroring (no Mirror appends until resumed).
    ///
    /// # Errors
    /// [`LogError::ModeTransition`] unless Mirroring.
    pub fn pause_mirroring(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        match &self.mode {
            Mode::Mirroring { source } => {
                self.mode = Mode::Paused {
                    source: source.clone(),
                };
                self.write_mode(io)
            }
            other => Err(LogError::ModeTransition {
                what: "pause mirroring",
                mode: other.clone(),
            }),
        }
    }

    /// Resumes a paused mirror.
    ///
    /// # Errors
    /// [`LogError::ModeTransition`] unless Paused.
    pub fn resume_mirroring(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        match &self.mode {
            Mode::Paused { source } => {
                self.mode = Mode::Mirroring {
                    source: source.clone(),
                };
                self.abandon_pending_stop(io)?;
                self.write_mode(io)
            }
            other => Err(LogError::ModeTransition {
                what: "resume mirroring",
                mode: other.clone(),
            }),
        }
    }

    /// Stops mirroring (failover), in design.md §Mirroring's order, durable before it returns: the log end
    /// becomes `last_mirrored_offset`; `leader_epoch` is stamped from here on; open
    /// transactions get ABORT markers (or the log is truncated to the LSO); the history gets
    /// `(first offset written here, local)`; the markers and the barrier, which clears the
    /// producer state, are one append and one commit. From Mirroring, Paused or Failed.
    ///
    /// Atomic: a power cut or a failure at any step leaves the state before the stop or after
    /// it (the stop intent, `stop_intent.rs`), and a retry reports the same
    /// `last_mirrored_offset`.
    ///
    /// # Errors
    /// [`LogError::ModeTransition`] from Local, or an I/O failure (the partition is then not
    /// acknowledged as stopped; a retry completes it).
    pub fn stop_mirroring(
        &mut self,
        io: &mut dyn Io,
        leader_epoch: i32,
        open: OpenTransactions,
        now_ms: i64,
    ) -> Result<StopOutcome, LogError> {
        self.check()?;
        if self.mode == Mode::Local {
            return Err(LogError::ModeTransition {
                what: "stop mirroring",
                mode: self.mode.clone(),
            });
        }
        self.commit(io)?;
        let last_mirrored_offset = self
            .pending_stop
            .as_ref()
            .map_or(self.log_end(), |p| p.last_mirrored_offset);
        let mut intent = StopIntent {
            last_mirrored_offset,
            first_local: None,
        };
        intent.write(io, &self.dir)?;
        self.pending_stop = Some(intent.clone());
        self.set_leader_epoch(leader_epoch);
        if open == OpenTransactions::TruncateToLso {
            let lso = self.last_stable_offset();
            if lso < self.log_end() {
                self.truncate_to(io, lso)?;
            }
        }
        let first_local = self.log_end();
        let history_before = self.history.clone();
        intent.first_local = Some((first_local, history_before.clone()));
        intent.write(io, &self.dir)?;
        self.pending_stop = Some(intent);
        // The Local range is recorded before the barrier is written (design.md §Mirroring, step 4); the
        // intent undoes it if the barrier never becomes durable.
        self.history.record(first_local, RangeKind::Local);
        self.write_history(io)?;
        let previous = std::mem::replace(&mut self.mode, Mode::Local);
        let written = self.append_stop_batches(io, leader_epoch, now_ms);
        match written {
            Ok((aborted_producers, barrier_offset)) => {
                self.write_mode(io)?;
                self.pending_stop = None;
                remove_durably(io, &self.dir, STOP_INTENT).map_err(|e| self.poison(classify(e)))?;
                self.debug_check_invariants();
                Ok(StopOutcome {
                    last_mirrored_offset,
                    aborted_producers,
                    barrier_offset,
                })
            }
            Err(e) => {
                // Nothing of the append is durable (or the log is poisoned): as before the
                // stop, its intent kept for the retry.
                self.mode = previous;
                self.history = history_before;
                self.write_history(io)?;
                Err(e)
            }
        }
    }

    /// The stop's ABORT markers (one per producer with an open transaction) and its barrier,
    /// as one append made durable by one commit. Returns the producers and the barrier's
    /// offset.
    fn append_stop_batches(
        &mut self,
        io: &mut dyn Io,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<(Vec<i64>, Offset), LogError> {
        let mut open_txns: Vec<(i64, i16, i32)> = self
            .psm
            .producers()
            .filter(|e| e.current_txn_first_offset.is_some())
            .map(|e| (e.producer_id, e.epoch, e.coordinator_epoch))
            .collect();
        open_txns.sort_unstable();
        let mut aborted = Vec::with_capacity(open_txns.len());
        let mut batches = Vec::with_capacity(open_txns.len() * 80 + 80);
        for &(producer_id, producer_epoch, coordinator_epoch) in &open_txns {
            batches.extend_from_slice(&format::build_marker(&format::MarkerSpec {
                base_offset: Offset(0),
                partition_leader_epoch: leader_epoch,
                producer_id,
                producer_epoch,
                commit: false,
                coordinator_epoch: coordinator_epoch.max(0),
                timestamp: now_ms,
            }));
            aborted.push(producer_id);
        }
        batches.extend_from_slice(&format::build_barrier(&format::BarrierSpec {
            base_offset: Offset(0),
            partition_leader_epoch: leader_epoch,
            timestamp: now_ms,
        }));
        let out = self.append(io, &batches, Origin::Coordinator)?;
        self.commit(io)?;
        Ok((aborted, out.last_offset))
    }

    /// The kind of range the current mode writes.
    pub(super) fn current_kind(&self) -> RangeKind {
        match &self.mode {
            Mode::Local => RangeKind::Local,
            Mode::Mirroring { source } | Mode::Paused { source } => {
                RangeKind::Mirror(source.clone())
            }
            Mode::Failed { .. } => self.history.last_kind(),
        }
    }
}

/// Longest mirror source name (it is written into every history entry).
pub const MIRROR_SOURCE_BYTES_MAX: usize = 1024;

/// Refuses a source the mode history could not read back: the history is one entry per line,
/// so a line break would split an entry and leave a `mirror-checkpoint` that never decodes
/// again (found by review: such a partition could never be opened).
fn validate_source(source: &str) -> Result<(), LogError> {
    let reason = if source.is_empty() {
        "empty"
    } else if source.len() > MIRROR_SOURCE_BYTES_MAX {
        "longer than 1024 bytes"
    } else if source.chars().any(char::is_control) {
        "holds a line break or another control character"
    } else {
        return Ok(());
    };
    Err(LogError::InvalidMirrorSource {
        name: source.to_string(),
        reason,
    })
}
