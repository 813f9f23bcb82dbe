//! The vocabulary of the public API: partition names, per-partition configuration (Kafka's
//! names), request and result types, and the error every call returns.

use crate::format::Offset;
use crate::io::IoError;
use crate::log::{LogConfig, LogError};
use crate::producer_state::ProducerStateConfig;
use crate::segment::SegmentConfig;
use std::fmt;

/// A topic partition; its directory is `<data_dir>/<topic>-<partition>` as in Kafka.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name (Kafka's rules: 1–249 of `[a-zA-Z0-9._-]`).
    pub topic: String,
    /// Partition number (≥ 0).
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`-`partition`.
    #[must_use]
    pub fn new(topic: &str, partition: i32) -> Self {
        TopicPartition {
            topic: topic.to_string(),
            partition,
        }
    }

    /// The directory name, `topic-partition`.
    #[must_use]
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    /// Parses a directory name back (`a-b-3` is topic `a-b`, partition 3).
    #[must_use]
    pub fn from_dir_name(name: &str) -> Option<Self> {
        let (topic, partition) = name.rsplit_once('-')?;
        let partition = partition.parse().ok().filter(|&p: &i32| p >= 0)?;
        let tp = TopicPartition::new(topic, partition);
        tp.validate().ok()?;
        Some(tp)
    }

    /// Checks Kafka's topic-name rules and a non-negative partition.
    ///
    /// # Errors
    /// [`EngineError::InvalidPartition`].
    pub fn validate(&self) -> Result<(), EngineError> {
        let ok_name = !self.topic.is_empty()
            && self.topic.len() <= 249
            && self.topic != "."
            && self.topic != ".."
            && self
                .topic
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
        if ok_name && self.partition >= 0 {
            Ok(())
        } else {
            Err(EngineError::InvalidPartition(self.clone()))
        }
    }

    /// Stable placement hash (FNV-1a over the directory name): the same partition lands on
    /// the same shard in every run with the same shard count.
    #[must_use]
    pub fn placement_hash(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.dir_name().bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Kafka's default `max.message.bytes` (1 MiB plus the batch overhead).
pub const MAX_MESSAGE_BYTES_DEFAULT: usize = 1_048_588;

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
    /// `producer.id.expiration.ms` (default 1 day).
    pub producer_id_expiration_ms: i64,
    /// Append buffer per partition: the most bytes accumulated between commit rounds (at
    /// least `max.message.bytes`).
    pub append_buffer_bytes: usize,
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
            producer_id_expiration_ms: ProducerStateConfig::default().producer_id_expiration_ms,
            append_buffer_bytes: 2 << 20,
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
            },
            producer: ProducerStateConfig {
                producer_id_expiration_ms: self.producer_id_expiration_ms,
            },
            retention_bytes: self.retention_bytes,
            retention_ms: self.retention_ms,
            segment_ms: self.segment_ms,
            segment_index_bytes: Some(self.segment_index_bytes),
        }
    }

    /// `name=value` lines with Kafka's names (unset options are omitted).
    #[must_use]
    pub fn encode(&self) -> String {
        let mut out = format!(
            "segment.bytes={}\nindex.interval.bytes={}\nsegment.index.bytes={}\nmax.message.bytes={}\nproducer.id.expiration.ms={}\nappend.buffer.bytes={}\n",
            self.segment_bytes,
            self.index_interval_bytes,
            self.segment_index_bytes,
            self.max_message_bytes,
            self.producer_id_expiration_ms,
            self.append_buffer_bytes
        );
        for (name, value) in [
            ("segment.ms", self.segment_ms.map(|v| v.to_string())),
            (
                "retention.bytes",
                self.retention_bytes.map(|v| v.to_string()),
            ),
            ("retention.ms", self.retention_ms.map(|v| v.to_string())),
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
                "segment.ms" => c.segment_ms = Some(value.parse().map_err(|_| bad("segment.ms"))?),
                "retention.bytes" => {
                    c.retention_bytes = Some(value.parse().map_err(|_| bad("retention.bytes"))?);
                }
                "retention.ms" => {
                    c.retention_ms = Some(value.parse().map_err(|_| bad("retention.ms"))?);
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

/// A read: whole batches from `offset`, at least one, then up to `max_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest {
    /// First offset wanted.
    pub offset: Offset,
    /// Soft size limit.
    pub max_bytes: usize,
    /// Up to the high watermark, or the last stable offset.
    pub isolation: crate::log::Isolation,
}

/// What `state` reports of a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// First readable offset.
    pub log_start: Offset,
    /// Highest offset readers see (the durable end unless set by the broker).
    pub high_watermark: Offset,
    /// Last stable offset.
    pub last_stable_offset: Offset,
    /// Offset after the last appended batch.
    pub log_end: Offset,
    /// Offset after the last durable batch.
    pub durable_end: Offset,
    /// Producers tracked.
    pub producer_count: usize,
    /// Local, Mirroring, Paused or Failed.
    pub mode: crate::log::Mode,
}

/// Every error of the public API. `#[non_exhaustive]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The partition's log refused or failed (the cause says which and where).
    #[error("partition {partition}: {source}")]
    Log {
        /// The partition.
        partition: TopicPartition,
        /// What the log said.
        source: LogError,
    },
    /// No such partition on this engine.
    #[error("partition {0} does not exist")]
    UnknownPartition(TopicPartition),
    /// `create_partition` for one that exists.
    #[error("partition {0} exists already")]
    PartitionExists(TopicPartition),
    /// A topic name outside Kafka's rules, or a negative partition.
    #[error("invalid partition name {0}")]
    InvalidPartition(TopicPartition),
    /// The partition failed at open (e.g. corruption found by recovery) and is not served.
    #[error("partition {partition} failed at open: {source}")]
    Failed {
        /// The partition.
        partition: TopicPartition,
        /// Why.
        source: LogError,
    },
    /// A batch over `max.message.bytes`.
    #[error("partition {partition}: a {bytes}-byte batch exceeds max.message.bytes = {limit}")]
    MessageTooLarge {
        /// The partition.
        partition: TopicPartition,
        /// The batch's size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A setting out of range.
    #[error("invalid configuration {name}: {reason}")]
    Config {
        /// Kafka's name of the setting.
        name: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// An I/O failure outside any partition (the data directory, a shard's ring).
    #[error("I/O: {0}")]
    Io(#[from] IoError),
    /// The shard serving the partition stopped (the engine is closed or the shard failed).
    #[error("shard {0} stopped")]
    ShardStopped(usize),
    /// Another engine (in this or another process) has the data directory open.
    #[error("data directory {} is in use by another engine (its .lock is held)", .0.display())]
    DataDirLocked(std::path::PathBuf),
}

impl EngineError {
    /// Whether the device is full (ENOSPC), wherever it was met: a partition's append or roll,
    /// or the data directory itself. Nothing acknowledged is affected and the partition is not
    /// poisoned: the call can be retried once space is freed.
    #[must_use]
    pub fn is_disk_full(&self) -> bool {
        matches!(
            self,
            EngineError::Log {
                source: LogError::DiskFull,
                ..
            } | EngineError::Io(IoError::NoSpace { .. })
        )
    }
}
