//! The arguments and reports of the engine's calls that are more than a value: a read, the
//! partition state, and the mirroring start and stop.

use crate::format::Offset;
use crate::log::{MirrorStart, OpenTransactions};

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
