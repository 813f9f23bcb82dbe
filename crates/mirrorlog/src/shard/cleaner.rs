//! The shard's log cleaner: compaction of its compacted partitions (`log/clean/`), in the
//! background of its loop.
//!
//! Why a budget per turn rather than a cleaner thread with its own ring: a pass's output is
//! swapped in under the partition's segments, which only the shard touches (no locks on the
//! data path), and the reads and writes of a pass are a few large sequential operations. So the
//! shard runs one pass at a time, a step of at most [`CleanerConfig::step_bytes`] read (64 KiB
//! by default) per turn of its loop: every turn when the shard has nothing else to do; while
//! appends wait on the device, only after a pause as long as the last step took (at most half
//! the shard's time, so the producers' threads keep their share of the CPU); while requests
//! wait in its queue, one step every [`CLEAN_STEP_INTERVAL_MS_MAX`]. A request waits at most
//! one small step for it, and a busy shard still cleans.
//!
//! Choice of partition (Kafka's `grabFilthiestCompactedLog`): every `log.cleaner.backoff.ms`
//! while idle, the Local compacted partition that is due with the highest dirty ratio. A
//! partition whose pass failed (damaged batch, dedupe map too small) is uncleanable until it is
//! reopened, as Kafka marks it.
//!
//! Bounds: the dedupe map is `log.cleaner.dedupe.buffer.size` split over the shards, allocated
//! at a pass's start and freed when the shard has nothing left to clean; the bytes read and
//! written are throttled to `log.cleaner.io.max.bytes.per.second` split over the shards.

use super::Shard;
use crate::api::TopicPartition;
use crate::log::{CleanPass, CleanProgress, LogError, OffsetMap, DEDUPE_BUFFER_BYTES_DEFAULT};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Kafka's `log.cleaner.backoff.ms` default: how often an idle cleaner looks for dirty logs.
pub const CLEANER_BACKOFF_MS_DEFAULT: u64 = 15_000;
/// Bytes a step reads by default: small enough that a request arriving during a step waits
/// a fraction of a millisecond (measured: about 0.3 ms of CPU and I/O per 64 KiB).
pub const CLEAN_STEP_BYTES_DEFAULT: usize = 64 << 10;
/// Longest a pass waits for a step while the shard is busy.
pub const CLEAN_STEP_INTERVAL_MS_MAX: u64 = 10;

/// The cleaner's settings (Kafka's broker names); the engine splits the buffer and the rate
/// over its shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanerConfig {
    /// `log.cleaner.enable`.
    pub enable: bool,
    /// `log.cleaner.dedupe.buffer.size`: bytes of the dedupe map.
    pub dedupe_buffer_bytes: usize,
    /// `log.cleaner.io.max.bytes.per.second`: bytes read and written per second, at most.
    pub io_max_bytes_per_second: Option<u64>,
    /// `log.cleaner.backoff.ms`.
    pub backoff_ms: u64,
    /// Bytes read per step (see the module docs).
    pub step_bytes: usize,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            enable: true,
            dedupe_buffer_bytes: DEDUPE_BUFFER_BYTES_DEFAULT,
            io_max_bytes_per_second: None,
            backoff_ms: CLEANER_BACKOFF_MS_DEFAULT,
            step_bytes: CLEAN_STEP_BYTES_DEFAULT,
        }
    }
}

/// The cleaner's state on one shard.
#[derive(Debug, Default)]
pub(super) struct ShardCleaner {
    /// The pass in progress: its partition's slot and the pass.
    pass: Option<(usize, CleanPass)>,
    /// The map between passes (dropped when there is nothing to clean).
    map: Option<OffsetMap>,
    /// When an idle cleaner looks again (real time: it paces work, it decides nothing about
    /// data, which the shard's clock does).
    next_check: Option<Instant>,
    last_step: Option<Instant>,
    /// How long the last step took (the duty cycle while appends wait on the device).
    last_step_took: Duration,
    /// Bytes the throttle let through in the current second, and when that second began.
    window_bytes: u64,
    window_start: Option<Instant>,
    uncleanable: HashSet<TopicPartition>,
    pub(super) counters: CleanerCounters,
}

/// What the shard's cleaner did (in `ShardStats`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CleanerCounters {
    /// Passes finished.
    pub passes: u64,
    /// Passes abandoned (the partition changed under them).
    pub passes_abandoned: u64,
    /// Passes failed (the partition is uncleanable until reopened).
    pub passes_failed: u64,
    /// Bytes read (mapping and cleaning).
    pub bytes_read: u64,
    /// Bytes the cleaned segments hold.
    pub bytes_written: u64,
    /// Bytes of the segments replaced by cleaned ones.
    pub bytes_replaced: u64,
    /// Time spent in steps, microseconds.
    pub busy_us: u64,
    /// Cleanable bytes of the compacted partitions, as of the last look.
    pub backlog_bytes: u64,
    /// The highest dirty ratio among them, as of the last look.
    pub max_dirty_ratio: f64,
    /// Bytes of the dedupe map held now.
    pub dedupe_buffer_bytes: usize,
    /// Partitions whose pass failed.
    pub uncleanable_partitions: usize,
}

