//! The journal's superblock: where its live blocks start. Two slots alternate (the write that
//! replaces the newest never touches it), and the valid slot with the highest sequence wins.
//!
//! Slot layout (big-endian), [`SUPERBLOCK_SLOT_SIZE_BYTES`] bytes, zeroes past the header:
//!
//! ```text
//!  0 magic u32 "MLJS"   4 version u16 (1)   6 crc u32: CRC-32C of [10, 48)
//! 10 sequence u64       18 start_position u64 (the first live block)
//! 26 start_lsn u64 (that block's lsn)        34 journal_bytes u64 (the file's size)
//! 42 shard u32          46 reserved u16 (0)
//! ```

use super::{JournalError, FIRST_BLOCK_POSITION};
use crate::format::crc32c;
use crate::format::reader::Reader;
use crate::io::PAGE_SIZE_BYTES;

/// Size of one superblock slot.
pub const SUPERBLOCK_SLOT_SIZE_BYTES: usize = PAGE_SIZE_BYTES;
const MAGIC: u32 = u32::from_be_bytes(*b"MLJS");
const VERSION: u16 = 1;
const CRC_START: usize = 10;
const HEADER_END: usize = 48;

/// A decoded superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    /// Increases with every superblock written; the newest valid slot wins.
    pub sequence: u64,
    /// The position of the first live block.
    pub start_position: u64,
    /// The lsn the block at `start_position` must carry.
    pub start_lsn: u64,
    /// The journal file's size.
    pub journal_bytes: u64,
    /// The shard that writes this journal.
    pub shard: u32,
}

impl Superblock {
    /// The slot this superblock is written to (they alternate by sequence).
    #[must_use]
    pub fn slot(&self) -> usize {
        (self.sequence % 2) as usize
    }

    /// The slot's file position.
    #[must_use]
    pub fn slot_position(&self) -> u64 {
        (self.slot() * SUPERBLOCK_SLOT_SIZE_BYTES) as u64
    }

    /// Writes the slot image into `out` (at least [`SUPERBLOCK_SLOT_SIZE_BYTES`] long; the
    /// rest of the slot is zeroed).
    ///
    /// # Panics
    /// If `out` is too short (a caller bug).
    pub fn encode_into(&self, out: &mut [u8]) {
        let out = &mut out[..SUPERBLOCK_SLOT_SIZE_BYTES];
        out.fill(0);
        out[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        out[4..6].copy_from_slice(&VERSION.to_be_bytes());
        out[10..18].copy_from_slice(&self.sequence.to_be_bytes());
        out[18..26].copy_from_slice(&self.start_position.to_be_bytes());
        out[26..34].copy_from_slice(&self.start_lsn.to_be_bytes());
        out[34..42].copy_from_slice(&self.journal_bytes.to_be_bytes());
        out[42..46].copy_from_slice(&self.shard.to_be_bytes());
        let crc = crc32c(&out[CRC_START..HEADER_END]);
        out[6..10].copy_from_slice(&crc.to_be_bytes());
    }

    /// Decodes a slot image.
    ///
    /// # Errors
    /// [`JournalError::BadSuperblock`] when the slot holds no valid superblock (empty, torn,
    /// another version, or positions that do not fit the file).
    pub fn decode(slot: &[u8]) -> Result<Self, JournalError> {
        let bad = |what: &str| JournalError::BadSuperblock(what.to_string());
        let header = slot.get(..HEADER_END).ok_or_else(|| bad("truncated"))?;
        if header.iter().all(|&b| b == 0) {
            return Err(bad("empty"));
        }
        let mut r = Reader::new(header);
        if r.u32() != Some(MAGIC) {
            return Err(bad("bad magic"));
        }
        let version = r.array::<2>().map(u16::from_be_bytes).unwrap_or_default();
        if version != VERSION {
            return Err(bad(&format!("version {version}")));
        }
        let stored = r.u32().unwrap_or_default();
        let computed = crc32c(&header[CRC_START..HEADER_END]);
        if stored != computed {
            return Err(bad(&format!(
                "crc stored {stored:#010x}, computed {computed:#010x}"
            )));
        }
        let sb = Superblock {
            sequence: r.i64().unwrap_or_default() as u64,
            start_position: r.i64().unwrap_or_default() as u64,
            start_lsn: r.i64().unwrap_or_default() as u64,
            journal_bytes: r.i64().unwrap_or_default() as u64,
            shard: r.u32().unwrap_or_default(),
        };
        if sb.start_position < FIRST_BLOCK_POSITION
            || sb.start_position >= sb.journal_bytes
            || !sb.start_position.is_multiple_of(PAGE_SIZE_BYTES as u64)
        {
            return Err(bad(&format!(
                "start position {} outside the blocks of a {}-byte journal",
                sb.start_position, sb.journal_bytes
            )));
        }
        Ok(sb)
    }

    /// The newest valid superblock of a journal file's first bytes.
    ///
    /// # Errors
    /// [`JournalError::NoSuperblock`] naming why each slot was refused.
    pub fn newest(file: &[u8]) -> Result<Self, JournalError> {
        let slot = |i: usize| {
            file.get(i * SUPERBLOCK_SLOT_SIZE_BYTES..(i + 1) * SUPERBLOCK_SLOT_SIZE_BYTES)
                .map_or_else(
                    || {
                        Err(JournalError::BadSuperblock(format!(
                            "slot {i} past the file's end"
                        )))
                    },
                    Self::decode,
                )
        };
        match (slot(0), slot(1)) {
            (Ok(a), Ok(b)) => Ok(if b.sequence > a.sequence { b } else { a }),
            (Ok(a), Err(_)) => Ok(a),
            (Err(_), Ok(b)) => Ok(b),
            (Err(a), Err(b)) => Err(JournalError::NoSuperblock(format!("{a}; {b}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb(sequence: u64) -> Superblock {
        Superblock {
            sequence,
            start_position: FIRST_BLOCK_POSITION + 4096 * sequence,
            start_lsn: 100 + sequence,
            journal_bytes: 1 << 20,
            shard: 3,
        }
    }

    fn file_with(blocks: &[Superblock]) -> Vec<u8> {
        let mut file = vec![0u8; 2 * SUPERBLOCK_SLOT_SIZE_BYTES];
        for b in blocks {
            let at = b.slot_position() as usize;
            b.encode_into(&mut file[at..]);
        }
        file
    }

    #[test]
    fn the_newest_valid_slot_wins_and_a_torn_one_leaves_the_other() {
        let file = file_with(&[sb(4), sb(5)]);
        assert_eq!(Superblock::newest(&file), Ok(sb(5)));
        let mut torn = file.clone();
        torn[SUPERBLOCK_SLOT_SIZE_BYTES + 20] ^= 1; // slot 1 holds sequence 5
        assert_eq!(Superblock::newest(&torn), Ok(sb(4)));
        let mut both = torn;
        both[20] ^= 1;
        assert!(matches!(
            Superblock::newest(&both),
            Err(JournalError::NoSuperblock(_))
        ));
        assert!(matches!(
            Superblock::newest(&[0u8; 100]),
            Err(JournalError::NoSuperblock(_))
        ));
    }

    #[test]
    fn positions_outside_the_blocks_are_refused() {
        for start_position in [0, 4096, 1 << 20, FIRST_BLOCK_POSITION + 1] {
            let mut slot = vec![0u8; SUPERBLOCK_SLOT_SIZE_BYTES];
            Superblock {
                start_position,
                ..sb(1)
            }
            .encode_into(&mut slot);
            assert!(
                Superblock::decode(&slot).is_err(),
                "start {start_position} accepted"
            );
        }
    }
}
