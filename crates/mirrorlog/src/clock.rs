//! The time seam: every "now" the engine acts on (producer expiration, retention) comes from a
//! [`Clock`], never from `SystemTime` directly, so tests and simulated runs control time and
//! replay exactly (STYLE §10). Production uses [`WallClock`]; tests use [`ManualClock`].

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// A source of the current time in milliseconds since the Unix epoch (Kafka's timestamps).
pub trait Clock: std::fmt::Debug + Send + Sync {
    /// Now, in milliseconds since the epoch.
    fn now_ms(&self) -> i64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct WallClock;

impl Clock for WallClock {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

/// A clock that moves only when told to; clones share one time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now_ms: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock showing `now_ms`.
    #[must_use]
    pub fn new(now_ms: i64) -> Self {
        ManualClock {
            now_ms: Arc::new(AtomicI64::new(now_ms)),
        }
    }

    /// Sets the time.
    pub fn set(&self, now_ms: i64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
    }

    /// Moves the time forward by `ms`.
    pub fn advance(&self, ms: i64) {
        self.now_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_clones_share_it() {
        let c = ManualClock::new(1_000);
        let shared = c.clone();
        assert_eq!(c.now_ms(), 1_000);
        shared.advance(250);
        assert_eq!(c.now_ms(), 1_250);
        c.set(7);
        assert_eq!(shared.now_ms(), 7);
        assert!(WallClock.now_ms() > 1_700_000_000_000);
    }
}
