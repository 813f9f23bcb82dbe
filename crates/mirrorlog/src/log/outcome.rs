//! What the partition log's calls return: read isolation, an append's offsets, a read's batches
//! and positions.

use crate::format::Offset;
use crate::producer_state::AbortedTxn;

/// How far a read may go (Kafka's `FetchIsolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Up to the high watermark (consumers at `read_uncommitted`).
    ReadUncommitted,
    /// Up to the last stable offset, with the aborted transactions of the range (consumers at
    /// `read_committed`).
    ReadCommitted,
    /// Up to the durable log end, past the high watermark (Kafka's `FetchLogEnd`: the followers
    /// of a broker that replicates).
    LogEnd,
}

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    /// First offset of the append (of the original batch for a duplicate).
    pub first_offset: Offset,
    /// Last offset.
    pub last_offset: Offset,
    /// A client retry of a batch already in the log: nothing was written.
    pub duplicate: bool,
}

/// What a read returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// Whole batches, starting with the one containing the requested offset (shared: a clone
    /// or a slice copies nothing).
    pub records: bytes::Bytes,
    /// High watermark.
    pub high_watermark: Offset,
    /// Last stable offset.
    pub last_stable_offset: Offset,
    /// Log start offset.
    pub log_start_offset: Offset,
    /// For `ReadCommitted`: aborted transactions overlapping the returned range.
    pub aborted: Vec<AbortedTxn>,
    /// Durable bytes after the returned batches (a reader's lag in bytes; exact to the batch
    /// in the active segment, to the index entry in a sealed one).
    pub bytes_after: u64,
}
