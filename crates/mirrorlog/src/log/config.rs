//! A partition log's settings, with Kafka's names and defaults.

use crate::producer_state::ProducerStateConfig;
use crate::segment::SegmentConfig;

/// Settings of a partition log (Kafka names where they exist).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`, `index.interval.bytes` and the append buffer.
    pub segment: SegmentConfig,
    /// `producer.id.expiration.ms`.
    pub producer: ProducerStateConfig,
    /// `retention.bytes`: delete the oldest sealed segments while the log is larger.
    pub retention_bytes: Option<u64>,
    /// `retention.ms`: delete sealed segments whose newest record is older.
    pub retention_ms: Option<i64>,
    /// `segment.ms`: roll when a batch is this much newer than the segment's first batch
    /// (Kafka measures from record timestamps the same way).
    pub segment_ms: Option<i64>,
    /// `segment.index.bytes`: roll when the offset index would outgrow it (Kafka's default
    /// 10 MiB when `None`).
    pub segment_index_bytes: Option<u64>,
    /// `max.message.bytes`: the largest batch a client may append (the engine checks it); the
    /// log bounds what it decompresses of one batch by it ([`DECOMPRESSION_RATIO_MAX`]).
    pub max_message_bytes: usize,
    /// `message.timestamp.before.max.ms`: client records older than now minus this are refused.
    pub timestamp_before_max_ms: Option<i64>,
    /// `message.timestamp.after.max.ms`: client records newer than now plus this are refused.
    pub timestamp_after_max_ms: Option<i64>,
    /// `cleanup.policy` and the compaction settings (`clean/`).
    pub compaction: CompactionConfig,
}

/// Kafka's `cleanup.policy`: `delete`, `compact`, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// `delete`: `retention.ms` and `retention.bytes` delete old segments.
    pub delete: bool,
    /// `compact`: the cleaner keeps the latest record of each key (`clean/`).
    pub compact: bool,
}

impl CleanupPolicy {
    /// `delete`, Kafka's default.
    pub const DELETE: CleanupPolicy = CleanupPolicy {
        delete: true,
        compact: false,
    };
    /// `compact`.
    pub const COMPACT: CleanupPolicy = CleanupPolicy {
        delete: false,
        compact: true,
    };
    /// `compact,delete`.
    pub const COMPACT_DELETE: CleanupPolicy = CleanupPolicy {
        delete: true,
        compact: true,
    };

    /// Parses Kafka's list (`delete`, `compact`, `compact,delete` in any order, spaces allowed).
    /// `None` for an empty list or an unknown policy.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let mut policy = CleanupPolicy {
            delete: false,
            compact: false,
        };
        for item in text.split(',').map(str::trim) {
            match item {
                "delete" => policy.delete = true,
                "compact" => policy.compact = true,
                _ => return None,
            }
        }
        (policy.delete || policy.compact).then_some(policy)
    }
}

impl std::fmt::Display for CleanupPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match (self.compact, self.delete) {
            (true, true) => "compact,delete",
            (true, false) => "compact",
            _ => "delete",
        })
    }
}

/// The settings of a compacted log, with Kafka's names and defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionConfig {
    /// `cleanup.policy`.
    pub policy: CleanupPolicy,
    /// `min.cleanable.dirty.ratio`, in millionths (Kafka's 0.5 is 500 000): a log is cleaned
    /// when its dirty bytes are more than this share of its cleanable bytes.
    pub min_cleanable_dirty_ratio_ppm: u32,
    /// `delete.retention.ms`: how long a tombstone (and an emptied transaction's marker) stays
    /// readable after the cleaner first passes it (its KIP-534 delete horizon).
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: a segment whose newest record is younger stays uncleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty segment whose first batch is older than this is
    /// cleaned whatever the dirty ratio.
    pub max_compaction_lag_ms: i64,
}

impl CompactionConfig {
    /// Kafka's defaults: `cleanup.policy=delete`, `min.cleanable.dirty.ratio=0.5`,
    /// `delete.retention.ms` one day, no minimum lag, no maximum lag.
    pub const DEFAULT: CompactionConfig = CompactionConfig {
        policy: CleanupPolicy::DELETE,
        min_cleanable_dirty_ratio_ppm: 500_000,
        delete_retention_ms: 86_400_000,
        min_compaction_lag_ms: 0,
        max_compaction_lag_ms: i64::MAX,
    };
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment: SegmentConfig::default(),
            producer: ProducerStateConfig::default(),
            retention_bytes: None,
            retention_ms: None,
            segment_ms: None,
            segment_index_bytes: None,
            max_message_bytes: MAX_MESSAGE_BYTES_DEFAULT,
            timestamp_before_max_ms: None,
            timestamp_after_max_ms: None,
            compaction: CompactionConfig::default(),
        }
    }
}

/// Kafka's default `max.message.bytes` (1 MiB plus the batch overhead).
pub const MAX_MESSAGE_BYTES_DEFAULT: usize = 1_048_588;

/// How many times `max.message.bytes` the log decompresses of one batch, at most, to look
/// inside it (ListOffsets by timestamp). A batch's compressed size is bounded by
/// `max.message.bytes`, but producers size batches by their compressed estimate, so a
/// compressible batch legitimately decompresses to several times that; a zip bomb (gigabytes
/// from kilobytes) stops here. Past it a lookup answers at the batch's granularity.
pub const DECOMPRESSION_RATIO_MAX: usize = 64;

impl LogConfig {
    /// The rules a client's batches are checked by at `now_ms` (`None`: no clock, so no
    /// timestamp bound): Kafka's `LogValidator`, with this log's bounds.
    #[must_use]
    pub fn client_rules(&self, now_ms: Option<i64>) -> crate::format::ClientRules {
        let timestamps = now_ms
            .filter(|_| {
                self.timestamp_before_max_ms.is_some() || self.timestamp_after_max_ms.is_some()
            })
            .map(|now| {
                let before = self.timestamp_before_max_ms.unwrap_or(i64::MAX);
                let after = self.timestamp_after_max_ms.unwrap_or(i64::MAX);
                (now.saturating_sub(before), now.saturating_add(after))
            });
        crate::format::ClientRules {
            decompressed_bytes_max: self.decompressed_bytes_max(),
            timestamps,
        }
    }

    /// The most bytes one batch may decompress to here: `max.message.bytes` times
    /// [`DECOMPRESSION_RATIO_MAX`].
    #[must_use]
    pub fn decompressed_bytes_max(&self) -> usize {
        self.max_message_bytes
            .saturating_mul(DECOMPRESSION_RATIO_MAX)
    }
}

/// Kafka's default `segment.index.bytes`.
pub const SEGMENT_INDEX_BYTES_DEFAULT: u64 = 10 << 20;

impl super::PartitionLog {
    /// The log's settings.
    #[must_use]
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Replaces the log's settings live. Retention, compaction, `max.message.bytes`,
    /// `segment.ms`, `segment.index.bytes` and producer expiration act from the next call on;
    /// the segment sizes (`segment`) from the next segment on: the active one keeps those it
    /// was created with.
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
        self.psm.set_config(config.producer);
    }
}