impl Shard {
    /// When the pass in progress may take its next step (now or later: the duty cycle while
    /// appends wait on the device, the throttle), or `None` without a pass. The loop does not
    /// block while a step is due, and asks the alarm to wake it for a later one.
    pub(super) fn cleaner_next_step(&self) -> Option<Instant> {
        self.cleaner.pass.as_ref()?;
        let c = &self.cleaner;
        let mut at = Instant::now();
        if let (Some(rate), Some(start)) =
            (self.config.cleaner.io_max_bytes_per_second, c.window_start)
        {
            if c.window_bytes >= rate {
                at = at.max(start + Duration::from_secs(1));
            }
        }
        if let Some(last) = c.last_step.filter(|_| self.io.appends_waiting()) {
            at = at.max(last + c.last_step_took);
        }
        Some(at)
    }

    fn cleaner_throttled(&self) -> bool {
        let Some(rate) = self.config.cleaner.io_max_bytes_per_second else {
            return false;
        };
        let c = &self.cleaner;
        c.window_start
            .is_some_and(|s| s.elapsed() < Duration::from_secs(1) && c.window_bytes >= rate)
    }

    /// On the tick: looks for the filthiest due partition when no pass runs.
    pub(super) fn cleaner_tick(&mut self, now_ms: i64) {
        if !self.config.cleaner.enable || self.cleaner.pass.is_some() {
            return;
        }
        if self.cleaner.next_check.is_some_and(|t| Instant::now() < t) {
            return;
        }
        self.cleaner.next_check =
            Some(Instant::now() + Duration::from_millis(self.config.cleaner.backoff_ms));
        self.start_filthiest(now_ms);
    }

    /// Starts a pass on the due partition with the highest dirty ratio, if any.
    pub(super) fn start_filthiest(&mut self, now_ms: i64) {
        let mut best: Option<(f64, usize)> = None;
        let (mut backlog, mut max_ratio) = (0u64, 0f64);
        for slot in 0..self.slots.len() {
            let Some(part) = self.slots[slot].as_mut() else {
                continue;
            };
            let compaction = part.config.compaction;
            if !compaction.policy.compact || self.cleaner.uncleanable.contains(&part.tp) {
                continue;
            }
            let Ok(plan) = part.log.cleanable(&mut self.io, now_ms) else {
                continue;
            };
            backlog += plan.cleanable_bytes;
            max_ratio = max_ratio.max(plan.dirty_ratio());
            if plan.is_due(compaction.min_cleanable_dirty_ratio_ppm)
                && best.is_none_or(|(r, _)| plan.dirty_ratio() > r)
            {
                best = Some((plan.dirty_ratio(), slot));
            }
        }
        self.cleaner.counters.backlog_bytes = backlog;
        self.cleaner.counters.max_dirty_ratio = max_ratio;
        let Some((_, slot)) = best else {
            // Nothing to clean: the map's memory goes back.
            self.cleaner.map = None;
            self.cleaner.counters.dedupe_buffer_bytes = 0;
            return;
        };
        let map = self
            .cleaner
            .map
            .take()
            .unwrap_or_else(|| OffsetMap::new(self.config.cleaner.dedupe_buffer_bytes));
        self.cleaner.counters.dedupe_buffer_bytes = map.allocated_bytes();
        let Some(part) = self.slots[slot].as_mut() else {
            return;
        };
        match part.log.begin_clean(&mut self.io, now_ms, map, false) {
            Ok(Ok(pass)) => self.cleaner.pass = Some((slot, pass)),
            Ok(Err(map)) => self.cleaner.map = Some(map),
            Err(error) => self.mark_uncleanable(slot, &error),
        }
    }

    fn mark_uncleanable(&mut self, slot: usize, error: &LogError) {
        if let Some(part) = self.slots.get(slot).and_then(Option::as_ref) {
            tracing::warn!(partition = %part.tp, %error,
                "log cleaning failed: the partition is not cleaned until it is reopened");
            self.cleaner.uncleanable.insert(part.tp.clone());
        }
        self.cleaner.counters.passes_failed += 1;
        self.cleaner.counters.uncleanable_partitions = self.cleaner.uncleanable.len();
    }

