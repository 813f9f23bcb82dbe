//! Log compaction (`cleanup.policy=compact`) with Kafka's cleaner semantics (`LogCleaner`,
//! `Cleaner`, `LogCleanerManager`): keep the newest record of each key, remove aborted
//! transactions' records, tombstones and emptied transactions' markers after their delete
//! horizon, never rewrite an offset.
//!
//! A *pass* ([`CleanPass`]) cleans one partition:
//! 1. **Plan** ([`PartitionLog::cleanable`], Kafka's `cleanableOffsets` and
//!    `calculateCleanableBytes`): the first dirty offset is the `cleaner-offset-checkpoint`
//!    (reset to the log start when it lies outside the log); nothing at or past the first
//!    uncleanable offset is cleaned — the active segment, the last stable offset (so the high
//!    watermark too) and any segment whose newest record is younger than
//!    `min.compaction.lag.ms`, rounded down to a segment base. A log is due when its dirty share
//!    of the cleanable bytes exceeds `min.cleanable.dirty.ratio`, or a dirty segment's first
//!    batch is older than `max.compaction.lag.ms`.
//! 2. **Map** the dirty section: each key's newest offset ([`OffsetMap`], bounded: when it is
//!    full the pass cleans up to where it got, and the next pass goes on from there). Batches of
//!    aborted transactions are not mapped.
//! 3. **Clean** every segment from the log's first up to the map's end, in groups whose total
//!    stays within `segment.bytes` (Kafka's `groupSegmentsBySize`). Each group becomes one
//!    segment named by its first base, written beside the old ones and swapped in (`swap.rs`).
//!    The rules per batch are `filter.rs`'s.
//! 4. The checkpoint moves to the map's end.
//!
//! Where this differs from Kafka, on purpose:
//! - The last batch of every cleaned segment is kept (emptied if nothing of it survives), not
//!   only the pass's last: this engine's segments end where the next begins (recovery refuses
//!   a segment starting past its predecessor's end unless `segment-gaps` records it), and the
//!   emptied header keeps that true. Consumers see no record of it.
//! - The checkpoint is kept per partition directory, in Kafka's format with one entry, as this
//!   engine keeps its recovery point.
//! - A partition that is Mirroring or Paused is never cleaned (design.md §Mirroring): the source's gaps are
//!   copied. A pass in progress stops when the partition leaves Local, or when its segments
//!   change under it (retention, delete-records, truncation): its output is removed.
//!
//! A pass works in steps ([`PartitionLog::clean_step`]) of a byte budget, so a shard cleans
//! between its other work; [`PartitionLog::clean`] runs a whole pass at once.
//!
//! Files, one per step of a pass: `plan.rs` (what is cleanable, whether it is due), `map.rs`
//! (the map phase and the groups), `rewrite.rs` (the rewrite phase, the swap of each group, the
//! checkpoint); and `offset_map.rs` (the dedupe map), `txn.rs` (transactions while walking),
//! `filter.rs` (the rules per batch), `stream.rs` (a whole pass's read-ahead), `swap.rs` (the
//! cleaned segment's writer, the swap and its recovery).

mod filter;
mod map;
mod offset_map;
mod plan;
mod rewrite;
mod stream;
mod swap;
mod txn;

pub use offset_map::{OffsetMap, DEDUPE_LOAD_FACTOR_PPM, DEDUPE_SLOT_BYTES};
pub use plan::Cleanable;
pub use swap::{finish_interrupted_clean, CLEANED_SUFFIX, CLEAN_WRITE_CHUNK_BYTES, SWAP_SUFFIX};

use super::{classify, LogError, Mode, PartitionLog};
use crate::format::{FormatError, Offset, BATCH_HEADER_SIZE_BYTES, LENGTH_POS, LOG_OVERHEAD_BYTES};
use crate::io::Io;
use filter::LastRecord;
use std::collections::HashMap;
use swap::CleanedSegment;
use txn::CleanedTransactions;

