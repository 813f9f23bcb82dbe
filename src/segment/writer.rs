//! The active segment: appends into an aligned buffer, commit rounds with write-once pages and
//! commit records, and sealing.
//!
//! Positions, in increasing order (all byte positions in the `.log` file):
//!
//! ```text
//! 0 ……… synced_pages_end ……… buf_start ……… data_len ………… data_region ── slot 0 ── slot 1
//!       (full pages durable       (page-aligned: the resident buffer holds [buf_start, data_len))
//!        in the file)
//! ```
//!
//! Contract:
//! - A page of the data region is written exactly once, when full (or at seal). The partial
//!   tail page goes into the commit record in the slot *not* holding the newest valid record, so
//!   every acknowledged byte always has an intact durable copy that no in-flight write touches.
//! - A commit round writes the newly full pages and the commit record, then — after both
//!   completed — one fdatasync of the file. Only then is the round durable ([`Durable`]).
//! - At most one round is in flight; appends continue into a fresh buffer meanwhile.
//! - The file is preallocated (`fallocate`, size included) to the data region plus both slots
//!   when created, so data writes land in place; sealing writes the last partial page, syncs, and
//!   truncates the file to exactly its data (the slots vanish), leaving what Kafka would hold.
//! - A failed write or fdatasync poisons the segment: every later call returns that error.

use super::commit_record::{page_floor, CommitRecord, COMMIT_SLOTS, COMMIT_SLOT_SIZE_BYTES};
use super::index::SegmentIndexes;
use super::{log_path, offset_index_path, time_index_path, SegmentError};
use crate::format::{self, Offset};
use crate::io::{
    self, AlignedBuf, BufferPool, Completion, FallocateMode, FileId, Io, Op, OpId, OpenOptions,
    PAGE_SIZE_BYTES,
};
use std::path::Path;

/// Settings of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentConfig {
    /// `segment.bytes`: most data bytes in one segment.
    pub segment_bytes: u64,
    /// `index.interval.bytes`.
    pub index_interval_bytes: u32,
    /// Size of the append buffer: the most bytes accumulated between commit rounds.
    pub commit_buffer_bytes: usize,
}

impl Default for SegmentConfig {
    fn default() -> Self {
        SegmentConfig {
            segment_bytes: 1 << 30,
            index_interval_bytes: 4096,
            commit_buffer_bytes: 2 << 20,
        }
    }
}

/// What is durable in the segment after the last completed round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durable {
    /// Durable bytes.
    pub data_len: u64,
    /// The offset after the last durable batch.
    pub next_offset: Offset,
}

#[derive(Debug)]
struct Round {
    /// The chain's operations (pages write, commit-record write, fdatasync) not yet completed.
    pending: usize,
    ops: Vec<OpId>,
    /// Where the round's full pages start in the file (they end at `pages_end`).
    pages_start: u64,
    /// The pages buffer, once its write completed: kept for reads when the round is durable.
    pages_buf: Option<AlignedBuf>,
    pages_end: u64,
    data_len: u64,
    next_offset: Offset,
    tail: Vec<u8>,
}

/// A sealed segment: its extent and indexes.
#[derive(Debug, Clone)]
pub struct SealedSegment {
    /// First offset.
    pub base_offset: Offset,
    /// Offset after the last batch.
    pub next_offset: Offset,
    /// Size of the `.log`.
    pub data_len: u64,
    /// Its indexes (also written to `.index` and `.timeindex`).
    pub indexes: SegmentIndexes,
}

/// See the module docs.
#[derive(Debug)]
pub struct SegmentWriter {
    base_offset: Offset,
    config: SegmentConfig,
    file: FileId,
    data_region_bytes: u64,
    data_len: u64,
    next_offset: Offset,
    buf: AlignedBuf,
    buf_start: u64,
    synced_pages_end: u64,
    durable: Durable,
    durable_tail: Vec<u8>,
    sequence: u64,
    indexes: SegmentIndexes,
    round: Option<Round>,
    poisoned: Option<SegmentError>,
    pool: BufferPool,
    slot_pool: BufferPool,
    /// The pages of the latest durable rounds, still in memory: `(file position, buffer,
    /// length)`, oldest first. Reads of recent data are served from here; appends take the
    /// oldest back when the pool has no idle buffer.
    recent: std::collections::VecDeque<(u64, AlignedBuf, usize)>,
    /// Buffers no pool took, waiting to go back to the Io.
    spare: Vec<AlignedBuf>,
}

