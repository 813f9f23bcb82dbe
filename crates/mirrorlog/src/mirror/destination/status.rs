//! What a mirror destination reports of each partition (a broker's admin surface and metrics,
//! a [`super::super::MirrorLink`]'s counters), and how it notes errors: every error counted and
//! kept as the last one, logged at WARN at most once per interval per partition (a source
//! answering errors at once must not flood the log).
//!
//! The lag in time ([`PartStatus::lag_ms`]) is kept here, from the source's high watermarks as
//! its answers showed them, so that every destination computes it the same way.

use crate::engine::TopicPartition;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a mirror destination reports of one partition.
#[derive(Debug, Clone)]
pub struct PartStatus {
    /// The partition (same name on both sides).
    pub tp: TopicPartition,
    /// Fetch answers for it.
    pub fetches: u64,
    /// Bytes fetched and queued.
    pub bytes_fetched: u64,
    /// The offsets those bytes span (the lag in bytes is estimated from the ratio).
    pub offsets_fetched: u64,
    /// Appends made durable.
    pub batches_appended: u64,
    /// Their record bytes.
    pub bytes_written: u64,
    /// Realignments at the source's log start.
    pub realigns: u64,
    /// Errors met.
    pub errors: u64,
    /// Errors met, by kind: the source's Kafka error name, or `network` (the connection or a
    /// request failed), `metadata` (the source's metadata names no leader), `local` (an
    /// engine call here failed).
    pub errors_by_kind: std::collections::BTreeMap<String, u64>,
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
    /// When the source last answered it without an error.
    pub answered_at: Option<Instant>,
    /// The source's high watermarks as the answers showed them, each with when it was first
    /// seen, increasing, those the local durable end passed dropped ([`PartStatus::lag_ms`]).
    pub seen: std::collections::VecDeque<(i64, Instant)>,
}

/// How recent the source's last answer for a partition must be for its lag to be known. Past
/// it, `GET /mirrors` shows the lag as unknown (null) beside the answer's age, the partition
/// as stalled with the reason, and `/health` the mirror as unreachable. A fetcher long-polls
/// for at most 500 ms and backs off for at most a second, so a source that answers is never
/// this late.
pub const ANSWER_FRESH: Duration = Duration::from_secs(10);

/// Most high-watermark samples a partition keeps; past it the newest is raised instead of a
/// new one added, which can only make the lag read older, never younger.
const SEEN_MAX: usize = 64;

impl PartStatus {
    /// Nothing fetched yet.
    #[must_use]
    pub fn new(tp: TopicPartition) -> Self {
        PartStatus {
            tp,
            fetches: 0,
            bytes_fetched: 0,
            offsets_fetched: 0,
            batches_appended: 0,
            bytes_written: 0,
            realigns: 0,
            errors: 0,
            errors_by_kind: std::collections::BTreeMap::new(),
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
            answered_at: None,
            seen: std::collections::VecDeque::new(),
        }
    }

    /// `lag` offsets in bytes, estimated from the bytes per offset of what this partition
    /// fetched since its fetcher started: 0 when caught up, `None` when nothing was fetched
    /// yet to measure by.
    #[must_use]
    pub fn lag_bytes(&self, lag: i64) -> Option<u64> {
        let lag = u64::try_from(lag).ok()?;
        if lag == 0 {
            return Some(0);
        }
        if self.offsets_fetched == 0 {
            return None;
        }
        let per = self.bytes_fetched as f64 / self.offsets_fetched as f64;
        Some((lag as f64 * per).round() as u64)
    }

    /// This status carried over to a new fetcher of the partition (a pause, a resume): the
    /// counters and what the source last said stay; what the old fetcher was doing (a stall,
    /// its retries and backoff) goes, as the new one starts afresh.
    #[must_use]
    pub fn restarted(mut self) -> Self {
        self.stalled = None;
        self.retries = 0;
        self.backoff_until = None;
        self
    }

