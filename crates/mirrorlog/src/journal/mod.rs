//! The per-shard journal: one sequentially written file per shard that a commit
//! round makes durable with one fdatasync, whatever the number of partitions the round touches.
//! This layer owns the journal's file format and its space; it knows nothing of partitions
//! beyond an opaque key (the partition directory's name), and nothing of Kafka. The shard drives
//! it (`shard/journal.rs`), the segment writer puts its rounds into it
//! (`segment/writer/journal_round.rs`), and the open replays it (`shard/replay.rs`,
//! `segment/journal_replay.rs`).
//!
//! Files: `superblock.rs` and `block.rs` (the format), `ring.rs` (where blocks go; a block never
//! overwrites a live one), `writer.rs` (blocks, flushes, releases over the `Io`), `chain.rs`
//! (reading the live blocks as recovery does), `load.rs` (the same through the `Io` or any
//! reader, only the live part).
//!
//! File layout (`journal-<shard>.mlj` in the data directory), all integers big-endian:
//!
//! ```text
//! 0 ── superblock slot 0 ── 4096 ── superblock slot 1 ── 8192 ── blocks … ── journal_bytes
//! ```
//!
//! - The two superblock slots alternate like a segment's commit records: the valid one with the
//!   highest sequence names where the live blocks start (position and lsn).
//! - A block is a page-aligned run of entries written by one commit round, with one CRC-32C. Its
//!   lsn (log sequence number) is one more than the block before it, across laps of the ring and
//!   across restarts, so a block left over from an earlier lap can never pass for the next one.
//! - Blocks follow each other: the block after the one at `p` (of `block_bytes` bytes) is at
//!   `p + block_bytes`, or at the first block position when it did not fit before the end of the
//!   file. Reading follows that chain from the superblock and stops at the first position holding
//!   no block with the next lsn: nothing inside a block's payload is ever parsed as a block, so
//!   batches a client wrote cannot forge journal blocks.
//! - An entry carries one partition's bytes of the round: segment positions `[start, end)` of the
//!   segment `segment_base`, of which `[inline_from, end)` travel inline. The format lets
//!   `[start, inline_from)` name pages the round synced in the segment itself; the engine writes
//!   none (a round large enough for that is an ordinary round), and replay reads them where
//!   they lie.

pub mod block;
pub mod chain;
pub mod load;
pub mod ring;
pub mod superblock;
pub mod writer;

pub use block::{BlockBuilder, BlockView, Entry, BLOCK_HEADER_SIZE_BYTES, ENTRY_FIXED_SIZE_BYTES};
pub use chain::{read_chain, Chain, ChainEnd};
pub use load::{load, load_with, Loaded};
pub use ring::Ring;
pub use superblock::{Superblock, SUPERBLOCK_SLOT_SIZE_BYTES};
pub use writer::{
    Finished, Flush, JournalCounters, JournalWriteError, JournalWriter, Reserve,
    FLUSHES_IN_FLIGHT_MAX, FLUSH_BLOCKS_MAX,
};

use crate::io::PAGE_SIZE_BYTES;

/// Where the first block may start: past the two superblock slots.
pub const FIRST_BLOCK_POSITION: u64 = 2 * SUPERBLOCK_SLOT_SIZE_BYTES as u64;
/// The smallest journal: the superblocks and room for a few blocks.
pub const JOURNAL_BYTES_MIN: u64 = 1 << 20;
/// The default journal size (`journal.bytes`): room for the rounds between checkpoints.
pub const JOURNAL_BYTES_DEFAULT: u64 = 128 << 20;
/// The largest journal.
pub const JOURNAL_BYTES_MAX: u64 = 64 << 30;
/// The largest block: a quarter of the smallest journal. A flush writes several.
pub const BLOCK_BYTES_MAX: usize = 256 << 10;
/// A partition key's most bytes (a partition directory's name: Kafka bounds topic names to
/// 249 characters, and the partition number adds at most 11).
pub const KEY_BYTES_MAX: usize = 512;

/// The file name of shard `shard`'s journal.
#[must_use]
pub fn file_name(shard: usize) -> String {
    format!("journal-{shard}.mlj")
}

/// The shard a journal file name names, if it is one.
#[must_use]
pub fn shard_of(name: &str) -> Option<usize> {
    name.strip_prefix("journal-")?
        .strip_suffix(".mlj")?
        .parse()
        .ok()
}

/// `n` rounded up to a page.
#[must_use]
pub fn page_ceil(n: usize) -> usize {
    n.div_ceil(PAGE_SIZE_BYTES) * PAGE_SIZE_BYTES
}

/// Why journal bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// Neither superblock slot holds a valid superblock.
    #[error("journal has no valid superblock ({0})")]
    NoSuperblock(String),
    /// A superblock slot holds bytes that are not a valid superblock.
    #[error("journal superblock: {0}")]
    BadSuperblock(String),
    /// A block's bytes are not a valid block.
    #[error("journal block at {position}: {what}")]
    BadBlock {
        /// The block's position in the file.
        position: u64,
        /// What is wrong.
        what: String,
    },
    /// A block's entry is not a valid entry.
    #[error("journal block at {position}, entry {index}: {what}")]
    BadEntry {
        /// The block's position in the file.
        position: u64,
        /// The entry's index in the block.
        index: usize,
        /// What is wrong.
        what: String,
    },
    /// A size setting out of its bounds.
    #[error("journal size {bytes} out of [{JOURNAL_BYTES_MIN}, {JOURNAL_BYTES_MAX}] or not a multiple of {PAGE_SIZE_BYTES}")]
    BadSize {
        /// The size asked for.
        bytes: u64,
    },
    /// An entry that cannot go into a block (key too long, positions out of order, too big).
    #[error("journal entry refused: {0}")]
    EntryRefused(String),
}

/// Checks a journal size setting.
///
/// # Errors
/// [`JournalError::BadSize`].
pub fn check_size(bytes: u64) -> Result<(), JournalError> {
    if (JOURNAL_BYTES_MIN..=JOURNAL_BYTES_MAX).contains(&bytes)
        && bytes.is_multiple_of(PAGE_SIZE_BYTES as u64)
    {
        Ok(())
    } else {
        Err(JournalError::BadSize { bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip_and_sizes_are_bounded() {
        assert_eq!(file_name(7), "journal-7.mlj");
        assert_eq!(shard_of("journal-7.mlj"), Some(7));
        assert_eq!(shard_of("journal-x.mlj"), None);
        assert_eq!(shard_of("00000.log"), None);
        assert!(check_size(JOURNAL_BYTES_MIN).is_ok());
        assert!(check_size(JOURNAL_BYTES_MAX).is_ok());
        for bad in [
            0,
            JOURNAL_BYTES_MIN - 4096,
            JOURNAL_BYTES_MIN + 1,
            JOURNAL_BYTES_MAX + 4096,
        ] {
            assert_eq!(check_size(bad), Err(JournalError::BadSize { bytes: bad }));
        }
        assert_eq!(page_ceil(0), 0);
        assert_eq!(page_ceil(1), 4096);
        assert_eq!(page_ceil(4096), 4096);
    }
}