/// Rounds whose pages stay resident for reads.
const RECENT_ROUNDS_MAX: usize = 1;

impl SegmentWriter {
    /// Creates and preallocates the segment `<base_offset>.log` in `dir`. `sequence` continues
    /// the partition's commit-record numbering.
    ///
    /// # Errors
    /// [`SegmentError::Io`] (e.g. `NoSpace` from the preallocation).
    pub fn create(
        io: &mut dyn Io,
        dir: &Path,
        base_offset: Offset,
        config: SegmentConfig,
        sequence: u64,
    ) -> Result<Self, SegmentError> {
        let mut w = Self::prepare(io, dir, base_offset, config, sequence)?;
        // A creation record (empty segment), synced before the segment is used: from here on
        // at least one valid commit record is always durable in the slots (they alternate), so
        // recovery can tell "never committed" (no record: creation never finished) from
        // damage.
        w.install(io, &[], 0, base_offset, Vec::new())?;
        Ok(w)
    }

    /// Opens (creating if needed) and preallocates the file; writes no record.
    fn prepare(
        io: &mut dyn Io,
        dir: &Path,
        base_offset: Offset,
        config: SegmentConfig,
        sequence: u64,
    ) -> Result<Self, SegmentError> {
        let buffer_bytes = config.commit_buffer_bytes.max(2 * PAGE_SIZE_BYTES);
        let data_region_bytes =
            config.segment_bytes.div_ceil(PAGE_SIZE_BYTES as u64) * PAGE_SIZE_BYTES as u64;
        let file = io::open(
            io,
            &log_path(dir, base_offset),
            OpenOptions {
                create: true,
                write: true,
                direct: true,
                directory: false,
            },
        )?;
        let mut others = Vec::new();
        io::run(
            io,
            Op::Fallocate {
                file,
                offset: 0,
                len: data_region_bytes + (COMMIT_SLOTS * COMMIT_SLOT_SIZE_BYTES) as u64,
                mode: FallocateMode::Extend,
            },
            &mut others,
        )?
        .result?;
        let pool = BufferPool::new(buffer_bytes, 2);
        Ok(SegmentWriter {
            base_offset,
            config,
            file,
            data_region_bytes,
            data_len: 0,
            next_offset: base_offset,
            buf: io.buffer(buffer_bytes),
            buf_start: 0,
            synced_pages_end: 0,
            durable: Durable {
                data_len: 0,
                next_offset: base_offset,
            },
            durable_tail: Vec::new(),
            sequence,
            indexes: SegmentIndexes::new(base_offset, config.index_interval_bytes),
            round: None,
            poisoned: None,
            pool,
            slot_pool: BufferPool::new(COMMIT_SLOT_SIZE_BYTES, 2),
            recent: std::collections::VecDeque::new(),
            spare: Vec::new(),
        })
    }

    /// The segment's first offset.
    #[must_use]
    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// Bytes appended (durable or not).
    #[must_use]
    pub fn data_len(&self) -> u64 {
        self.data_len
    }

    /// The offset after the last appended batch.
    #[must_use]
    pub fn next_offset(&self) -> Offset {
        self.next_offset
    }

    /// What the last completed round made durable.
    #[must_use]
    pub fn durable(&self) -> &Durable {
        &self.durable
    }

    /// The last commit-record sequence used.
    #[must_use]
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The indexes built so far.
    #[must_use]
    pub fn indexes(&self) -> &SegmentIndexes {
        &self.indexes
    }

    /// Whether a commit round is in flight.
    #[must_use]
    pub fn round_in_flight(&self) -> bool {
        self.round.is_some()
    }

    /// The operations of the round in flight (none without one): a shard that shares its
    /// `Io` among partitions routes their completions here.
    #[must_use]
    pub fn round_ops(&self) -> &[OpId] {
        self.round.as_ref().map_or(&[], |r| r.ops.as_slice())
    }

    /// File position of commit slot `slot`.
    #[must_use]
    pub fn slot_position(&self, slot: usize) -> u64 {
        self.data_region_bytes + (slot * COMMIT_SLOT_SIZE_BYTES) as u64
    }

