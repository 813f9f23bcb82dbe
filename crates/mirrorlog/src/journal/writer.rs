//! Writing a shard's journal through its `Io`: entries gather into blocks; a block that is full
//! is placed in the [`Ring`] at once and waits, and a flush writes every waiting block and then
//! syncs the file: one fdatasync per flush, whatever the number of entries and blocks (at most
//! [`FLUSH_BLOCKS_MAX`] wait for one). A flush of one block links its write and fdatasync; the
//! blocks of a larger one are written side by side (a linked chain would run them one after
//! another: measured, 17 blocks took 16–23 ms where one write of the same bytes took 6), and
//! its fdatasync starts when the last of them completed ([`Finished::Syncing`]). At most [`FLUSHES_IN_FLIGHT_MAX`] flushes are in
//! flight, acknowledged in order: blocks of flush `n + 1` only after those of flush `n`, so the
//! chain recovery follows never has a hole below an acknowledged block.
//!
//! Space comes back in two steps: [`JournalWriter::release_below`] writes a superblock naming the
//! new start (alternating slots, synced), and only once that is durable does the ring let blocks
//! overwrite the released space: until then a power cut would restart reading from the old
//! start, through the released blocks.
//!
//! A failed write or fdatasync poisons the writer: every later call returns that error.

use super::{
    BlockBuilder, Entry, JournalError, Ring, Superblock, BLOCK_BYTES_MAX, FIRST_BLOCK_POSITION,
    SUPERBLOCK_SLOT_SIZE_BYTES,
};
use crate::io::{
    self, AlignedBuf, Completion, FallocateMode, FileId, Io, IoError, Op, OpId, OpenOptions,
};
use std::path::Path;

/// Why a journal write failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JournalWriteError {
    /// The operating system refused an operation (this poisons the writer).
    #[error("journal i/o: {0}")]
    Io(#[from] IoError),
    /// The entry or setting was refused (nothing was written).
    #[error(transparent)]
    Refused(#[from] JournalError),
}

/// What [`JournalWriter::start_flush`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flush {
    /// The blocks `first..=last` are on their way: their writes and one fdatasync, linked.
    Started {
        /// The first block's lsn.
        first: u64,
        /// The last block's lsn.
        last: u64,
        /// Its operations, for routing completions.
        ops: Vec<OpId>,
    },
    /// No entries, or a flush already in flight.
    Nothing,
    /// No room in the ring: checkpoint partitions and release space first.
    Full,
}

/// What a completion finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// Part of an operation chain still in flight.
    Nothing,
    /// Every block up to and including `last` is durable: every entry in them is.
    Blocks {
        /// The newest durable block's lsn.
        last: u64,
    },
    /// The superblock releasing every block below `lsn` is durable; their space is free.
    Released(u64),
    /// A flush's block writes completed and its fdatasync was submitted: route this
    /// operation's completion to the writer too.
    Syncing(OpId),
}

/// What [`JournalWriter::reserve`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserve {
    /// The entry goes into the block that will get this lsn.
    At(u64),
    /// Not before the flush in flight completes: enough blocks wait for it already.
    Later,
    /// Never in this journal as it stands: the entry is larger than a block, or the ring has
    /// no room for it until partitions checkpoint. Make the round durable another way.
    Never,
}

/// Flushes in flight at once. Each is acknowledged only after every older one (in lsn order),
/// but a second one in flight lets the device work on the next group of rounds while the first
/// one's fdatasync completes: group commit without an idle device between flushes.
pub const FLUSHES_IN_FLIGHT_MAX: usize = 2;

/// Most filled blocks waiting for one flush: the memory one shard's journal holds is this many
/// blocks and the one being filled, and one flush writes at most this many bytes.
pub const FLUSH_BLOCKS_MAX: usize = 32;

#[derive(Debug)]
struct InFlight {
    ops: Vec<OpId>,
    pending: usize,
    /// Block writes not completed yet whose fdatasync is not submitted yet (a flush of
    /// several blocks: see the module docs); 0 once it is, or when it was linked.
    writes_left: usize,
    /// The last block's lsn, or the lsn released below.
    lsn: u64,
}

/// A filled block, placed in the ring, waiting for the next flush.
#[derive(Debug)]
struct Filled {
    position: u64,
    buf: AlignedBuf,
    len: usize,
}

/// Counters of the journal's work (for the bench and stats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalCounters {
    /// Flushes started (each one fdatasync).
    pub flushes: u64,
    /// Blocks written.
    pub blocks: u64,
    /// Bytes written into the journal (blocks, padding included; superblocks not).
    pub bytes_written: u64,
    /// Superblocks written to release space.
    pub releases: u64,
}

