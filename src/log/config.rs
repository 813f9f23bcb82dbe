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
