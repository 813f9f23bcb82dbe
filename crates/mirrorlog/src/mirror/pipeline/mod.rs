//! The one mirror pipeline: what a destination asks its [`Source`] and when, and what it does
//! with the answers, for many partitions at once. The broker's mirror of a Kafka cluster runs
//! it over the wire; a [`super::MirrorLink`] runs it over another engine.
//!
//! Each turn ([`Pipeline::turn`]) takes the answers that arrived, resolves the appends that
//! are durable, and sends each idle route its next request, as Kafka's follower fetcher does
//! (`AbstractFetcherThread`): the divergence checks due (OffsetForLeaderEpoch, at start and
//! whenever a partition's leader or its epoch changes), else the log ranges due (after a fetch
//! out of range), else a fetch of every partition the route leads that has room for another
//! append in flight. A fetch answer's appends over all its partitions land as one engine call
//! (the destination side's `Landing`), and the next fetch goes out at the offsets they will end
//! at while they commit, up to `appends_in_flight` per partition.
//!
//! Between turns the driver waits on [`Pipeline::answers`] (a request answered or a landing
//! durable) or until [`Pipeline::next_wake`] (a backoff ending), whatever its runtime: the
//! requests' futures and the engine's calls only need a waker.
//!
//! - `answers.rs`: each answer's handling: fetched batches landed, divergence truncated, out of
//!   range realigned or truncated, errors backed off or stalled.

mod answers;

use super::destination::{Backoff, Landed, Part, PartStatus, APPENDS_IN_FLIGHT_MAX};
use super::source::{Answers, Ask, EpochEnd, Fetched, LogRange, PartError, RequestError, Source};
use crate::engine::{Engine, TopicPartition};
use crate::format::Offset;
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// How often partitions that are all idle (paused, stopped, stalled) are looked at again.
pub const IDLE_POLL: Duration = Duration::from_millis(200);

/// A request out, and the partitions it asked for, in order.
struct Out {
    route: i32,
    parts: Vec<usize>,
    /// The offset each partition was asked at.
    asked: Vec<Offset>,
    call: Call,
}

enum Call {
    Fetch(Answers<Fetched>),
    Check(Answers<EpochEnd>),
    Range(Answers<LogRange>),
}

/// A request's answer, once arrived.
type Answer<T> = Result<Vec<Result<T, PartError>>, RequestError>;

enum Done {
    Fetch(Answer<Fetched>),
    Check(Answer<EpochEnd>),
    Range(Answer<LogRange>),
}

/// A mirror's partitions and the requests out for them (see the module docs).
pub struct Pipeline {
    engine: Arc<Engine>,
    /// The mirror's name: the `source` of its partitions' `Mirroring` mode.
    name: String,
    parts: Vec<Part>,
    status: Arc<Mutex<Vec<PartStatus>>>,
    landed: Arc<Landed>,
    appends_in_flight: usize,
    /// The partitions' backoff bounds (`None`: the destination side's defaults).
    backoff: Option<(Duration, Duration)>,
    /// Routes with a request out.
    busy: BTreeSet<i32>,
    out: Vec<Out>,
    /// Answers arrived and not yet handled, with their route, partitions and offsets asked.
    done: Vec<(i32, Vec<usize>, Vec<Offset>, Done)>,
    draining: bool,
    /// When the pipeline was made: only answers since count for [`Pipeline::caught_up`].
    started: Instant,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("name", &self.name)
            .field("partitions", &self.parts.len())
            .field("requests_out", &self.out.len())
            .field("draining", &self.draining)
            .finish_non_exhaustive()
    }
}

/// The destination side's steps over the pipeline's fields (borrowed apart from its parts).
macro_rules! local {
    ($p:expr) => {
        $crate::mirror::destination::Local {
            engine: &$p.engine,
            name: &$p.name,
            status: &$p.status,
            landed: &$p.landed,
        }
    };
}
use local;

