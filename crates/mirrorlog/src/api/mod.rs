//! The vocabulary of the public API: partition names, per-partition configuration (Kafka's
//! names), the arguments and results of the engine's calls, and the error every call returns.
//!
//! It sits below both the runtime (`shard`, `engine`) and the read-only `inspect` layer, so that
//! a tool reading a data directory shares these types without importing the runtime. The
//! result types that lower layers define (an append's offsets, a read's batches, modes, the
//! producer entries) are re-exported here: an embedder needs this module, [`crate::engine`] and
//! [`crate::format`], nothing else.

mod error;
mod partition_config;
mod requests;
mod topic_partition;

pub use crate::log::{CleanupPolicy, CompactionConfig};
pub use error::EngineError;
pub use partition_config::{
    dirty_ratio_ppm, PartitionConfig, APPEND_BUFFER_BYTES_MAX, DIRTY_RATIO_PPM_MAX,
    MAX_MESSAGE_BYTES_DEFAULT, PARTITION_CONFIG_FILE,
};
pub use requests::{PartitionAppend, PartitionState, ReadRequest, StartMirroring, StopMirroring};
pub use topic_partition::TopicPartition;

pub use crate::clock::{Clock, ManualClock, WallClock};
pub use crate::format::Offset;
pub use crate::io::IoError;
pub use crate::log::{
    AppendOutcome, EpochEndOffset, Isolation, LogError, MirrorStart, Mode, OffsetSpec,
    OpenTransactions, ReadResult, StopOutcome, TimestampOffset,
};
/// A global allocator for processes that decode hostile bytes: a reservation past what the
/// machine can hold fails as an allocation error instead of aborting (`mem/reserve_alloc.rs`).
pub use crate::mem::ReserveOnlyAlloc;
pub use crate::producer_state::{AbortedTxn, Origin, ProducerEntry, ProducerStateError};
pub use crate::segment::SegmentError;
