//! [`EngineError`], the one error type of the public API, with the cause from the layer below.

use super::TopicPartition;
use crate::format::Offset;
use crate::io::IoError;
use crate::log::LogError;

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
    /// A batch over `max.message.bytes` (a client's), or over the append buffer or segment it
    /// must fit in whole (a mirrored one: the local `max.message.bytes` does not apply to it).
    #[error("partition {partition}: a {bytes}-byte batch exceeds the partition's limit of {limit} bytes (max.message.bytes for a client's batch; the append buffer, or the segment, a mirrored batch must fit in whole)")]
    MessageTooLarge {
        /// The partition.
        partition: TopicPartition,
        /// The batch's size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// An append that was to follow others (`Engine::append_following`)
    /// found the log ending before what they would have reached: one of them was refused, and
    /// this one would leave a hole where its records belong. Nothing was appended.
    #[error("partition {partition}: an append meant to follow offset {follows} found the log ending at {log_end} (an append before it did not land)")]
    AppendOutOfOrder {
        /// The partition.
        partition: TopicPartition,
        /// The log end the append needed at least.
        follows: Offset,
        /// The log end it found.
        log_end: Offset,
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
    /// The data directory belongs to another cluster (its `meta.properties` says so).
    #[error("data directory {} belongs to cluster {stored:?}, not {configured:?}", .data_dir.display())]
    ClusterIdMismatch {
        /// The data directory.
        data_dir: std::path::PathBuf,
        /// The cluster id stored there.
        stored: String,
        /// The engine's.
        configured: String,
    },
    /// A mirror stopped fetching the partition until the operator acts (its source sent a
    /// batch no source can have, or holds another log): the partition is still mirroring.
    #[error("partition {partition}: its mirror stalled: {reason}")]
    MirrorStalled {
        /// The partition.
        partition: TopicPartition,
        /// Why.
        reason: String,
    },
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
