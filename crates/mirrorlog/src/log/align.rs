//! Log alignment (design.md §Mirroring, Kafka's `truncateFullyAndStartAt`): a destination starts mirroring
//! a source whose retention moved its log start by removing every local segment and starting
//! the log at that offset — log start and log end both there, no producer state, no epochs.
//!
//! Crash safety: the target is written first, durably, to `start-at-intent` (Kafka checkpoint
//! text: version `0`, then the offset). Every step after it leaves a valid log (the log cut or
//! rolled to the target, then segments deleted oldest first), and an open that finds the
//! intent finishes the steps before anything is served, then removes it: after a crash at any
//! point the log is as before the call (no intent yet) or aligned.

use super::{
    classify, remove_durably, remove_snapshots, LogError, PartitionLog, LOG_START_CHECKPOINT,
};
use crate::format::Offset;
use crate::io::{self, Io};
use crate::producer_state::ProducerStateManager;

/// The alignment intent's file in a partition directory.
pub const START_AT_INTENT: &str = "start-at-intent";

fn encode_intent(at: Offset) -> String {
    format!("0\n{}\n", at.0)
}

fn decode_intent(text: &str) -> Option<Offset> {
    let mut lines = text.lines();
    (lines.next()? == "0").then_some(())?;
    let at = lines.next()?.trim().parse::<i64>().ok()?;
    (lines.next().is_none() && at >= 0).then_some(Offset(at))
}

impl PartitionLog {
    /// Removes every segment and starts the log at `at` (log start = log end = `at`), as
    /// Kafka's `truncateFullyAndStartAt`: the producer state, its snapshots, the epoch cache
    /// and the aborted transactions go with the data. Durable when it returns; crash safe (see
    /// the module docs). The mode and the mode history are the caller's (`start_mirroring`,
    /// or a mirror fetcher realigning).
    ///
    /// # Errors
    /// [`LogError::OffsetOutOfRange`] for an `at` below the log start (a log never moves back
    /// before data it deleted), or an I/O failure.
    pub fn truncate_fully_and_start_at(
        &mut self,
        io: &mut dyn Io,
        at: Offset,
    ) -> Result<(), LogError> {
        self.check()?;
        if at < self.log_start {
            return Err(LogError::OffsetOutOfRange {
                offset: at,
                log_start: self.log_start,
                log_end: self.log_end(),
            });
        }
        self.commit(io)?;
        io::write_file_atomically(io, &self.dir, START_AT_INTENT, encode_intent(at).as_bytes())
            .map_err(|e| self.poison(classify(e)))?;
        self.align(io, at)?;
        remove_durably(io, &self.dir, START_AT_INTENT).map_err(|e| self.poison(classify(e)))?;
        self.debug_check_invariants();
        Ok(())
    }

    /// At open: finishes an alignment a crash interrupted.
    ///
    /// # Errors
    /// [`LogError::Corrupt`] for an unreadable intent, or the alignment's errors.
    pub(super) fn finish_interrupted_alignment(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        let path = self.dir.join(START_AT_INTENT);
        let Some(bytes) = super::read_if_present(io, &path)? else {
            return Ok(());
        };
        let Some(at) = decode_intent(&String::from_utf8_lossy(&bytes)) else {
            return Err(LogError::Corrupt {
                file: path,
                what: "unreadable start-at intent".into(),
            });
        };
        // The steps are done in an order that never moves the log start past `at`.
        self.align(io, at.max(self.log_start))?;
        remove_durably(io, &self.dir, START_AT_INTENT).map_err(|e| self.poison(classify(e)))
    }

    /// The alignment's steps; each is idempotent, so a finished prefix is done again harmlessly.
    fn align(&mut self, io: &mut dyn Io, at: Offset) -> Result<(), LogError> {
        // 1. The log ends at `at`: cut there, or a new empty segment starts there (a gap past the
        //    old end, recorded in `segment-gaps`).
        if at < self.log_end() {
            self.truncate_to(io, at)?;
        }
        if self.active.base_offset() != at {
            self.roll_to(io, at, false)?;
        }
        // 2. The log start is `at`, durably, before any segment below it goes.
        io::write_file_atomically(
            io,
            &self.dir,
            LOG_START_CHECKPOINT,
            format!("{}\n", at.0).as_bytes(),
        )
        .map_err(|e| self.poison(classify(e)))?;
        self.log_start = at;
        let deleted = !self.sealed.is_empty();
        while !self.sealed.is_empty() {
            self.delete_oldest_segment(io)?;
        }
        if deleted {
            io::fsync_dir(io, &self.dir).map_err(|e| self.poison(classify(e)))?;
        }
        self.prune_gaps(io);
        // 3. Nothing of the old data's state stays: producers, snapshots, epochs, aborts.
        self.psm = ProducerStateManager::new(self.config.producer);
        let snapshots = self.snapshot_offsets(io)?;
        remove_snapshots(io, &self.dir, snapshots).map_err(|e| self.poison(classify(e)))?;
        self.aborted.clear();
        if !self.epochs.entries().is_empty() {
            self.epochs = super::EpochCache::default();
            self.write_epoch_checkpoint(io)?;
        }
        if let Some(hw) = self.managed_high_watermark {
            self.managed_high_watermark = Some(hw.max(at));
        }
        // Nothing is sealed: a crash from here scans the (empty) active segment only.
        self.advance_recovery_point(io, at)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_intent_round_trips_and_refuses_garbage() {
        for at in [0, 1, 10_000, i64::MAX] {
            assert_eq!(decode_intent(&encode_intent(Offset(at))), Some(Offset(at)));
        }
        for bad in ["", "0\n", "1\n5\n", "0\n-3\n", "0\nx\n", "0\n5\n6\n"] {
            assert_eq!(decode_intent(bad), None, "{bad:?}");
        }
    }
}
