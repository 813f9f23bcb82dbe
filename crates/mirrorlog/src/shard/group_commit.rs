//! Group commit: one commit round per dirty partition without one in flight (after
//! `commit_linger_us` if set), started from a queue of ready partitions while the ring has
//! room, and the round's completions fed back to its partition. A round goes into the shard's
//! journal when it can (`journal.rs`: one flush for all of them), else it is an ordinary
//! round (the segment's commit record and fdatasync).

use super::{Owner, Shard};
use crate::api::EngineError;
use crate::io::{Completion, Io};
use crate::segment::ROUND_OPS_MAX;
use std::time::{Duration, Instant};

impl Shard {
    /// Starts the commit rounds of the ready partitions, oldest first, while the ring has room
    /// for one more (and the doorbell watch); returns how long until a lingering partition is
    /// due, if one is. Partitions left waiting for room stay at the front of the queue: the
    /// next turn, after completions freed room, starts them first.
    pub(super) fn start_rounds(&mut self) -> Result<Option<Duration>, EngineError> {
        let linger = Duration::from_micros(self.config.commit_linger_us);
        let mut due_in: Option<Duration> = None;
        let mut lingering = Vec::new();
        while let Some(&slot) = self.ready.front() {
            if self.io.room() < ROUND_OPS_MAX + 1 {
                self.counters.rounds_waiting_for_room += 1;
                break;
            }
            self.ready.pop_front();
            let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            if !part.queued {
                // A slot reused by another partition since it was queued.
                continue;
            }
            part.queued = false;
            let Some(since) = part.dirty_since else {
                continue;
            };
            if part.log.round_in_flight() {
                // Queued again when its round completes.
                continue;
            }
            let waited = since.elapsed();
            if waited < linger {
                let left = linger - waited;
                due_in = Some(due_in.map_or(left, |d| d.min(left)));
                part.queued = true;
                lingering.push(slot);
                continue;
            }
            match self.journal_round(slot) {
                super::journal::JournalRound::Started | super::journal::JournalRound::Nothing => {
                    if let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) {
                        part.dirty_since = None;
                    }
                    continue;
                }
                super::journal::JournalRound::Later => {
                    // After the flush in flight; the rest keep their order behind it.
                    if let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) {
                        part.queued = true;
                    }
                    self.ready.push_front(slot);
                    break;
                }
                super::journal::JournalRound::Failed(e) => {
                    if let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) {
                        part.dirty_since = None;
                        Self::fail_waiters(part, &e);
                    }
                    self.checkpoint_progress(slot, false);
                    continue;
                }
                super::journal::JournalRound::Ordinary => {}
            }
            let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            // A checkpoint the journal asked for waits for the shard's one sync of all of them
            // (`journal.rs`); any other ordinary round syncs its own file.
            let deferred = part.checkpoint_wanted && self.journal.writer.is_some();
            let started = if deferred {
                part.log.start_checkpoint(&mut self.io)
            } else {
                part.log.start_commit(&mut self.io)
            };
            match started {
                Ok(true) => {
                    let ops = part.log.round_ops().to_vec();
                    self.io.register(&ops, Owner::Partition(slot));
                    if deferred {
                        self.journal.syncing.push(slot);
                    } else {
                        self.counters.fdatasyncs += 1;
                    }
                    part.dirty_since = None;
                }
                Ok(false) => {
                    part.dirty_since = None;
                    self.checkpoint_progress(slot, false);
                }
                Err(e) => {
                    part.dirty_since = None;
                    Self::fail_waiters(part, &e);
                    self.checkpoint_progress(slot, false);
                }
            }
        }
        // Lingering partitions keep their order, behind any still waiting for room.
        self.ready.extend(lingering);
        // The rounds just started into the journal go out together.
        if let Some(window) = self.flush_journal(false) {
            due_in = Some(due_in.map_or(window, |d| d.min(window)));
        }
        Ok(due_in)
    }

    pub(super) fn on_round_completion(&mut self, slot: usize, c: Completion) {
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            if let Some(buf) = c.buf {
                self.io.recycle(buf);
            }
            return;
        };
        match part.log.on_completion(c) {
            Ok(Some(_)) => self.round_finished(slot),
            Ok(None) => {}
            Err(e) => {
                Self::fail_waiters(part, &e);
                self.checkpoint_progress(slot, false);
            }
        }
    }

    /// The round of the partition in `slot` completed (its own operations, or its journal
    /// block): acknowledge, and queue the next round if appends arrived meanwhile.
    pub(super) fn round_finished(&mut self, slot: usize) {
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        part.stats.commit_rounds += 1;
        self.counters.commit_rounds += 1;
        if part.log.durable_end() < part.log.log_end() {
            part.mark_dirty(slot, Instant::now(), &mut self.ready);
        }
        self.checkpoint_progress(slot, false);
        // retention.bytes / retention.ms are also checked as rounds complete (O(1) when
        // nothing is due; deleting a sealed segment is a few unlinks), besides the timer
        // that reaches idle partitions. It acknowledges what became durable.
        let now_ms = self.config.clock.now_ms();
        self.enforce_retention(slot, now_ms);
        self.resolve(slot);
        // It wrote its deferred pages to hand its buffer back: it does, if still idle.
        if self.slots[slot]
            .as_mut()
            .is_some_and(|p| std::mem::take(&mut p.handing_back) && p.blocked.is_empty())
        {
            self.hand_back_buffer(slot);
        }
        // Others wait for a buffer: this partition's goes back now if it is done.
        self.release_if_wanted(slot);
    }
}
