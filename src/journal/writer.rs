//! Writing a shard's journal through its `Io`: entries gather into one block; a flush writes the
//! block where the [`Ring`] places it and syncs it, linked (one fdatasync per block, whatever
//! the number of entries). At most one block is in flight: block `n + 1` is acknowledged only
//! after block `n`, so the chain recovery follows never has a hole below an acknowledged block.
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
    /// The block `lsn` is on its way (its write and fdatasync, linked).
    Started {
        /// The block's lsn.
        lsn: u64,
        /// Its operations, for routing completions.
        ops: Vec<OpId>,
    },
    /// No entries, or a block already in flight.
    Nothing,
    /// No room in the ring: checkpoint partitions and release space first.
    Full,
}

/// What a completion finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// Part of an operation chain still in flight.
    Nothing,
    /// The block `lsn` is durable: every entry in it is.
    Block(u64),
    /// The superblock releasing every block below `lsn` is durable; their space is free.
    Released(u64),
}

#[derive(Debug)]
struct InFlight {
    ops: Vec<OpId>,
    pending: usize,
    /// Block lsn, or the lsn released below.
    lsn: u64,
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
    /// The block being filled (`BLOCK_BYTES_MAX`), and one to fill while the other is written.
    buf: AlignedBuf,
    spare: Option<AlignedBuf>,
    block: Option<InFlight>,
    superblock: Option<InFlight>,
    poisoned: Option<IoError>,
}

impl JournalWriter {
    /// Creates (or empties and recreates) the journal at `path`: `journal_bytes` allocated, and
    /// a durable superblock whose first block gets lsn `first_lsn`. The caller makes sure no
    /// partition still needs an old journal there, and that `first_lsn` is above every lsn any
    /// partition has seen, so nothing an earlier journal wrote can pass for a new block. The
    /// directory entry is made durable too.
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
        // it is on the disk; and the file is emptied, so no old block outlives the creation.
        let old_sequence = io::read_direct(io, file, 0, FIRST_BLOCK_POSITION as usize)
            .ok()
            .and_then(|bytes| Superblock::newest(&bytes).ok())
            .map_or(0, |sb| sb.sequence);
        let mut others = Vec::new();
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
        let mut w = JournalWriter {
            file,
            shard,
            journal_bytes,
            ring: Ring::new(journal_bytes, FIRST_BLOCK_POSITION, first_lsn),
            sequence: old_sequence,
            builder: BlockBuilder::new(),
            buf: io.buffer(BLOCK_BYTES_MAX),
            spare: None,
            block: None,
            superblock: None,
            poisoned: None,
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

    /// The ring (space, lsns).
    #[must_use]
    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    /// Whether the block being filled has room for an entry of `entry_bytes` more.
    #[must_use]
    pub fn fits(&self, entry_bytes: usize) -> bool {
        self.builder.bytes_with(entry_bytes) <= BLOCK_BYTES_MAX
    }

    /// Entries in the block being filled.
    #[must_use]
    pub fn entries(&self) -> u32 {
        self.builder.entries()
    }

    /// Whether a block is being written.
    #[must_use]
    pub fn flushing(&self) -> bool {
        self.block.is_some()
    }

    /// The lsn the block being filled will get (blocks are numbered as they are flushed, one
    /// at a time).
    #[must_use]
    pub fn filling_lsn(&self) -> u64 {
        self.ring.next_lsn()
    }

    /// Adds `entry` to the block being filled.
    ///
    /// # Errors
    /// [`JournalWriteError::Refused`] (nothing added): a malformed entry, or no room in the
    /// block (flush first).
    pub fn push(&mut self, entry: &Entry<'_>) -> Result<(), JournalWriteError> {
        self.check()?;
        self.builder.push(self.buf.as_mut_slice(), entry)?;
        Ok(())
    }

    /// Writes the block being filled, if there is one and none is in flight.
    ///
    /// # Errors
    /// A submission failure, which poisons the writer.
    pub fn start_flush(&mut self, io: &mut dyn Io) -> Result<Flush, JournalWriteError> {
        self.check()?;
        if self.block.is_some() || self.builder.entries() == 0 {
            return Ok(Flush::Nothing);
        }
        let block_bytes = self.builder.bytes_with(0);
        let Some((lsn, position)) = self.ring.push(block_bytes as u64) else {
            return Ok(Flush::Full);
        };
        let len = self.builder.finish(self.buf.as_mut_slice(), lsn);
        let next = self
            .spare
            .take()
            .unwrap_or_else(|| io.buffer(BLOCK_BYTES_MAX));
        let full = std::mem::replace(&mut self.buf, next);
        let chain = vec![
            Op::Write {
                file: self.file,
                offset: position,
                buf: full,
                range: 0..len,
            },
            Op::Fdatasync { file: self.file },
        ];
        let ops = io.submit_chain(chain).map_err(|e| self.poison(e))?;
        self.block = Some(InFlight {
            pending: ops.len(),
            ops: ops.clone(),
            lsn,
        });
        Ok(Flush::Started { lsn, ops })
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
        self.superblock = Some(InFlight {
            pending: ops.len(),
            ops: ops.clone(),
            lsn,
        });
        Ok(Some(ops))
    }

    /// Whether `completion` belongs to this writer.
    #[must_use]
    pub fn owns(&self, completion: &Completion) -> bool {
        [&self.block, &self.superblock]
            .into_iter()
            .flatten()
            .any(|f| f.ops.contains(&completion.id))
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
            if buf.capacity() >= BLOCK_BYTES_MAX && self.spare.is_none() {
                self.spare = Some(buf);
            } else {
                io.recycle(buf);
            }
        }
        if let Err(e) = completion.result {
            return Err(self.poison(e));
        }
        let id = completion.id;
        for is_block in [true, false] {
            let slot = if is_block {
                &mut self.block
            } else {
                &mut self.superblock
            };
            let Some(flight) = slot.as_mut().filter(|f| f.ops.contains(&id)) else {
                continue;
            };
            flight.pending -= 1;
            if flight.pending > 0 {
                return Ok(Finished::Nothing);
            }
            let lsn = flight.lsn;
            *slot = None;
            if is_block {
                return Ok(Finished::Block(lsn));
            }
            self.ring.release_below(lsn);
            return Ok(Finished::Released(lsn));
        }
        Ok(Finished::Nothing)
    }

    /// Hands the writer's buffers back to the Io (close). Operations in flight keep theirs.
    pub fn return_buffers(&mut self, io: &mut dyn Io) {
        io.recycle(std::mem::replace(&mut self.buf, AlignedBuf::empty()));
        if let Some(buf) = self.spare.take() {
            io.recycle(buf);
        }
    }
}
