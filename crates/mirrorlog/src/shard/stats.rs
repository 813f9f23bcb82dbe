//! The counters and latency histograms a shard keeps, per shard and per partition.

use crate::api::TopicPartition;
use hdrhistogram::Histogram;

/// Counters of one partition.
#[derive(Debug, Clone)]
pub struct PartitionStats {
    /// The partition.
    pub partition: TopicPartition,
    /// Appends acknowledged.
    pub appends: u64,
    /// Bytes of those appends.
    pub append_bytes: u64,
    /// Commit rounds completed (one fdatasync each).
    pub commit_rounds: u64,
    /// Appends waiting for durability.
    pub appends_waiting: usize,
    /// Request-to-acknowledgement latency of appends, in microseconds (two significant
    /// digits, grown to the largest value recorded: a partition's counters stay small).
    pub append_latency_us: Histogram<u64>,
}

/// A snapshot of one shard's counters.
#[derive(Debug, Clone)]
pub struct ShardStats {
    /// Which shard.
    pub shard: usize,
    /// Appends acknowledged.
    pub appends: u64,
    /// Bytes appended.
    pub append_bytes: u64,
    /// Commit rounds completed.
    pub commit_rounds: u64,
    /// fdatasyncs issued: one per journal flush (however many partitions it makes durable),
    /// one per ordinary round (a partition's own file: a checkpoint, a large round, a round
    /// the journal could not take).
    pub fdatasyncs: u64,
    /// Rounds that went into the journal.
    pub journal_rounds: u64,
    /// Journal flushes (each one fdatasync of the journal file).
    pub journal_flushes: u64,
    /// Writes of an idle partition's deferred pages (full pages journal rounds left in its
    /// buffer), so that it can hand the buffer back.
    pub page_writes: u64,
    /// Times the journal passed half full and partitions were asked to checkpoint.
    pub journal_checkpoint_waves: u64,
    /// Filesystem-wide syncs that made a wave's checkpoints durable (each counts in
    /// `fdatasyncs` too).
    pub journal_syncs: u64,
    /// Bytes written into the journal.
    pub journal_bytes_written: u64,
    /// Bytes the shard wrote to its files, all of them (segments, commit records, indexes,
    /// the journal): ÷ `append_bytes` is the write amplification.
    pub device_bytes_written: u64,
    /// Turns of the loop.
    pub loop_turns: u64,
    /// Turns whose appends looked ahead (their producers' slots prefetched first).
    pub lookahead_turns: u64,
    /// Times the start of ready rounds paused because the ring had no room for another.
    pub rounds_waiting_for_room: u64,
    /// Bytes of idle buffers in the shard's pool when the snapshot was taken.
    pub idle_buffer_bytes: usize,
    /// Appends that waited for an append buffer (`append_buffers_max` partitions held one).
    pub appends_waiting_for_buffer: u64,
    /// Partitions holding an append buffer when the snapshot was taken.
    pub partitions_holding_buffers: usize,
    /// Requests waiting in the queue when the snapshot was taken.
    pub queue_depth: usize,
    /// Long-poll reads that had to wait for bytes.
    pub reads_parked: u64,
    /// Parked reads let go because their caller dropped the call (`Call`'s cancel safety).
    pub reads_cancelled: u64,
    /// Reads parked when the snapshot was taken.
    pub parked_reads: usize,
    /// Reads submitted to the device (recovery, opens and reads past the tail cache).
    pub device_reads: u64,
    /// Reads answered from the tail cache.
    pub tail_cache_hits: u64,
    /// Bytes the tail cache holds.
    pub tail_cache_bytes: usize,
    /// Bytes the read-ahead windows hold (read or being read).
    pub read_ahead_bytes: usize,
    /// Sealed-segment answers gathered across two read-ahead chunks (the only ones copied).
    pub read_ahead_seam_copies: u64,
    /// The log cleaner's work (`cleaner.rs`).
    pub cleaner: super::CleanerCounters,
    /// Append latency over the shard, microseconds.
    pub append_latency_us: Histogram<u64>,
    /// Journal flushes from their start (the blocks' writes and the fdatasync submitted) to
    /// their completion, microseconds.
    pub journal_flush_latency_us: Histogram<u64>,
    /// Per partition.
    pub partitions: Vec<PartitionStats>,
}

/// A partition's latency histogram: two significant digits, auto-resizing from nothing, so
/// that thousands of idle partitions do not each hold ~150 KiB of empty counts (measured by the
/// `partitions` workload).
pub(super) fn partition_histogram() -> Histogram<u64> {
    Histogram::new(2).unwrap_or_else(|_| unreachable!())
}

pub(super) fn histogram() -> Histogram<u64> {
    // 1 µs .. 100 s at 3 significant digits; the bounds are constants, so this cannot fail.
    Histogram::new_with_bounds(1, 100_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}
