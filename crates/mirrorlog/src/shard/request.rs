//! What a shard is asked to do: one request per call of the public API, each carrying the
//! promise its result goes back through.

use super::{Promise, ShardStats};
use crate::api::{EngineError, PartitionConfig, PartitionState, ReadRequest, TopicPartition};
use crate::format::Offset;
use crate::log::{
    EpochEndOffset, Isolation, MirrorStart, OffsetSpec, OpenTransactions, ReadResult, StopOutcome,
    TimestampOffset,
};
use crate::producer_state::{Origin, ProducerEntry};

/// A result on its way back to a caller.
pub type Reply<T> = Promise<Result<T, EngineError>>;

/// Per partition of an `Open` request: opened, or why not.
pub type OpenResults = Vec<(TopicPartition, Result<(), EngineError>)>;

/// A request to a shard.
#[derive(Debug)]
#[non_exhaustive]
pub enum Request {
    /// Open (recover if needed) the partitions in these directories.
    Open {
        /// The partitions.
        partitions: Vec<TopicPartition>,
        /// Per partition: opened, or why not (it is then served as Failed).
        reply: Reply<OpenResults>,
    },
    /// Create an empty partition.
    Create {
        /// The partition.
        tp: TopicPartition,
        /// Its settings.
        config: PartitionConfig,
        /// Done.
        reply: Reply<()>,
    },
    /// Clean (compact) the partition now, whole, whatever its dirty ratio.
    Clean {
        /// The partition.
        tp: TopicPartition,
        /// The pass's stats, or `None` when nothing was cleanable.
        reply: Reply<Option<crate::log::CleanStats>>,
    },
    /// Change the partition's settings live (validated, then kept in `partition.config`).
    UpdateConfig {
        /// The partition.
        tp: TopicPartition,
        /// The new settings.
        config: crate::api::PartitionConfig,
        /// Done.
        reply: Reply<()>,
    },
    /// Close and delete a partition with its directory.
    Delete {
        /// The partition.
        tp: TopicPartition,
        /// Done.
        reply: Reply<()>,
    },
    /// Append batches; answered when durable.
    Append {
        /// The partition.
        tp: TopicPartition,
        /// Whole batches.
        batches: bytes::Bytes,
        /// Who sends them.
        origin: Origin,
        /// The log end the append must find at least (a pipelined writer's appends before it
        /// landed), or no condition.
        follows: Option<Offset>,
        /// Offsets once durable.
        reply: super::AppendReply,
    },
    /// Appends to many partitions of this shard (`Engine::append_many`), each as an `Append`
    /// in order; answered once, when every one is durable or refused.
    AppendMany {
        /// The partitions' batches, each with its `follows`.
        appends: Vec<crate::api::PartitionAppend>,
        /// Who sends them.
        origin: Origin,
        /// Every partition's result, in `appends`' order.
        reply: Reply<Vec<super::PartResult>>,
    },
    /// Read whole batches.
    Read {
        /// The partition.
        tp: TopicPartition,
        /// What.
        request: ReadRequest,
        /// The batches with the read's offsets.
        reply: super::ReadReply,
    },
    /// Reads of many partitions of this shard (`Engine::read_many`), each as a `Read`;
    /// answered once, when every one is.
    ReadMany {
        /// Each partition and what to read of it.
        reads: Vec<(TopicPartition, ReadRequest)>,
        /// Every read's result, in `reads`' order.
        reply: Reply<Vec<Result<ReadResult, EngineError>>>,
    },
    /// Long-poll reads of many partitions of this shard (`Engine::wait_any`), each as a
    /// `Read`; answered by the first one answered, with its position in `reads`.
    WaitAny {
        /// Each partition and what to read of it (a `max_wait` to park).
        reads: Vec<(TopicPartition, ReadRequest)>,
        /// The position of the first read answered.
        reply: Reply<usize>,
    },
    /// Offsets and counts.
    State {
        /// The partition.
        tp: TopicPartition,
        /// The state.
        reply: Reply<PartitionState>,
    },
    /// The producer entries.
    Producers {
        /// The partition.
        tp: TopicPartition,
        /// A snapshot of the entries.
        reply: Reply<Vec<ProducerEntry>>,
    },
    /// Remove everything from `offset` on (durable when answered).
    TruncateTo {
        /// The partition.
        tp: TopicPartition,
        /// First offset removed.
        offset: Offset,
        /// The new log end.
        reply: Reply<Offset>,
    },
    /// Move the log start to `before` (durable when answered).
    DeleteRecords {
        /// The partition.
        tp: TopicPartition,
        /// The new log start.
        before: Offset,
        /// The log start.
        reply: Reply<Offset>,
    },
    /// Let the broker manage the high watermark.
    SetHighWatermark {
        /// The partition.
        tp: TopicPartition,
        /// The high watermark.
        offset: Offset,
        /// Done.
        reply: Reply<()>,
    },
    /// Start mirroring from `source` after truncating to `start`.
    StartMirroring {
        /// The partition.
        tp: TopicPartition,
        /// The source (cluster / partition name, recorded in the mode history).
        source: String,
        /// Where to truncate first.
        start: MirrorStart,
        /// The log end mirroring continues from.
        reply: Reply<Offset>,
    },
    /// Stop mirroring (failover); durable when answered.
    StopMirroring {
        /// The partition.
        tp: TopicPartition,
        /// The leader epoch this cluster writes from now on.
        leader_epoch: i32,
        /// Open transactions: ABORT markers or truncation to the LSO.
        open_transactions: OpenTransactions,
        /// What was done.
        reply: Reply<StopOutcome>,
    },
    /// Suspend (`pause: true`) or resume mirroring.
    PauseMirroring {
        /// The partition.
        tp: TopicPartition,
        /// Pause or resume.
        pause: bool,
        /// Done.
        reply: Reply<()>,
    },
    /// Realign a mirroring partition past its log end (the source's log start moved past it).
    RealignMirror {
        /// The partition.
        tp: TopicPartition,
        /// The new log start and end.
        at: Offset,
        /// The new log end.
        reply: Reply<Offset>,
    },
    /// ListOffsets.
    OffsetForTimestamp {
        /// The partition.
        tp: TopicPartition,
        /// What is asked.
        spec: OffsetSpec,
        /// Up to the high watermark, or the last stable offset.
        isolation: Isolation,
        /// The offset found, if any.
        reply: Reply<Option<TimestampOffset>>,
    },
    /// OffsetsForLeaderEpoch.
    EpochEndOffset {
        /// The partition.
        tp: TopicPartition,
        /// The epoch asked.
        epoch: i32,
        /// Its end.
        reply: Reply<EpochEndOffset>,
    },
    /// The leader epoch stamped into client and coordinator appends from now on.
    SetLeaderEpoch {
        /// The partition.
        tp: TopicPartition,
        /// The epoch.
        epoch: i32,
        /// Done.
        reply: Reply<()>,
    },
    /// The engine's timer: run the periodic work that is due (producer expiration, retention).
    Tick,
    /// Test hook: the shard stops as a fatal ring failure stops it (everything waiting is
    /// answered `ShardStopped`, the thread ends with the error), for the supervision tests of
    /// embedders ([`crate::engine::Engine::dead_shards`]).
    Halt,
    /// Counters and latency histograms.
    Stats {
        /// The snapshot.
        reply: Reply<ShardStats>,
    },
    /// Replay the journals into the segments and start the shard's journal: this shard's own
    /// and `orphans` (journals of shards the engine no longer runs). Done before any
    /// partition of the data directory opens; an `Open` or `Create` does it first if nothing
    /// asked (a shard driven on its own, with no orphans then).
    StartJournal {
        /// Journal files of shards the engine no longer runs, replayed here and deleted.
        orphans: Vec<std::path::PathBuf>,
        /// What the replay did.
        reply: Reply<super::JournalReplay>,
    },
    /// Clean shutdown of every partition; the shard stops after answering.
    Close {
        /// Per partition failures, if any.
        reply: Reply<Vec<(TopicPartition, EngineError)>>,
    },
}
