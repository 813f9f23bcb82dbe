//! Commit rounds and poisoning.
//!
//! Appended data becomes durable with a commit round: blocking ([`PartitionLog::commit`]) or
//! started and fed its completions by a shard that multiplexes several partitions on one ring.
//! A failed write or fdatasync poisons the log: the pages' state is unknown, so every later call
//! returns that error. `DiskFull` before anything irreversible is not poisonous.

use super::{classify, LogError, PartitionLog};
use crate::format::Offset;
use crate::io::{self, Io};
use crate::journal::JournalWriter;
use crate::segment::JournalStart;

impl PartitionLog {
    pub(super) fn check(&self) -> Result<(), LogError> {
        match &self.poisoned {
            Some(e) => Err(LogError::Poisoned(Box::new(e.clone()))),
            None => Ok(()),
        }
    }

    /// Whether a failure poisoned the log (it accepts nothing more).
    #[must_use]
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.is_some()
    }

    pub(super) fn poison(&mut self, error: LogError) -> LogError {
        // ENOSPC during preallocation or a roll, or no descriptor for a file the roll opens,
        // changes nothing durable: not poisonous.
        let transient = matches!(
            error,
            LogError::DiskFull | LogError::TooManyOpenFiles { .. }
        );
        if !transient && self.poisoned.is_none() {
            self.poisoned = Some(error.clone());
        }
        error
    }

    /// Makes everything appended durable (one commit round) and returns the durable end.
    ///
    /// # Errors
    /// An I/O failure, which poisons the log.
    pub fn commit(&mut self, io: &mut dyn Io) -> Result<Offset, LogError> {
        self.check()?;
        match self.active.commit(io) {
            Ok(durable) => {
                self.debug_check_invariants();
                Ok(durable.next_offset)
            }
            // A failed round (ENOSPC included: a write into preallocated pages can still meet
            // it, e.g. on thin-provisioned storage) leaves its pages' state unknown: poison.
            Err(e) => Err(self.poison_always(classify(e))),
        }
    }

    /// Starts a commit round for everything appended so far without waiting (a shard overlaps
    /// the next appends with the round's I/O). Returns `false` if a round is in flight or there
    /// is nothing new.
    ///
    /// # Errors
    /// A submission failure, which poisons the log.
    pub fn start_commit(&mut self, io: &mut dyn Io) -> Result<bool, LogError> {
        self.check()?;
        let started = self
            .active
            .start_commit(io)
            .map_err(|e| self.poison_always(classify(e)))?;
        self.debug_check_invariants();
        Ok(started)
    }

    /// Starts a journal round for everything appended so far (see
    /// `segment/writer/journal_round.rs`): the bytes go into the shard journal's block as one
    /// entry named `key`, the newly full pages to the segment unsynced.
    ///
    /// # Errors
    /// A submission failure, which poisons the log.
    pub fn start_journal_round(
        &mut self,
        io: &mut dyn Io,
        journal: &mut JournalWriter,
        key: &str,
    ) -> Result<JournalStart, LogError> {
        self.check()?;
        let started = self
            .active
            .start_journal_round(io, journal, key)
            .map_err(|e| self.poison_always(classify(e)))?;
        self.debug_check_invariants();
        Ok(started)
    }

    /// Starts the write of the active segment's deferred pages, if it has any and no round
    /// is in flight (see `SegmentWriter::start_page_write`): an idle partition's, so that it
    /// can hand its append buffer back. Returns whether it started.
    ///
    /// # Errors
    /// A submission failure, which poisons the log.
    pub fn start_page_write(&mut self, io: &mut dyn Io) -> Result<bool, LogError> {
        self.check()?;
        let started = self
            .active
            .start_page_write(io)
            .map_err(|e| self.poison_always(classify(e)))?;
        Ok(started.is_some())
    }

    /// Whether full pages made durable by journal rounds wait in the append buffer for their
    /// write (the buffer cannot go back before they are written).
    #[must_use]
    pub fn has_deferred_pages(&self) -> bool {
        self.active.has_deferred_pages()
    }

    /// Starts a checkpoint made durable by the caller's filesystem-wide sync instead of its own
    /// fdatasync (see `SegmentWriter::start_checkpoint`). Returns `false` when there is
    /// nothing to do or a round is in flight.
    ///
    /// # Errors
    /// A submission failure, which poisons the log.
    pub fn start_checkpoint(&mut self, io: &mut dyn Io) -> Result<bool, LogError> {
        self.check()?;
        let started = self
            .active
            .start_checkpoint(io)
            .map_err(|e| self.poison_always(classify(e)))?;
        self.debug_check_invariants();
        Ok(started)
    }

    /// Whether the round in flight is a checkpoint waiting for the caller's sync.
    #[must_use]
    pub fn awaits_sync(&self) -> bool {
        self.active.awaits_sync()
    }

    /// Whether a checkpoint's writes completed and it waits for the caller's sync.
    #[must_use]
    pub fn checkpoint_written(&self) -> bool {
        self.active.checkpoint_written()
    }

    /// The caller's sync covering the checkpoint in flight completed: the new durable end.
    pub fn on_synced(&mut self) -> Option<Offset> {
        let durable = self.active.on_synced()?;
        self.debug_check_invariants();
        Some(durable.next_offset)
    }

    /// The journal's blocks up to `last` are durable: the new durable end when that finished
    /// this log's round.
    pub fn on_journal_durable(&mut self, last: u64) -> Option<Offset> {
        let durable = self.active.on_journal_durable(last)?;
        self.debug_check_invariants();
        Some(durable.next_offset)
    }

    /// The journal's flush (or the sync) this log's round waited for failed: the log is
    /// poisoned.
    pub fn on_journal_failed(&mut self, error: io::IoError) -> LogError {
        let e = self.active.on_journal_failed(error);
        self.poison_always(classify(e))
    }

    /// The lsn of the oldest journal entry of this log that no commit record supersedes yet
    /// (the journal keeps that block until the log checkpoints).
    #[must_use]
    pub fn journal_low(&self) -> Option<u64> {
        self.active.journal_low()
    }

    /// Whether a commit round is in flight.
    #[must_use]
    pub fn round_in_flight(&self) -> bool {
        self.active.round_in_flight()
    }

    /// The operations of the commit round in flight, for routing completions when several
    /// partitions share one `Io`.
    #[must_use]
    pub fn round_ops(&self) -> &[io::OpId] {
        self.active.round_ops()
    }

    /// Feeds a completion of this log's round; returns the new durable end when the round
    /// finished.
    ///
    /// # Errors
    /// The operation's failure, which poisons the log.
    pub fn on_completion(
        &mut self,
        completion: io::Completion,
    ) -> Result<Option<Offset>, LogError> {
        match self.active.on_completion(completion) {
            Ok(durable) => {
                self.debug_check_invariants();
                Ok(durable.map(|d| d.next_offset))
            }
            Err(e) => Err(self.poison_always(classify(e))),
        }
    }

    /// Poisons the log with `error` even when it is `DiskFull`: for a step that cannot be
    /// undone, where no retry could succeed.
    pub(super) fn poison_always(&mut self, error: LogError) -> LogError {
        if self.poisoned.is_none() {
            self.poisoned = Some(error.clone());
        }
        error
    }
}