    /// One step of the pass in progress, when due (see the module docs): at once when the
    /// shard has nothing else to do; while appends wait on the device, after a pause as long as
    /// the last step (half the shard's time at most); while requests wait in the queue, once
    /// every [`CLEAN_STEP_INTERVAL_MS_MAX`].
    pub(super) fn clean_turn(&mut self, queue_busy: bool) {
        if self.cleaner.pass.is_none() || self.cleaner_throttled() {
            return;
        }
        let since_last = self.cleaner.last_step.map(|t| t.elapsed());
        let due = if queue_busy {
            since_last.is_none_or(|d| d >= Duration::from_millis(CLEAN_STEP_INTERVAL_MS_MAX))
        } else if self.io.appends_waiting() {
            since_last.is_none_or(|d| d >= self.cleaner.last_step_took)
        } else {
            true
        };
        if !due {
            return;
        }
        let Some((slot, mut pass)) = self.cleaner.pass.take() else {
            return;
        };
        // A step may swap segments a read-ahead is reading: the window goes first.
        self.drop_read_ahead(slot);
        let started = Instant::now();
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            // The partition was deleted or closed: `abandon_cleaning` already ran.
            return;
        };
        let before = (
            pass.stats().map_bytes_read + pass.stats().bytes_read,
            pass.stats().bytes_written,
        );
        let progress = part
            .log
            .clean_step(&mut self.io, &mut pass, self.config.cleaner.step_bytes);
        let after = (
            pass.stats().map_bytes_read + pass.stats().bytes_read,
            pass.stats().bytes_written,
        );
        let tp = part.tp.clone();
        if after.1 != before.1 {
            // A cleaned segment was swapped in: the tail cache must not serve what it removed.
            self.forget_tail_of(&tp);
        }
        let moved = (after.0 - before.0) + (after.1 - before.1);
        let c = &mut self.cleaner;
        c.last_step = Some(Instant::now());
        c.last_step_took = started.elapsed();
        c.counters.busy_us += started.elapsed().as_micros() as u64;
        c.counters.bytes_read += after.0 - before.0;
        c.counters.bytes_written += after.1 - before.1;
        if c.window_start
            .is_none_or(|s| s.elapsed() >= Duration::from_secs(1))
        {
            c.window_start = Some(Instant::now());
            c.window_bytes = 0;
        }
        c.window_bytes += moved;
        match progress {
            Ok(CleanProgress::Working) => self.cleaner.pass = Some((slot, pass)),
            Ok(CleanProgress::Done(stats)) => {
                self.cleaner.counters.passes += 1;
                self.cleaner.counters.bytes_replaced += stats.bytes_read;
                tracing::debug!(partition = %tp, ?stats, "log cleaned");
                self.cleaner.map = Some(pass.into_map());
                // The next partition, if one is due, starts at once.
                let now_ms = self.config.clock.now_ms();
                self.start_filthiest(now_ms);
            }
            Ok(CleanProgress::Abandoned) => {
                self.cleaner.counters.passes_abandoned += 1;
                self.cleaner.map = Some(pass.into_map());
            }
            Err(error) => {
                self.cleaner.map = Some(pass.into_map());
                self.mark_uncleanable(slot, &error);
            }
        }
    }

    /// Stops the pass on `slot` (the partition is being deleted or closed), removing its
    /// output.
    pub(super) fn abandon_cleaning(&mut self, slot: usize) {
        if self.cleaner.pass.as_ref().is_some_and(|(s, _)| *s == slot) {
            if let (Some((_, mut pass)), Some(part)) = (
                self.cleaner.pass.take(),
                self.slots.get_mut(slot).and_then(Option::as_mut),
            ) {
                part.log.abandon_clean(&mut self.io, &mut pass);
                self.cleaner.map = Some(pass.into_map());
            }
        }
    }

    /// Cleans the partition now, whole, whatever its dirty ratio (the `clean` request: tools
    /// and tests). Returns the pass's stats, or `None` when nothing was cleanable.
    pub(super) fn clean_now(
        &mut self,
        slot: usize,
    ) -> Result<Option<crate::log::CleanStats>, LogError> {
        self.abandon_cleaning(slot);
        self.drop_read_ahead(slot);
        let now_ms = self.config.clock.now_ms();
        let map = self
            .cleaner
            .map
            .take()
            .unwrap_or_else(|| OffsetMap::new(self.config.cleaner.dedupe_buffer_bytes));
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            self.cleaner.map = Some(map);
            return Ok(None);
        };
        let started = Instant::now();
        let (result, map) = part.log.clean(&mut self.io, now_ms, map, true);
        let tp = part.tp.clone();
        self.cleaner.map = Some(map);
        self.forget_tail_of(&tp);
        let c = &mut self.cleaner.counters;
        c.busy_us += started.elapsed().as_micros() as u64;
        if let Ok(Some(stats)) = &result {
            c.passes += 1;
            c.bytes_read += stats.map_bytes_read + stats.bytes_read;
            c.bytes_written += stats.bytes_written;
            c.bytes_replaced += stats.bytes_read;
        }
        result
    }
}
