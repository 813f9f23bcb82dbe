//! A link's pipeline: fetch at the destination's end from the source (a long-poll at the
//! source's end), append what came as `Origin::Mirror`, and fetch the next while that append
//! commits (up to `appends_in_flight` of them). The source's high watermark and log start come
//! with every read; nothing else is asked of it. A fetch below the source's log start (its
//! retention passed the destination's end) realigns the destination there, once the appends in
//! flight are done (design.md §Mirroring, log alignment): at the base of the batch holding the log start
//! (below it after a DeleteRecords inside a batch), the destination's log start raised to the
//! source's once that batch is durable, as a Kafka follower's. An error drops the pipeline, counts, backs off
//! (doubling up to `backoff_max`) and starts again from the destination's end; each append is
//! sent to follow the one before it (`Engine::append_following`), so the appends sent after a
//! refused one are refused too, never stored past a hole. An append the
//! destination refuses as larger than it takes at once (`AppendTooLarge`: its append buffer or
//! segment) tells the pump that limit; fetch answers then go in pieces of whole batches up to
//! it, so a `fetch_bytes` above the destination's limit costs one retry, not a stall.
//!
//! [`Pump::poll_step`] only polls the engines' calls (which are futures): a broker drives it
//! from its own runtime, waking on the calls' wakers and sleeping until [`Step::wake_at`]
//! during a backoff. [`Pump::step`] is the same with nothing to wake: it never blocks.

use super::destination::Backoff;
use super::link::MirrorLink;
use crate::engine::{AppendOutcome, Call, EngineError, Isolation, PartitionState, ReadRequest};
use crate::format::{frames, Offset};
use crate::log::{LogError, ReadResult};
use crate::producer_state::Origin;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// What a step did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Step {
    /// Batches that became durable on the destination.
    pub batches: usize,
    /// Fetches the source answered.
    pub fetches: usize,
    /// Backing off after an error: nothing happens before then.
    pub wake_at: Option<Instant>,
}

/// An append on its way: the destination end once durable, its size.
struct InFlight {
    next: Offset,
    batches: usize,
    bytes: usize,
    call: Call<AppendOutcome>,
}

/// A link's pipeline (see the module docs).
pub struct Pump {
    link: MirrorLink,
    /// Where the next fetch reads (`None`: ask the destination).
    next: Option<Offset>,
    state: Option<Call<PartitionState>>,
    fetch: Option<(Offset, Call<ReadResult>)>,
    appends: VecDeque<InFlight>,
    /// The source's log start passed the fetch offset: where the batch holding it starts is
    /// being asked (a log start inside a batch, after a DeleteRecords there).
    probe: Option<(Offset, Call<ReadResult>)>,
    /// Realign the destination here once the appends in flight are done, then fetch from the
    /// second offset (the source's log start).
    realign_to: Option<(Offset, Offset)>,
    realign: Option<(Offset, Call<Offset>)>,
    /// After a realignment at a batch base below the source's log start: the destination's
    /// log start goes up to it once that batch is durable (as a Kafka follower takes the
    /// leader's log start).
    raise_log_start: Option<Offset>,
    raising: Option<Call<Offset>>,
    /// The destination's durable end as the link saw it.
    durable_end: Option<Offset>,
    /// Where the destination's log ends once the appends sent land: the next append is sent
    /// to follow it ([`crate::engine::Engine::append_following`]), so that when one is
    /// refused, those sent after it are refused too instead of leaving a hole.
    append_end: Option<Offset>,
    /// The source's high watermark at its last answer, and its durable bytes after it.
    source_high_watermark: Option<Offset>,
    source_bytes_after: u64,
    backoff: Backoff,
    draining: bool,
    /// The most the destination takes in one append, once it refused more
    /// (`AppendTooLarge`): fetched bytes then go in pieces of whole batches up to it.
    append_limit: Option<usize>,
}

impl std::fmt::Debug for Pump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pump")
            .field("next", &self.next)
            .field("appends_in_flight", &self.appends.len())
            .field("durable_end", &self.durable_end)
            .finish_non_exhaustive()
    }
}

/// Polls `call` once.
fn ready<T>(call: &mut Call<T>, cx: &mut Context<'_>) -> Option<Result<T, EngineError>> {
    match Pin::new(call).poll(cx) {
        Poll::Ready(r) => Some(r),
        Poll::Pending => None,
    }
}

