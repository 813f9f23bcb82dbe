//! The shard's journal (design.md §Durability):
//! the commit rounds of all the shard's partitions become durable together, with one flush of
//! one file, however many partitions a round touches.
//!
//! - **Rounds.** A ready partition starts a journal round: its bytes since its durable end go
//!   into the journal's block as one entry, its newly full pages to its segment unsynced
//!   (a round of `DIRECT_ROUND_BYTES` or more syncs its own pages and journals only its
//!   partial page). After the turn's rounds, one flush writes the waiting blocks and syncs
//!   the journal; when it completes, every partition whose entry it carried is durable and
//!   acknowledged. One flush is in flight at a time: the rounds started meanwhile go in the
//!   next, which starts the moment it completes (group commit across partitions), or after
//!   `journal_group_window_us` when that is set.
//! - **Fallback.** A round the journal cannot take (larger than a block, no room in the ring,
//!   the journal off or failed) is an ordinary round: the segment's own commit record and
//!   fdatasync. That is always correct, and it is also a checkpoint.
//! - **Checkpoints.** When the ring passes half full, the partitions whose oldest entry lies
//!   in its older half checkpoint: their newly full pages and a commit record, which
//!   supersedes their entries, written without an fdatasync each; once all of them are
//!   written, one filesystem-wide sync (`Io::syncfs`) makes them durable together, so a wave
//!   of 10,000 checkpoints costs one sync, not 10,000. Once they all did, a superblock
//!   releases the blocks no partition needs (`JournalWriter::release_below`). A poisoned partition never checkpoints: its entries
//!   stay (its acknowledged bytes may live only there) and the ring fills; the others then
//!   fall back to ordinary rounds.
//! - **Waits in place** (a roll, a truncation, a close) make a journal round durable through
//!   the segment itself (`upgrade_journal_round`); `take` flushes the journal before it waits.
//! - **Open** (`replay.rs` of this module's sibling): before any partition of the data directory
//!   opens, the journals are replayed into the segments; then the shard starts its journal
//!   afresh above every lsn the old file may hold.

use super::{Owner, Shard};
use crate::io::Io as _;
use crate::io::{Completion, IoError, OpKind};
use crate::journal::{Finished, Flush, JournalWriteError, JournalWriter};
use crate::log::LogError;
use crate::segment::{JournalStart, ROUND_OPS_MAX};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The shard's journal and what waits for it.
#[derive(Debug, Default)]
pub(super) struct ShardJournal {
    /// `None` while not started, when off (`journal_bytes` 0), or after it failed to start.
    pub(super) writer: Option<JournalWriter>,
    /// Whether [`Shard::start_journal`] ran (replay done, the writer made if on).
    pub(super) started: bool,
    /// Partitions whose journal round waits for a block: `(lsn, slot)`, in lsn order.
    awaiting: VecDeque<(u64, usize)>,
    /// Partitions asked to checkpoint and not done yet (`Part::checkpoint_wanted`).
    pub(super) checkpoints_left: usize,
    /// The lsn below which the current checkpoint wave frees the ring.
    wave_below: u64,
    /// Since when entries wait for a flush (the group window).
    unflushed_since: Option<Instant>,
    /// When the flush in flight started (its latency is recorded at its completion).
    flush_started: Option<Instant>,
    /// Partitions whose checkpoint waits for the shard's sync (`Io::syncfs`).
    pub(super) syncing: Vec<usize>,
}

/// How a ready partition's round went (see `group_commit.rs`).
pub(super) enum JournalRound {
    /// In the journal: its block will acknowledge it.
    Started,
    /// Nothing to do.
    Nothing,
    /// Wait for the flush in flight, then try again.
    Later,
    /// An ordinary round instead.
    Ordinary,
    /// It failed (the log is poisoned).
    Failed(LogError),
}