/// The cleaner's progress in a partition directory: the first dirty offset.
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";

/// Bytes a pass reads at once from a segment (a batch larger than this is read whole).
pub const CLEAN_READ_CHUNK_BYTES: usize = 1 << 20;

/// Fewest bytes a step reads at once (a batch larger than that is read whole).
pub const CLEAN_READ_CHUNK_BYTES_MIN: usize = 4096;

/// `log.cleaner.dedupe.buffer.size`'s default (Kafka's 128 MiB, shared by its cleaner threads).
pub const DEDUPE_BUFFER_BYTES_DEFAULT: usize = 128 << 20;

/// What a pass did (Kafka's `CleanerStats`).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct CleanStats {
    /// Bytes read while mapping keys.
    pub map_bytes_read: u64,
    /// Bytes read while cleaning.
    pub bytes_read: u64,
    /// Bytes the cleaned segments hold.
    pub bytes_written: u64,
    /// Records read while cleaning.
    pub records_read: u64,
    /// Records kept.
    pub records_kept: u64,
    /// Records without a key found in data batches (removed, as Kafka does).
    pub keyless_records: u64,
    /// Keys in the map.
    pub keys_mapped: u64,
    /// Segments replaced, and the segments that replaced them.
    pub segments_replaced: u64,
    /// Cleaned segments written.
    pub segments_written: u64,
    /// The dedupe map's size.
    pub map_memory_bytes: u64,
    /// The first offset the next pass starts from.
    pub end_offset: Offset,
}

/// How a step ended.
#[derive(Debug, Clone, PartialEq)]
pub enum CleanProgress {
    /// More to do: call [`PartitionLog::clean_step`] again.
    Working,
    /// The pass finished; the checkpoint is at `stats.end_offset`.
    Done(CleanStats),
    /// The partition changed under the pass (it left Local, or its segments changed): the
    /// pass stopped and removed its output; the next pass starts afresh.
    Abandoned,
}

#[derive(Debug)]
enum Phase {
    /// Mapping keys: the segment based at `base`, from byte `position`.
    Map {
        base: Offset,
        position: u64,
    },
    /// Cleaning group `group`: its segment number `segment` from byte `position`.
    Clean {
        group: usize,
        segment: usize,
        position: u64,
        out: Option<CleanedSegment>,
    },
    Done,
}

/// One pass over one partition (see the module docs). Holds the dedupe map.
#[derive(Debug)]
pub struct CleanPass {
    now_ms: i64,
    first_dirty: Offset,
    upper: Offset,
    generation: u64,
    map: OffsetMap,
    txn: CleanedTransactions,
    last_records: HashMap<i64, LastRecord>,
    groups: Vec<Vec<Offset>>,
    phase: Phase,
    stats: CleanStats,
    scratch: Vec<u8>,
    /// Bytes read at once: the step's budget, at most [`CLEAN_READ_CHUNK_BYTES`].
    chunk_bytes: usize,
    /// A whole pass reads ahead (`stream.rs`); a budgeted step reads in place.
    stream: Option<stream::SegmentStream>,
    read_ahead: bool,
}

impl CleanPass {
    /// The dedupe map, for the next pass.
    #[must_use]
    pub fn into_map(self) -> OffsetMap {
        self.map
    }

    /// What the pass did so far.
    #[must_use]
    pub fn stats(&self) -> &CleanStats {
        &self.stats
    }
}