impl Pump {
    pub(super) fn new(link: MirrorLink) -> Self {
        let c = &link.config;
        let seed = u64::from(link.destination_tp.partition.unsigned_abs()) + 1;
        let backoff = Backoff::with_bounds(seed, c.backoff_min, c.backoff_max);
        Pump {
            link,
            next: None,
            state: None,
            fetch: None,
            appends: VecDeque::new(),
            probe: None,
            realign_to: None,
            realign: None,
            raise_log_start: None,
            raising: None,
            durable_end: None,
            append_end: None,
            source_high_watermark: None,
            source_bytes_after: 0,
            backoff,
            draining: false,
            append_limit: None,
        }
    }

    /// Appends sent and not yet durable.
    #[must_use]
    pub fn appends_in_flight(&self) -> usize {
        self.appends.len()
    }

    /// The destination holds what the source's high watermark covered at its last answer,
    /// durably, and nothing is in flight.
    #[must_use]
    pub fn caught_up(&self) -> bool {
        self.appends.is_empty()
            && matches!((self.durable_end, self.source_high_watermark), (Some(d), Some(h)) if d >= h)
    }

    /// Fetches no more: the appends in flight finish, then the pump is idle.
    pub fn drain(&mut self) {
        self.draining = true;
        self.fetch = None;
    }

    /// Whether [`Pump::drain`] was called.
    #[must_use]
    pub fn draining(&self) -> bool {
        self.draining
    }