    fn check(&self) -> Result<(), SegmentError> {
        match &self.poisoned {
            Some(e) => Err(SegmentError::Poisoned(Box::new(e.clone()))),
            None => Ok(()),
        }
    }

    /// Size of the append buffer: the largest request one round can take.
    #[must_use]
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Room left for appends before the next commit round must start.
    #[must_use]
    pub fn buffer_room(&self) -> usize {
        self.buf.capacity() - (self.data_len - self.buf_start) as usize
    }

    /// Appends one checked batch whose offsets are final. Returns its position.
    ///
    /// # Errors
    /// [`SegmentError::SegmentFull`] (roll first), [`SegmentError::BufferFull`] (commit first),
    /// or the poisoning error.
    pub fn append(
        &mut self,
        batch: &[u8],
        last_offset: Offset,
        max_timestamp: i64,
    ) -> Result<u64, SegmentError> {
        self.append_stamped(batch, None, last_offset, max_timestamp)
    }

    /// [`SegmentWriter::append`], stamping `baseOffset` and `partitionLeaderEpoch` in the copy
    /// (fields the CRC does not cover), as client and coordinator appends need.
    ///
    /// # Errors
    /// As [`SegmentWriter::append`].
    pub fn append_stamped(
        &mut self,
        batch: &[u8],
        stamp: Option<(Offset, i32)>,
        last_offset: Offset,
        max_timestamp: i64,
    ) -> Result<u64, SegmentError> {
        self.check()?;
        let len = batch.len() as u64;
        if self.data_len + len > self.config.segment_bytes {
            return Err(SegmentError::SegmentFull {
                base_offset: self.base_offset,
                data_len: self.data_len,
                batch_bytes: len,
            });
        }
        if batch.len() > self.buffer_room() {
            return Err(SegmentError::BufferFull {
                room_bytes: self.buffer_room(),
                batch_bytes: len,
            });
        }
        let position = self.data_len;
        let at = (position - self.buf_start) as usize;
        let copy = &mut self.buf.as_mut_slice()[at..at + batch.len()];
        copy.copy_from_slice(batch);
        if let Some((base_offset, leader_epoch)) = stamp {
            // The batch was checked by the caller, so it holds a whole header.
            let _ = format::stamp_base_offset(copy, base_offset);
            let _ = format::stamp_partition_leader_epoch(copy, leader_epoch);
        }
        self.indexes.on_append(
            position as u32,
            batch.len() as u32,
            last_offset,
            max_timestamp,
        );
        self.data_len += len;
        self.next_offset = Offset(last_offset.0 + 1);
        Ok(position)
    }

    /// Starts a commit round for everything appended so far. Returns `false` when there is
    /// nothing new or a round is already in flight.
    ///
    /// # Errors
    /// A submission error (which poisons the segment) or the poisoning error.
    pub fn start_commit(&mut self, io: &mut dyn Io) -> Result<bool, SegmentError> {
        self.check()?;
        if self.round.is_some() || self.data_len == self.durable.data_len {
            return Ok(false);
        }
        let pages_end = page_floor(self.data_len);
        let tail_len = (self.data_len - pages_end) as usize;
        let mut chain = Vec::with_capacity(3);
        let mut tail = vec![0u8; tail_len];
        if pages_end > self.buf_start {
            // The full pages leave with the current buffer; the partial page moves to a fresh
            // one, where appends continue.
            let mut next = self.take_buffer(io);
            let from = (pages_end - self.buf_start) as usize;
            next.as_mut_slice()[..tail_len]
                .copy_from_slice(&self.buf.as_slice()[from..from + tail_len]);
            let full = std::mem::replace(&mut self.buf, next);
            chain.push(Op::Write {
                file: self.file,
                offset: self.buf_start,
                buf: full,
                range: 0..from,
            });
            self.buf_start = pages_end;
        }
        tail.copy_from_slice(&self.buf.as_slice()[..tail_len]);
        self.sequence += 1;
        let record = CommitRecord {
            sequence: self.sequence,
            base_offset: self.base_offset,
            data_len: self.data_len,
            next_offset: self.next_offset,
            prev_data_len: self.durable.data_len,
            tail,
        };
        let mut slot = self.slot_buffer(io);
        record.encode_into(slot.as_mut_slice());
        chain.push(Op::Write {
            file: self.file,
            offset: self.slot_position((self.sequence % COMMIT_SLOTS as u64) as usize),
            buf: slot,
            range: 0..COMMIT_SLOT_SIZE_BYTES,
        });
        // The fdatasync is linked behind the writes: it starts the moment they complete, with
        // no round trip through this thread.
        chain.push(Op::Fdatasync { file: self.file });
        let pages_start = self.synced_pages_end;
        let ops = io.submit_chain(chain).map_err(|e| self.poison(e.into()))?;
        self.round = Some(Round {
            pending: ops.len(),
            ops,
            pages_start,
            pages_buf: None,
            pages_end,
            data_len: self.data_len,
            next_offset: self.next_offset,
            tail: record.tail,
        });
        Ok(true)
    }

