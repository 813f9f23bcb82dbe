//! The spacing of a mirror's retries: exponential from a least delay to a bound, with ±20 %
//! jitter (Kafka's `retry.backoff.ms` / `retry.backoff.max.ms`, KIP-580), one per partition (or
//! per connection), so that one partition's errors never delay another's fetches and many
//! partitions failing together do not retry in step.
//!
//! Delays are computed in microseconds: a link whose bounds are a millisecond or two (tests
//! use 1 ms) keeps its jitter, and a first retry is never rounded down to no wait.

use std::time::{Duration, Instant};

/// A broker mirror's first retry delay of a partition in error (Kafka's `retry.backoff.ms`).
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// A broker mirror's longest retry delay (Kafka's `retry.backoff.max.ms` is 1 s).
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Jitter, in percent either side.
const JITTER_PERCENT: u64 = 20;
/// The most doublings of the least delay (past it the bound has long been reached).
const DOUBLINGS_MAX: u32 = 16;

const _: () = assert!(JITTER_PERCENT < 100);
const _: () = assert!(BACKOFF_MIN.as_micros() <= BACKOFF_MAX.as_micros());

/// Exponential, jittered, bounded retry delays of one partition (or one connection).
#[derive(Debug, Clone)]
pub struct Backoff {
    failures: u32,
    until: Option<Instant>,
    seed: u64,
    min: Duration,
    max: Duration,
}

impl Backoff {
    /// No failures yet, between [`BACKOFF_MIN`] and [`BACKOFF_MAX`]; `seed` varies the jitter
    /// between partitions.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self::with_bounds(seed, BACKOFF_MIN, BACKOFF_MAX)
    }

    /// No failures yet, from `min` doubling up to `max` (a `max` below `min` is `min`).
    #[must_use]
    pub fn with_bounds(seed: u64, min: Duration, max: Duration) -> Self {
        Backoff {
            failures: 0,
            until: None,
            seed: seed | 1,
            min,
            max: max.max(min),
        }
    }

    /// A failure at `now`: the next attempt waits the delay returned.
    pub fn fail(&mut self, now: Instant) -> Duration {
        let exp = self
            .min
            .saturating_mul(1u32 << self.failures.min(DOUBLINGS_MAX));
        let base_us = u64::try_from(exp.min(self.max).as_micros()).unwrap_or(u64::MAX / 2);
        self.failures = self.failures.saturating_add(1);
        // xorshift64: enough to spread retries, no dependency.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let span = base_us / 100 * JITTER_PERCENT * 2;
        let jitter = if span == 0 { 0 } else { self.seed % (span + 1) };
        let us = base_us / 100 * (100 - JITTER_PERCENT) + jitter;
        let delay = Duration::from_micros(us);
        self.until = Some(now + delay);
        delay
    }

    /// A success: the next failure starts from the least delay again.
    pub fn reset(&mut self) {
        self.failures = 0;
        self.until = None;
    }

    /// Whether an attempt may go out at `now`.
    #[must_use]
    pub fn ready(&self, now: Instant) -> bool {
        self.until.is_none_or(|t| now >= t)
    }

    /// When the wait ends, if one is running at `now`.
    #[must_use]
    pub fn waiting_until(&self, now: Instant) -> Option<Instant> {
        self.until.filter(|&t| t > now)
    }

    /// Failures since the last success.
    #[must_use]
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_jittered_to_its_bound_and_resets() {
        let now = Instant::now();
        let mut b = Backoff::new(42);
        assert!(b.ready(now));
        let mut delays = Vec::new();
        for _ in 0..10 {
            delays.push(b.fail(now));
        }
        let ms: Vec<u128> = delays.iter().map(Duration::as_millis).collect();
        assert!((80..=120).contains(&ms[0]), "{ms:?}");
        assert!((160..=240).contains(&ms[1]), "{ms:?}");
        for &d in &ms[4..] {
            assert!((800..=1200).contains(&d), "bounded: {ms:?}");
        }
        assert!(!b.ready(now));
        assert!(b.ready(now + Duration::from_millis(1200)));
        assert_eq!(b.failures(), 10);
        b.reset();
        assert!(b.ready(now));
        assert!((80..=120).contains(&b.fail(now).as_millis()));
        // Two partitions failing together retry at different times.
        let (mut x, mut y) = (Backoff::new(1), Backoff::new(2));
        let xs: Vec<Duration> = (0..6).map(|_| x.fail(now)).collect();
        let ys: Vec<Duration> = (0..6).map(|_| y.fail(now)).collect();
        assert_ne!(xs, ys);
    }

    /// A link's bounds of a millisecond keep their jitter: the first retry waits 0.8–1.2 ms,
    /// never nothing, and the delays are not all equal.
    #[test]
    fn millisecond_bounds_keep_their_jitter() {
        let now = Instant::now();
        let one = Duration::from_millis(1);
        let mut b = Backoff::with_bounds(7, one, one);
        let delays: Vec<Duration> = (0..8).map(|_| b.fail(now)).collect();
        for d in &delays {
            assert!((800..=1_200).contains(&d.as_micros()), "{delays:?}");
        }
        assert!(delays.windows(2).any(|w| w[0] != w[1]), "{delays:?}");
        // A bound below the least delay is the least delay.
        let mut c = Backoff::with_bounds(3, Duration::from_millis(10), one);
        assert!((8_000..=12_000).contains(&c.fail(now).as_micros()));
    }
}
