//! The shard's periodic work, on every partition, idle ones too: producer expiration every
//! `producer.id.expiration.check.interval.ms` and retention every
//! `log.retention.check.interval.ms`, measured on the shard's clock. The engine's timer thread
//! sends a `Tick` to every shard (at least once a second); each tick does what is due.
//! Sealed segments' indexes a partition has not used for a while are dropped, a partition
//! without appends since the last tick hands its append buffers back, and a managed high
//! watermark that moved is checkpointed, and parked reads whose callers went are let go.
//! Producers are also expired right after a partition opens, so that the entries a snapshot
//! brought back are judged by the real time (design.md §Producer state).

use super::Shard;

/// Kafka's default `producer.id.expiration.check.interval.ms` (10 minutes).
pub const PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS_DEFAULT: u64 = 600_000;
/// Kafka's default `log.retention.check.interval.ms` (5 minutes).
pub const RETENTION_CHECK_INTERVAL_MS_DEFAULT: u64 = 300_000;
/// Producers in one partition's table from which a turn's lookahead pays: below it (about
/// 1 MiB of entries, within a core's L2 share) the slots are cached anyway, and the pass that
/// finds each append's partition costs more than it saves (measured: `produce` lost ~6 % with
/// the lookahead on and 64 producers per partition).
pub const LOOKAHEAD_MIN_PRODUCERS: usize = 8192;
/// How often the loaded indexes of sealed segments a partition has not used since the last
/// time are dropped (an idle partition then holds none).
pub const IDLE_CACHE_RELEASE_INTERVAL_MS: i64 = 30_000;
/// Default request-queue depth per shard.
pub const QUEUE_DEPTH_DEFAULT: usize = 4096;

impl Shard {
    /// Runs the periodic work that is due at the clock's now.
    pub(super) fn on_tick(&mut self) {
        self.lookahead = self
            .slots
            .iter()
            .flatten()
            .any(|p| p.log.producer_state().len() >= LOOKAHEAD_MIN_PRODUCERS);
        let now_ms = self.config.clock.now_ms();
        if now_ms >= self.next_expiration_ms {
            self.next_expiration_ms = now_ms
                .saturating_add_unsigned(self.config.producer_id_expiration_check_interval_ms);
            for part in self.slots.iter_mut().flatten() {
                let expired = part.log.remove_expired_producers(now_ms);
                if expired > 0 {
                    tracing::debug!(partition = %part.tp, expired, "producers expired");
                }
            }
        }
        if now_ms >= self.next_cache_release_ms {
            self.next_cache_release_ms = now_ms.saturating_add(IDLE_CACHE_RELEASE_INTERVAL_MS);
            for part in self.slots.iter_mut().flatten() {
                part.log.release_idle_caches();
            }
        }
        // A partition with no append since the last tick hands its append buffers back (an
        // idle partition's memory is then its state, not 2 MiB of buffers); its next append
        // takes one from the Io again.
        for slot in 0..self.slots.len() {
            let Some(part) = self.slots[slot].as_mut() else {
                continue;
            };
            if !std::mem::take(&mut part.appended_since_tick) {
                // Deferred pages are written first; the buffer goes when that write completes.
                self.hand_back_buffer(slot);
            }
        }
        self.admit_waiters();
        self.drop_idle_read_ahead();
        self.cancel_abandoned_reads();
        // A managed high watermark that moved since the last tick is checkpointed (Kafka's
        // `replication-offset-checkpoint`); a failure is logged and retried next tick.
        for part in self.slots.iter_mut().flatten() {
            if let Err(error) = part.log.checkpoint_high_watermark(&mut self.io) {
                tracing::warn!(partition = %part.tp, %error, "high watermark checkpoint failed");
            }
        }
        self.cleaner_tick(now_ms);
        if now_ms >= self.next_retention_ms {
            self.next_retention_ms =
                now_ms.saturating_add_unsigned(self.config.retention_check_interval_ms);
            for slot in 0..self.slots.len() {
                self.enforce_retention(slot, now_ms);
            }
        }
    }

    /// `retention.ms` / `retention.bytes` on the partition in `slot`, if it has either (O(1)
    /// when nothing is due); a failure is logged, not fatal: the next check retries.
    pub(super) fn enforce_retention(&mut self, slot: usize, now_ms: i64) {
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if part.config.retention_bytes.is_none() && part.config.retention_ms.is_none() {
            return;
        }
        // Retention may delete the segment a read-ahead is reading.
        self.drop_read_ahead(slot);
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if let Err(e) = part.log.enforce_retention(&mut self.io, now_ms) {
            tracing::warn!(partition = %part.tp, error = %e, "retention failed");
        }
        // Rolling an expired active segment made its appends durable.
        self.resolve(slot);
    }
}
