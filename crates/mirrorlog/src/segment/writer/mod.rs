//! The active segment: appends into an aligned buffer, commit rounds with write-once pages and
//! commit records, and sealing.
//!
//! Positions, in increasing order (all byte positions in the `.log` file):
//!
//! ```text
//! 0 ……… buf_start ……… synced_pages_end ……… data_len ………… data_region ── slot 0 ── slot 1
//!   (page-aligned: the        (full pages durable,
//!    resident buffer           in the file or in the
//!    holds [buf_start,         shard's journal)
//!    data_len))
//! ```
//!
//! `buf_start` may also lie above `synced_pages_end` while a round's pages are in flight.
//!
//! Contract:
//! - A page of the data region is written exactly once, when full (or at seal). The partial
//!   tail page goes into the commit record in the slot *not* holding the newest valid record, so
//!   every acknowledged byte always has an intact durable copy that no in-flight write touches.
//! - A journal round leaves its full pages in the buffer (deferred: the journal holds them)
//!   until the buffer holds [`DEFERRED_PAGES_MAX_BYTES`], a checkpoint or an ordinary round
//!   takes them, or an idle writer writes them ([`SegmentWriter::start_page_write`]): wide
//!   rounds of small appends cost one large write per partition now and then, not one small
//!   write per partition per round. Deferred pages are read from the buffer, and from a copy
//!   while their write is in flight.
//! - A commit round writes the newly full pages and the commit record, then — after both
//!   completed — one fdatasync of the file. Only then is the round durable ([`Durable`]).
//! - At most one round is in flight; appends continue into a fresh buffer meanwhile.
//! - Disk is reserved in steps: at creation only the commit slots are allocated (past the data
//!   region, which sets the file's size, so the data region reads as zeros); before an append
//!   goes beyond the reserved part of the data region, [`SegmentWriter::reserve_for`] allocates
//!   the next step (`fallocate` keeping the size), growing from [`PREALLOCATE_FIRST_STEP_BYTES`]
//!   by doubling up to `preallocate_step_bytes`, so data writes land in allocated space (in
//!   place, not punted to kernel workers) and an idle partition holds almost no disk. Sealing
//!   writes the last partial page, syncs, and truncates the file to exactly its data (the slots
//!   and the unused reservation vanish), leaving what Kafka would hold.
//! - A failed write or fdatasync poisons the segment: every later call returns that error.

mod journal_round;
pub use journal_round::{JournalStart, DEFERRED_PAGES_MAX_BYTES, DIRECT_ROUND_BYTES};
mod reopen;
mod round;
pub use round::ROUND_OPS_MAX;
mod seal;

use super::commit_record::COMMIT_SLOT_SIZE_BYTES;
use super::index::SegmentIndexes;
use super::{log_path, SegmentError};
use crate::format::{self, Offset};
use crate::io::{
    self, AlignedBuf, BufferPool, FallocateMode, FileId, Io, Op, OpId, OpenOptions, PAGE_SIZE_BYTES,
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
    /// The largest step disk is reserved in ahead of the appends (see the module docs).
    pub preallocate_step_bytes: u64,
}

/// The first reservation of a segment's data region; later ones double, up to
/// `preallocate_step_bytes`.
pub const PREALLOCATE_FIRST_STEP_BYTES: u64 = 1 << 20;
/// Default `preallocate_step_bytes`.
pub const PREALLOCATE_STEP_BYTES_DEFAULT: u64 = 32 << 20;