    /// One step without blocking (see [`Pump::poll_step`]); `Ok` with nothing done when the
    /// engines have not answered yet.
    ///
    /// # Errors
    /// As [`Pump::poll_step`].
    pub fn step(&mut self) -> Result<Step, EngineError> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match self.poll_step(&mut cx) {
            Poll::Ready(r) => r,
            Poll::Pending => Ok(Step::default()),
        }
    }

    /// Takes every answer that has arrived and sends what they allow: `Ready` with what was
    /// done, or with a backoff's end; `Pending` when nothing has arrived (the calls' wakers
    /// are registered with `cx`).
    ///
    /// # Errors
    /// A failed call. The pipeline is dropped and starts again from the destination's end
    /// after a backoff; an error that ends mirroring (the destination no longer mirrors)
    /// keeps failing, and the caller should stop.
    pub fn poll_step(&mut self, cx: &mut Context<'_>) -> Poll<Result<Step, EngineError>> {
        let mut step = Step::default();
        if let Some(until) = self.backoff.waiting_until(Instant::now()) {
            step.wake_at = Some(until);
            return Poll::Ready(Ok(step));
        }
        loop {
            match self.advance(cx, &mut step) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => return Poll::Ready(Err(self.failed(e))),
            }
        }
        self.publish();
        if step == Step::default() {
            Poll::Pending
        } else {
            // A successful step ends any backoff run.
            self.backoff.reset();
            Poll::Ready(Ok(step))
        }
    }

    /// One pass over the pipeline; whether anything moved.
    fn advance(&mut self, cx: &mut Context<'_>, step: &mut Step) -> Result<bool, EngineError> {
        let mut moved = false;
        // Appends complete in order.
        while let Some(front) = self.appends.front_mut() {
            let Some(r) = ready(&mut front.call, cx) else {
                break;
            };
            let outcome = r?;
            let done = self.appends.pop_front();
            let (batches, bytes, next) = done.map_or((0, 0, outcome.last_offset), |d| {
                (d.batches, d.bytes, d.next)
            });
            step.batches += batches;
            self.durable_end = Some(next);
            if let Ok(mut s) = self.link.stats.lock() {
                s.batches += batches as u64;
                s.bytes += bytes as u64;
            }
            moved = true;
        }
        if let Some((fetch_at, call)) = self.realign.as_mut() {
            if let Some(r) = ready(call, cx) {
                let fetch_at = *fetch_at;
                let at = r?;
                self.realign = None;
                self.next = Some(fetch_at);
                self.durable_end = Some(at);
                self.append_end = Some(at);
                self.raise_log_start = (at < fetch_at).then_some(fetch_at);
                if let Ok(mut s) = self.link.stats.lock() {
                    s.realigns += 1;
                }
                moved = true;
            }
        }
        if let Some((log_start, call)) = self.probe.as_mut() {
            if let Some(r) = ready(call, cx) {
                let log_start = *log_start;
                self.probe = None;
                // The batch holding the log start begins at or below it (none: the source is
                // empty from there, and the destination starts at its end).
                let base = frames(&r?.records)
                    .next()
                    .map_or(log_start, |f| f.header.base_offset.min(log_start));
                self.realign_to = Some((base, log_start));
                moved = true;
            }
        }
        if let Some(to) = self
            .raise_log_start
            .filter(|&to| self.durable_end.is_some_and(|d| d > to))
        {
            self.raise_log_start = None;
            let link = &self.link;
            self.raising = Some(link.destination.delete_records(&link.destination_tp, to));
            moved = true;
        }
        if let Some(call) = self.raising.as_mut() {
            if let Some(r) = ready(call, cx) {
                self.raising = None;
                r?;
                moved = true;
            }
        }
        if self.next.is_none()
            && self.appends.is_empty()
            && self.probe.is_none()
            && self.realign.is_none()
            && self.realign_to.is_none()
        {
            let link = &self.link;
            let call = self
                .state
                .get_or_insert_with(|| link.destination.state(&link.destination_tp));
            if let Some(r) = ready(call, cx) {
                self.state = None;
                let state = r?;
                self.next = Some(state.log_end);
                self.durable_end = Some(state.durable_end);
                self.append_end = Some(state.log_end);
                moved = true;
            }
        }
        if let Some((at, call)) = self.fetch.as_mut() {
            if let Some(r) = ready(call, cx) {
                let at = *at;
                self.fetch = None;
                step.fetches += 1;
                moved = true;
                self.fetched(at, r)?;
            }
        }
        if let Some((to, fetch_at)) = self.realign_to.filter(|_| self.appends.is_empty()) {
            self.realign_to = None;
            let link = &self.link;
            let call = link.destination.realign_mirror(&link.destination_tp, to);
            self.realign = Some((fetch_at, call));
            moved = true;
        }
        let room = self.appends.len() < self.link.config.appends_in_flight.max(1);
        if let Some(at) = self.next.filter(|_| {
            room && !self.draining
                && self.fetch.is_none()
                && self.probe.is_none()
                && self.realign.is_none()
                && self.realign_to.is_none()
        }) {
            let c = &self.link.config;
            let request = ReadRequest::new(at, c.fetch_bytes, Isolation::ReadUncommitted)
                .wait_for(c.min_bytes, c.max_wait);
            let call = self.link.source.read(&self.link.source_tp, request);
            self.fetch = Some((at, call));
            moved = true;
        }
        Ok(moved)
    }

    /// A fetch at `at` answered: its batches go to the destination; a fetch below the
    /// source's log start realigns.
    fn fetched(
        &mut self,
        at: Offset,
        r: Result<ReadResult, EngineError>,
    ) -> Result<(), EngineError> {
        let r = match r {
            Err(EngineError::Log {
                source: LogError::OffsetOutOfRange { log_start, .. },
                ..
            }) if at < log_start => {
                // The source's retention passed the destination's end: start there, at the
                // batch holding the log start (asked first: it may begin below it).
                let link = &self.link;
                let request = ReadRequest::new(log_start, 1, Isolation::ReadUncommitted);
                self.probe = Some((log_start, link.source.read(&link.source_tp, request)));
                self.next = None;
                return Ok(());
            }
            other => other?,
        };
        self.source_high_watermark = Some(r.high_watermark);
        self.source_bytes_after = r.bytes_after;
        if let Ok(mut s) = self.link.stats.lock() {
            s.fetches += 1;
            s.source_high_watermark = r.high_watermark;
        }
        if let Ok(mut s) = self.link.sightings.lock() {
            s.mirrored_end = self.durable_end.map_or(-1, |d| d.0);
            s.note_answer(r.high_watermark.0, Instant::now());
        }
        let limit = self.append_limit.unwrap_or(usize::MAX);
        let mut next = at;
        for (from, to, batches, piece_next) in pieces(&r.records, limit) {
            let link = &self.link;
            let (tp, records) = (&link.destination_tp, r.records.slice(from..to));
            let call = match self.append_end {
                Some(end) => link
                    .destination
                    .append_following(tp, records, Origin::Mirror, end),
                None => link.destination.append(tp, records, Origin::Mirror),
            };
            self.append_end = Some(piece_next);
            self.appends.push_back(InFlight {
                next: piece_next,
                batches,
                bytes: to - from,
                call,
            });
            next = piece_next;
        }
        if next > at {
            self.next = Some(next);
        }
        Ok(())
    }

    /// After an error: count it, drop the pipeline (what was sent still takes effect; the next
    /// start asks the destination where it ends) and back off.
    fn failed(&mut self, e: EngineError) -> EngineError {
        self.next = None;
        self.state = None;
        self.fetch = None;
        self.append_end = None;
        self.appends.clear();
        self.probe = None;
        self.realign_to = None;
        self.realign = None;
        self.raising = None;
        if let EngineError::Log {
            source: LogError::AppendTooLarge { limit, .. },
            ..
        } = &e
        {
            // The destination takes no more than this in one append: fetch answers larger
            // than it go in pieces from now on (else the same fetch would be refused forever).
            self.append_limit = Some(*limit);
        }
        self.backoff.fail(Instant::now());
        if let Ok(mut s) = self.link.stats.lock() {
            s.errors += 1;
            s.last_error = Some(e.to_string());
        }
        tracing::warn!(error = %e, "mirror link backs off");
        e
    }

    /// The lag in offsets and bytes into the shared counters.
    fn publish(&self) {
        let in_flight: u64 = self.appends.iter().map(|a| a.bytes as u64).sum();
        if let Ok(mut s) = self.link.stats.lock() {
            if let Some(d) = self.durable_end {
                s.mirrored_end = d;
            }
            s.lag_offsets = s.source_high_watermark.0 - s.mirrored_end.0;
            s.lag_bytes = self.source_bytes_after + in_flight;
        }
    }
}

