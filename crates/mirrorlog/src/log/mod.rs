//! One partition log: segments, offsets per append origin, the producer state, rolling,
//! durable commits, reads, truncation, delete-records (log start checkpointed), retention,
//! `segment.ms` rolls and the leader-epoch checkpoint.
//!
//! Contract:
//! - `append` validates the whole request (format fast path for every batch, client rules for
//!   client appends, offsets for copied appends, producer rules via a staged PSM update) before
//!   anything is written; a rejected append changes nothing.
//! - Client and Coordinator appends get offsets from the log end and the current leader epoch
//!   stamped into the stored copy; Replication and Mirror appends keep every byte, start at or
//!   past the log end (a gap on the source) and increase.
//! - Appended data becomes durable with the next commit round ([`PartitionLog::commit`]); the
//!   high watermark defaults to the durable end, reads never go past it (nor past the last stable
//!   offset at `ReadCommitted`).
//! - A batch that does not fit the active segment rolls it: the segment is sealed (trimmed to
//!   Kafka's bytes, indexes written), the PSM snapshot is written atomically under the next
//!   offset's name, and a new segment starts.
//! - A failed write or fdatasync poisons the log: every later call returns that error.
//!
//! - `cleanup.policy=compact`: the cleaner (`clean/`) rewrites sealed segments below the first
//!   uncleanable offset by Kafka's rules, never while the partition mirrors; offsets never
//!   change. A compacted log takes client records only with a key.
//! - Modes: clients (and the coordinator) write only in Local; Mirror appends only in
//!   Mirroring, and a corrupt or non-contiguous mirrored batch moves the partition to Failed.
//!   The mode history (`mirror-checkpoint`) decides the barrier rule: a barrier clears the
//!   producer state iff its offset lies in a Local range — here and in recovery's replay alike.
//!
//! Files, one per lifecycle step: `open.rs` (create, open, assemble, close), `append.rs`,
//! `clean/` (compaction with Kafka's cleaner rules: see its docs),
//! `commit.rs` (rounds, journal rounds, poisoning), `roll.rs`, `read.rs`, `read_async.rs` (what
//! a shard needs to read sealed segments through the ring), `truncate.rs`, `retention.rs`
//! (delete-records, retention), `lookup.rs` (ListOffsets, OffsetsForLeaderEpoch),
//! `mirroring.rs` (start/pause/resume/stop, realign), `stop_intent.rs` (atomic stops across
//! power cuts), `align.rs` (Kafka's `truncateFullyAndStartAt`), `replay.rs` (producer state from
//! snapshot + replay), `mode_history.rs`, `epoch_cache.rs`, `high_watermark.rs`,
//! `recovery_point.rs`, `segment_gaps.rs`, `sealed.rs`, `intent.rs`, `dir_files.rs` (the
//! partition directory's small files), `config.rs`, `error.rs`, `outcome.rs`, `collected.rs`.

mod align;
mod append;
mod clean;
mod collected;
mod commit;
mod config;
mod dir_files;
mod epoch_cache;
mod error;
mod high_watermark;
mod intent;
mod lookup;
mod mirroring;
mod mode_history;
mod open;
mod outcome;
mod read;
mod read_async;
mod recovery_point;
mod replay;
mod retention;
mod roll;
mod sealed;
mod segment_gaps;
mod stop_intent;
mod truncate;

