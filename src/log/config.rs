//! A partition log's settings, with Kafka's names and defaults.

use crate::producer_state::ProducerStateConfig;
use crate::segment::SegmentConfig;

/// Settings of a partition log (Kafka names where they exist).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
}

/// Kafka's default `segment.index.bytes`.
pub const SEGMENT_INDEX_BYTES_DEFAULT: u64 = 10 << 20;