    fn poison(&mut self, error: SegmentError) -> SegmentError {
        if self.poisoned.is_none() {
            self.poisoned = Some(error.clone());
        }
        error
    }

    /// Whether `completion` belongs to this segment's round.
    #[must_use]
    pub fn owns(&self, completion: &Completion) -> bool {
        self.round
            .as_ref()
            .is_some_and(|r| r.ops.contains(&completion.id))
    }

    /// Feeds a completion of this segment's round. Returns the new durable state when the round
    /// finished.
    ///
    /// # Errors
    /// The operation's failure, which poisons the segment.
    pub fn on_completion(
        &mut self,
        completion: Completion,
    ) -> Result<Option<Durable>, SegmentError> {
        if let Some(buf) = completion.buf {
            if buf.capacity() == COMMIT_SLOT_SIZE_BYTES {
                self.release_slot(buf);
            } else if completion.result.is_ok()
                && self
                    .round
                    .as_ref()
                    .is_some_and(|r| r.ops.contains(&completion.id))
            {
                if let Some(round) = self.round.as_mut() {
                    round.pages_buf = Some(buf);
                }
            } else {
                self.release(buf);
            }
        }
        if let Err(e) = completion.result {
            return Err(self.poison(e.into()));
        }
        let Some(round) = self.round.as_mut() else {
            return Ok(None);
        };
        if !round.ops.contains(&completion.id) {
            return Ok(None);
        }
        round.pending -= 1;
        if round.pending > 0 {
            return Ok(None);
        }
        let Some(round) = self.round.take() else {
            return Ok(None);
        };
        self.synced_pages_end = round.pages_end;
        self.durable = Durable {
            data_len: round.data_len,
            next_offset: round.next_offset,
        };
        self.durable_tail = round.tail;
        if let Some(buf) = round.pages_buf {
            let len = (round.pages_end - round.pages_start) as usize;
            self.recent.push_back((round.pages_start, buf, len));
            while self.recent.len() > RECENT_ROUNDS_MAX {
                if let Some((_, old, _)) = self.recent.pop_front() {
                    self.release(old);
                }
            }
        }
        Ok(Some(self.durable.clone()))
    }

    /// A buffer for appends: an idle one, else the oldest resident round's, else a new one
    /// from the Io (registered with the ring where possible).
    fn take_buffer(&mut self, io: &mut dyn Io) -> AlignedBuf {
        if let Some(buf) = self.pool.try_take() {
            return buf;
        }
        match self.recent.pop_front() {
            Some((_, buf, _)) => buf,
            None => io.buffer(self.pool.buffer_size_bytes()),
        }
    }

    fn slot_buffer(&mut self, io: &mut dyn Io) -> AlignedBuf {
        self.slot_pool
            .try_take()
            .unwrap_or_else(|| io.buffer(COMMIT_SLOT_SIZE_BYTES))
    }

    /// Keeps a buffer for reuse; one the pool does not take waits in `spare` for the Io.
    fn release(&mut self, buf: AlignedBuf) {
        if let Some(extra) = self.pool.give(buf) {
            self.spare.push(extra);
        }
    }

    fn release_slot(&mut self, buf: AlignedBuf) {
        if let Some(extra) = self.slot_pool.give(buf) {
            self.spare.push(extra);
        }
    }