pub use align::START_AT_INTENT;
pub use clean::{
    finish_interrupted_clean, CleanPass, CleanProgress, CleanStats, Cleanable, OffsetMap,
    CLEANED_SUFFIX, CLEANER_OFFSET_CHECKPOINT, CLEAN_READ_CHUNK_BYTES, CLEAN_READ_CHUNK_BYTES_MIN,
    CLEAN_WRITE_CHUNK_BYTES, DEDUPE_BUFFER_BYTES_DEFAULT, DEDUPE_LOAD_FACTOR_PPM,
    DEDUPE_SLOT_BYTES, SWAP_SUFFIX,
};
pub(crate) use collected::Collected;
pub use config::{
    CleanupPolicy, CompactionConfig, LogConfig, DECOMPRESSION_RATIO_MAX, MAX_MESSAGE_BYTES_DEFAULT,
    SEGMENT_INDEX_BYTES_DEFAULT,
};
pub(crate) use dir_files::load_history;
use dir_files::{checkpointed_log_start, mode_of, remove_durably, unlink_if_present};
pub use dir_files::{
    mode_from_files, CLEAN_SHUTDOWN_MARKER, LOG_START_CHECKPOINT, MIRROR_MODE_FILE,
};
pub(crate) use dir_files::{read_if_present, remove_snapshots, tidy_partition_dir};
pub use epoch_cache::{CheckpointError, EpochCache, LEADER_EPOCH_CHECKPOINT};
use error::classify;
pub use error::LogError;
use high_watermark::load_high_watermark;
pub use high_watermark::HIGH_WATERMARK_CHECKPOINT;
pub(crate) use intent::{clear_intent, write_intent};
pub use intent::{finish_interrupted_reopen, SEGMENT_INTENT};
pub use lookup::{EpochEndOffset, OffsetSpec, TimestampOffset};
pub use mirroring::{MirrorStart, OpenTransactions, StopOutcome, MIRROR_SOURCE_BYTES_MAX};
pub use mode_history::{Mode, ModeHistory, ModeHistoryError, RangeKind, MIRROR_CHECKPOINT};
pub use outcome::{AppendOutcome, Isolation, ReadResult};
use read::read_direct;
pub use read_async::{FromBytes, ReadParams, SealedRead};
pub(crate) use recovery_point::load_recovery_point;
use recovery_point::write_recovery_point;
pub use recovery_point::{decode_recovery_point, RECOVERY_POINT_CHECKPOINT};
pub use replay::Replay;
use sealed::{encode_txn_index, end_and_indexes, Sealed};
pub use sealed::{open_trusted, TrustedSegment, SEALED_INDEXES_LOADED_MAX};
pub(crate) use segment_gaps::load_gaps;
pub use segment_gaps::{decode_gaps, encode_gaps, SEGMENT_GAPS};
use stop_intent::StopIntent;
pub use stop_intent::STOP_INTENT;

use crate::format::Offset;
use crate::io::{self, Io};
use crate::producer_state::{AbortedTxn, BatchInfo, ProducerStateManager};
use crate::segment::SegmentWriter;
use std::path::PathBuf;

/// See the module docs.
#[derive(Debug)]
pub struct PartitionLog {
    dir: PathBuf,
    config: LogConfig,
    sealed: Vec<Sealed>,
    active: SegmentWriter,
    psm: ProducerStateManager,
    /// The aborted transactions whose ABORT marker is in the active segment (a sealed
    /// segment's are its own: `sealed.rs`).
    aborted: Vec<AbortedTxn>,
    log_start: Offset,
    leader_epoch: i32,
    managed_high_watermark: Option<Offset>,
    /// The managed high watermark as last checkpointed (`high_watermark.rs`).
    high_watermark_checkpointed: Option<Offset>,
    poisoned: Option<LogError>,
    /// A roll sealed a segment but could not write all the files derived from it (indexes,
    /// `.txnindex`, snapshot; ENOSPC): the data is whole and readable, and `close` then leaves
    /// no clean-shutdown marker so that the next open rebuilds them.
    derived_incomplete: bool,
    infos: Vec<BatchInfo>,
    /// Per batch of the append being written: where it is in the request and what the log
    /// needs of its header.
    extents: Vec<Extent>,
    epochs: EpochCache,
    /// Local and mirrored ranges (the barrier rule), persisted in `mirror-checkpoint`.
    history: ModeHistory,
    mode: Mode,
    /// A stop that did not finish (a power cut, a failure): a retry reports its
    /// `last_mirrored_offset` (see `stop_intent.rs`).
    pending_stop: Option<StopIntent>,
    /// Base offsets of the segments that start past their predecessor's end on purpose, as
    /// `segment-gaps` records them (see `segment_gaps.rs`), sorted.
    gaps: Vec<Offset>,
    /// The recovery point as last written (see `recovery_point.rs`).
    recovery_point: Offset,
    /// Counts changes to the sealed segments (deletions, truncations, cleaning swaps): a
    /// cleaning pass stops when they change under it (`clean/`).
    segments_generation: u64,
}

#[derive(Debug, Clone, Copy)]
struct Extent {
    start: usize,
    len: usize,
    max_timestamp: i64,
    leader_epoch: i32,
}