/// `records` cut at batch boundaries into pieces of at most `limit` bytes (a batch larger than
/// `limit` is a piece of its own): each piece's range, its batches, and the offset after it.
/// The last piece runs to the end of `records`, whatever follows its last whole batch.
fn pieces(records: &[u8], limit: usize) -> Vec<(usize, usize, usize, Offset)> {
    let mut out = Vec::new();
    let (mut from, mut batches, mut next) = (0usize, 0usize, None);
    for b in frames(records) {
        let (start, len) = (b.position, b.bytes.len());
        if let Some(n) = next.filter(|_| start + len - from > limit) {
            out.push((from, start, batches, n));
            (from, batches) = (start, 0);
        }
        batches += 1;
        next = Some(Offset(b.header.last_offset().0 + 1));
    }
    if let Some(n) = next {
        out.push((from, records.len(), batches, n));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{stamp_base_offset, BatchBuilder, BatchOptions, RecordSpec};

    fn batch(base: i64, value_len: usize) -> Vec<u8> {
        let value = vec![7u8; value_len];
        let mut b = BatchBuilder::new(BatchOptions::default());
        b.push(RecordSpec {
            timestamp: 0,
            key: None,
            value: Some(&value),
            headers: &[],
        });
        let mut bytes = b.build();
        stamp_base_offset(&mut bytes, Offset(base)).unwrap();
        bytes
    }

    #[test]
    fn fetched_bytes_go_in_pieces_of_whole_batches_up_to_the_limit() {
        let mut records = Vec::new();
        let mut ends = Vec::new();
        for (i, size) in [100usize, 3000, 200, 5000, 100].iter().enumerate() {
            records.extend_from_slice(&batch(i as i64, *size));
            ends.push(records.len());
        }
        // No limit: one piece, to the end.
        assert_eq!(
            pieces(&records, usize::MAX),
            vec![(0, records.len(), 5, Offset(5))]
        );
        let cut = pieces(&records, 4000);
        // Pieces cover the bytes in order, end at batch ends, stay within the limit unless one
        // batch is larger alone.
        assert_eq!(cut.first().map(|p| p.0), Some(0));
        assert_eq!(cut.last().map(|p| p.1), Some(records.len()));
        for w in cut.windows(2) {
            assert_eq!(w[0].1, w[1].0);
        }
        for &(from, to, batches, _) in &cut {
            assert!(ends.contains(&to), "{to}");
            assert!(to - from <= 4000 || batches == 1, "{from}..{to}");
        }
        assert_eq!(cut.iter().map(|p| p.2).sum::<usize>(), 5);
        assert_eq!(cut.last().map(|p| p.3), Some(Offset(5)));
        assert!(cut.len() >= 3);
        assert!(pieces(&[], 10).is_empty());
    }
}
