//! Long-poll reads (Kafka's `DelayedFetch`): a read asking for `min_bytes` with a `max_wait`
//! that finds fewer bytes readable is parked on its partition. Whatever moves the partition's
//! read bound (a commit round making appends durable, a managed high watermark, a transaction
//! ending) tries its parked reads again; one resolves as soon as `min_bytes` are readable, and
//! otherwise when its deadline passes, with what there is then — never earlier with less. No
//! polling: the commit wakes it, and the alarm (`alarm.rs`) rings the shard's doorbell at the
//! earliest deadline.

use super::alarm::Alarm;
use super::{ReadReply, Shard};
use crate::api::{EngineError, ReadRequest, TopicPartition};
use crate::format::Offset;
use crate::log::ReadResult;
use std::time::{Duration, Instant};

/// The longest a read waits: Kafka's `max_wait_ms` is an `i32` of milliseconds (24.8 days).
pub const READ_WAIT_MAX: Duration = Duration::from_millis(i32::MAX as u64);

/// A read waiting for bytes.
pub(super) struct ParkedRead {
    pub(super) request: ReadRequest,
    pub(super) reply: ReadReply,
    pub(super) deadline: Instant,
    /// The read bound when it last ran: nothing new is readable before it moves.
    pub(super) bound: Offset,
    /// The log start then (a deletion past the offset makes the read fail).
    pub(super) log_start: Offset,
}

/// The bytes that resolve `request` (never more than its `max_bytes` can return).
fn needed(request: &ReadRequest) -> usize {
    request.min_bytes.min(request.max_bytes.max(1))
}

impl Shard {
    /// Serves a read: at once, or parked until `min_bytes` are readable or `max_wait` passes.
    pub(super) fn read(&mut self, tp: TopicPartition, request: ReadRequest, reply: ReadReply) {
        let slot = match self.slot_of(&tp) {
            Ok(slot) => slot,
            Err(e) => return reply.fulfil(Err(e)),
        };
        // From memory (the tail cache), or through the ring (a sealed segment: the shard goes
        // on meanwhile), or in place.
        let result = match self.read_cached(slot, &request) {
            Some(r) => r,
            None => match self.read_sealed(slot, request, reply) {
                None => return,
                Some((request, back)) => return self.read_or_park(tp, request, back),
            },
        };
        self.answer_or_park(tp, request, reply, result);
    }

    /// A read neither the cache nor a sealed segment holds: in place, then answered or parked.
    fn read_or_park(&mut self, tp: TopicPartition, request: ReadRequest, reply: ReadReply) {
        let result = match self.slot_of(&tp) {
            // The tail cache did not hold it.
            Ok(slot) => self.read_in_log(slot, &request),
            Err(e) => Err(e),
        };
        self.answer_or_park(tp, request, reply, result);
    }

    /// Answers a read with `result`, or parks it when it has fewer than `min_bytes` and may
    /// wait.
    fn answer_or_park(
        &mut self,
        tp: TopicPartition,
        request: ReadRequest,
        reply: ReadReply,
        result: Result<ReadResult, EngineError>,
    ) {
        let park = request.max_wait > std::time::Duration::ZERO
            && matches!(&result, Ok(r) if r.records.len() < needed(&request));
        let slot = self.by_name.get(&tp).copied();
        let Some(part) = slot
            .filter(|_| park)
            .and_then(|s| self.slots.get_mut(s))
            .and_then(Option::as_mut)
        else {
            return reply.fulfil(result);
        };
        // A caller's `max_wait` is not trusted to fit an `Instant` (`Duration::MAX` overflowed
        // and panicked the shard thread): it is capped at the most Kafka's `max_wait_ms` can
        // say, and the addition checked all the same.
        let now = Instant::now();
        let deadline = now
            .checked_add(request.max_wait.min(READ_WAIT_MAX))
            .unwrap_or(now);
        part.parked.push(ParkedRead {
            request,
            reply,
            deadline,
            bound: part.log.read_bound(request.isolation),
            log_start: part.log.log_start(),
        });
        self.counters.reads_parked += 1;
        self.parked_reads += 1;
        self.next_deadline = Some(self.next_deadline.map_or(deadline, |d| d.min(deadline)));
        self.arm_alarm(deadline);
    }

