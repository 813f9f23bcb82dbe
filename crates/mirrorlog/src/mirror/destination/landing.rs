//! The appends of one fetch answer, made as one engine call (`Engine::append_many`): one
//! request per shard for the whole answer instead of one per partition, so that the shard takes
//! the answer in one turn and its rounds go into the same journal flush.
//!
//! A [`Landing`] holds the answer's call and then its results, each taken once by its
//! partition. Nothing here needs a runtime: the call is a future, polled by whoever waits on
//! it. A mirror's [`Landed`] is its wake-up: [`Landed::landed`] resolves once any of its
//! landings has been answered, and the first poll that sees an answer notes how long it took
//! from the fetch answer's arrival to durable (`fetch_to_durable`). [`Landing::take`] is the
//! other waiter (a partition that must see its append resolved before it goes on);
//! [`Landing::try_take`] never polls, so a runtime's registered waker is never replaced by a
//! no-op one.

use crate::engine::{AppendMany, AppendOutcome, Engine, EngineError, Origin, PartitionAppend};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// One partition's result: durable, or refused.
pub type AppendResult = Result<AppendOutcome, EngineError>;

/// Slowest fetch-to-durable time the histogram holds: an hour, in µs.
const FETCH_TO_DURABLE_US_MAX: u64 = 3_600_000_000;

/// The results of one fetch answer's appends, each taken once by its partition.
#[derive(Debug)]
pub struct Landing {
    state: Mutex<State>,
    landed: Arc<Landed>,
}

#[derive(Debug)]
struct State {
    /// The engine's call, until it answered.
    call: Option<AppendMany>,
    /// Per append, in the order given; empty until the engine answered.
    results: Vec<Option<AppendResult>>,
    /// When the fetch answer arrived.
    arrived: Instant,
}

impl Landing {
    /// Makes `appends` (from one answer that arrived at `arrived`) as one Mirror call; its
    /// answer is noted in `landed` (its time, and a wake-up) by the first poll that sees it.
    pub fn start(
        engine: &Engine,
        appends: Vec<PartitionAppend>,
        arrived: Instant,
        landed: Arc<Landed>,
    ) -> Arc<Landing> {
        let call = engine.append_many(appends, Origin::Mirror);
        let landing = Arc::new(Landing {
            state: Mutex::new(State {
                call: Some(call),
                results: Vec::new(),
                arrived,
            }),
            landed: landed.clone(),
        });
        lock(&landed.pending).push(Arc::downgrade(&landing));
        landing
    }

    /// Polls the engine's call: `Ready` once it has answered (the results are then here).
    fn poll_answer(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = lock(&self.state);
        let Some(call) = state.call.as_mut() else {
            return Poll::Ready(());
        };
        let Poll::Ready(results) = Pin::new(call).poll(cx) else {
            return Poll::Pending;
        };
        state.call = None;
        state.results = results.into_iter().map(Some).collect();
        let took = state.arrived.elapsed();
        drop(state);
        self.landed.record(took);
        self.landed.unseen.fetch_add(1, Ordering::AcqRel);
        Poll::Ready(())
    }

    /// The `at`th append's result if the engine's answer has been seen (`None`: not yet, or
    /// taken). Never polls the call.
    #[must_use]
    pub fn try_take(&self, at: usize) -> Option<AppendResult> {
        lock(&self.state).results.get_mut(at).and_then(Option::take)
    }

    /// The `at`th append's result, once the engine answered.
    pub async fn take(&self, at: usize) -> AppendResult {
        std::future::poll_fn(|cx| self.poll_answer(cx)).await;
        // Each position is taken once, by its partition; a second take finds nothing, which
        // reads as the engine gone (as `AppendMany` reads a position it did not fill).
        self.try_take(at)
            .unwrap_or(Err(EngineError::ShardStopped(0)))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One mirror's landings: their fetch-to-durable times (from a fetch answer's arrival to the
/// last of its appends durable or refused, per answer that appended anything, since the mirror
/// started), and the wake-up of whoever drives the mirror.
#[derive(Debug)]
pub struct Landed {
    times: Mutex<hdrhistogram::Histogram<u64>>,
    /// Landings not yet seen answered.
    pending: Mutex<Vec<Weak<Landing>>>,
    /// Answers seen (by any poll) since [`Landed::landed`] last resolved.
    unseen: AtomicUsize,
}

/// A mirror's fetch-to-durable times, in µs (all 0 with none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LandedSummary {
    /// Answers counted.
    pub answers: u64,
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Slowest.
    pub max_us: u64,
}

impl Default for Landed {
    fn default() -> Self {
        // 1 µs to an hour at 3 significant digits: bounds that are valid, so `new` succeeds.
        let h = hdrhistogram::Histogram::new_with_bounds(1, FETCH_TO_DURABLE_US_MAX, 3)
            .unwrap_or_else(|_| unreachable!("valid histogram bounds"));
        Landed {
            times: Mutex::new(h),
            pending: Mutex::new(Vec::new()),
            unseen: AtomicUsize::new(0),
        }
    }
}

impl Landed {
    /// Notes one answer's time.
    pub fn record(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        lock(&self.times).saturating_record(us.max(1));
    }

    /// Resolves once a landing has been answered since it last resolved (at once if some
    /// poll already saw one). It polls every landing not yet answered, so the one that
    /// answers wakes its caller, and drops those answered or no longer held.
    pub fn landed(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            lock(&self.pending).retain(|w| {
                w.upgrade()
                    .is_some_and(|landing| landing.poll_answer(cx).is_pending())
            });
            if self.unseen.swap(0, Ordering::AcqRel) > 0 {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }

    /// The times noted so far.
    #[must_use]
    pub fn summary(&self) -> LandedSummary {
        let h = lock(&self.times);
        LandedSummary {
            answers: h.len(),
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_summarise_what_was_recorded() {
        let t = Landed::default();
        assert_eq!(t.summary().answers, 0);
        for ms in 1..=100u64 {
            t.record(Duration::from_millis(ms));
        }
        let s = t.summary();
        assert_eq!(s.answers, 100);
        assert!((49_900..=50_100).contains(&s.p50_us), "{s:?}");
        assert!((99_900..=100_100).contains(&s.max_us), "{s:?}");
    }
}
