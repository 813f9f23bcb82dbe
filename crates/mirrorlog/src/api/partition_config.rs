//! Per-partition settings with Kafka's names and defaults, validated at creation and kept in the
//! partition directory (`partition.config`) so that a reopen uses the same ones.

use super::EngineError;
use crate::log::{CleanupPolicy, CompactionConfig, LogConfig};
use crate::producer_state::ProducerStateConfig;
use crate::segment::SegmentConfig;

/// Most bytes a partition's append buffer may hold: it is allocated per partition, so a larger
/// one is a configuration mistake, refused before the allocation could abort the process.
pub const APPEND_BUFFER_BYTES_MAX: usize = 256 << 20;

/// Smallest `preallocate.step.bytes`: one page.
pub const PREALLOCATE_STEP_BYTES_MIN: u64 = 4096;
/// Largest `preallocate.step.bytes`.
pub const PREALLOCATE_STEP_BYTES_MAX: u64 = 1 << 30;

/// `min.cleanable.dirty.ratio` 1.0 in millionths.
pub const DIRTY_RATIO_PPM_MAX: u32 = 1_000_000;

/// `min.cleanable.dirty.ratio` text (a number in [0, 1]) in millionths, rounded.
#[must_use]
pub fn dirty_ratio_ppm(text: &str) -> Option<u32> {
    let ratio: f64 = text.trim().parse().ok()?;
    (0.0..=1.0)
        .contains(&ratio)
        .then(|| (ratio * f64::from(DIRTY_RATIO_PPM_MAX)).round() as u32)
}

/// The partition's settings file in its directory.
pub const PARTITION_CONFIG_FILE: &str = "partition.config";

pub use crate::log::MAX_MESSAGE_BYTES_DEFAULT;

/// Per-partition settings, Kafka's names in the docs. Validated at `create_partition` and
/// kept in the partition directory (`partition.config`), so a reopen uses the same ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionConfig {
    /// `segment.bytes` (default 1 GiB).
    pub segment_bytes: u64,
    /// `segment.ms` (default: none).
    pub segment_ms: Option<i64>,
    /// `index.interval.bytes` (default 4096).
    pub index_interval_bytes: u32,
    /// `segment.index.bytes` (default 10 MiB).
    pub segment_index_bytes: u64,
    /// `retention.bytes` (default: none).
    pub retention_bytes: Option<u64>,
    /// `retention.ms` (default: none here; Kafka's is 7 days, applied by the broker).
    pub retention_ms: Option<i64>,
    /// `max.message.bytes`: the largest batch accepted.
    pub max_message_bytes: usize,
    /// `message.timestamp.before.max.ms`: how far before now a client record's timestamp may
    /// be (default: no bound).
    pub message_timestamp_before_max_ms: Option<i64>,
    /// `message.timestamp.after.max.ms`: how far after now a client record's timestamp may be
    /// (default: no bound).
    pub message_timestamp_after_max_ms: Option<i64>,
    /// `producer.id.expiration.ms` (default 1 day).
    pub producer_id_expiration_ms: i64,
    /// Append buffer per partition: the most bytes accumulated between commit rounds (at
    /// least `max.message.bytes`).
    pub append_buffer_bytes: usize,
    /// `preallocate.step.bytes`: the largest step the active segment's disk is reserved in
    /// ahead of the appends (the first is 1 MiB, each next one doubles up to this). Kafka's
    /// `file.preallocate` reserves the whole segment; this reserves at most one step ahead.
    pub preallocate_step_bytes: u64,
    /// `cleanup.policy`, `min.cleanable.dirty.ratio`, `delete.retention.ms`,
    /// `min.compaction.lag.ms` and `max.compaction.lag.ms` (Kafka's defaults: `delete`, 0.5,
    /// one day, 0, none).
    pub compaction: CompactionConfig,
}

