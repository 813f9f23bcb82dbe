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
//! - A partition that is Mirroring or Paused is never cleaned (SPEC §3): the source's gaps are
//!   copied. A pass in progress stops when the partition leaves Local, or when its segments
//!   change under it (retention, delete-records, truncation): its output is removed.
//!
//! A pass works in steps ([`PartitionLog::clean_step`]) of a byte budget, so a shard cleans
//! between its other work; [`PartitionLog::clean`] runs a whole pass at once.
//!
//! Files: `offset_map.rs` (the dedupe map), `txn.rs` (transactions while walking), `filter.rs`
//! (the rules per batch), `swap.rs` (the cleaned segment's writer, the swap and its recovery).

mod filter;
mod offset_map;
mod stream;
mod swap;
mod txn;

pub use offset_map::{OffsetMap, DEDUPE_LOAD_FACTOR_PPM, DEDUPE_SLOT_BYTES};
pub use swap::{finish_interrupted_clean, CLEANED_SUFFIX, CLEAN_WRITE_CHUNK_BYTES, SWAP_SUFFIX};

use super::recovery_point::{decode_recovery_point, write_partition_checkpoint};
use super::{classify, LogError, Mode, PartitionLog, Sealed};
use crate::format::{
    inspect, BatchHeader, FormatError, Offset, BATCH_HEADER_SIZE_BYTES, LENGTH_POS,
    LOG_OVERHEAD_BYTES,
};
use crate::io::{self, Io};
use crate::producer_state::AbortedTxn;
use filter::{filter_batch, LastRecord, Rules};
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

/// What a partition offers the cleaner now (Kafka's `LogToClean`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cleanable {
    /// The first offset not yet cleaned.
    pub first_dirty: Offset,
    /// The first offset the cleaner may not clean (a segment base).
    pub first_uncleanable: Offset,
    /// Bytes of the segments below the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of the segments from the first dirty one up to the first uncleanable one.
    pub cleanable_bytes: u64,
    /// A dirty segment's first batch is older than `max.compaction.lag.ms`.
    pub overdue: bool,
}