impl PartitionLog {
    /// Starts a pass at `now_ms` if the partition is compacted, Local and due (or always with
    /// `force`, if it has anything cleanable), taking `map` (cleared) for it; else gives the map
    /// back.
    ///
    /// # Errors
    /// As [`PartitionLog::cleanable`].
    pub fn begin_clean(
        &mut self,
        io: &mut dyn Io,
        now_ms: i64,
        mut map: OffsetMap,
        force: bool,
    ) -> Result<Result<CleanPass, OffsetMap>, LogError> {
        self.check()?;
        if !self.config.compaction.policy.compact || !matches!(self.mode, Mode::Local) {
            return Ok(Err(map));
        }
        let plan = self.cleanable(io, now_ms)?;
        let due = if force {
            plan.cleanable_bytes > 0
        } else {
            plan.is_due(self.config.compaction.min_cleanable_dirty_ratio_ppm)
        };
        if !due || plan.first_uncleanable <= plan.first_dirty {
            return Ok(Err(map));
        }
        map.clear();
        let first = self
            .sealed
            .iter()
            .find(|s| s.next_offset > plan.first_dirty)
            .map_or(plan.first_uncleanable, |s| s.base_offset);
        let stats = CleanStats {
            map_memory_bytes: map.memory_bytes() as u64,
            ..CleanStats::default()
        };
        let mut pass = CleanPass {
            now_ms,
            first_dirty: plan.first_dirty,
            upper: plan.first_uncleanable,
            generation: self.segments_generation,
            map,
            txn: CleanedTransactions::default(),
            last_records: HashMap::new(),
            groups: Vec::new(),
            phase: Phase::Map {
                base: first,
                position: 0,
            },
            stats,
            scratch: Vec::new(),
            chunk_bytes: CLEAN_READ_CHUNK_BYTES,
            stream: None,
            read_ahead: false,
        };
        let aborted = self.aborted_between(io, plan.first_dirty, Offset(pass.upper.0 - 1))?;
        pass.txn.add_aborted(aborted);
        // The first dirty segment is read from the index entry at or below the first dirty
        // offset, as Kafka's `buildOffsetMapForSegment` starts.
        if let Some(i) = self.sealed.iter().position(|s| s.base_offset == first) {
            let interval = self.config.segment.index_interval_bytes;
            let position = self.sealed[i]
                .indexes(io, &self.dir, interval)?
                .lookup(plan.first_dirty);
            pass.phase = Phase::Map {
                base: first,
                position: u64::from(position),
            };
        }
        Ok(Ok(pass))
    }

    /// Runs a whole pass at `now_ms` if one is due (or, with `force`, if anything is
    /// cleanable). Returns its stats, or `None` when there was nothing to do or the pass was
    /// abandoned; the map is handed back either way.
    ///
    /// # Errors
    /// As [`PartitionLog::clean_step`].
    pub fn clean(
        &mut self,
        io: &mut dyn Io,
        now_ms: i64,
        map: OffsetMap,
        force: bool,
    ) -> (Result<Option<CleanStats>, LogError>, OffsetMap) {
        let mut pass = match self.begin_clean(io, now_ms, map, force) {
            Ok(Ok(pass)) => pass,
            Ok(Err(map)) => return (Ok(None), map),
            Err(e) => return (Err(e), OffsetMap::new(0)),
        };
        loop {
            match self.clean_step(io, &mut pass, usize::MAX) {
                Ok(CleanProgress::Working) => {}
                Ok(CleanProgress::Done(stats)) => return (Ok(Some(stats)), pass.into_map()),
                Ok(CleanProgress::Abandoned) => return (Ok(None), pass.into_map()),
                Err(e) => return (Err(e), pass.into_map()),
            }
        }
    }

    /// Stops `pass` and removes its output (a shard dropping a partition mid-pass).
    pub fn abandon_clean(&mut self, io: &mut dyn Io, pass: &mut CleanPass) {
        if let Phase::Clean { out, .. } = &mut pass.phase {
            if let Some(out) = out.take() {
                out.abandon(io, &self.dir);
            }
        }
        pass.phase = Phase::Done;
    }