impl Shard {
    /// Starts the journal round of the partition in `slot` (see the module docs).
    pub(super) fn journal_round(&mut self, slot: usize) -> JournalRound {
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return JournalRound::Nothing;
        };
        let Some(writer) = self.journal.writer.as_mut() else {
            return JournalRound::Ordinary;
        };
        if part.checkpoint_wanted || writer.poisoned().is_some() {
            return JournalRound::Ordinary;
        }
        match part
            .log
            .start_journal_round(&mut self.io, writer, &part.key)
        {
            Ok(JournalStart::Started { lsn, ops }) => {
                self.io.register(&ops, Owner::Partition(slot));
                self.journal.awaiting.push_back((lsn, slot));
                self.journal
                    .unflushed_since
                    .get_or_insert_with(Instant::now);
                self.counters.journal_rounds += 1;
                JournalRound::Started
            }
            Ok(JournalStart::Nothing) => JournalRound::Nothing,
            Ok(JournalStart::Later) => JournalRound::Later,
            Ok(JournalStart::NoRoom) => JournalRound::Ordinary,
            Err(e) => JournalRound::Failed(e),
        }
    }

    /// Starts a flush of the waiting blocks unless one is in flight or the group window has
    /// not passed; returns how long until it has, if that is what holds it back.
    pub(super) fn flush_journal(&mut self, force: bool) -> Option<Duration> {
        let writer = self.journal.writer.as_mut()?;
        if !writer.can_flush() || !writer.has_unflushed() {
            return None;
        }
        let window = Duration::from_micros(self.config.journal_group_window_us);
        if !force && !window.is_zero() {
            let waited = self.journal.unflushed_since.map_or(window, |t| t.elapsed());
            if waited < window {
                return Some(window - waited);
            }
        }
        // Room for the doorbell watch and one ordinary round besides.
        let ops_max = self.io.capacity().saturating_sub(ROUND_OPS_MAX + 1);
        match writer.start_flush(&mut self.io, ops_max) {
            Ok(Flush::Started { ops, .. }) => {
                self.io.register(&ops, Owner::Journal);
                self.counters.fdatasyncs += 1;
                self.counters.journal_flushes += 1;
                self.journal.unflushed_since = None;
                self.journal.flush_started = Some(Instant::now());
            }
            Ok(Flush::Nothing) => {}
            Ok(Flush::Full) => {
                // `reserve` places every block it lets fill, so this is not expected; the
                // rounds waiting for the block that found no room are made durable in place.
                tracing::error!(
                    shard = self.config.index,
                    "journal full at a flush: rounds made durable in place"
                );
                self.commit_awaiting_in_place();
            }
            Err(e) => {
                self.fail_journal(into_io(e));
            }
        }
        None
    }

    /// Makes every round waiting for the journal durable through its own segment.
    fn commit_awaiting_in_place(&mut self) {
        while let Some((_, slot)) = self.journal.awaiting.pop_front() {
            let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            if !part.log.round_in_flight() {
                continue;
            }
            match part.log.commit(&mut self.io) {
                Ok(_) => self.round_finished(slot),
                Err(e) => Self::fail_waiters(part, &e),
            }
        }
    }

    /// Every round waiting for the journal fails with `error` (the journal is poisoned; later
    /// rounds are ordinary ones).
    fn fail_journal(&mut self, error: IoError) {
        tracing::error!(shard = self.config.index, error = %error, "journal failed: its rounds fail, later rounds sync their own files");
        while let Some((_, slot)) = self.journal.awaiting.pop_front() {
            if let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) {
                if part.log.round_in_flight() {
                    let e = part.log.on_journal_failed(error.clone());
                    Self::fail_waiters(part, &e);
                }
            }
        }
    }

    /// A completion of the journal's flush or release.
    pub(super) fn on_journal_completion(&mut self, c: Completion) {
        let Some(writer) = self.journal.writer.as_mut() else {
            if let Some(buf) = c.buf {
                crate::io::Io::recycle(&mut self.io, buf);
            }
            return;
        };
        match writer.on_completion(&mut self.io, c) {
            Ok(Finished::Nothing) => {}
            Ok(Finished::Blocks { last }) => {
                if let Some(t) = self.journal.flush_started.take() {
                    let us = u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
                    self.counters
                        .journal_flush_latency_us
                        .saturating_record(us.max(1));
                }
                while let Some(&(lsn, slot)) = self.journal.awaiting.front() {
                    if lsn > last {
                        break;
                    }
                    self.journal.awaiting.pop_front();
                    let finished = self
                        .slots
                        .get_mut(slot)
                        .and_then(Option::as_mut)
                        .and_then(|p| p.log.on_journal_durable(last));
                    if finished.is_some() {
                        self.round_finished(slot);
                    }
                }
                self.plan_checkpoints();
                // The rounds that waited for this flush go out now.
                self.flush_journal(false);
            }
            Ok(Finished::Released(_)) => self.plan_checkpoints(),
            Ok(Finished::Syncing(sync)) => self.io.register(&[sync], Owner::Journal),
            Err(e) => {
                self.fail_journal(into_io(e));
            }
        }
    }

    /// When the ring is half full and no wave is under way: the partitions whose oldest entry
    /// is in its older half checkpoint (or, with none, the space is released at once).
    pub(super) fn plan_checkpoints(&mut self) {
        let Some(writer) = self.journal.writer.as_ref() else {
            return;
        };
        if self.journal.checkpoints_left > 0 || writer.releasing() {
            return;
        }
        let ring = writer.ring();
        let Some(oldest) = ring.oldest_live_lsn() else {
            return;
        };
        if ring.used_bytes() * 2 < ring.capacity_bytes() {
            return;
        }
        let below = oldest + ((writer.durable_next().saturating_sub(oldest)) / 2).max(1);
        self.journal.wave_below = below;
        self.counters.journal_checkpoint_waves += 1;
        for (slot, part) in self.slots.iter_mut().enumerate() {
            let Some(part) = part.as_mut() else { continue };
            if part.log.journal_low().is_some_and(|l| l < below) && !part.checkpoint_wanted {
                part.checkpoint_wanted = true;
                self.journal.checkpoints_left += 1;
                if !part.queued && !part.log.round_in_flight() {
                    part.queued = true;
                    part.dirty_since.get_or_insert_with(Instant::now);
                    self.ready.push_back(slot);
                }
            }
        }
        if self.journal.checkpoints_left == 0 {
            self.release_journal();
        }
    }

    /// The partition in `slot` finished a round (or left): if it was asked to checkpoint and
    /// no longer holds entries below the wave's bound, it is done; the last one done releases
    /// the space.
    pub(super) fn checkpoint_progress(&mut self, slot: usize, gone: bool) {
        let below = self.journal.wave_below;
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if !part.checkpoint_wanted {
            return;
        }
        let done =
            gone || part.log.is_poisoned() || part.log.journal_low().is_none_or(|l| l >= below);
        if !done {
            // Its journal round finished first: the checkpoint round follows.
            if !part.queued && !part.log.round_in_flight() {
                part.queued = true;
                part.dirty_since.get_or_insert_with(Instant::now);
                self.ready.push_back(slot);
            }
            return;
        }
        part.checkpoint_wanted = false;
        self.journal.checkpoints_left = self.journal.checkpoints_left.saturating_sub(1);
        if self.journal.checkpoints_left == 0 {
            self.release_journal();
        }
    }

    /// Releases the blocks below every partition's oldest entry (and below what is still
    /// being written).
    fn release_journal(&mut self) {
        let Some(writer) = self.journal.writer.as_mut() else {
            return;
        };
        let lowest = self
            .slots
            .iter()
            .flatten()
            .filter_map(|p| p.log.journal_low())
            .min();
        let below = lowest.map_or(writer.durable_next(), |l| l.min(writer.durable_next()));
        match writer.release_below(&mut self.io, below) {
            Ok(Some(ops)) => self.io.register(&ops, Owner::Journal),
            Ok(None) => {}
            Err(e) => {
                self.fail_journal(into_io(e));
            }
        }
    }

    /// Once every checkpoint started for the wave has written its pages and commit record, one
    /// filesystem-wide sync (`Io::syncfs`) makes them all durable, instead of one fdatasync per
    /// partition. A checkpoint whose partition waited for it in place synced its own file and
    /// is no longer waiting.
    pub(super) fn sync_checkpoints(&mut self) {
        if self.journal.syncing.is_empty() {
            return;
        }
        let still_writing = self.journal.syncing.iter().any(|&slot| {
            self.slots
                .get(slot)
                .and_then(Option::as_ref)
                .is_some_and(|p| {
                    // A poisoned one (its write failed) will never be written: it does not
                    // hold the others back.
                    !p.log.is_poisoned() && p.log.awaits_sync() && !p.log.checkpoint_written()
                })
        });
        if still_writing {
            return;
        }
        let slots = std::mem::take(&mut self.journal.syncing);
        let waiting: Vec<usize> = slots
            .into_iter()
            .filter(|&slot| {
                self.slots
                    .get(slot)
                    .and_then(Option::as_ref)
                    .is_some_and(|p| !p.log.is_poisoned() && p.log.checkpoint_written())
            })
            .collect();
        if waiting.is_empty() {
            return;
        }
        self.counters.fdatasyncs += 1;
        self.counters.journal_syncs += 1;
        let synced = crate::io::Io::syncfs(&mut self.io, &self.config.data_dir);
        for slot in waiting {
            let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            match &synced {
                Ok(()) => {
                    if part.log.on_synced().is_some() {
                        self.round_finished(slot);
                    }
                }
                Err(e) => {
                    let e = part.log.on_journal_failed(e.clone());
                    Self::fail_waiters(part, &e);
                    self.checkpoint_progress(slot, false);
                }
            }
        }
    }

    /// Waits until the journal has nothing in flight, flushing what waits (close).
    pub(super) fn settle_journal(&mut self) {
        loop {
            self.flush_journal(true);
            self.sync_checkpoints();
            let busy = self
                .journal
                .writer
                .as_ref()
                .is_some_and(|w| w.flushing() || w.releasing());
            if !busy {
                return;
            }
            match self.io.reap(true) {
                Ok(cs) => self.dispatch(cs),
                Err(_) => return,
            }
        }
    }

    /// At a clean close, after every partition closed (each one's commit record supersedes its
    /// entries): one superblock releases every block, so the next open reads the journal's
    /// superblocks and one page; then the file is closed.
    pub(super) fn close_journal(&mut self) {
        self.settle_journal();
        if let Some(writer) = self.journal.writer.as_mut() {
            let below = writer.durable_next();
            if let Ok(Some(ops)) = writer.release_below(&mut self.io, below) {
                self.io.register(&ops, Owner::Journal);
            }
        }
        self.settle_journal();
        if let Some(writer) = self.journal.writer.take() {
            if let Err(e) = writer.close(&mut self.io) {
                tracing::warn!(shard = self.config.index, error = %e, "closing the journal");
            }
        }
    }
}

/// The I/O failure behind a journal write error (flushes and releases fail only that way; a
/// refusal there would be a bug, reported as `EINVAL`).
fn into_io(e: JournalWriteError) -> IoError {
    match e {
        JournalWriteError::Io(e) => e,
        JournalWriteError::Refused(_) => IoError::Os {
            op: OpKind::Write,
            errno: libc::EINVAL,
        },
    }
}