    /// Reads for `request` from the partition in `slot`: from the tail cache when it holds the
    /// offset, else from the log, in place.
    pub(super) fn read_now(
        &mut self,
        slot: usize,
        request: &ReadRequest,
    ) -> Result<ReadResult, EngineError> {
        match self.read_cached(slot, request) {
            Some(r) => r,
            None => self.read_in_log(slot, request),
        }
    }

    /// Reads for `request` from the partition's log, in place (the tail cache does not hold
    /// it).
    pub(super) fn read_in_log(
        &mut self,
        slot: usize,
        request: &ReadRequest,
    ) -> Result<ReadResult, EngineError> {
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return Err(EngineError::ShardStopped(self.config.index));
        };
        part.log
            .read_limited(
                &mut self.io,
                request.offset,
                request.max_bytes,
                request.isolation,
                request.min_one_batch,
            )
            .map_err(|source| EngineError::Log {
                partition: part.tp.clone(),
                source,
            })
    }

    /// Asks for a wake-up at `deadline` unless one at or before it is pending.
    pub(super) fn arm_alarm(&mut self, deadline: Instant) {
        if self
            .alarm_at
            .is_some_and(|at| at <= deadline && at > Instant::now())
        {
            return;
        }
        self.alarm_at = Some(deadline);
        if let Some(alarm) = Alarm::get() {
            alarm.wake_at(deadline, &self.doorbell);
        }
    }

    /// Tries the parked reads of the partition in `slot` whose bound moved (or whose deadline
    /// passed, or all with `all`): each resolves when it has its bytes, an error, or its time
    /// is up; the rest stay parked.
    pub(super) fn wake_parked(&mut self, slot: usize, now: Instant, all: bool) {
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if part.parked.is_empty() {
            return;
        }
        let before = part.parked.len();
        let mut kept = Vec::with_capacity(before);
        for mut p in std::mem::take(&mut part.parked) {
            let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
                break;
            };
            let expired = all || p.deadline <= now;
            let moved = part.log.read_bound(p.request.isolation) != p.bound
                || part.log.log_start() != p.log_start;
            if !expired && !moved {
                kept.push(p);
                continue;
            }
            let result = self.read_now(slot, &p.request);
            let enough = matches!(&result, Ok(res) if res.records.len() >= needed(&p.request));
            if expired || enough || result.is_err() {
                p.reply.fulfil(result);
            } else if let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) {
                p.bound = part.log.read_bound(p.request.isolation);
                p.log_start = part.log.log_start();
                kept.push(p);
            }
        }
        self.parked_reads -= before - kept.len();
        if let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            part.parked = kept;
        }
    }

    /// Resolves every parked read whose deadline has passed, and asks for a wake-up at the
    /// next deadline.
    pub(super) fn expire_parked(&mut self) {
        let now = Instant::now();
        if self.alarm_at.is_some_and(|at| at <= now) {
            self.alarm_at = None;
        }
        // O(1) until the earliest deadline comes (a shard may hold thousands of partitions).
        if self.parked_reads == 0 || self.next_deadline.is_none_or(|d| d > now) {
            return;
        }
        let mut next: Option<Instant> = None;
        for slot in 0..self.slots.len() {
            let Some(part) = self.slots[slot].as_ref() else {
                continue;
            };
            if part.parked.iter().any(|p| p.deadline <= now) {
                self.wake_parked(slot, now, false);
            }
            if let Some(part) = self.slots[slot].as_ref() {
                for p in &part.parked {
                    next = Some(next.map_or(p.deadline, |n| n.min(p.deadline)));
                }
            }
        }
        self.next_deadline = next;
        if let Some(at) = next {
            self.arm_alarm(at);
        }
    }

    /// Lets go of every parked read whose caller dropped its call (its connection closed, say):
    /// nobody reads the answer, so it holds its place for nothing. Run on the shard's tick.
    pub(super) fn cancel_abandoned_reads(&mut self) {
        if self.parked_reads == 0 {
            return;
        }
        let mut cancelled = 0;
        for part in self.slots.iter_mut().flatten() {
            let before = part.parked.len();
            part.parked.retain(|p| !p.reply.abandoned());
            cancelled += before - part.parked.len();
        }
        self.parked_reads -= cancelled;
        self.counters.reads_cancelled += cancelled as u64;
    }

    /// Answers every parked read of the partition in `slot` now (it closes or goes away).
    pub(super) fn answer_parked(&mut self, slot: usize) {
        self.wake_parked(slot, Instant::now(), true);
    }
}