impl Default for PartitionConfig {
    fn default() -> Self {
        PartitionConfig {
            segment_bytes: 1 << 30,
            segment_ms: None,
            index_interval_bytes: 4096,
            segment_index_bytes: crate::log::SEGMENT_INDEX_BYTES_DEFAULT,
            retention_bytes: None,
            retention_ms: None,
            max_message_bytes: MAX_MESSAGE_BYTES_DEFAULT,
            message_timestamp_before_max_ms: None,
            message_timestamp_after_max_ms: None,
            producer_id_expiration_ms: ProducerStateConfig::default().producer_id_expiration_ms,
            append_buffer_bytes: 2 << 20,
            preallocate_step_bytes: crate::segment::PREALLOCATE_STEP_BYTES_DEFAULT,
            compaction: CompactionConfig::DEFAULT,
        }
    }
}

impl PartitionConfig {
    /// Checks every setting; the error names the Kafka setting.
    ///
    /// # Errors
    /// [`EngineError::Config`].
    pub fn validate(&self) -> Result<(), EngineError> {
        let bad = |name: &'static str, reason: String| Err(EngineError::Config { name, reason });
        if self.segment_bytes < 64 << 10 || self.segment_bytes > i32::MAX as u64 {
            return bad(
                "segment.bytes",
                format!("{} is outside [65536, 2^31-1]", self.segment_bytes),
            );
        }
        if self.index_interval_bytes == 0 {
            return bad("index.interval.bytes", "must be positive".into());
        }
        if self.segment_index_bytes < 8 {
            return bad("segment.index.bytes", "must hold one entry".into());
        }
        if self.segment_ms.is_some_and(|ms| ms <= 0) {
            return bad("segment.ms", "must be positive".into());
        }
        if self.retention_ms.is_some_and(|ms| ms <= 0) {
            return bad("retention.ms", "must be positive".into());
        }
        if self.max_message_bytes < 61 || self.max_message_bytes as u64 > self.segment_bytes {
            return bad(
                "max.message.bytes",
                format!(
                    "{} is outside [61, segment.bytes = {}]",
                    self.max_message_bytes, self.segment_bytes
                ),
            );
        }
        if self.producer_id_expiration_ms <= 0 {
            return bad("producer.id.expiration.ms", "must be positive".into());
        }
        for (name, bound) in [
            (
                "message.timestamp.before.max.ms",
                self.message_timestamp_before_max_ms,
            ),
            (
                "message.timestamp.after.max.ms",
                self.message_timestamp_after_max_ms,
            ),
        ] {
            if bound.is_some_and(|ms| ms < 0) {
                return bad(name, "must not be negative".into());
            }
        }
        if self.append_buffer_bytes > APPEND_BUFFER_BYTES_MAX {
            return bad(
                "append buffer",
                format!(
                    "{} is above {APPEND_BUFFER_BYTES_MAX} (it is allocated per partition)",
                    self.append_buffer_bytes
                ),
            );
        }
        if !(PREALLOCATE_STEP_BYTES_MIN..=PREALLOCATE_STEP_BYTES_MAX)
            .contains(&self.preallocate_step_bytes)
        {
            return bad(
                "preallocate.step.bytes",
                format!(
                    "{} is outside [{PREALLOCATE_STEP_BYTES_MIN}, {PREALLOCATE_STEP_BYTES_MAX}]",
                    self.preallocate_step_bytes
                ),
            );
        }
        let c = &self.compaction;
        if c.min_cleanable_dirty_ratio_ppm > DIRTY_RATIO_PPM_MAX {
            return bad(
                "min.cleanable.dirty.ratio",
                format!(
                    "{} is outside [0, 1]",
                    f64::from(c.min_cleanable_dirty_ratio_ppm) / f64::from(DIRTY_RATIO_PPM_MAX)
                ),
            );
        }
        if c.delete_retention_ms < 0 {
            return bad("delete.retention.ms", "must not be negative".into());
        }
        if c.min_compaction_lag_ms < 0 {
            return bad("min.compaction.lag.ms", "must not be negative".into());
        }
        if c.max_compaction_lag_ms <= 0 {
            return bad("max.compaction.lag.ms", "must be positive".into());
        }
        if self.append_buffer_bytes < self.max_message_bytes {
            return bad(
                "append buffer",
                format!(
                    "{} is below max.message.bytes = {}",
                    self.append_buffer_bytes, self.max_message_bytes
                ),
            );
        }
        Ok(())
    }