/// See the module docs.
#[derive(Debug)]
pub struct JournalWriter {
    file: FileId,
    shard: u32,
    journal_bytes: u64,
    ring: Ring,
    sequence: u64,
    builder: BlockBuilder,
    /// The block being filled (`BLOCK_BYTES_MAX`).
    buf: AlignedBuf,
    /// Filled blocks placed in the ring, oldest first, for the next flush.
    filled: Vec<Filled>,
    /// Block buffers back from the device, for the next blocks.
    spares: Vec<AlignedBuf>,
    /// Flushes in flight, oldest first (at most [`FLUSHES_IN_FLIGHT_MAX`]).
    flights: std::collections::VecDeque<InFlight>,
    superblock: Option<InFlight>,
    poisoned: Option<IoError>,
    counters: JournalCounters,
    /// The lsn after the newest durable block.
    durable_next: u64,
}

/// The bytes of zeroes one write puts down when a journal file is first made.
const ZERO_FILL_WRITE_BYTES: usize = 1 << 20;

impl JournalWriter {
    /// Starts the journal at `path` afresh: a durable superblock whose first block gets lsn
    /// `first_lsn`, the directory entry durable too. A file of `journal_bytes` already there is
    /// reused as it is (its blocks stay, below `first_lsn`, and no chain reaches them); any
    /// other is emptied, allocated and written with zeroes once, so that blocks never land in
    /// unwritten extents (on ext4 their first write would make each flush commit metadata).
    ///
    /// The caller makes sure no partition still needs the old journal's entries (they were
    /// replayed, durably), and that `first_lsn` is above every lsn the file may hold: above
    /// the old chain's end by more than the blocks of the flushes that may be in flight
    /// ([`FLUSHES_IN_FLIGHT_MAX`] × [`FLUSH_BLOCKS_MAX`]), since the blocks of unacknowledged
    /// flushes may lie past a torn one (`Loaded::lsn_floor_for_next`).
    ///
    /// # Errors
    /// [`JournalWriteError::Refused`] for a bad size, [`JournalWriteError::Io`] otherwise.
    pub fn create(
        io: &mut dyn Io,
        path: &Path,
        shard: u32,
        journal_bytes: u64,
        first_lsn: u64,
    ) -> Result<Self, JournalWriteError> {
        super::check_size(journal_bytes)?;
        let file = io::open(
            io,
            path,
            OpenOptions {
                create: true,
                write: true,
                direct: true,
                directory: false,
            },
        )?;
        // The new superblock's sequence continues the old journal's, so that it wins whenever
        // it is on the disk.
        let old_sequence = io::read_direct(io, file, 0, FIRST_BLOCK_POSITION as usize)
            .ok()
            .and_then(|bytes| Superblock::newest(&bytes).ok())
            .map_or(0, |sb| sb.sequence);
        let mut others = Vec::new();
        if io.file_len(file)? != journal_bytes {
            io::run(io, Op::Truncate { file, len: 0 }, &mut others)?.result?;
            io::run(
                io,
                Op::Fallocate {
                    file,
                    offset: 0,
                    len: journal_bytes,
                    mode: FallocateMode::Extend,
                },
                &mut others,
            )?
            .result?;
            zero_fill(io, file, journal_bytes)?;
        }
        let mut w = JournalWriter {
            file,
            shard,
            journal_bytes,
            ring: Ring::new(journal_bytes, FIRST_BLOCK_POSITION, first_lsn),
            sequence: old_sequence,
            builder: BlockBuilder::new(),
            buf: io.buffer(BLOCK_BYTES_MAX),
            filled: Vec::new(),
            spares: Vec::new(),
            flights: std::collections::VecDeque::new(),
            superblock: None,
            poisoned: None,
            counters: JournalCounters::default(),
            durable_next: first_lsn,
        };
        let slot = w.next_superblock(io, FIRST_BLOCK_POSITION, first_lsn);
        let written = io::run(io, slot, &mut others)?;
        if let Some(buf) = written.buf {
            io.recycle(buf);
        }
        written.result?;
        io::run(io, Op::Fdatasync { file }, &mut others)?.result?;
        if let Some(dir) = path.parent() {
            io::fsync_dir(io, dir)?;
        }
        Ok(w)
    }