    /// Works on `pass` until about `budget_bytes` were read (at least one batch), in reads of
    /// the budget (at most [`CLEAN_READ_CHUNK_BYTES`]).
    ///
    /// # Errors
    /// [`LogError::Corrupt`] for a damaged batch or one whose records cannot be read (the pass
    /// is over; the partition is otherwise unaffected), an I/O failure (one after the swap's
    /// commit point poisons the log: the next open finishes the swap).
    pub fn clean_step(
        &mut self,
        io: &mut dyn Io,
        pass: &mut CleanPass,
        budget_bytes: usize,
    ) -> Result<CleanProgress, LogError> {
        self.check()?;
        if pass.generation != self.segments_generation || !matches!(self.mode, Mode::Local) {
            self.abandon_clean(io, pass);
            return Ok(CleanProgress::Abandoned);
        }
        pass.chunk_bytes = budget_bytes.clamp(CLEAN_READ_CHUNK_BYTES_MIN, CLEAN_READ_CHUNK_BYTES);
        pass.read_ahead = budget_bytes == usize::MAX;
        let mut read = 0usize;
        while read < budget_bytes {
            let result = match pass.phase {
                Phase::Map { base, position } => self.map_chunk(io, pass, base, position),
                Phase::Clean { .. } => self.clean_chunk(io, pass),
                Phase::Done => break,
            };
            match result {
                Ok(bytes) => read += bytes.max(1),
                Err(e) => {
                    if let Some(s) = pass.stream.take() {
                        s.stop(io);
                    }
                    self.abandon_clean(io, pass);
                    return Err(e);
                }
            }
        }
        // Nothing stays in flight between steps.
        if let Some(s) = pass.stream.take() {
            s.stop(io);
        }
        Ok(match pass.phase {
            Phase::Done => CleanProgress::Done(pass.stats),
            _ => CleanProgress::Working,
        })
    }

    /// Reads the chunk of sealed segment `index` at `position` holding at least one whole
    /// batch (its bytes, or `None` at the segment's end): through the pass's stream in a whole
    /// pass, in place in a budgeted step.
    fn read_batches_at(
        &mut self,
        io: &mut dyn Io,
        index: usize,
        position: u64,
        pass: &mut CleanPass,
    ) -> Result<Option<Vec<u8>>, LogError> {
        let s = &self.sealed[index];
        let (file, data_len) = (s.file, s.data_len);
        if position >= data_len {
            if let Some(stream) = pass.stream.take() {
                stream.stop(io);
            }
            return Ok(None);
        }
        let left = (data_len - position) as usize;
        let chunk_bytes = pass.chunk_bytes;
        let mut read =
            |io: &mut dyn Io, len: usize, at_least: usize| -> Result<Vec<u8>, LogError> {
                if !pass.read_ahead {
                    return super::read_direct(io, file, position, len);
                }
                if !pass
                    .stream
                    .as_ref()
                    .is_some_and(|s| s.serves(file, position))
                {
                    if let Some(old) = pass.stream.take() {
                        old.stop(io);
                    }
                    pass.stream = Some(stream::SegmentStream::new(
                        file,
                        data_len,
                        position,
                        chunk_bytes,
                    ));
                }
                let stream = pass.stream.as_mut().ok_or(LogError::DiskFull)?;
                stream.read(io, position, len, at_least).map_err(classify)
            };
        // A whole batch at least: its header first, then (below) its size.
        let mut chunk = read(io, chunk_bytes.min(left), BATCH_HEADER_SIZE_BYTES)?;
        if let Some(length) = chunk.get(LENGTH_POS..LENGTH_POS + 4) {
            let size = LOG_OVERHEAD_BYTES as i64
                + i64::from(i32::from_be_bytes(length.try_into().unwrap_or_default()));
            if size > chunk.len() as i64 && size as u64 <= left as u64 {
                chunk = read(
                    io,
                    (size as usize).max(chunk_bytes.min(left)),
                    size as usize,
                )?;
            }
        }
        Ok(Some(chunk))
    }

    fn corrupt(&self, base: Offset, error: FormatError) -> LogError {
        LogError::Corrupt {
            file: crate::segment::log_path(&self.dir, base),
            what: format!("the cleaner cannot read a batch: {error}"),
        }
    }
}
