//! Reading a journal file through the `Io` as open-time replay does: the superblocks, then the
//! live blocks one by one along the chain ([`super::chain`]'s rule), each read where it lies
//! and checked whole (CRC) before it counts. Only the live part of the file is read, so a
//! journal that a clean close released costs its superblocks and one page.

use super::chain::{check_lsn, follow};
use super::{BlockView, ChainEnd, JournalError, Superblock, FIRST_BLOCK_POSITION};
use crate::io::{self, FileId, Io, IoError, Op, OpenOptions, PAGE_SIZE_BYTES};
use std::path::Path;

/// A journal's live blocks, owned.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The superblock the chain started from.
    pub superblock: Superblock,
    /// `(position, bytes)` of each live block, in lsn order.
    pub blocks: Vec<(u64, Vec<u8>)>,
    /// The lsn after the last live block.
    pub next_lsn: u64,
    /// Why the chain ended.
    pub end: ChainEnd,
}

impl Loaded {
    /// The blocks decoded (they were checked when read).
    ///
    /// # Errors
    /// [`JournalError`] only if a block changed since (it cannot: they are owned).
    pub fn views(&self) -> Result<Vec<BlockView<'_>>, JournalError> {
        self.blocks
            .iter()
            .map(|(position, bytes)| BlockView::decode(bytes, *position))
            .collect()
    }

    /// An lsn above every block the file may hold: past the chain's end by more than the
    /// blocks of every flush that can be in flight (a torn flush may leave later blocks, of it
    /// and of the next, behind the chain's end).
    #[must_use]
    pub fn lsn_floor_for_next(&self) -> u64 {
        self.next_lsn + (super::FLUSHES_IN_FLIGHT_MAX * (super::FLUSH_BLOCKS_MAX + 1)) as u64 + 1
    }
}

/// Reads the journal at `path`: `None` when there is no such file or it holds no valid
/// superblock (a creation a power cut interrupted: nothing in it was ever live).
///
/// # Errors
/// An I/O failure.
pub fn load(io: &mut dyn Io, path: &Path) -> Result<Option<Loaded>, IoError> {
    let file = match io::open(
        io,
        path,
        OpenOptions {
            create: false,
            write: false,
            direct: true,
            directory: false,
        },
    ) {
        Ok(f) => f,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let loaded = load_open(io, file);
    let closed = io::run(io, Op::Close { file }, &mut Vec::new());
    let loaded = loaded?;
    closed?.result?;
    Ok(loaded)
}

fn load_open(io: &mut dyn Io, file: FileId) -> Result<Option<Loaded>, IoError> {
    let size = io.file_len(file)?;
    load_with(size, &mut |position, len| {
        io::read_direct(io, file, position, len)
    })
}

/// [`load`] over any reader: `size` is the file's length, `read(position, len)` reads whole
/// pages (a short answer is the file's end). The offline tools read with `std::fs` this way.
///
/// # Errors
/// `read`'s.
pub fn load_with<E: Clone>(
    size: u64,
    read: &mut dyn FnMut(u64, usize) -> Result<Vec<u8>, E>,
) -> Result<Option<Loaded>, E> {
    let head = read(0, FIRST_BLOCK_POSITION as usize)?;
    let Ok(superblock) = Superblock::newest(&head) else {
        return Ok(None);
    };
    let size = size.min(superblock.journal_bytes);
    let mut failure = None;
    let followed = follow(
        &superblock,
        size,
        |position, lsn| {
            let not_there = |what: String| JournalError::BadBlock { position, what };
            if position.saturating_add(PAGE_SIZE_BYTES as u64) > size {
                return Err(not_there("past the file's end".into()));
            }
            let first = read(position, PAGE_SIZE_BYTES).map_err(|e| {
                failure.get_or_insert(e);
                not_there("unreadable".into())
            })?;
            // The header's block size (checked again by the decoding below).
            let block_bytes = first
                .get(18..22)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map_or(0, u32::from_be_bytes) as u64;
            let bytes = if block_bytes as usize > PAGE_SIZE_BYTES
                && block_bytes <= super::BLOCK_BYTES_MAX as u64
                && position + block_bytes <= size
            {
                read(position, block_bytes as usize).map_err(|e| {
                    failure.get_or_insert(e);
                    not_there("unreadable".into())
                })?
            } else {
                first
            };
            check_lsn(BlockView::decode(&bytes, position)?, lsn)?;
            Ok((position, bytes))
        },
        |(position, bytes)| position + bytes.len() as u64,
    );
    if let Some(e) = failure {
        // A read that failed is not the end of the chain: the blocks past it may be live.
        return Err(e);
    }
    Ok(Some(Loaded {
        superblock,
        blocks: followed.blocks,
        next_lsn: followed.next_lsn,
        end: followed.end,
    }))
}