    fn next_superblock(&mut self, io: &mut dyn Io, start_position: u64, start_lsn: u64) -> Op {
        self.sequence += 1;
        let sb = Superblock {
            sequence: self.sequence,
            start_position,
            start_lsn,
            journal_bytes: self.journal_bytes,
            shard: self.shard,
        };
        let mut buf = io.buffer(SUPERBLOCK_SLOT_SIZE_BYTES);
        sb.encode_into(buf.as_mut_slice());
        Op::Write {
            file: self.file,
            offset: sb.slot_position(),
            buf,
            range: 0..SUPERBLOCK_SLOT_SIZE_BYTES,
        }
    }

    fn check(&self) -> Result<(), JournalWriteError> {
        match &self.poisoned {
            Some(e) => Err(JournalWriteError::Io(e.clone())),
            None => Ok(()),
        }
    }

    fn poison(&mut self, e: IoError) -> JournalWriteError {
        self.poisoned.get_or_insert(e.clone());
        JournalWriteError::Io(e)
    }

    /// The failure that poisoned the writer, if one did.
    #[must_use]
    pub fn poisoned(&self) -> Option<&IoError> {
        self.poisoned.as_ref()
    }

    /// The ring (space, lsns).
    #[must_use]
    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    /// The journal's counters.
    #[must_use]
    pub fn counters(&self) -> JournalCounters {
        self.counters
    }

    /// The lsn after the newest durable block: space below it may be released once no
    /// partition needs its entries; blocks from it on are still being written.
    #[must_use]
    pub fn durable_next(&self) -> u64 {
        self.durable_next
    }

    /// Entries in the block being filled.
    #[must_use]
    pub fn entries(&self) -> u32 {
        self.builder.entries()
    }

    /// Whether entries wait for a flush (in the block being filled or in filled blocks).
    #[must_use]
    pub fn has_unflushed(&self) -> bool {
        self.builder.entries() > 0 || !self.filled.is_empty()
    }

    /// Whether a flush is in flight.
    #[must_use]
    pub fn flushing(&self) -> bool {
        !self.flights.is_empty()
    }

    /// Whether another flush may start now ([`FLUSHES_IN_FLIGHT_MAX`]).
    #[must_use]
    pub fn can_flush(&self) -> bool {
        self.flights.len() < FLUSHES_IN_FLIGHT_MAX
    }

    /// Whether a release (a superblock) is in flight.
    #[must_use]
    pub fn releasing(&self) -> bool {
        self.superblock.is_some()
    }

    /// The lsn the block being filled will get (blocks are numbered as they fill).
    #[must_use]
    pub fn filling_lsn(&self) -> u64 {
        self.ring.next_lsn()
    }

    /// Makes room for an entry of `entry_bytes` (see [`Entry::encoded_bytes`]): in the block
    /// being filled, or in a new one after the full one is placed in the ring for the next
    /// flush. Then [`JournalWriter::push`] it.
    pub fn reserve(&mut self, io: &mut dyn Io, entry_bytes: usize) -> Reserve {
        if self.poisoned.is_some() {
            return Reserve::Never;
        }
        let with = self.builder.bytes_with(entry_bytes);
        if with <= BLOCK_BYTES_MAX {
            return match self.ring.place(with as u64) {
                Some(_) => Reserve::At(self.ring.next_lsn()),
                None => Reserve::Never,
            };
        }
        if self.builder.entries() == 0 {
            return Reserve::Never; // larger than any block
        }
        if self.filled.len() >= FLUSH_BLOCKS_MAX {
            return Reserve::Later;
        }
        let alone = super::page_ceil(super::BLOCK_HEADER_SIZE_BYTES + entry_bytes);
        if alone > BLOCK_BYTES_MAX {
            return Reserve::Never;
        }
        if !self.seal_filling(io) {
            return Reserve::Never;
        }
        match self.ring.place(alone as u64) {
            Some(_) => Reserve::At(self.ring.next_lsn()),
            None => Reserve::Never,
        }
    }

    /// Places the block being filled in the ring and moves it to the filled blocks; `false`
    /// when the ring has no room for it (nothing changes then).
    fn seal_filling(&mut self, io: &mut dyn Io) -> bool {
        let bytes = self.builder.bytes_with(0);
        let Some((lsn, position)) = self.ring.push(bytes as u64) else {
            return false;
        };
        let len = self.builder.finish(self.buf.as_mut_slice(), lsn);
        let next = self
            .spares
            .pop()
            .unwrap_or_else(|| io.buffer(BLOCK_BYTES_MAX));
        let buf = std::mem::replace(&mut self.buf, next);
        self.filled.push(Filled { position, buf, len });
        true
    }