impl Pipeline {
    /// The pipeline of mirror `name` on `engine`: one partition per entry of `status` (whose
    /// counters it keeps; a restart passes the last pipeline's on), its landings timed in
    /// `landed`. Nothing is asked before the first [`Pipeline::turn`].
    #[must_use]
    pub fn new(
        engine: Arc<Engine>,
        name: impl Into<String>,
        status: Arc<Mutex<Vec<PartStatus>>>,
        landed: Arc<Landed>,
    ) -> Self {
        let parts = super::destination::lock(&status)
            .iter()
            .enumerate()
            .map(|(i, s)| Part::new(s.tp.clone(), i))
            .collect();
        Pipeline {
            engine,
            name: name.into(),
            parts,
            status,
            landed,
            appends_in_flight: APPENDS_IN_FLIGHT_MAX,
            backoff: None,
            busy: BTreeSet::new(),
            out: Vec::new(),
            done: Vec::new(),
            draining: false,
            started: Instant::now(),
        }
    }

    /// The same pipeline with at most `n` appends in flight per partition (at least 1).
    #[must_use]
    pub fn with_appends_in_flight(mut self, n: usize) -> Self {
        self.appends_in_flight = n.max(1);
        self
    }

    /// The same pipeline with its partitions backing off from `min` doubling up to `max`.
    #[must_use]
    pub fn with_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff = Some((min, max));
        for (i, p) in self.parts.iter_mut().enumerate() {
            p.backoff = Self::backoff_of(i, min, max);
        }
        self
    }

    /// Partition `i`'s backoff between `min` and `max`, its jitter seeded as `Part::new`'s.
    fn backoff_of(i: usize, min: Duration, max: Duration) -> Backoff {
        Backoff::with_bounds(0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1), min, max)
    }

    /// The mirror's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its partitions, in the order of its status.
    #[must_use]
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// Its partitions, to stop one (a recreated topic at the source) or note what the source's
    /// metadata says of them.
    pub fn parts_mut(&mut self) -> &mut [Part] {
        &mut self.parts
    }

    /// Its status, shared with whoever reports it.
    #[must_use]
    pub fn status(&self) -> &Arc<Mutex<Vec<PartStatus>>> {
        &self.status
    }

    /// Mirrors `tp` too (a partition added at the source), from its end here.
    pub fn add(&mut self, tp: TopicPartition) {
        let mut st = super::destination::lock(&self.status);
        let i = st.len();
        st.push(PartStatus::new(tp.clone()));
        drop(st);
        let mut part = Part::new(tp, i);
        if let Some((min, max)) = self.backoff {
            part.backoff = Self::backoff_of(i, min, max);
        }
        part.active = true;
        self.parts.push(part);
    }

    /// Reads every idle partition's mode and end from the engine: at start, and while every
    /// partition is idle (paused, stopped or stalled), so that a resumed one is fetched again.
    pub async fn reread_idle(&mut self) {
        let local = local!(self);
        for (i, part) in self.parts.iter_mut().enumerate() {
            if part.in_flight.is_empty() && !part.busy {
                local.reread(i, part).await;
            }
        }
    }

    /// Whether any partition is fetched.
    #[must_use]
    pub fn any_active(&self) -> bool {
        self.parts.iter().any(|p| p.active)
    }

    /// One turn: the answers that arrived are handled, the appends that are durable resolved,
    /// and each idle route is sent its next request (none once draining).
    pub async fn turn(&mut self, source: &mut impl Source, now: Instant) {
        for (route, parts, asked, done) in std::mem::take(&mut self.done) {
            self.busy.remove(&route);
            for &i in &parts {
                if let Some(p) = self.parts.get_mut(i) {
                    p.busy = false;
                }
            }
            self.handle(route, &parts, &asked, done, now).await;
        }
        self.settle(false).await;
        if self.draining {
            return;
        }
        for part in &mut self.parts {
            let leader = source.leader(&part.tp);
            if leader != part.leader {
                // A new leader or epoch: find where the logs diverge before fetching again.
                if leader.is_some() {
                    part.check = true;
                }
                part.leader = leader;
            }
        }
        self.dispatch(source, now).await;
    }

    /// Resolves appends in flight: those done, or all of them (`all`, waiting).
    async fn settle(&mut self, all: bool) {
        let local = local!(self);
        for (i, part) in self.parts.iter_mut().enumerate() {
            local.settle(i, part, all).await;
        }
    }

    /// Sends each idle, ready route its next request: the divergence checks due, else the
    /// log ranges due, else a fetch.
    async fn dispatch(&mut self, source: &mut impl Source, now: Instant) {
        let routes: BTreeSet<i32> = self
            .parts
            .iter()
            .filter(|p| p.active && !p.busy)
            .filter_map(|p| p.leader.map(|l| l.broker))
            .collect();
        for route in routes {
            if self.busy.contains(&route) || !source.ready(route, now) {
                continue;
            }
            let led: Vec<usize> = (0..self.parts.len())
                .filter(|&i| {
                    let p = &self.parts[i];
                    p.active && !p.busy && p.leader.is_some_and(|l| l.broker == route)
                })
                .collect();
            let ready = |p: &Part| p.backoff.ready(now);
            let checks: Vec<usize> = led
                .iter()
                .copied()
                .filter(|&i| self.parts[i].check && ready(&self.parts[i]))
                .collect();
            // Checks that needed no question (an empty log has nothing to check) let the
            // partitions be fetched in this same turn: nothing else would wake the pipeline.
            if !checks.is_empty() && self.send_checks(source, route, checks).await {
                continue;
            }
            let ranges: Vec<usize> = led
                .iter()
                .copied()
                .filter(|&i| {
                    let p = &self.parts[i];
                    p.out_of_range && !p.check && ready(p)
                })
                .collect();
            if !ranges.is_empty() {
                let local = local!(self);
                for &i in &ranges {
                    local.settle(i, &mut self.parts[i], true).await;
                }
                let asks = self.asks(&ranges, |p| p.next);
                let call = Call::Range(source.log_ranges(route, asks.clone()));
                self.send(route, ranges, &asks, call);
                continue;
            }
            let room = self.appends_in_flight;
            let fetch: Vec<usize> = led
                .into_iter()
                .filter(|&i| {
                    let p = &self.parts[i];
                    !p.check && !p.out_of_range && ready(p) && p.in_flight.len() < room
                })
                .collect();
            if !fetch.is_empty() {
                {
                    let mut st = super::destination::lock(&self.status);
                    for &i in &fetch {
                        if let Some(s) = st.get_mut(i) {
                            s.fetch_requests += 1;
                        }
                    }
                }
                let asks = self.asks(&fetch, |p| p.next);
                let call = Call::Fetch(source.fetch(route, asks.clone()));
                self.send(route, fetch, &asks, call);
            }
        }
    }

    /// OffsetForLeaderEpoch for `checks`, with each one's newest local epoch (a partition with
    /// an empty log has nothing to check); whether a request went out.
    async fn send_checks(
        &mut self,
        source: &mut impl Source,
        route: i32,
        checks: Vec<usize>,
    ) -> bool {
        let local = local!(self);
        let mut asked = Vec::new();
        let mut epochs = Vec::new();
        for i in checks {
            let part = &mut self.parts[i];
            match local.newest_epoch(i, part).await {
                Some(e) => {
                    asked.push(i);
                    epochs.push(e);
                }
                None => {
                    part.check = false;
                    part.truncate_floor = None;
                }
            }
        }
        if asked.is_empty() {
            return false;
        }
        let mut epochs = epochs.into_iter();
        let asks = self.asks(&asked, |_| Offset(i64::from(epochs.next().unwrap_or(-1))));
        let call = Call::Check(source.epoch_ends(route, asks.clone()));
        self.send(route, asked, &asks, call);
        true
    }

    /// The asks of `parts`, each at the offset `at` gives it.
    fn asks(&self, parts: &[usize], mut at: impl FnMut(&Part) -> Offset) -> Vec<Ask> {
        parts
            .iter()
            .map(|&i| {
                let p = &self.parts[i];
                Ask {
                    tp: p.tp.clone(),
                    offset: at(p),
                    current_leader_epoch: p.leader.map_or(-1, |l| l.epoch),
                }
            })
            .collect()
    }

    fn send(&mut self, route: i32, parts: Vec<usize>, asks: &[Ask], call: Call) {
        self.busy.insert(route);
        for &i in &parts {
            self.parts[i].busy = true;
        }
        let asked = asks.iter().map(|a| a.offset).collect();
        self.out.push(Out {
            route,
            parts,
            asked,
            call,
        });
    }

    /// Polls the requests out and the landings: `Ready` once something arrived since the last
    /// turn (the next turn handles it); the wakers are registered with `cx`.
    pub fn poll_answers(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let mut i = 0;
        while i < self.out.len() {
            let done = match &mut self.out[i].call {
                Call::Fetch(f) => f.as_mut().poll(cx).map(Done::Fetch),
                Call::Check(f) => f.as_mut().poll(cx).map(Done::Check),
                Call::Range(f) => f.as_mut().poll(cx).map(Done::Range),
            };
            match done {
                Poll::Ready(done) => {
                    let out = self.out.swap_remove(i);
                    self.done.push((out.route, out.parts, out.asked, done));
                }
                Poll::Pending => i += 1,
            }
        }
        let landed = std::pin::pin!(self.landed.landed()).poll(cx).is_ready();
        if landed || !self.done.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Resolves once a request answered or a landing is durable.
    pub fn answers(&mut self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| self.poll_answers(cx))
    }

    /// When the next turn is due with nothing answered: the first backoff to end (the
    /// partitions' and the source's routes'), or [`IDLE_POLL`].
    #[must_use]
    pub fn next_wake(&self, source: &impl Source, now: Instant) -> Instant {
        let mut wake = now + IDLE_POLL;
        for p in self.parts.iter().filter(|p| p.active) {
            if let Some(t) = p.backoff.waiting_until(now) {
                wake = wake.min(t);
            }
        }
        if let Some(t) = source.wake_at(now) {
            wake = wake.min(t);
        }
        wake.max(now + Duration::from_millis(1))
    }

    /// Sends nothing more: the requests out are dropped at [`Pipeline::finish`], the appends
    /// in flight resolve.
    pub fn drain(&mut self) {
        self.draining = true;
    }

    /// Whether [`Pipeline::drain`] was called.
    #[must_use]
    pub fn draining(&self) -> bool {
        self.draining
    }

    /// Appends sent and not yet resolved, over all partitions.
    #[must_use]
    pub fn appends_in_flight(&self) -> usize {
        self.parts.iter().map(|p| p.in_flight.len()).sum()
    }

    /// Every fetched partition holds, durably, what the source's high watermark covered at
    /// its last answer since this pipeline was made, with nothing in flight (a fetch may be
    /// out: it is dropped by [`Pipeline::finish`]).
    #[must_use]
    pub fn caught_up(&self) -> bool {
        let st = super::destination::lock(&self.status);
        self.parts.iter().enumerate().all(|(i, p)| {
            !p.active
                || (p.in_flight.is_empty()
                    && st.get(i).is_some_and(|s| {
                        s.answered_at.is_some_and(|t| t >= self.started)
                            && s.mirrored_end >= s.source_high_watermark
                    }))
        })
    }

    /// Drops the requests out and waits for every append in flight to resolve.
    pub async fn finish(&mut self) {
        self.out.clear();
        self.done.clear();
        self.busy.clear();
        for p in &mut self.parts {
            p.busy = false;
        }
        self.settle(true).await;
    }
}