    /// The log layer's settings.
    #[must_use]
    pub fn log_config(&self) -> LogConfig {
        LogConfig {
            segment: SegmentConfig {
                segment_bytes: self.segment_bytes,
                index_interval_bytes: self.index_interval_bytes,
                commit_buffer_bytes: self.append_buffer_bytes,
                preallocate_step_bytes: self.preallocate_step_bytes,
            },
            producer: ProducerStateConfig {
                producer_id_expiration_ms: self.producer_id_expiration_ms,
            },
            retention_bytes: self.retention_bytes,
            retention_ms: self.retention_ms,
            segment_ms: self.segment_ms,
            segment_index_bytes: Some(self.segment_index_bytes),
            max_message_bytes: self.max_message_bytes,
            timestamp_before_max_ms: self.message_timestamp_before_max_ms,
            timestamp_after_max_ms: self.message_timestamp_after_max_ms,
            compaction: self.compaction,
        }
    }

    /// `name=value` lines with Kafka's names (unset options are omitted).
    #[must_use]
    pub fn encode(&self) -> String {
        let mut out = format!(
            "segment.bytes={}\nindex.interval.bytes={}\nsegment.index.bytes={}\nmax.message.bytes={}\nproducer.id.expiration.ms={}\nappend.buffer.bytes={}\npreallocate.step.bytes={}\n",
            self.segment_bytes,
            self.index_interval_bytes,
            self.segment_index_bytes,
            self.max_message_bytes,
            self.producer_id_expiration_ms,
            self.append_buffer_bytes,
            self.preallocate_step_bytes
        );
        for (name, value) in [
            ("segment.ms", self.segment_ms.map(|v| v.to_string())),
            (
                "retention.bytes",
                self.retention_bytes.map(|v| v.to_string()),
            ),
            ("retention.ms", self.retention_ms.map(|v| v.to_string())),
            (
                "message.timestamp.before.max.ms",
                self.message_timestamp_before_max_ms.map(|v| v.to_string()),
            ),
            (
                "message.timestamp.after.max.ms",
                self.message_timestamp_after_max_ms.map(|v| v.to_string()),
            ),
        ] {
            if let Some(v) = value {
                out.push_str(&format!("{name}={v}\n"));
            }
        }
        let (c, d) = (&self.compaction, CompactionConfig::DEFAULT);
        for (name, value) in [
            (
                "cleanup.policy",
                (c.policy != d.policy).then(|| c.policy.to_string()),
            ),
            (
                "min.cleanable.dirty.ratio",
                (c.min_cleanable_dirty_ratio_ppm != d.min_cleanable_dirty_ratio_ppm).then(|| {
                    (f64::from(c.min_cleanable_dirty_ratio_ppm) / f64::from(DIRTY_RATIO_PPM_MAX))
                        .to_string()
                }),
            ),
            (
                "delete.retention.ms",
                (c.delete_retention_ms != d.delete_retention_ms)
                    .then(|| c.delete_retention_ms.to_string()),
            ),
            (
                "min.compaction.lag.ms",
                (c.min_compaction_lag_ms != d.min_compaction_lag_ms)
                    .then(|| c.min_compaction_lag_ms.to_string()),
            ),
            (
                "max.compaction.lag.ms",
                (c.max_compaction_lag_ms != d.max_compaction_lag_ms)
                    .then(|| c.max_compaction_lag_ms.to_string()),
            ),
        ] {
            if let Some(v) = value {
                out.push_str(&format!("{name}={v}\n"));
            }
        }
        out
    }