    /// Adds `entry` to the block being filled (after [`JournalWriter::reserve`] said where).
    ///
    /// # Errors
    /// [`JournalWriteError::Refused`] (nothing added): a malformed entry, or no room in the
    /// block.
    pub fn push(&mut self, entry: &Entry<'_>) -> Result<(), JournalWriteError> {
        self.check()?;
        self.builder.push(self.buf.as_mut_slice(), entry)?;
        Ok(())
    }

    /// Writes the blocks waiting (the filled ones and the one being filled), then one
    /// fdatasync, linked, in at most `ops_max` operations (a ring's room: blocks past it wait
    /// for the next flush); nothing when no entry waits or a flush is in flight.
    ///
    /// # Errors
    /// A submission failure, which poisons the writer.
    pub fn start_flush(
        &mut self,
        io: &mut dyn Io,
        ops_max: usize,
    ) -> Result<Flush, JournalWriteError> {
        self.check()?;
        if !self.can_flush() || !self.has_unflushed() {
            return Ok(Flush::Nothing);
        }
        // When the ring has no room for the block being filled, the filled blocks go now and
        // it waits for room.
        if self.builder.entries() > 0 && !self.seal_filling(io) && self.filled.is_empty() {
            return Ok(Flush::Full);
        }
        let take = self.filled.len().min(ops_max.max(2) - 1);
        // Placed blocks left for the next flush (a block still being filled is not placed).
        let waiting = (self.filled.len() - take) as u64;
        let last = self.ring.next_lsn() - 1 - waiting;
        let count = take as u64;
        let first = last + 1 - count;
        let mut writes = Vec::with_capacity(take + 1);
        for f in self.filled.drain(..take) {
            self.counters.bytes_written += f.len as u64;
            writes.push(Op::Write {
                file: self.file,
                offset: f.position,
                buf: f.buf,
                range: 0..f.len,
            });
        }
        self.counters.flushes += 1;
        self.counters.blocks += count;
        let (ops, writes_left) = if writes.len() == 1 {
            writes.push(Op::Fdatasync { file: self.file });
            let ops = io.submit_chain(writes).map_err(|e| self.poison(e))?;
            (ops, 0)
        } else {
            // Side by side; the fdatasync follows the last (`on_completion`).
            let n = writes.len();
            let mut ops = Vec::with_capacity(n + 1);
            for write in writes {
                ops.push(io.submit(write).map_err(|e| self.poison(e))?);
            }
            (ops, n)
        };
        self.flights.push_back(InFlight {
            pending: ops.len() + usize::from(writes_left > 0),
            ops: ops.clone(),
            writes_left,
            lsn: last,
        });
        Ok(Flush::Started { first, last, ops })
    }

    /// Starts releasing every block below `lsn` (their partitions checkpointed past them): a
    /// superblock naming the new start, synced. Returns its operations, or `None` when a
    /// release is already in flight or nothing would move.
    ///
    /// # Errors
    /// A submission failure, which poisons the writer.
    pub fn release_below(
        &mut self,
        io: &mut dyn Io,
        lsn: u64,
    ) -> Result<Option<Vec<OpId>>, JournalWriteError> {
        self.check()?;
        if self.superblock.is_some() || self.ring.oldest_live_lsn().is_none_or(|l| l >= lsn) {
            return Ok(None);
        }
        let mut after = self.ring.clone();
        after.release_below(lsn);
        let (position, start_lsn) = after.start();
        let write = self.next_superblock(io, position, start_lsn);
        let ops = io
            .submit_chain(vec![write, Op::Fdatasync { file: self.file }])
            .map_err(|e| self.poison(e))?;
        self.counters.releases += 1;
        self.superblock = Some(InFlight {
            pending: ops.len(),
            ops: ops.clone(),
            writes_left: 0,
            lsn,
        });
        Ok(Some(ops))
    }

    /// Whether `completion` belongs to this writer.
    #[must_use]
    pub fn owns(&self, completion: &Completion) -> bool {
        self.flights
            .iter()
            .chain(&self.superblock)
            .any(|f| f.ops.contains(&completion.id))
    }

    /// The operations in flight (a flush's and a release's), for a caller that must wait for
    /// them in place.
    #[must_use]
    pub fn ops_in_flight(&self) -> Vec<OpId> {
        self.flights
            .iter()
            .chain(&self.superblock)
            .flat_map(|f| f.ops.iter().copied())
            .collect()
    }