impl Cleanable {
    /// Dirty share of the cleanable bytes, 0 to 1 (Kafka's `cleanableRatio`).
    #[must_use]
    pub fn dirty_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.cleanable_bytes;
        if total == 0 {
            return 0.0;
        }
        self.cleanable_bytes as f64 / total as f64
    }

    /// Whether a pass is due: overdue with dirty bytes, or dirtier than `min_ratio_ppm`.
    #[must_use]
    pub fn is_due(&self, min_ratio_ppm: u32) -> bool {
        self.cleanable_bytes > 0
            && (self.overdue
                || self.cleanable_bytes as u128 * 1_000_000
                    > u128::from(min_ratio_ppm)
                        * u128::from(self.clean_bytes + self.cleanable_bytes))
    }
}

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
    /// The cleaner's checkpoint (the first dirty offset), if written.
    pub fn cleaner_checkpoint(&self, io: &mut dyn Io) -> Option<Offset> {
        let bytes = io::read_file_if_present(io, &self.dir.join(CLEANER_OFFSET_CHECKPOINT))
            .ok()
            .flatten()?;
        decode_recovery_point(&String::from_utf8_lossy(&bytes))
    }

    /// What the partition offers the cleaner at `now_ms` (see the module docs), whatever its
    /// policy.
    ///
    /// # Errors
    /// An I/O failure reading segment timestamps.
    pub fn cleanable(&mut self, io: &mut dyn Io, now_ms: i64) -> Result<Cleanable, LogError> {
        let log_start = self.log_start;
        let checkpoint = self.cleaner_checkpoint(io).unwrap_or(log_start);
        let first_dirty = if checkpoint < log_start || checkpoint > self.log_end() {
            log_start
        } else {
            checkpoint
        };
        let interval = self.config.segment.index_interval_bytes;
        let lag_min = self.config.compaction.min_compaction_lag_ms.max(0);
        let lag_max = self.config.compaction.max_compaction_lag_ms.max(0);
        let mut uncleanable = self.last_stable_offset().min(self.active.base_offset());
        let mut overdue = false;
        let dirty_from = self
            .sealed
            .partition_point(|s| s.next_offset <= first_dirty);
        for i in dirty_from..self.sealed.len() {
            let s = &mut self.sealed[i];
            if s.base_offset >= uncleanable {
                break;
            }
            if lag_min > 0 && s.max_timestamp(io, &self.dir, interval)? > now_ms - lag_min {
                uncleanable = uncleanable.min(s.base_offset);
                break;
            }
            if lag_max < i64::MAX && s.data_len >= BATCH_HEADER_SIZE_BYTES as u64 {
                // The first batch's largest timestamp, from its header (Kafka's
                // `getFirstBatchTimestampForSegments`).
                let head = super::read_direct(io, s.file, 0, BATCH_HEADER_SIZE_BYTES)?;
                let first = head
                    .first_chunk::<BATCH_HEADER_SIZE_BYTES>()
                    .map_or(-1, |h| BatchHeader::decode(h).max_timestamp);
                overdue |= first > 0 && first < now_ms.saturating_sub(lag_max);
            }
        }
        // Rounded down to the base of the segment holding it (Kafka cleans whole segments).
        let holding = self
            .sealed
            .partition_point(|s| s.next_offset <= uncleanable);
        let first_uncleanable = self
            .sealed
            .get(holding)
            .map_or(self.active.base_offset(), |s| s.base_offset)
            .max(first_dirty.min(self.active.base_offset()));
        let (mut clean_bytes, mut cleanable_bytes) = (0, 0);
        for s in &self.sealed {
            if s.base_offset >= first_uncleanable {
                break;
            }
            if s.next_offset <= first_dirty {
                clean_bytes += s.data_len;
            } else {
                cleanable_bytes += s.data_len;
            }
        }
        Ok(Cleanable {
            first_dirty,
            first_uncleanable,
            clean_bytes,
            cleanable_bytes,
            overdue,
        })
    }

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

    /// Maps the keys of one chunk. Returns the bytes read.
    fn map_chunk(
        &mut self,
        io: &mut dyn Io,
        pass: &mut CleanPass,
        base: Offset,
        position: u64,
    ) -> Result<usize, LogError> {
        let Some(index) = self.sealed.iter().position(|s| s.base_offset == base) else {
            return self.end_map(io, pass);
        };
        if base >= pass.upper {
            return self.end_map(io, pass);
        }
        let Some(chunk) = self.read_batches_at(io, index, position, pass)? else {
            // The segment's end: the map covers it whole (Kafka fast-forwards across gaps).
            let next = self.sealed[index].next_offset.min(pass.upper);
            pass.map.set_latest_offset(Offset(next.0 - 1));
            pass.phase = match self.sealed.get(index + 1) {
                Some(s) if s.base_offset < pass.upper => Phase::Map {
                    base: s.base_offset,
                    position: 0,
                },
                _ => return self.end_map(io, pass).map(|_| 0),
            };
            return Ok(0);
        };
        let limit = self.config.decompressed_bytes_max();
        let mut at = 0usize;
        while let Some(rest) = chunk.get(at..).filter(|r| !r.is_empty()) {
            let batch = match inspect(rest, position + at as u64) {
                Ok(b) => b,
                Err(FormatError::Incomplete { .. }) if at > 0 => break,
                Err(e) => return Err(self.corrupt(base, e)),
            };
            let h = *batch.header();
            if h.attributes.is_control() {
                pass.txn.on_control_batch(&h, batch.kind());
            } else if !pass.txn.on_data_batch(&h) {
                let decompressed;
                let records =
                    if h.attributes.compression() == Some(crate::format::Compression::None) {
                        batch.records().map_err(|e| self.corrupt(base, e))?
                    } else {
                        decompressed = batch
                            .decompressed_records(limit)
                            .map_err(|e| self.corrupt(base, e))?;
                        decompressed.iter()
                    };
                for record in records {
                    let record = record.map_err(|e| self.corrupt(base, e))?;
                    let offset = Offset(h.base_offset.0 + i64::from(record.offset_delta));
                    if let Some(key) = record.key.filter(|_| offset >= pass.first_dirty) {
                        if pass.map.is_full() || !pass.map.put(key, offset) {
                            // Full: the pass cleans up to the last whole batch mapped.
                            pass.stats.map_bytes_read += at as u64;
                            return self.end_map(io, pass).map(|_| at);
                        }
                    }
                }
            }
            if h.last_offset() >= pass.first_dirty {
                pass.map.set_latest_offset(h.last_offset());
            }
            at += batch.bytes().len();
        }
        pass.stats.map_bytes_read += at as u64;
        pass.phase = Phase::Map {
            base,
            position: position + at as u64,
        };
        Ok(at)
    }

    /// The map is complete: plan the groups and start cleaning.
    fn end_map(&mut self, io: &mut dyn Io, pass: &mut CleanPass) -> Result<usize, LogError> {
        pass.stats.keys_mapped = pass.map.len() as u64;
        let end = Offset(pass.map.latest_offset().0 + 1);
        if end <= pass.first_dirty {
            // Not one whole batch fit: no pass with this map can make progress.
            return Err(LogError::DedupeBufferTooSmall {
                slots: pass.map.slots(),
                offset: pass.first_dirty,
            });
        }
        pass.stats.end_offset = end.max(pass.first_dirty);
        // Kafka's `groupSegmentsBySize` over the segments below the map's end.
        let segment_bytes = self.config.segment.segment_bytes;
        let index_bytes_max = self
            .config
            .segment_index_bytes
            .unwrap_or(super::SEGMENT_INDEX_BYTES_DEFAULT);
        let interval = u64::from(self.config.segment.index_interval_bytes.max(1));
        let index_bytes = |len: u64| (len / interval + 1) * 12;
        let candidates: Vec<(Offset, Offset, u64)> = self
            .sealed
            .iter()
            .take_while(|s| s.base_offset < end && s.base_offset < pass.upper)
            .map(|s| (s.base_offset, s.next_offset, s.data_len))
            .collect();
        let mut groups: Vec<Vec<Offset>> = Vec::new();
        let mut i = 0;
        while let Some(&(first_base, mut last_end, len)) = candidates.get(i) {
            let mut group = vec![first_base];
            let (mut size, mut ix) = (len, index_bytes(len));
            i += 1;
            while let Some(&(b, e, l)) = candidates.get(i) {
                if size + l > segment_bytes
                    || ix + index_bytes(l) > index_bytes_max
                    || (l > 0 && e.0 - 1 - first_base.0 > i64::from(i32::MAX))
                {
                    break;
                }
                group.push(b);
                size += l;
                ix += index_bytes(l);
                last_end = e;
                i += 1;
            }
            let _ = last_end;
            groups.push(group);
        }
        pass.groups = groups;
        pass.txn = CleanedTransactions::default();
        pass.phase = Phase::Clean {
            group: 0,
            segment: 0,
            position: 0,
            out: None,
        };
        if pass.groups.is_empty() {
            self.finish_pass(io, pass)?;
        }
        Ok(0)
    }

    /// Cleans one chunk of the current group (starting the group, or finishing it with its
    /// swap, when that is next). Returns the bytes read.
    fn clean_chunk(&mut self, io: &mut dyn Io, pass: &mut CleanPass) -> Result<usize, LogError> {
        let (group, segment, position, mut out) = match &mut pass.phase {
            Phase::Clean {
                group,
                segment,
                position,
                out,
            } => (*group, *segment, *position, out.take()),
            _ => return Ok(0),
        };
        let result = self.clean_chunk_of(io, pass, (group, segment, position), &mut out);
        // The cleaned segment being written goes back with the pass (an error leaves it there
        // for `abandon_clean` to remove).
        if let Some(o) = out {
            match &mut pass.phase {
                Phase::Clean { out: slot, .. } => *slot = Some(o),
                _ => o.abandon(io, &self.dir),
            }
        }
        result
    }

    fn clean_chunk_of(
        &mut self,
        io: &mut dyn Io,
        pass: &mut CleanPass,
        (group, segment, position): (usize, usize, u64),
        out: &mut Option<CleanedSegment>,
    ) -> Result<usize, LogError> {
        let Some(bases) = pass.groups.get(group).cloned() else {
            self.finish_pass(io, pass)?;
            return Ok(0);
        };
        let first = bases[0];
        let group_end_index = self
            .sealed
            .iter()
            .position(|s| s.base_offset == bases[bases.len() - 1]);
        let (Some(first_index), Some(last_index)) = (
            self.sealed.iter().position(|s| s.base_offset == first),
            group_end_index,
        ) else {
            return Err(LogError::Corrupt {
                file: self.dir.clone(),
                what: format!("cleaner: segment group {bases:?} is not in the log"),
            });
        };
        if out.is_none() {
            // A new group: its aborted transactions, and the producers' last batches now.
            let group_end = self.sealed[last_index].next_offset;
            let aborted: Vec<AbortedTxn> =
                self.aborted_between(io, first, Offset(group_end.0 - 1))?;
            pass.txn.add_aborted(aborted);
            pass.last_records = self
                .psm
                .producers()
                .map(|e| {
                    let last = e.last_data_offset();
                    (
                        e.producer_id,
                        LastRecord {
                            last_data_offset: (last.0 >= 0).then_some(last),
                            epoch: e.epoch,
                        },
                    )
                })
                .collect();
            let interval = self.config.segment.index_interval_bytes;
            *out = Some(CleanedSegment::create(io, &self.dir, first, interval).map_err(classify)?);
        }
        let index = first_index + segment;
        let seg_base = self.sealed[index].base_offset;
        let chunk = self.read_batches_at(io, index, position, pass)?;
        let Some(chunk) = chunk else {
            // This segment is done: the next of the group, or the swap.
            if index < last_index {
                pass.phase = Phase::Clean {
                    group,
                    segment: segment + 1,
                    position: 0,
                    out: None,
                };
            } else {
                let cleaned = out.take();
                pass.phase = Phase::Clean {
                    group: group + 1,
                    segment: 0,
                    position: 0,
                    out: None,
                };
                if let Some(cleaned) = cleaned {
                    self.swap_in(io, pass, cleaned, first_index, last_index)?;
                }
            }
            return Ok(0);
        };
        let Some(mut cleaned) = out.take() else {
            return Ok(0);
        };
        let last_data_len = self.sealed[last_index].data_len;
        let mut rules = Rules {
            map: &mut pass.map,
            txn: &mut pass.txn,
            last_records: &pass.last_records,
            now_ms: pass.now_ms,
            delete_retention_ms: self.config.compaction.delete_retention_ms,
            round_upper: pass.upper,
            decompressed_bytes_max: self.config.decompressed_bytes_max(),
        };
        let mut at = 0usize;
        let mut failed = None;
        while let Some(rest) = chunk.get(at..).filter(|r| !r.is_empty()) {
            let batch = match inspect(rest, position + at as u64) {
                Ok(b) => b,
                Err(FormatError::Incomplete { .. }) if at > 0 => break,
                Err(e) => {
                    failed = Some(self.corrupt(seg_base, e));
                    break;
                }
            };
            let size = batch.bytes().len();
            let last_of_segment =
                index == last_index && position + (at + size) as u64 == last_data_len;
            pass.scratch.clear();
            match filter_batch(&mut rules, &batch, last_of_segment, &mut pass.scratch) {
                Ok(f) => {
                    pass.stats.records_read += f.records_read;
                    pass.stats.records_kept += f.records_kept;
                    pass.stats.keyless_records += f.keyless;
                    if !pass.scratch.is_empty() {
                        if let Err(e) = cleaned.append(
                            io,
                            &pass.scratch,
                            batch.header().last_offset(),
                            f.max_timestamp,
                        ) {
                            failed = Some(classify(e));
                            break;
                        }
                    }
                }
                Err(e) => {
                    failed = Some(self.corrupt(seg_base, e));
                    break;
                }
            }
            at += size;
        }
        pass.stats.bytes_read += at as u64;
        pass.phase = Phase::Clean {
            group,
            segment,
            position: position + at as u64,
            out: None,
        };
        *out = Some(cleaned);
        match failed {
            Some(e) => Err(e),
            None => Ok(at),
        }
    }

    /// Finishes the cleaned segment and swaps it in for sealed segments
    /// `first_index..=last_index`.
    fn swap_in(
        &mut self,
        io: &mut dyn Io,
        pass: &mut CleanPass,
        cleaned: CleanedSegment,
        first_index: usize,
        last_index: usize,
    ) -> Result<(), LogError> {
        let base = self.sealed[first_index].base_offset;
        let group_end = self.sealed[last_index].next_offset;
        let replaced: Vec<Offset> = self.sealed[first_index..=last_index]
            .iter()
            .map(|s| s.base_offset)
            .collect();
        let kept_aborts = pass.txn.take_kept_aborts();
        let txn_index = super::encode_txn_index(&kept_aborts);
        let (data_len, _, indexes) = match cleaned.finish(io, &self.dir, &txn_index) {
            Ok(done) => done,
            Err(e) => {
                swap::remove_uncommitted(io, &self.dir, base);
                return Err(classify(e));
            }
        };
        if let Err(e) = swap::commit(io, &self.dir, base) {
            // Whether the log's rename happened is unknown here: if it did, the swap is
            // committed and the next open completes it; the log must not go on as if not.
            return Err(self.poison(classify(e)));
        }
        // Committed: from here every failure poisons (the next open completes the swap).
        let old: Vec<Sealed> = self.sealed.drain(first_index..=last_index).collect();
        let mut others = Vec::new();
        for s in &old {
            if let Err(e) =
                io::run(io, io::Op::Close { file: s.file }, &mut others).and_then(|c| c.result)
            {
                return Err(self.poison_always(classify(e)));
            }
        }
        if let Err(e) = swap::complete(io, &self.dir, base, &replaced) {
            return Err(self.poison_always(classify(e)));
        }
        // The snapshots named by the replaced segments go with them, as Kafka's
        // `replaceSegments` deletes them; the first base's stays with its segment. A failure
        // leaves strays the next open removes.
        let _ = super::remove_snapshots(io, &self.dir, replaced.iter().copied().skip(1));
        let file = match crate::segment::open_for_reads(io, &self.dir, base) {
            Ok(f) => f,
            Err(e) => return Err(self.poison_always(classify(e))),
        };
        let meta = crate::segment::SealedSegment {
            base_offset: base,
            next_offset: group_end,
            data_len,
            indexes,
        };
        self.sealed
            .insert(first_index, Sealed::from_segment(meta, file, kept_aborts));
        self.segments_generation += 1;
        pass.generation = self.segments_generation;
        pass.stats.segments_replaced += replaced.len() as u64;
        pass.stats.segments_written += 1;
        pass.stats.bytes_written += data_len;
        self.debug_check_invariants();
        Ok(())
    }

    /// The pass is over: the checkpoint moves to its end (a failure to write it only makes the
    /// next pass map more).
    fn finish_pass(&mut self, io: &mut dyn Io, pass: &mut CleanPass) -> Result<(), LogError> {
        pass.phase = Phase::Done;
        if let Err(error) = write_partition_checkpoint(
            io,
            &self.dir,
            CLEANER_OFFSET_CHECKPOINT,
            pass.stats.end_offset,
        ) {
            tracing::warn!(dir = %self.dir.display(), %error, "cleaner checkpoint not written");
        }
        Ok(())
    }
}