impl Default for SegmentConfig {
    fn default() -> Self {
        SegmentConfig {
            segment_bytes: 1 << 30,
            index_interval_bytes: 4096,
            commit_buffer_bytes: 2 << 20,
            preallocate_step_bytes: PREALLOCATE_STEP_BYTES_DEFAULT,
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
    /// A journal round's block, until it is durable (it counts in `pending`).
    block_lsn: Option<u64>,
    /// A journal round (no commit record): a checkpoint is a round that is not.
    journaled: bool,
    /// A checkpoint made durable by the caller's filesystem-wide sync, not its own fdatasync
    /// (it counts in `pending`): [`SegmentWriter::on_synced`].
    awaits_sync: bool,
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
    /// The data region is allocated on disk below this (page-aligned; see the module docs).
    reserved_end: u64,
    data_len: u64,
    next_offset: Offset,
    /// The append buffer; `AlignedBuf::empty()` while handed back (an idle writer:
    /// [`SegmentWriter::release_buffers`]).
    buf: AlignedBuf,
    /// The append buffer's size when one is attached.
    buffer_bytes: usize,
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
    /// This writer's identity in its commit records and journal entries: drawn afresh by each
    /// writer of the file, so entries of an earlier writer (a deleted partition's, one before a
    /// reopen) never apply to this one.
    segment_id: u64,
    /// The lsn of its oldest journal entry no commit record supersedes yet.
    journal_low: Option<u64>,
    /// Deferred durable pages whose buffer left with the write in flight: `(file position,
    /// bytes)`, up to `synced_pages_end`; reads take them from here until the round finishes.
    leaving: Option<(u64, Vec<u8>)>,
}

/// Rounds whose pages stay resident for reads.
const RECENT_ROUNDS_MAX: usize = 1;

/// A segment writer's identity: unique in practice (the clock's nanoseconds and a process
/// counter, mixed), never 0 (version 1 records' value).
fn new_segment_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // splitmix64 of the two.
    let mut z = nanos ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(std::process::id()) << 40;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).max(1)
}

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
        let indexes = SegmentIndexes::new(base_offset, config.index_interval_bytes);
        w.install(io, 0, base_offset, Vec::new(), indexes)?;
        w.attach_buffer(io);
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
        let data_region_bytes = super::data_region_bytes(config.segment_bytes);
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
        // The slots, past the data region: this sets the file's size; the data region is
        // reserved in steps as appends need it (`reserve_for`).
        let mut others = Vec::new();
        io::run(
            io,
            Op::Fallocate {
                file,
                offset: data_region_bytes,
                len: super::preallocated_bytes(config.segment_bytes) - data_region_bytes,
                mode: FallocateMode::Extend,
            },
            &mut others,
        )?
        .result?;
        // The new file's directory entry must be durable before anything in it is
        // acknowledged: without this a power cut can forget the file whole (found by the
        // simulator's directory model: a roll whose snapshot rename met ENOSPC left the new
        // segment's entry unsynced while its appends were acknowledged).
        io::fsync_dir(io, dir)?;
        let pool = BufferPool::new(buffer_bytes, 2);
        Ok(SegmentWriter {
            base_offset,
            config,
            file,
            data_region_bytes,
            reserved_end: 0,
            data_len: 0,
            next_offset: base_offset,
            // `create` and the reopens attach one when they are done (a log that only opens
            // a partition hands it back at once: `release_buffers`).
            buf: AlignedBuf::empty(),
            buffer_bytes,
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
            segment_id: new_segment_id(),
            journal_low: None,
            leaving: None,
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

    /// Reserves disk for `bytes` more data (an append about to be made), in steps: when the
    /// data would pass the reserved part of the data region, the next step is allocated first
    /// (at least what the append needs; see the module docs). Nothing changes on failure.
    ///
    /// # Errors
    /// The `fallocate`'s failure (`NoSpace` when the disk is full); it does not poison.
    pub fn reserve_for(&mut self, io: &mut dyn Io, bytes: u64) -> Result<(), SegmentError> {
        self.check()?;
        let page = PAGE_SIZE_BYTES as u64;
        let needed = (self.data_len + bytes).div_ceil(page) * page;
        if needed <= self.reserved_end || self.reserved_end >= self.data_region_bytes {
            return Ok(());
        }
        let largest = self.config.preallocate_step_bytes.max(page);
        let step = self
            .reserved_end
            .max(PREALLOCATE_FIRST_STEP_BYTES)
            .min(largest);
        let end = needed
            .max(self.reserved_end + step)
            .div_ceil(page)
            .saturating_mul(page)
            .min(self.data_region_bytes);
        let mut others = Vec::new();
        io::run(
            io,
            Op::Fallocate {
                file: self.file,
                offset: self.reserved_end,
                len: end - self.reserved_end,
                mode: FallocateMode::KeepSize,
            },
            &mut others,
        )?
        .result?;
        self.reserved_end = end;
        Ok(())
    }

    /// Where the reserved part of the data region ends.
    #[must_use]
    pub fn reserved_end(&self) -> u64 {
        self.reserved_end
    }

    /// Size of the append buffer: the largest request one round can take.
    #[must_use]
    pub fn buffer_capacity(&self) -> usize {
        self.buffer_bytes
    }

    /// Room left for appends before the next commit round must start.
    #[must_use]
    pub fn buffer_room(&self) -> usize {
        self.buffer_bytes - (self.data_len - self.buf_start) as usize
    }

    /// Whether the writer holds no buffers (handed back while idle).
    #[must_use]
    pub fn is_detached(&self) -> bool {
        self.buf.capacity() == 0
    }

    /// Hands every buffer back to the Io when the writer is idle — no round in flight,
    /// everything appended durable — so an idle partition holds no append buffer; the partial
    /// last page stays in the durable tail it is copied back from. Returns whether it did.
    pub fn release_buffers(&mut self, io: &mut dyn Io) -> bool {
        if self.is_detached()
            || self.round.is_some()
            || self.data_len != self.durable.data_len
            || self.has_deferred_pages()
        {
            return false;
        }
        self.return_buffers(io);
        self.debug_check_invariants();
        true
    }

    /// Whether full pages made durable by journal rounds wait in the buffer for their write
    /// (an idle writer writes them with [`SegmentWriter::start_page_write`] before it can hand
    /// its buffer back).
    #[must_use]
    pub fn has_deferred_pages(&self) -> bool {
        self.buf_start < self.synced_pages_end
    }

    /// Makes the append buffer `bytes` large (never smaller) once the writer is idle — no
    /// round in flight, everything appended durable — so that a partition whose
    /// `max.message.bytes` was raised takes a batch larger than its old buffer without waiting
    /// for its next segment. Returns whether the buffer is now at least `bytes`.
    pub fn grow_buffer(&mut self, io: &mut dyn Io, bytes: usize) -> bool {
        let bytes = bytes.max(2 * PAGE_SIZE_BYTES);
        if bytes <= self.buffer_bytes {
            return true;
        }
        if !self.is_detached() && !self.release_buffers(io) {
            return false;
        }
        self.buffer_bytes = bytes;
        self.pool = BufferPool::new(bytes, 2);
        true
    }

    /// Takes an append buffer again after [`SegmentWriter::release_buffers`] (nothing to do
    /// otherwise), with the partial last page copied back into it.
    pub fn attach_buffer(&mut self, io: &mut dyn Io) {
        if !self.is_detached() {
            return;
        }
        let mut buf = io.buffer(self.buffer_bytes);
        let tail = &self.durable_tail;
        buf.as_mut_slice()[..tail.len()].copy_from_slice(tail);
        self.buf = buf;
        self.debug_check_invariants();
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
        if self.is_detached() {
            return Err(SegmentError::BufferDetached);
        }
        // Kafka's `LogSegment.ensureOffsetInRange`: every offset of the segment is its base
        // plus a relative offset in 0..=i32::MAX (the indexes hold 32-bit relative offsets).
        // The log rolls before this is reached; the segment refuses by itself all the same.
        let first_offset = stamp.map_or_else(
            || {
                batch
                    .get(..8)
                    .and_then(|b| <[u8; 8]>::try_from(b).ok())
                    .map_or(last_offset, |b| Offset(i64::from_be_bytes(b)))
            },
            |(base, _)| base,
        );
        for offset in [first_offset, last_offset] {
            let relative = offset.0.checked_sub(self.base_offset.0);
            if !relative.is_some_and(|r| (0..=i64::from(i32::MAX)).contains(&r)) {
                return Err(SegmentError::OffsetOutOfRange {
                    base_offset: self.base_offset,
                    offset,
                });
            }
        }
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
        self.debug_check_invariants();
        Ok(position)
    }

    /// Asserts the writer's invariants (STYLE §4): the positions in the module docs' order,
    /// `synced_pages_end ≤ buf_start ≤ data_len ≤ data_region`, the first two page-aligned;
    /// the resident buffer holding `[buf_start, data_len)`; the durable state behind the
    /// appended one and past the synced pages, its tail exactly the bytes above them; a round
    /// in flight between the durable and the appended state. Called after every mutation when
    /// debug assertions are on (tests, CI), and by tests directly.
    ///
    /// # Panics
    /// When one does not hold: a bug in the writer, never a property of the bytes it was given
    /// (those are validated before they reach it).
    pub fn check_invariants(&self) {
        let page = PAGE_SIZE_BYTES as u64;
        assert!(
            self.buf_start <= self.data_len && self.data_len <= self.data_region_bytes,
            "positions out of order: buf_start {} data_len {} data_region {}",
            self.buf_start,
            self.data_len,
            self.data_region_bytes
        );
        if let Some((start, bytes)) = &self.leaving {
            assert!(
                (self.round.is_some() || self.poisoned.is_some())
                    && start + bytes.len() as u64 == self.synced_pages_end
                    && *start < self.buf_start,
                "deferred pages leaving ([{start}, +{})) only with their round in flight, up to the synced pages {} and below the buffer {}",
                bytes.len(),
                self.synced_pages_end,
                self.buf_start
            );
        }
        assert!(
            self.synced_pages_end.is_multiple_of(page) && self.buf_start.is_multiple_of(page),
            "synced_pages_end {} and buf_start {} must be page-aligned",
            self.synced_pages_end,
            self.buf_start
        );
        assert!(
            self.data_len - self.buf_start <= self.buffer_bytes as u64,
            "the resident buffer ({} bytes) must hold [{}, {})",
            self.buffer_bytes,
            self.buf_start,
            self.data_len
        );
        if self.is_detached() {
            // Idle, or checkpointing what journal rounds made durable (a round that adds
            // nothing: its commit record supersedes the segment's journal entries).
            assert!(
                self.round
                    .as_ref()
                    .is_none_or(|r| r.data_len == self.data_len)
                    && self.data_len == self.durable.data_len
                    && self.buf_start == self.synced_pages_end,
                "a writer without buffers is idle: everything durable, its tail in durable_tail"
            );
        } else {
            assert!(
                self.buf.capacity() == self.buffer_bytes,
                "the append buffer has its configured size"
            );
        }
        assert!(
            self.synced_pages_end <= self.durable.data_len
                && self.durable.data_len <= self.data_len
                && self.durable.next_offset <= self.next_offset
                && self.base_offset <= self.durable.next_offset,
            "durable state (data_len {}, next {}) outside [synced pages {}, appended (data_len {}, next {})]",
            self.durable.data_len,
            self.durable.next_offset,
            self.synced_pages_end,
            self.data_len,
            self.next_offset
        );
        assert_eq!(
            self.durable_tail.len() as u64,
            self.durable.data_len - self.synced_pages_end,
            "the durable tail is the bytes between the synced pages and the durable end"
        );
        if let Some(round) = &self.round {
            assert!(
                self.durable.data_len <= round.data_len
                    && round.data_len <= self.data_len
                    && round.pages_start <= round.pages_end
                    && self.synced_pages_end <= round.pages_end
                    && round.pages_end <= round.data_len,
                "round in flight (pages [{}, {}), data_len {}) outside durable {} .. appended {}",
                round.pages_start,
                round.pages_end,
                round.data_len,
                self.durable.data_len,
                self.data_len
            );
        }
    }

    /// [`SegmentWriter::check_invariants`] when debug assertions are on; nothing otherwise.
    #[inline]
    pub(super) fn debug_check_invariants(&self) {
        if cfg!(debug_assertions) {
            self.check_invariants();
        }
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
        // Three places, in file order: pages in the file (or still in memory from their
        // write), deferred pages not written yet, the durable tail.
        let written_end = self.written_end();
        if end <= written_end {
            // From one place: one copy.
            return match self.resident(position, end) {
                Some(bytes) => Ok(bytes.to_vec()),
                None => read_file(io, self.file, position, end),
            };
        }
        let mut out = Vec::with_capacity((end - position) as usize);
        if position < written_end {
            match self.resident(position, written_end) {
                // Recently written pages are served from memory (O_DIRECT has no page cache).
                Some(bytes) => out.extend_from_slice(bytes),
                None => out.extend_from_slice(&read_file(io, self.file, position, written_end)?),
            }
        }
        let pages_end = end.min(self.synced_pages_end);
        if position.max(written_end) < pages_end {
            out.extend_from_slice(self.deferred(position.max(written_end), pages_end));
        }
        if end > self.synced_pages_end {
            let from = position.max(self.synced_pages_end);
            let tail = &self.durable_tail
                [(from - self.synced_pages_end) as usize..(end - self.synced_pages_end) as usize];
            out.extend_from_slice(tail);
        }
        Ok(out)
    }

    /// Where the pages not written to the file yet start (deferred ones: from the buffer, or
    /// from their copy while their write is in flight).
    fn written_end(&self) -> u64 {
        let deferred_from = self.leaving.as_ref().map_or(self.buf_start, |(s, _)| *s);
        deferred_from.min(self.synced_pages_end)
    }

    /// The deferred durable bytes `[from, to)`, within `[written_end, synced_pages_end)`.
    fn deferred(&self, from: u64, to: u64) -> &[u8] {
        match &self.leaving {
            Some((start, bytes)) => &bytes[(from - start) as usize..(to - start) as usize],
            None => &self.buf.as_slice()
                [(from - self.buf_start) as usize..(to - self.buf_start) as usize],
        }
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
