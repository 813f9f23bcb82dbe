//! Acknowledging appends: a waiting append is answered once the durable end covers it, with
//! the log's error when its round failed, or with the truncation that removed its offsets.

use super::{Part, Shard, Waiter};
use crate::api::{EngineError, TopicPartition};
use crate::log::LogError;
use std::collections::VecDeque;

impl Shard {
    pub(super) fn fail_waiters(part: &mut Part, e: &LogError) {
        for w in part.waiters.drain(..) {
            w.reply.fulfil(Err(EngineError::Log {
                partition: part.tp.clone(),
                source: e.clone(),
            }));
        }
    }

    /// Acknowledges the appends the durable end now covers.
    pub(super) fn resolve(&mut self, slot: usize) {
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let durable = part.log.durable_end();
        while part.waiters.front().is_some_and(|w| w.needed <= durable) {
            let Some(w) = part.waiters.pop_front() else {
                break;
            };
            let us = w.since.elapsed().as_micros() as u64;
            let _ = part.stats.append_latency_us.record(us.max(1));
            let _ = self.counters.append_latency_us.record(us.max(1));
            part.stats.appends += 1;
            part.stats.append_bytes += w.bytes as u64;
            self.counters.appends += 1;
            self.counters.append_bytes += w.bytes as u64;
            w.reply.fulfil(Ok(w.outcome));
        }
        part.stats.appends_waiting = part.waiters.len();
        // What became durable may be what a long-poll read waits for.
        self.wake_parked(slot, std::time::Instant::now(), false);
    }

    /// After a truncation, appends waiting for offsets that no longer exist can never become
    /// durable: answer them with the truncation as the cause.
    pub(super) fn drop_waiters_past(&mut self, tp: &TopicPartition) {
        let Ok(slot) = self.slot_of(tp) else { return };
        let Some(part) = self.slots[slot].as_mut() else {
            return;
        };
        let end = part.log.log_end();
        let (keep, cut): (VecDeque<Waiter>, VecDeque<Waiter>) =
            part.waiters.drain(..).partition(|w| w.needed <= end);
        part.waiters = keep;
        for w in cut {
            w.reply.fulfil(Err(EngineError::Log {
                partition: tp.clone(),
                source: LogError::OffsetOutOfRange {
                    offset: w.outcome.first_offset,
                    log_start: part.log.log_start(),
                    log_end: end,
                },
            }));
        }
    }
}