    /// An answer without error from the source at `now` showed its high watermark `hw`.
    pub fn note_answer(&mut self, hw: i64, now: Instant) {
        self.answered_at = Some(now);
        if hw < 0 {
            return;
        }
        // A source whose end moved back (its log truncated): nothing seen lies past it now.
        for s in &mut self.seen {
            s.0 = s.0.min(hw);
        }
        let durable = self.mirrored_end;
        self.seen.retain(|s| s.0 > durable);
        match self.seen.back().map(|s| s.0) {
            Some(last) if last >= hw => {}
            Some(_) if self.seen.len() >= SEEN_MAX => {
                if let Some(newest) = self.seen.back_mut() {
                    newest.0 = hw;
                }
            }
            _ => {
                if hw > durable {
                    self.seen.push_back((hw, now));
                }
            }
        }
        // Equal high watermarks after a cap keep the earliest sighting.
        let mut i = 1;
        while i < self.seen.len() {
            if self.seen[i].0 <= self.seen[i - 1].0 {
                self.seen.remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// How long the source has not answered this partition at `now`, counted from `since`
    /// (when its fetcher started) when that is later than its last answer (none yet, or one
    /// before a pause).
    #[must_use]
    pub fn silent_for(&self, since: Instant, now: Instant) -> Duration {
        now.saturating_duration_since(self.answered_at.map_or(since, |t| t.max(since)))
    }

    /// Whether the source answered this partition within [`ANSWER_FRESH`] of `now`: only
    /// then is a lag shown.
    #[must_use]
    pub fn fresh(&self, now: Instant) -> bool {
        self.answered_at
            .is_some_and(|t| now.saturating_duration_since(t) <= ANSWER_FRESH)
    }

    /// How far behind the source, in time, the local durable end `durable_end` is at `now`:
    /// the time since the first answer whose high watermark covered the first offset not yet
    /// durable here; 0 when every offset any answer showed is durable here; `None` before the
    /// first answer. A record is seen only after the source acknowledged it, so this is never
    /// more than the age of the oldest acknowledged record not durable here; it is less by at
    /// most the time from that acknowledgement to the answer that showed it (see the README).
    #[must_use]
    pub fn lag_ms(&self, durable_end: i64, now: Instant) -> Option<u64> {
        self.answered_at?;
        Some(
            self.seen
                .iter()
                .find(|(hw, _)| *hw > durable_end)
                .map_or(0, |(_, at)| {
                    now.saturating_duration_since(*at).as_millis() as u64
                }),
        )
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

/// Notes error `e` of kind `kind` on partition `i` (`None`: every partition of `status`):
/// counted, kept as the last, logged as the module docs say.
pub fn note_error(status: &Mutex<Vec<PartStatus>>, i: Option<usize>, kind: &str, e: &str) {
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
        *s.errors_by_kind.entry(kind.to_string()).or_default() += 1;
        s.last_error = Some(e.to_string());
    }
    if warned.is_empty() {
        tracing::debug!(error = e, "mirror fetcher");
    } else {
        tracing::warn!(error = e, partitions = %warned.join(","), "mirror partition error");
    }
}

/// Partition `i` stops fetching until the operator acts, for `reason`; an error the source
/// answered (`Some(kind)`: its Kafka error name) is counted as [`note_error`] counts one.
pub fn set_stalled(status: &Mutex<Vec<PartStatus>>, i: usize, error: Option<&str>, reason: &str) {
    tracing::warn!(reason, "mirror partition stalled");
    if let Some(s) = lock(status).get_mut(i) {
        if let Some(kind) = error {
            s.errors += 1;
            *s.errors_by_kind.entry(kind.to_string()).or_default() += 1;
        }
        s.stalled = Some(reason.to_string());
        s.last_error = Some(reason.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lag_in_bytes_is_the_lag_at_the_bytes_per_offset_fetched() {
        let mut s = PartStatus::new(TopicPartition::new("t", 0));
        assert_eq!(s.lag_bytes(0), Some(0), "caught up: none, measured or not");
        assert_eq!(s.lag_bytes(5), None, "nothing fetched to measure by");
        s.bytes_fetched = 3_000;
        s.offsets_fetched = 40;
        assert_eq!(s.lag_bytes(10), Some(750));
        assert_eq!(s.lag_bytes(-1), None);
    }

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
        note_error(&status, Some(1), "network", "boom");
        note_error(&status, Some(1), "network", "boom");
        note_error(&status, None, "network", "gone");
        let st = lock(&status);
        assert_eq!((st[0].errors, st[1].errors), (1, 3));
        assert!(st[0].warned_at.is_some() && st[1].warned_at.is_some());
        assert_eq!(st[1].last_error.as_deref(), Some("gone"));
    }

    #[test]
    fn lag_is_the_age_of_the_first_sighting_of_what_is_not_durable() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut s = PartStatus::new(TopicPartition::new("t", 0));
        assert_eq!(s.lag_ms(0, at(0)), None, "no answer yet");
        s.note_answer(10, at(0));
        s.note_answer(10, at(50));
        s.note_answer(20, at(100));
        // Durable to 5: offset 5 was first seen at 0.
        assert_eq!(s.lag_ms(5, at(300)), Some(300));
        // Durable to 10: offsets 10.. were first seen at 100.
        s.mirrored_end = 10;
        assert_eq!(s.lag_ms(10, at(300)), Some(200));
        // Durable past everything seen: no lag, however old the answers.
        s.mirrored_end = 20;
        assert_eq!(s.lag_ms(20, at(5_000)), Some(0));
        s.note_answer(20, at(6_000));
        assert!(s.seen.is_empty(), "what is durable is forgotten");
        // A source that moved back: what was seen past its new end is capped to it.
        s.mirrored_end = 15;
        s.note_answer(30, at(7_000));
        s.note_answer(25, at(7_100));
        assert_eq!(s.seen.iter().map(|x| x.0).collect::<Vec<_>>(), [25]);
        assert_eq!(s.lag_ms(15, at(7_500)), Some(500));
    }

    #[test]
    fn samples_are_bounded_and_a_full_list_only_makes_the_lag_older() {
        let t0 = Instant::now();
        let mut s = PartStatus::new(TopicPartition::new("t", 0));
        for i in 1..=200u64 {
            s.note_answer(i as i64, t0 + Duration::from_millis(i));
        }
        assert_eq!(s.seen.len(), SEEN_MAX);
        // Offset 150 was really first seen at 151 ms; the capped list says earlier, not later.
        let now = t0 + Duration::from_millis(1_000);
        assert!(s.lag_ms(150, now).unwrap() >= 1_000 - 151);
    }
}