    /// Feeds a completion of this writer's operations.
    ///
    /// # Errors
    /// The operation's failure, which poisons the writer.
    pub fn on_completion(
        &mut self,
        io: &mut dyn Io,
        completion: Completion,
    ) -> Result<Finished, JournalWriteError> {
        if let Some(buf) = completion.buf {
            if buf.capacity() >= BLOCK_BYTES_MAX && self.spares.len() < 2 {
                self.spares.push(buf);
            } else {
                io.recycle(buf);
            }
        }
        if let Err(e) = completion.result {
            return Err(self.poison(e));
        }
        let id = completion.id;
        if let Some(at) = self.flights.iter().position(|f| f.ops.contains(&id)) {
            let flight = &mut self.flights[at];
            flight.pending -= 1;
            flight.ops.retain(|&o| o != id);
            if flight.writes_left > 0 {
                // A block write of a flush of several: the last one's completion submits the
                // fdatasync, which then covers every block of the flush.
                flight.writes_left -= 1;
                if flight.writes_left > 0 {
                    return Ok(Finished::Nothing);
                }
                let sync = match io.submit(Op::Fdatasync { file: self.file }) {
                    Ok(op) => op,
                    Err(e) => return Err(self.poison(e)),
                };
                self.flights[at].ops.push(sync);
                return Ok(Finished::Syncing(sync));
            }
            // Flushes are acknowledged in order: one that completes before an older one waits
            // for it (the chain recovery follows must hold every acknowledged block).
            let mut last = None;
            while self.flights.front().is_some_and(|f| f.pending == 0) {
                if let Some(f) = self.flights.pop_front() {
                    last = Some(f.lsn);
                }
            }
            return Ok(match last {
                Some(last) => {
                    self.durable_next = last + 1;
                    Finished::Blocks { last }
                }
                None => Finished::Nothing,
            });
        }
        if let Some(flight) = self.superblock.as_mut().filter(|f| f.ops.contains(&id)) {
            flight.pending -= 1;
            flight.ops.retain(|&o| o != id);
            if flight.pending > 0 {
                return Ok(Finished::Nothing);
            }
            let lsn = flight.lsn;
            self.superblock = None;
            self.ring.release_below(lsn);
            return Ok(Finished::Released(lsn));
        }
        Ok(Finished::Nothing)
    }

    /// Hands the writer's buffers back to the Io (close). Operations in flight keep theirs.
    pub fn return_buffers(&mut self, io: &mut dyn Io) {
        io.recycle(std::mem::replace(&mut self.buf, AlignedBuf::empty()));
        for f in self.filled.drain(..) {
            io.recycle(f.buf);
        }
        for buf in self.spares.drain(..) {
            io.recycle(buf);
        }
    }

    /// Closes the file (after [`JournalWriter::return_buffers`], nothing in flight).
    ///
    /// # Errors
    /// The close's failure.
    pub fn close(mut self, io: &mut dyn Io) -> Result<(), IoError> {
        self.return_buffers(io);
        io::run(io, Op::Close { file: self.file }, &mut Vec::new())?.result?;
        Ok(())
    }
}

/// Writes zeroes over `[0, journal_bytes)` and syncs them (a new journal file).
fn zero_fill(io: &mut dyn Io, file: FileId, journal_bytes: u64) -> Result<(), IoError> {
    const IN_FLIGHT: u64 = 8;
    let chunk = ZERO_FILL_WRITE_BYTES as u64;
    let mut position = 0;
    let mut done = Vec::new();
    while position < journal_bytes {
        let mut chain = Vec::new();
        while position < journal_bytes && (chain.len() as u64) < IN_FLIGHT {
            let len = chunk.min(journal_bytes - position) as usize;
            let mut buf = io.buffer(ZERO_FILL_WRITE_BYTES);
            buf.as_mut_slice()[..len].fill(0);
            chain.push(Op::Write {
                file,
                offset: position,
                buf,
                range: 0..len,
            });
            position += len as u64;
        }
        let ops = io.submit_chain(chain)?;
        let mut left = ops.len();
        let mut others = Vec::new();
        while left > 0 {
            io.complete_for(&ops, &mut done)?;
            for c in done.drain(..) {
                if !ops.contains(&c.id) {
                    others.push(c);
                    continue;
                }
                left -= 1;
                if let Some(buf) = c.buf {
                    io.recycle(buf);
                }
                c.result?;
            }
        }
        io.requeue(others);
    }
    io::run(io, Op::Fdatasync { file }, &mut done)?.result?;
    Ok(())
}