    /// Parses [`PartitionConfig::encode`]'s text (missing names keep their defaults).
    ///
    /// # Errors
    /// [`EngineError::Config`] for an unknown name or a bad value.
    pub fn decode(text: &str) -> Result<Self, EngineError> {
        let mut c = PartitionConfig::default();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (name, value) = line.split_once('=').ok_or(EngineError::Config {
                name: "partition.config",
                reason: format!("line {line:?} is not name=value"),
            })?;
            let bad = |name: &'static str| EngineError::Config {
                name,
                reason: format!("bad value {value:?}"),
            };
            match name {
                "segment.bytes" => {
                    c.segment_bytes = value.parse().map_err(|_| bad("segment.bytes"))?
                }
                "index.interval.bytes" => {
                    c.index_interval_bytes =
                        value.parse().map_err(|_| bad("index.interval.bytes"))?;
                }
                "segment.index.bytes" => {
                    c.segment_index_bytes =
                        value.parse().map_err(|_| bad("segment.index.bytes"))?;
                }
                "max.message.bytes" => {
                    c.max_message_bytes = value.parse().map_err(|_| bad("max.message.bytes"))?;
                }
                "producer.id.expiration.ms" => {
                    c.producer_id_expiration_ms = value
                        .parse()
                        .map_err(|_| bad("producer.id.expiration.ms"))?;
                }
                "append.buffer.bytes" => {
                    c.append_buffer_bytes =
                        value.parse().map_err(|_| bad("append.buffer.bytes"))?;
                }
                "preallocate.step.bytes" => {
                    c.preallocate_step_bytes =
                        value.parse().map_err(|_| bad("preallocate.step.bytes"))?;
                }
                "segment.ms" => c.segment_ms = Some(value.parse().map_err(|_| bad("segment.ms"))?),
                "retention.bytes" => {
                    c.retention_bytes = Some(value.parse().map_err(|_| bad("retention.bytes"))?);
                }
                "retention.ms" => {
                    c.retention_ms = Some(value.parse().map_err(|_| bad("retention.ms"))?);
                }
                "message.timestamp.before.max.ms" => {
                    c.message_timestamp_before_max_ms = Some(
                        value
                            .parse()
                            .map_err(|_| bad("message.timestamp.before.max.ms"))?,
                    );
                }
                "message.timestamp.after.max.ms" => {
                    c.message_timestamp_after_max_ms = Some(
                        value
                            .parse()
                            .map_err(|_| bad("message.timestamp.after.max.ms"))?,
                    );
                }
                "cleanup.policy" => {
                    c.compaction.policy =
                        CleanupPolicy::parse(value).ok_or_else(|| bad("cleanup.policy"))?;
                }
                "min.cleanable.dirty.ratio" => {
                    c.compaction.min_cleanable_dirty_ratio_ppm =
                        dirty_ratio_ppm(value).ok_or_else(|| bad("min.cleanable.dirty.ratio"))?;
                }
                "delete.retention.ms" => {
                    c.compaction.delete_retention_ms =
                        value.parse().map_err(|_| bad("delete.retention.ms"))?;
                }
                "min.compaction.lag.ms" => {
                    c.compaction.min_compaction_lag_ms =
                        value.parse().map_err(|_| bad("min.compaction.lag.ms"))?;
                }
                "max.compaction.lag.ms" => {
                    c.compaction.max_compaction_lag_ms =
                        value.parse().map_err(|_| bad("max.compaction.lag.ms"))?;
                }
                _ => {
                    return Err(EngineError::Config {
                        name: "partition.config",
                        reason: format!("unknown setting {name:?}"),
                    })
                }
            }
        }
        c.validate()?;
        Ok(c)
    }
}