impl PartitionLog {
    /// The producer state.
    #[must_use]
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.psm
    }

    /// Drops the producers with no open transaction whose last timestamp is at least
    /// `producer.id.expiration.ms` before `now_ms` (Kafka's `removeExpiredProducers`); their next
    /// batch is accepted as an unknown producer's. Returns how many were dropped.
    pub fn remove_expired_producers(&mut self, now_ms: i64) -> usize {
        self.psm.remove_expired(now_ms)
    }

    /// The offset after the last appended batch.
    #[must_use]
    pub fn log_end(&self) -> Offset {
        self.active.next_offset()
    }

    /// The offset after the last durable batch.
    #[must_use]
    pub fn durable_end(&self) -> Offset {
        self.active.durable().next_offset
    }

    /// The log start offset.
    #[must_use]
    pub fn log_start(&self) -> Offset {
        self.log_start
    }

    /// Base offsets of every segment, oldest first (the active one last).
    #[must_use]
    pub fn segment_base_offsets(&self) -> Vec<Offset> {
        let mut v: Vec<_> = self.sealed.iter().map(|s| s.base_offset).collect();
        v.push(self.active.base_offset());
        v
    }

    /// The leader epoch stamped into client and coordinator appends.
    #[must_use]
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// The newest epoch in the epoch cache (mirrored batches' epochs included).
    #[must_use]
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.latest_epoch()
    }

    /// Sets the leader epoch stamped into client and coordinator appends.
    pub fn set_leader_epoch(&mut self, epoch: i32) {
        self.leader_epoch = epoch;
    }

    /// High watermark: the durable end, or the value a replicating broker manages (never past
    /// the durable end, never below the log start: Kafka's `updateHighWatermark` bounds it the
    /// same way).
    #[must_use]
    pub fn high_watermark(&self) -> Offset {
        let durable = self.durable_end();
        self.managed_high_watermark.map_or(durable, |hw| {
            hw.min(durable).max(self.log_start.min(durable))
        })
    }

    /// Lets a broker doing its own replication manage the high watermark.
    pub fn set_high_watermark(&mut self, high_watermark: Offset) {
        self.managed_high_watermark = Some(high_watermark);
        self.debug_check_invariants();
    }

    /// Last stable offset: the first offset of the oldest open transaction, or the high
    /// watermark. Never below the log start (a transaction whose start was deleted by
    /// `delete_records` is unstable from the log start on, as Kafka clamps its first unstable
    /// offset).
    #[must_use]
    pub fn last_stable_offset(&self) -> Offset {
        let high_watermark = self.high_watermark();
        self.psm
            .last_stable_offset(high_watermark)
            .max(self.log_start.min(high_watermark))
    }

    /// Asserts the log's invariants (STYLE §4): `log start ≤ LSO ≤ HW ≤ durable end ≤ log end`;
    /// the log start inside the log (at or past the first segment's base); the segments in
    /// offset order, each starting where the previous one ends or, where `segment-gaps` records
    /// it, past that; and
    /// the active segment's own ([`SegmentWriter::check_invariants`]). Called after every
    /// mutation when debug assertions are on (tests, CI), and by tests directly. A poisoned log
    /// is not checked: it accepts nothing, and the failure may have stopped a change midway.
    ///
    /// # Panics
    /// When one does not hold: a bug in the log, never a property of its input.
    pub fn check_invariants(&self) {
        if self.poisoned.is_some() {
            return;
        }
        self.active.check_invariants();
        let (start, lso, hw) = (
            self.log_start,
            self.last_stable_offset(),
            self.high_watermark(),
        );
        let (durable, end) = (self.durable_end(), self.log_end());
        assert!(
            start <= lso && lso <= hw && hw <= durable && durable <= end,
            "{}: log start {start} ≤ LSO {lso} ≤ HW {hw} ≤ durable end {durable} ≤ log end {end} does not hold",
            self.dir.display()
        );
        let first_base = self
            .sealed
            .first()
            .map_or(self.active.base_offset(), |s| s.base_offset);
        assert!(
            first_base <= start,
            "{}: log start {start} below the first segment's base {first_base}",
            self.dir.display()
        );
        let mut next = first_base;
        let bases = self
            .sealed
            .iter()
            .map(|s| (s.base_offset, s.next_offset))
            .chain(std::iter::once((
                self.active.base_offset(),
                self.active.next_offset(),
            )));
        for (i, (base, end)) in bases.enumerate() {
            assert!(
                base <= end
                    && (base == next || (i > 0 && base > next && self.gaps.contains(&base))),
                "{}: segment [{base}, {end}) does not follow offset {next} (recorded gaps: {:?})",
                self.dir.display(),
                self.gaps
            );
            next = end;
        }
    }

    /// [`PartitionLog::check_invariants`] when debug assertions are on; nothing otherwise.
    #[inline]
    fn debug_check_invariants(&self) {
        if cfg!(debug_assertions) {
            self.check_invariants();
        }
    }

    /// The leader-epoch cache.
    #[must_use]
    pub fn epoch_cache(&self) -> &EpochCache {
        &self.epochs
    }

    /// End offset of leader epoch `epoch` (for `start_mirroring(EpochEnd(e))`).
    #[must_use]
    pub fn epoch_end_offset(&self, epoch: i32) -> Option<Offset> {
        self.epochs.end_offset(epoch, self.log_end())
    }

    fn write_epoch_checkpoint(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        let text = self.epochs.encode();
        io::write_file_atomically(io, &self.dir, LEADER_EPOCH_CHECKPOINT, text.as_bytes())
            .map_err(|e| self.poison(classify(e)))
    }
}
