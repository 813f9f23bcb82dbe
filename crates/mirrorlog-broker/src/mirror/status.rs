//! What the fetcher reports of each partition to the admin surface, and how it notes errors:
//! every error counted and kept as the last one, logged at WARN at most once per interval per
//! partition (a source answering errors at once must not flood the log).

use mirrorlog::engine::TopicPartition;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What the fetcher reports of one partition.
#[derive(Debug, Clone)]
pub struct PartStatus {
    /// The partition (same name on both sides).
    pub tp: TopicPartition,
    /// Fetch answers for it.
    pub fetches: u64,
    /// Bytes fetched and queued.
    pub bytes_fetched: u64,
    /// Appends made durable.
    pub batches_appended: u64,
    /// Realignments at the source's log start.
    pub realigns: u64,
    /// Errors met.
    pub errors: u64,
    /// The last error.
    pub last_error: Option<String>,
    /// Why the partition stopped fetching, when it needs the operator.
    pub stalled: Option<String>,
    /// The source's high watermark at its last answer (-1: none yet).
    pub source_high_watermark: i64,
    /// The source's log start at its last answer.
    pub source_log_start: i64,
    /// The local durable end the fetcher has seen: the last mirrored offset + 1.
    pub mirrored_end: i64,
    /// When an error of this partition was last logged at WARN (rate limit).
    pub warned_at: Option<std::time::Instant>,
    /// The source broker leading it, from the last metadata (-1: none known).
    pub source_leader: i32,
    /// That leader's epoch (-1: unknown).
    pub source_leader_epoch: i32,
    /// Fetch requests sent that asked for it.
    pub fetch_requests: u64,
    /// Errors since its last good answer (its backoff grows with them).
    pub retries: u32,
    /// Until when its next request waits (backoff), if it waits.
    pub backoff_until: Option<std::time::Instant>,
    /// Truncations where the local log diverged from the source.
    pub truncations: u64,
    /// When its topic's configs were last synced from the source.
    pub config_synced: Option<std::time::SystemTime>,
    /// Why the last config sync of its topic failed.
    pub config_error: Option<String>,
}

impl PartStatus {
    /// Nothing fetched yet.
    pub fn new(tp: TopicPartition) -> Self {
        PartStatus {
            tp,
            fetches: 0,
            bytes_fetched: 0,
            batches_appended: 0,
            realigns: 0,
            errors: 0,
            last_error: None,
            stalled: None,
            source_high_watermark: -1,
            source_log_start: -1,
            mirrored_end: 0,
            warned_at: None,
            source_leader: -1,
            source_leader_epoch: -1,
            fetch_requests: 0,
            retries: 0,
            backoff_until: None,
            truncations: 0,
            config_synced: None,
            config_error: None,
        }
    }
}

/// The status, through a poisoned lock too (a panicked reader must not stop the fetcher).
pub fn lock(s: &Mutex<Vec<PartStatus>>) -> std::sync::MutexGuard<'_, Vec<PartStatus>> {
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Least time between two WARN lines about one partition's errors.
const ERROR_WARN_INTERVAL: Duration = Duration::from_secs(10);

/// Whether an error `now_error` of a partition whose last one was `previous`, last logged at
/// WARN at `warned_at`, is logged at WARN: its first error and every change, at most once per
/// [`ERROR_WARN_INTERVAL`]; repeats (and changes inside the interval) at DEBUG.
fn warn_worthy(
    previous: Option<&str>,
    now_error: &str,
    warned_at: Option<Instant>,
    now: Instant,
) -> bool {
    previous != Some(now_error)
        && warned_at.is_none_or(|t| now.saturating_duration_since(t) >= ERROR_WARN_INTERVAL)
}

pub fn note_error(status: &Mutex<Vec<PartStatus>>, i: Option<usize>, e: &str) {
    let now = Instant::now();
    let mut st = lock(status);
    let mut warned = Vec::new();
    for (j, s) in st.iter_mut().enumerate() {
        if i.is_some_and(|i| i != j) {
            continue;
        }
        if warn_worthy(s.last_error.as_deref(), e, s.warned_at, now) {
            s.warned_at = Some(now);
            warned.push(s.tp.to_string());
        }
        s.errors += 1;
        s.last_error = Some(e.to_string());
    }
    if warned.is_empty() {
        tracing::debug!(error = e, "mirror fetcher");
    } else {
        tracing::warn!(error = e, partitions = %warned.join(","), "mirror partition error");
    }
}

pub fn set_stalled(status: &Mutex<Vec<PartStatus>>, i: usize, reason: &str) {
    tracing::warn!(reason, "mirror partition stalled");
    if let Some(s) = lock(status).get_mut(i) {
        s.stalled = Some(reason.to_string());
        s.last_error = Some(reason.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partitions_first_error_and_each_change_warn_at_most_once_per_interval() {
        let t0 = Instant::now();
        let later = t0 + ERROR_WARN_INTERVAL;
        assert!(warn_worthy(None, "e1", None, t0), "the first error");
        assert!(!warn_worthy(Some("e1"), "e1", Some(t0), later), "a repeat");
        assert!(warn_worthy(Some("e1"), "e2", Some(t0), later), "a change");
        assert!(
            !warn_worthy(Some("e1"), "e2", Some(t0), t0 + Duration::from_secs(1)),
            "a change inside the interval"
        );
        let status = Mutex::new(vec![
            PartStatus::new(TopicPartition::new("t", 0)),
            PartStatus::new(TopicPartition::new("t", 1)),
        ]);
        note_error(&status, Some(1), "boom");
        note_error(&status, Some(1), "boom");
        note_error(&status, None, "gone");
        let st = lock(&status);
        assert_eq!((st[0].errors, st[1].errors), (1, 3));
        assert!(st[0].warned_at.is_some() && st[1].warned_at.is_some());
        assert_eq!(st[1].last_error.as_deref(), Some("gone"));
    }
}
