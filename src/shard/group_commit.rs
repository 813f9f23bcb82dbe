//! Group commit: one commit round per dirty partition without one in flight (after
//! `commit_linger_us` if set), and the round's completions fed back to its partition.

use super::{Owner, Shard};
use crate::api::EngineError;
use crate::io::{Completion, Io};
use std::time::{Duration, Instant};

impl Shard {
    /// Starts a commit round for every dirty partition without one; returns how long until a
    /// lingering partition is due, if one is.
    pub(super) fn start_rounds(&mut self) -> Result<Option<Duration>, EngineError> {
        let linger = Duration::from_micros(self.config.commit_linger_us);
        let mut due_in: Option<Duration> = None;
        for slot in 0..self.slots.len() {
            let Some(part) = self.slots[slot].as_mut() else {
                continue;
            };
            let Some(since) = part.dirty_since else {
                continue;
            };
            if part.log.round_in_flight() {
                continue;
            }
            let waited = since.elapsed();
            if waited < linger {
                let left = linger - waited;
                due_in = Some(due_in.map_or(left, |d| d.min(left)));
                continue;
            }
            let started = part.log.start_commit(&mut self.io);
            match started {
                Ok(true) => {
                    let ops = part.log.round_ops().to_vec();
                    self.io.register(&ops, Owner::Partition(slot));
                    self.counters.fdatasyncs += 1;
                    part.dirty_since = None;
                }
                Ok(false) => part.dirty_since = None,
                Err(e) => {
                    part.dirty_since = None;
                    Self::fail_waiters(part, &e);
                }
            }
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
            Ok(Some(_)) => {
                part.stats.commit_rounds += 1;
                self.counters.commit_rounds += 1;
                if part.log.durable_end() < part.log.log_end() {
                    part.dirty_since.get_or_insert_with(Instant::now);
                }
                // retention.bytes / retention.ms are also checked as rounds complete (O(1) when
                // nothing is due; deleting a sealed segment is a few unlinks), besides the timer
                // that reaches idle partitions. It acknowledges what became durable.
                let now_ms = self.config.clock.now_ms();
                self.enforce_retention(slot, now_ms);
                self.resolve(slot);
            }
            Ok(None) => {}
            Err(e) => Self::fail_waiters(part, &e),
        }
    }
}