    /// Hands every buffer the writer holds back to the Io (seal, close).
    fn return_buffers(&mut self, io: &mut dyn Io) {
        let current = std::mem::replace(&mut self.buf, AlignedBuf::new(PAGE_SIZE_BYTES));
        io.recycle(current);
        for buf in self.pool.drain().chain(self.slot_pool.drain()) {
            io.recycle(buf);
        }
        for (_, buf, _) in self.recent.drain(..) {
            io.recycle(buf);
        }
        for buf in self.spare.drain(..) {
            io.recycle(buf);
        }
    }

    /// The bytes `[from, to)` if one resident round holds them all.
    fn resident(&self, from: u64, to: u64) -> Option<&[u8]> {
        self.recent.iter().find_map(|(start, buf, len)| {
            let end = start + *len as u64;
            (from >= *start && to <= end)
                .then(|| &buf.as_slice()[(from - start) as usize..(to - start) as usize])
        })
    }

    /// Commits everything appended and waits until it is durable (set-up paths and tests; a
    /// shard multiplexes rounds instead).
    ///
    /// # Errors
    /// The round's failure.
    pub fn commit(&mut self, io: &mut dyn Io) -> Result<Durable, SegmentError> {
        // A failed round stays in `round` with operations that will never complete: waiting
        // for it again would spin forever (found by the injected-ENOSPC tests).
        self.check()?;
        if self.round.is_none() && !self.start_commit(io)? {
            return Ok(self.durable.clone());
        }
        let mut completions = Vec::new();
        while let Some(round) = &self.round {
            let ops = round.ops.clone();
            io.complete_for(&ops, &mut completions)?;
            for c in completions.drain(..) {
                if let Some(durable) = self.on_completion(c)? {
                    // A round finished; start the next if appends arrived meanwhile.
                    if self.data_len > durable.data_len {
                        self.start_commit(io)?;
                    }
                }
            }
        }
        Ok(self.durable.clone())
    }

