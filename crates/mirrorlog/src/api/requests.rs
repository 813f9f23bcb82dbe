//! The arguments and reports of the engine's calls that are more than a value: a read, the
//! partition state, and the mirroring start and stop.

use crate::format::Offset;
use crate::log::{MirrorStart, OpenTransactions};
use std::time::Duration;

/// A read: whole batches from `offset`, at least one (unless `min_one_batch` is off), then up
/// to `max_bytes`; with `min_bytes` and `max_wait`, a long-poll (Kafka's `fetch.min.bytes` and
/// `fetch.max.wait.ms`): the read resolves once `min_bytes` are readable past `offset`, woken
/// by the commit that made them durable, or when `max_wait` has passed, with what there is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest {
    /// First offset wanted.
    pub offset: Offset,
    /// Size limit: soft for the first batch (see `min_one_batch`), hard after it.
    pub max_bytes: usize,
    /// Up to the high watermark, the last stable offset, or the durable log end.
    pub isolation: crate::log::Isolation,
    /// Bytes that must be readable before the read resolves (0 or 1 with nothing readable:
    /// Kafka's default of 1 waits for one batch).
    pub min_bytes: usize,
    /// Longest wait for `min_bytes` (zero: answer at once).
    pub max_wait: Duration,
    /// Kafka's rule: a first batch larger than `max_bytes` is returned whole. Off: it is not
    /// (the read returns nothing), as for a fetch's later partitions.
    pub min_one_batch: bool,
}

impl ReadRequest {
    /// A read of up to `max_bytes` from `offset` at `isolation`, answered at once, at least one
    /// batch.
    #[must_use]
    pub fn new(offset: Offset, max_bytes: usize, isolation: crate::log::Isolation) -> Self {
        ReadRequest {
            offset,
            max_bytes,
            isolation,
            min_bytes: 0,
            max_wait: Duration::ZERO,
            min_one_batch: true,
        }
    }

    /// The same read as a long-poll: it resolves when `min_bytes` are readable or after
    /// `max_wait`.
    #[must_use]
    pub fn wait_for(mut self, min_bytes: usize, max_wait: Duration) -> Self {
        self.min_bytes = min_bytes;
        self.max_wait = max_wait;
        self
    }
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
    /// The leader epoch stamped into client and coordinator appends.
    pub leader_epoch: i32,
    /// The newest epoch the log holds (its epoch cache's last entry, mirrored batches'
    /// included); `None` for a log with no batches.
    pub latest_epoch: Option<i32>,
    /// Bytes of its log: the segments' data (Kafka's `Log.size`, what DescribeLogDirs and
    /// `retention.bytes` count).
    pub size_bytes: u64,
}

/// `start_mirroring`'s arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartMirroring {
    /// The source (recorded in the mode history), e.g. `"east/orders-0"`.
    pub source: String,
    /// Where the destination truncates before mirroring.
    pub truncate_to: MirrorStart,
}

/// `stop_mirroring`'s arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopMirroring {
    /// The leader epoch the destination writes from now on (bumped by the caller).
    pub leader_epoch: i32,
    /// What happens to transactions left open by the source.
    pub open_transactions: OpenTransactions,
}

/// One partition's part of [`Engine::append_many`](crate::engine::Engine::append_many): its
/// batches and, for a pipelined writer, the log end they must follow (as
/// [`Engine::append_following`](crate::engine::Engine::append_following)).
#[derive(Debug, Clone)]
pub struct PartitionAppend {
    /// The partition.
    pub tp: super::TopicPartition,
    /// Whole batches.
    pub batches: bytes::Bytes,
    /// The log end the append must find at least, or no condition.
    pub follows: Option<Offset>,
}

impl PartitionAppend {
    /// An append of `batches` to `tp`, with no condition.
    pub fn new(tp: super::TopicPartition, batches: impl Into<bytes::Bytes>) -> Self {
        PartitionAppend {
            tp,
            batches: batches.into(),
            follows: None,
        }
    }

    /// The same append, refused unless the log ends at `follows` or later when it is made.
    #[must_use]
    pub fn following(mut self, follows: Offset) -> Self {
        self.follows = Some(follows);
        self
    }
}
