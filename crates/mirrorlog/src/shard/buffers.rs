//! Append buffers as a bounded shard resource: a partition holds an append buffer
//! only while it has data to write (it takes one on its first append and hands it back once
//! idle), and at most `append_buffers_max` partitions of a shard hold one at a time. An append
//! to a partition without one, beyond that bound, waits — with every later request of that
//! partition queued behind it, so calls keep their order — until another partition hands its
//! buffer back: on the next tick if idle, or at once when its round completes with nothing left
//! to write while others wait. It never fails for want of a buffer. A partition whose journal
//! rounds left full pages deferred in its buffer writes them first, and hands the buffer back
//! when that write completes.

use super::{Owner, Request, Shard};
use crate::api::TopicPartition;

/// What [`Shard::hand_back_buffer`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HandBack {
    /// The buffer went back.
    Done,
    /// Its deferred pages' write started; the buffer can go once it completed.
    Writing,
    /// Not idle (or it failed: its waiters were told).
    Busy,
}

/// Default `append_buffers_max`: partitions of one shard holding an append buffer at once.
pub const APPEND_BUFFERS_MAX_DEFAULT: usize = 1024;

impl Shard {
    /// The slot of `request`'s partition when requests of it are queued behind one waiting
    /// for a buffer (`request` must queue too).
    pub(super) fn queued_behind(&self, request: &Request) -> Option<usize> {
        let tp = request.partition()?;
        let slot = *self.by_name.get(tp)?;
        self.slots[slot]
            .as_ref()
            .is_some_and(|p| !p.blocked.is_empty())
            .then_some(slot)
    }

    /// Whether an append to `tp` must wait for a buffer now.
    pub(super) fn must_wait_for_buffer(&self, tp: &TopicPartition) -> Option<usize> {
        if self.closed || self.closing {
            return None;
        }
        let slot = *self.by_name.get(tp)?;
        let part = self.slots[slot].as_ref()?;
        (!part.holds_buffer && self.attached >= self.config.append_buffers_max).then_some(slot)
    }

    /// Queues `request` behind its partition's wait for a buffer.
    pub(super) fn queue_for_buffer(&mut self, slot: usize, request: Request) {
        let Some(part) = self.slots[slot].as_mut() else {
            return;
        };
        if matches!(request, Request::Append { .. }) && part.blocked.is_empty() {
            self.counters.appends_waiting_for_buffer += 1;
        }
        part.blocked.push_back(request);
        if !part.waiting_for_buffer {
            part.waiting_for_buffer = true;
            self.buffer_waiters.push_back(slot);
            // A holder with nothing left to write hands its buffer over now, without waiting
            // for a tick (a shard driven without ticks must not wait forever).
            self.release_an_idle_holder();
        }
    }

    /// Hands back the buffer of one partition that holds one and has nothing to write (a scan
    /// of the partitions: only when appends wait), then admits waiters. When none can yet,
    /// one whose deferred pages hold its buffer starts writing them: its round's completion
    /// hands the buffer over (`round_finished`).
    fn release_an_idle_holder(&mut self) {
        for slot in 0..self.slots.len() {
            let Some(part) = self.slots[slot].as_ref() else {
                continue;
            };
            if !part.holds_buffer || !part.blocked.is_empty() {
                continue;
            }
            match self.hand_back_buffer(slot) {
                HandBack::Done => {
                    self.admit_waiters();
                    return;
                }
                HandBack::Writing => return,
                HandBack::Busy => {}
            }
        }
    }

    /// Hands the append buffer of the partition in `slot` back if it is idle (no round in
    /// flight, everything appended durable). One whose journal rounds left pages deferred in
    /// it starts their write instead; the write's completion hands the buffer back if the
    /// partition is still idle then (`round_finished`).
    pub(super) fn hand_back_buffer(&mut self, slot: usize) -> HandBack {
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return HandBack::Busy;
        };
        if part.log.release_buffers(&mut self.io) {
            self.account_buffer(slot);
            return HandBack::Done;
        }
        // Not idle: its next round writes the pages anyway. (`start_page_write` itself
        // refuses with a round in flight or nothing deferred.)
        if part.log.durable_end() < part.log.log_end() {
            return HandBack::Busy;
        }
        match part.log.start_page_write(&mut self.io) {
            Ok(true) => {
                let ops = part.log.round_ops().to_vec();
                part.handing_back = true;
                self.io.register(&ops, Owner::Partition(slot));
                self.counters.page_writes += 1;
                HandBack::Writing
            }
            Ok(false) => HandBack::Busy,
            Err(e) => {
                Self::fail_waiters(part, &e);
                HandBack::Busy
            }
        }
    }

    /// Brings the count of buffer holders up to date with the partition in `slot` (every path
    /// that may take or hand back a buffer calls it).
    pub(super) fn account_buffer(&mut self, slot: usize) {
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let holds = part.log.holds_append_buffer();
        if holds != part.holds_buffer {
            part.holds_buffer = holds;
            if holds {
                self.attached += 1;
            } else {
                self.attached = self.attached.saturating_sub(1);
            }
        }
    }

    /// Hands the buffer of the partition in `slot` back right away if others wait for one and
    /// it has nothing left to write.
    pub(super) fn release_if_wanted(&mut self, slot: usize) {
        if self.buffer_waiters.is_empty() {
            return;
        }
        if self.slots[slot]
            .as_ref()
            .is_some_and(|part| part.blocked.is_empty())
        {
            self.hand_back_buffer(slot);
        }
        self.admit_waiters();
    }

    /// Serves the partitions waiting for a buffer, oldest first, while buffers are free (all of
    /// them when the shard is closing).
    pub(super) fn admit_waiters(&mut self) {
        while self.closing || self.attached < self.config.append_buffers_max {
            let Some(slot) = self.buffer_waiters.pop_front() else {
                return;
            };
            let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            part.waiting_for_buffer = false;
            let queued = std::mem::take(&mut part.blocked);
            for r in queued {
                self.handle_request(r);
            }
        }
    }
}

impl Request {
    /// The partition a request is about, if one.
    pub(crate) fn partition(&self) -> Option<&TopicPartition> {
        match self {
            Request::Create { tp, .. }
            | Request::Delete { tp, .. }
            | Request::Append { tp, .. }
            | Request::Read { tp, .. }
            | Request::State { tp, .. }
            | Request::Producers { tp, .. }
            | Request::TruncateTo { tp, .. }
            | Request::DeleteRecords { tp, .. }
            | Request::Clean { tp, .. }
            | Request::UpdateConfig { tp, .. }
            | Request::SetHighWatermark { tp, .. }
            | Request::StartMirroring { tp, .. }
            | Request::StopMirroring { tp, .. }
            | Request::PauseMirroring { tp, .. }
            | Request::RealignMirror { tp, .. }
            | Request::OffsetForTimestamp { tp, .. }
            | Request::EpochEndOffset { tp, .. }
            | Request::SetLeaderEpoch { tp, .. } => Some(tp),
            Request::Open { .. }
            | Request::AppendMany { .. }
            | Request::ReadMany { .. }
            | Request::WaitAny { .. }
            | Request::StartJournal { .. }
            | Request::Tick
            | Request::Halt
            | Request::Stats { .. }
            | Request::Close { .. } => None,
        }
    }
}