    /// The durable bytes `[position, position + len)` (clamped to the durable end): from the
    /// file below the synced pages, from the durable tail above.
    ///
    /// # Errors
    /// A read failure.
    pub fn read_durable(
        &self,
        io: &mut dyn Io,
        position: u64,
        len: usize,
    ) -> Result<Vec<u8>, SegmentError> {
        let end = (position + len as u64).min(self.durable.data_len);
        if position >= end {
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity((end - position) as usize);
        if position < self.synced_pages_end {
            let file_end = end.min(self.synced_pages_end);
            match self.resident(position, file_end) {
                // Recently written pages are served from memory (O_DIRECT has no page cache).
                Some(bytes) => out.extend_from_slice(bytes),
                None => out.extend_from_slice(&read_file(io, self.file, position, file_end)?),
            }
        }
        if end > self.synced_pages_end {
            let from = position.max(self.synced_pages_end);
            let tail = &self.durable_tail
                [(from - self.synced_pages_end) as usize..(end - self.synced_pages_end) as usize];
            out.extend_from_slice(tail);
        }
        Ok(out)
    }

    /// Reopens the sealed segment `<base_offset>.log` as the active one, cut at `data_len` bytes
    /// (a batch boundary; `next_offset` follows the last kept batch). The file is preallocated
    /// again and — before anything else may touch the partial last page — its kept bytes are
    /// copied into a commit record and synced. Bytes past `data_len` stay in the file until
    /// later pages overwrite them; the record says where the data ends.
    ///
    /// # Errors
    /// Any I/O failure, or [`SegmentError::ShortRead`] if the file is shorter than `data_len`.
    pub fn reopen(
        io: &mut dyn Io,
        dir: &Path,
        base_offset: Offset,
        config: SegmentConfig,
        sequence: u64,
        data_len: u64,
        next_offset: Offset,
    ) -> Result<Self, SegmentError> {
        Self::reopen_with_tail(
            io,
            dir,
            base_offset,
            config,
            sequence,
            data_len,
            next_offset,
            None,
        )
    }

    /// [`SegmentWriter::reopen`] where the partial last page's bytes come from `tail` (a commit
    /// record's copy, for a segment that was never sealed) instead of the file.
    ///
    /// # Errors
    /// As [`SegmentWriter::reopen`].
    #[allow(clippy::too_many_arguments)]
    pub fn reopen_with_tail(
        io: &mut dyn Io,
        dir: &Path,
        base_offset: Offset,
        config: SegmentConfig,
        sequence: u64,
        data_len: u64,
        next_offset: Offset,
        tail: Option<Vec<u8>>,
    ) -> Result<Self, SegmentError> {
        let mut w = Self::prepare(io, dir, base_offset, config, sequence)?;
        // `prepare` opened the existing file and extended it; nothing was truncated.
        let pages_end = page_floor(data_len);
        let tail = match tail {
            Some(t) => t,
            None => read_file(io, w.file, pages_end, data_len)?,
        };
        let mut kept = read_file(io, w.file, 0, pages_end)?;
        kept.extend_from_slice(&tail);
        w.install(io, &kept, data_len, next_offset, tail)?;
        Ok(w)
    }

    /// Cuts the active segment at `data_len` bytes (a batch boundary) with `next_offset` after
    /// it: commits what is appended, then records the cut in a new commit record (synced), so
    /// the partial page's kept bytes have a durable copy before any write touches that page.
    ///
    /// # Errors
    /// Any I/O failure (which poisons the segment).
    pub fn truncate(
        &mut self,
        io: &mut dyn Io,
        data_len: u64,
        next_offset: Offset,
    ) -> Result<(), SegmentError> {
        self.commit(io)?;
        let data_len = data_len.min(self.data_len);
        let kept = self.read_durable(io, 0, data_len as usize)?;
        let pages_end = page_floor(data_len);
        let tail = kept[pages_end as usize..].to_vec();
        self.install(io, &kept, data_len, next_offset, tail)
    }

    /// Makes `[0, data_len)` (whose bytes are `kept`) the segment's durable content: writes and
    /// syncs a commit record holding the partial page, then resets the in-memory state and
    /// rebuilds the indexes from the kept batches.
    fn install(
        &mut self,
        io: &mut dyn Io,
        kept: &[u8],
        data_len: u64,
        next_offset: Offset,
        tail: Vec<u8>,
    ) -> Result<(), SegmentError> {
        self.check()?;
        let pages_end = page_floor(data_len);
        self.sequence += 1;
        let record = CommitRecord {
            sequence: self.sequence,
            base_offset: self.base_offset,
            data_len,
            next_offset,
            prev_data_len: data_len,
            tail,
        };
        let mut slot = self.slot_buffer(io);
        record.encode_into(slot.as_mut_slice());
        let chain = vec![
            Op::Write {
                file: self.file,
                offset: self.slot_position((self.sequence % COMMIT_SLOTS as u64) as usize),
                buf: slot,
                range: 0..COMMIT_SLOT_SIZE_BYTES,
            },
            Op::Fdatasync { file: self.file },
        ];
        let ids = io.submit_chain(chain).map_err(|e| self.poison(e.into()))?;
        let mut completions = Vec::new();
        let mut pending = ids.len();
        while pending > 0 {
            io.complete(1, &mut completions)?;
            for c in completions.drain(..) {
                if ids.contains(&c.id) {
                    pending -= 1;
                    if let Some(buf) = c.buf {
                        self.release_slot(buf);
                    }
                    if let Err(e) = c.result {
                        return Err(self.poison(e.into()));
                    }
                }
            }
        }
        // Resident pages may hold bytes past the new end.
        while let Some((_, buf, _)) = self.recent.pop_front() {
            self.release(buf);
        }
        let tail_len = (data_len - pages_end) as usize;
        self.buf.as_mut_slice()[..tail_len].copy_from_slice(&record.tail);
        self.buf_start = pages_end;
        self.synced_pages_end = pages_end;
        self.data_len = data_len;
        self.next_offset = next_offset;
        self.durable = Durable {
            data_len,
            next_offset,
        };
        self.durable_tail = record.tail;
        // The kept bytes were validated by whoever chose the cut; a failure here rebuilds
        // what scans and leaves the rest unindexed (reads fall back to a scan from 0).
        self.indexes =
            match super::index_batches(kept, self.base_offset, self.config.index_interval_bytes) {
                Ok((_, indexes)) => indexes,
                Err(_) => SegmentIndexes::new(self.base_offset, self.config.index_interval_bytes),
            };
        Ok(())
    }

    /// A writer that owns nothing, holding the place of one being sealed by value. Every
    /// operation on it fails; it exists only until the log is dropped.
    #[must_use]
    pub fn placeholder(base_offset: Offset) -> Self {
        SegmentWriter {
            base_offset,
            config: SegmentConfig::default(),
            file: FileId(u32::MAX),
            data_region_bytes: 0,
            data_len: 0,
            next_offset: base_offset,
            buf: AlignedBuf::new(PAGE_SIZE_BYTES),
            buf_start: 0,
            synced_pages_end: 0,
            durable: Durable {
                data_len: 0,
                next_offset: base_offset,
            },
            durable_tail: Vec::new(),
            sequence: 0,
            indexes: SegmentIndexes::new(base_offset, 4096),
            round: None,
            poisoned: Some(SegmentError::Io(crate::io::IoError::UnknownFile(FileId(
                u32::MAX,
            )))),
            pool: BufferPool::new(PAGE_SIZE_BYTES, 0),
            slot_pool: BufferPool::new(COMMIT_SLOT_SIZE_BYTES, 0),
            recent: std::collections::VecDeque::new(),
            spare: Vec::new(),
        }
    }

    /// Closes the file without sealing (the segment is being deleted or was already cut).
    ///
    /// # Errors
    /// The close's failure.
    pub fn close(mut self, io: &mut dyn Io) -> Result<(), SegmentError> {
        self.return_buffers(io);
        let mut others = Vec::new();
        io::run(io, Op::Close { file: self.file }, &mut others)?.result?;
        Ok(())
    }

    /// Seals the segment: commits, writes the last partial page, syncs, truncates the file to its
    /// data, and closes. None of it needs new space; the index files are
    /// [`SealedSegment::write_indexes`].
    ///
    /// # Errors
    /// Any I/O failure (which poisons the segment).
    pub fn seal(mut self, io: &mut dyn Io) -> Result<SealedSegment, SegmentError> {
        self.commit(io)?;
        let mut others = Vec::new();
        let tail_len = (self.data_len - self.buf_start) as usize;
        if tail_len > 0 {
            // The bytes past the data in the buffer are from an earlier use: zero them so the
            // padding of the last page is zeroes until the truncate below removes it.
            self.buf.as_mut_slice()[tail_len..PAGE_SIZE_BYTES].fill(0);
            let buf = std::mem::replace(&mut self.buf, AlignedBuf::new(PAGE_SIZE_BYTES));
            let written = io::run(
                io,
                Op::Write {
                    file: self.file,
                    offset: self.buf_start,
                    buf,
                    range: 0..PAGE_SIZE_BYTES,
                },
                &mut others,
            )?;
            if let Some(buf) = written.buf {
                io.recycle(buf);
            }
            written.result?;
        }
        self.return_buffers(io);
        for op in [
            Op::Fdatasync { file: self.file },
            Op::Truncate {
                file: self.file,
                len: self.data_len,
            },
            Op::Fdatasync { file: self.file },
            Op::Close { file: self.file },
        ] {
            io::run(io, op, &mut others)?.result?;
        }
        Ok(SealedSegment {
            base_offset: self.base_offset,
            next_offset: self.next_offset,
            data_len: self.data_len,
            indexes: self.indexes,
        })
    }
}

impl SealedSegment {
    /// Writes the `.index` and `.timeindex` of a sealed segment. Kept apart from
    /// [`SegmentWriter::seal`] because these are new files that need free space: a failure here
    /// (ENOSPC) leaves a sealed segment whose data is whole and readable, and whose index
    /// files recovery rebuilds.
    ///
    /// # Errors
    /// The I/O failure.
    pub fn write_indexes(&self, io: &mut dyn Io, dir: &Path) -> Result<(), SegmentError> {
        io::write_file(
            io,
            &offset_index_path(dir, self.base_offset),
            &self.indexes.encode_offset_index(),
        )?;
        io::write_file(
            io,
            &time_index_path(dir, self.base_offset),
            &self.indexes.encode_time_index(),
        )?;
        Ok(())
    }
}

/// Reads `[from, to)` of a direct file; a short read is an error here (the bytes are durable).
fn read_file(io: &mut dyn Io, file: FileId, from: u64, to: u64) -> Result<Vec<u8>, SegmentError> {
    let want = (to - from) as usize;
    let bytes = io::read_direct(io, file, from, want)?;
    if bytes.len() < want {
        return Err(SegmentError::ShortRead {
            position: from,
            wanted_bytes: want,
            got_bytes: bytes.len(),
        });
    }
    Ok(bytes)
}
