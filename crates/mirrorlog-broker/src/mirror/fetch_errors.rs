//! What the mirror fetcher does with each Fetch error code, as Kafka's follower fetcher
//! (`AbstractFetcherThread.processFetchRequest`) and consumer fetcher do, and the per-partition
//! backoff that spaces its retries.
//!
//! | code | name | action |
//! |---:|---|---|
//! | 0 | NONE | append the batches |
//! | 1 | OFFSET_OUT_OF_RANGE | ListOffsets earliest and latest at the leader: below its log start, realign there; past its end, truncate (OffsetForLeaderEpoch, else to its end); inside, retry with backoff |
//! | 3 | UNKNOWN_TOPIC_OR_PARTITION | refresh metadata, retry with backoff |
//! | 5 | LEADER_NOT_AVAILABLE | refresh metadata, retry with backoff |
//! | 6 | NOT_LEADER_OR_FOLLOWER | refresh metadata, retry with backoff at the new leader |
//! | 9 | REPLICA_NOT_AVAILABLE | refresh metadata, retry with backoff |
//! | 56 | KAFKA_STORAGE_ERROR | refresh metadata, retry with backoff |
//! | 74 | FENCED_LEADER_EPOCH | refresh metadata (our epoch is stale), retry with backoff |
//! | 75 | UNKNOWN_LEADER_EPOCH | refresh metadata (the leader lags our epoch), retry with backoff |
//! | 100 | UNKNOWN_TOPIC_ID | refresh metadata, retry with backoff |
//! | 103 | INCONSISTENT_TOPIC_ID | refresh metadata, retry with backoff |
//! | 29 | TOPIC_AUTHORIZATION_FAILED | retry with backoff; the reason shows until the source's ACLs allow the read |
//! | 31 | CLUSTER_AUTHORIZATION_FAILED | as 29 |
//! | 109 | OFFSET_MOVED_TO_TIERED_STORAGE | stall the partition with the reason: a consumer fetch (ours) is served from remote storage, so only a follower gets it |
//! | any other | | retry with backoff (Kafka's `partitionsWithError`) |
//!
//! A whole-request error (Fetch v7+'s top-level `error_code`) counts as that error for each
//! partition of the request. A lost connection backs off the connection to that broker and
//! refreshes metadata; its partitions are asked again once it is back. Backoff is per
//! partition, exponential from [`BACKOFF_MIN`] to [`BACKOFF_MAX`] with ±20 % jitter (Kafka's
//! `retry.backoff.ms` / `retry.backoff.max.ms`, KIP-580), and one
//! partition's backoff never delays another's fetches.

use std::time::{Duration, Instant};

/// First retry delay of a partition in error.
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest retry delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Jitter, in percent either side.
const JITTER_PERCENT: u64 = 20;

/// What one partition's Fetch error code calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Batches to append.
    Append,
    /// Find the source's log start and end, then realign, truncate or retry.
    OutOfRange,
    /// The leader (or our view of it) is stale: refresh metadata and retry with backoff.
    Reroute,
    /// Retry with backoff.
    Retry,
    /// Stop fetching the partition and show the reason: retrying cannot help.
    Stall,
}

/// The table above, as code.
pub fn action(code: i16) -> Action {
    match code {
        0 => Action::Append,
        1 => Action::OutOfRange,
        3 | 5 | 6 | 9 | 56 | 74 | 75 | 100 | 103 => Action::Reroute,
        109 => Action::Stall,
        _ => Action::Retry,
    }
}

/// Kafka's name of a Fetch error code, for the reasons the admin surface shows.
pub fn name(code: i16) -> String {
    crate::net::client::error_name(code)
}

/// Exponential, jittered, bounded retry delays of one partition (or one connection).
#[derive(Debug, Clone)]
pub struct Backoff {
    failures: u32,
    until: Option<Instant>,
    seed: u64,
}

impl Backoff {
    /// No failures yet; `seed` varies the jitter between partitions.
    pub fn new(seed: u64) -> Self {
        Backoff {
            failures: 0,
            until: None,
            seed: seed | 1,
        }
    }

    /// A failure at `now`: the next attempt waits the delay returned.
    pub fn fail(&mut self, now: Instant) -> Duration {
        let exp = BACKOFF_MIN.saturating_mul(1u32 << self.failures.min(16));
        let base = exp.min(BACKOFF_MAX);
        self.failures = self.failures.saturating_add(1);
        // xorshift64: enough to spread retries, no dependency.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let span = base.as_millis() as u64 * JITTER_PERCENT * 2 / 100;
        let jitter = if span == 0 { 0 } else { self.seed % (span + 1) };
        let ms = base.as_millis() as u64 * (100 - JITTER_PERCENT) / 100 + jitter;
        let delay = Duration::from_millis(ms);
        self.until = Some(now + delay);
        delay
    }

    /// A success: the next failure starts from [`BACKOFF_MIN`] again.
    pub fn reset(&mut self) {
        self.failures = 0;
        self.until = None;
    }

    /// Whether an attempt may go out at `now`.
    pub fn ready(&self, now: Instant) -> bool {
        self.until.is_none_or(|t| now >= t)
    }

    /// When the wait ends, if one is running at `now`.
    pub fn waiting_until(&self, now: Instant) -> Option<Instant> {
        self.until.filter(|&t| t > now)
    }

    /// Failures since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_of_the_table_has_its_action() {
        assert_eq!(action(0), Action::Append);
        assert_eq!(action(1), Action::OutOfRange);
        for c in [3, 5, 6, 9, 56, 74, 75, 100, 103] {
            assert_eq!(action(c), Action::Reroute, "{}", name(c));
        }
        for c in [-1, 2, 7, 13, 29, 31, 35, 76, 999] {
            assert_eq!(action(c), Action::Retry, "{}", name(c));
        }
        assert_eq!(action(109), Action::Stall);
        assert_eq!(name(6), "NOT_LEADER_OR_FOLLOWER (6)");
        assert_eq!(name(-1), "UNKNOWN_SERVER_ERROR (-1)");
        assert_eq!(name(58), "SASL_AUTHENTICATION_FAILED (58)");
        assert_eq!(name(100), "UNKNOWN_TOPIC_ID (100)");
        assert_eq!(name(109), "OFFSET_MOVED_TO_TIERED_STORAGE (109)");
        assert_eq!(name(4242), "error 4242");
    }

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
}
