//! What a listener does when `accept` fails: most often the process is out of file
//! descriptors (`EMFILE`, `ENFILE`) or the kernel of memory, and the pending connection stays in
//! the backlog, so an accept loop that retried at once would spin a core for as long as the
//! shortage lasts. It waits instead, longer each time the failure repeats
//! ([`ACCEPT_RETRY_DELAY_MIN`] doubling to [`ACCEPT_RETRY_DELAY_MAX`]), and logs the failure at
//! most once a second; the first accept that succeeds resets it.

use std::time::{Duration, Instant};

/// The first wait after a failed accept.
pub const ACCEPT_RETRY_DELAY_MIN: Duration = Duration::from_millis(10);
/// The longest wait between two accepts that fail.
pub const ACCEPT_RETRY_DELAY_MAX: Duration = Duration::from_secs(1);
/// At most one warning about failing accepts in this long.
const WARN_INTERVAL: Duration = Duration::from_secs(1);

const _: () = assert!(ACCEPT_RETRY_DELAY_MIN.as_nanos() < ACCEPT_RETRY_DELAY_MAX.as_nanos());

/// One listener's backoff.
#[derive(Debug)]
pub struct AcceptBackoff {
    listener: &'static str,
    delay: Duration,
    failures: u64,
    warned_at: Option<Instant>,
}

impl AcceptBackoff {
    /// The backoff of the listener named `listener` (in its log lines).
    pub fn new(listener: &'static str) -> Self {
        AcceptBackoff {
            listener,
            delay: ACCEPT_RETRY_DELAY_MIN,
            failures: 0,
            warned_at: None,
        }
    }

    /// An accept succeeded: the next failure waits the shortest time again.
    pub fn succeeded(&mut self) {
        self.delay = ACCEPT_RETRY_DELAY_MIN;
        self.failures = 0;
    }

    /// The wait before the next accept after this failure (and the next one's).
    pub fn failed(&mut self, error: &std::io::Error) -> Duration {
        self.failures += 1;
        let now = Instant::now();
        if self
            .warned_at
            .is_none_or(|at| now.duration_since(at) >= WARN_INTERVAL)
        {
            self.warned_at = Some(now);
            tracing::warn!(
                listener = self.listener,
                %error,
                failures = self.failures,
                retry_ms = self.delay.as_millis() as u64,
                "accept failed"
            );
        }
        let wait = self.delay;
        self.delay = (self.delay * 2).min(ACCEPT_RETRY_DELAY_MAX);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_failures_wait_longer_up_to_the_most_and_a_success_resets() {
        let mut b = AcceptBackoff::new("test");
        let e = std::io::Error::from_raw_os_error(24); // EMFILE
        let waits: Vec<Duration> = (0..10).map(|_| b.failed(&e)).collect();
        assert_eq!(waits[0], ACCEPT_RETRY_DELAY_MIN);
        assert!(waits.windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(*waits.last().unwrap(), ACCEPT_RETRY_DELAY_MAX);
        b.succeeded();
        assert_eq!(b.failed(&e), ACCEPT_RETRY_DELAY_MIN);
    }
}
