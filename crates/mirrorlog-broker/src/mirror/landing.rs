//! The appends of one fetch answer, made as one engine call (`Engine::append_many`): one
//! request per shard for the whole answer instead of one per partition, so that the shard takes
//! the answer in one turn and its rounds go into the same journal flush.
//!
//! A [`Landing`] holds the answer's results. A task awaits the call, keeps each partition's
//! result for the fetcher to take, notes how long the answer took from its arrival to durable
//! ([`Landed`], `GET /mirrors`' `fetch_to_durable_us`), and wakes the fetcher, which then
//! resolves the appends and fetches again the partitions that were at their limit.

use mirrorlog::engine::{AppendOutcome, Engine, EngineError, Origin, PartitionAppend};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify};

/// One partition's result: durable, or refused.
pub type AppendResult = Result<AppendOutcome, EngineError>;

/// The results of one fetch answer's appends, each taken once by its partition.
#[derive(Debug)]
pub struct Landing {
    /// Per append, in the order given; empty until the engine answered.
    results: Mutex<Vec<Option<AppendResult>>>,
    /// `true` once `results` holds the engine's answer.
    done: watch::Sender<bool>,
}

impl Landing {
    /// Makes `appends` (from one answer that arrived at `arrived`) as one Mirror call. Once
    /// every append is durable or refused, the time since `arrived` goes to `landed`, and its
    /// waiter is woken.
    pub fn start(
        engine: &Engine,
        appends: Vec<PartitionAppend>,
        arrived: Instant,
        landed: Arc<Landed>,
    ) -> Arc<Landing> {
        let call = engine.append_many(appends, Origin::Mirror);
        let landing = Arc::new(Landing {
            results: Mutex::new(Vec::new()),
            done: watch::Sender::new(false),
        });
        let ours = landing.clone();
        tokio::spawn(async move {
            let results = call.await;
            landed.record(arrived.elapsed());
            *lock(&ours.results) = results.into_iter().map(Some).collect();
            ours.done.send_replace(true);
            landed.wake.notify_one();
        });
        landing
    }

    /// The `at`th append's result if the engine answered (`None`: not yet, or taken).
    pub fn try_take(&self, at: usize) -> Option<AppendResult> {
        lock(&self.results).get_mut(at).and_then(Option::take)
    }

    /// The `at`th append's result, once the engine answered.
    pub async fn take(&self, at: usize) -> AppendResult {
        let mut done = self.done.subscribe();
        // The sender lives in `self`, so the wait ends only with the answer.
        let _ = done.wait_for(|d| *d).await;
        // Each position is taken once, by its partition; a second take finds nothing, which
        // reads as the engine gone (as `AppendMany` reads a position it did not fill).
        self.try_take(at)
            .unwrap_or(Err(EngineError::ShardStopped(0)))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What one mirror's landings report: their fetch-to-durable times (from a fetch answer's
/// arrival to the last of its appends durable or refused, per answer that appended anything,
/// since the mirror started), and a wake-up for its fetcher at each.
#[derive(Debug)]
pub struct Landed {
    times: Mutex<hdrhistogram::Histogram<u64>>,
    /// Notified once per landing (a permit is kept while nobody waits).
    pub wake: Notify,
}

impl Default for Landed {
    fn default() -> Self {
        // 1 µs to 1 hour at 3 significant digits: bounds that are valid, so `new` succeeds.
        let h = hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3)
            .unwrap_or_else(|_| unreachable!("valid histogram bounds"));
        Landed {
            times: Mutex::new(h),
            wake: Notify::new(),
        }
    }
}

impl Landed {
    /// Notes one answer's time.
    pub fn record(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        lock(&self.times).saturating_record(us.max(1));
    }

    /// Answers counted, and their p50, p99, p99.9 and max in µs (0 with none).
    pub fn summary(&self) -> Value {
        let h = lock(&self.times);
        json!({
            "answers": h.len(),
            "p50": h.value_at_quantile(0.5),
            "p99": h.value_at_quantile(0.99),
            "p999": h.value_at_quantile(0.999),
            "max": h.max(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_summarise_what_was_recorded() {
        let t = Landed::default();
        assert_eq!(t.summary()["answers"], 0);
        for ms in 1..=100u64 {
            t.record(Duration::from_millis(ms));
        }
        let s = t.summary();
        assert_eq!(s["answers"], 100);
        let p50 = s["p50"].as_u64().unwrap();
        assert!((49_900..=50_100).contains(&p50), "{s}");
        let max = s["max"].as_u64().unwrap();
        assert!((99_900..=100_100).contains(&max), "{s}");
    }
}
