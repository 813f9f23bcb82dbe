//! Reading a journal file as recovery does: from the newest superblock, block after block while
//! each carries the next lsn (see the module docs of `journal` for where the next block is).
//! The chain ends at the first position without one; the reason is kept, because a torn last
//! block is normal after a power cut (its round was never acknowledged) and worth showing.

use super::{BlockView, JournalError, Superblock, FIRST_BLOCK_POSITION};
use crate::io::PAGE_SIZE_BYTES;

/// Why the chain ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainEnd {
    /// No block holds the next lsn where it could be; the error says what the expected
    /// position held instead (zeroes, an older lap's block, a torn block).
    NoNextBlock(JournalError),
}

/// A journal's live blocks, oldest first.
#[derive(Debug, Clone)]
pub struct Chain<'a> {
    /// The superblock the chain started from.
    pub superblock: Superblock,
    /// The blocks, in lsn order.
    pub blocks: Vec<BlockView<'a>>,
    /// The lsn after the last block (the next block's).
    pub next_lsn: u64,
    /// Where the next block would be placed from.
    pub head: u64,
    /// Why reading stopped.
    pub end: ChainEnd,
}

/// Reads the live blocks of a journal file's bytes.
///
/// # Errors
/// [`JournalError::NoSuperblock`]: neither superblock slot is valid, so nothing in the file can
/// be trusted to be live.
pub fn read_chain(file: &[u8]) -> Result<Chain<'_>, JournalError> {
    let superblock = Superblock::newest(file)?;
    let size = (file.len() as u64).min(superblock.journal_bytes);
    let followed = follow(
        &superblock,
        size,
        |position, lsn| {
            let bytes = usize::try_from(position)
                .ok()
                .filter(|&p| (p as u64) < size)
                .and_then(|p| file.get(p..size as usize))
                .ok_or_else(|| JournalError::BadBlock {
                    position,
                    what: "past the file's end".into(),
                })?;
            let block = BlockView::decode(bytes, position)?;
            check_lsn(block, lsn)
        },
        |b| b.position + b.block_bytes,
    );
    Ok(Chain {
        superblock,
        blocks: followed.blocks,
        next_lsn: followed.next_lsn,
        head: followed.head,
        end: followed.end,
    })
}

/// `block` if it carries `lsn`.
pub(super) fn check_lsn(block: BlockView<'_>, lsn: u64) -> Result<BlockView<'_>, JournalError> {
    if block.lsn == lsn {
        Ok(block)
    } else {
        Err(JournalError::BadBlock {
            position: block.position,
            what: format!("lsn {} where {lsn} was next", block.lsn),
        })
    }
}

/// What [`follow`] found.
pub(super) struct Followed<B> {
    pub blocks: Vec<B>,
    pub next_lsn: u64,
    pub head: u64,
    pub end: ChainEnd,
}

/// Follows the chain from `superblock`: `block_at(position, lsn)` gives the block with that
/// lsn at that position or says why not, `end_of` where a block ends. A block is looked for
/// right behind the previous one, then at the first block position (a wrap).
pub(super) fn follow<B>(
    superblock: &Superblock,
    size: u64,
    mut block_at: impl FnMut(u64, u64) -> Result<B, JournalError>,
    end_of: impl Fn(&B) -> u64,
) -> Followed<B> {
    let mut blocks = Vec::new();
    let mut position = superblock.start_position;
    let mut lsn = superblock.start_lsn;
    // Each block takes at least a page: a bound no chain can pass.
    let most = (size / PAGE_SIZE_BYTES as u64) as usize;
    let end = loop {
        if blocks.len() > most {
            break ChainEnd::NoNextBlock(JournalError::BadBlock {
                position,
                what: "more blocks than the file holds".into(),
            });
        }
        let found = block_at(position, lsn).or_else(|first| {
            if position == FIRST_BLOCK_POSITION {
                Err(first)
            } else {
                block_at(FIRST_BLOCK_POSITION, lsn).map_err(|_| first)
            }
        });
        match found {
            Ok(block) => {
                position = end_of(&block);
                lsn += 1;
                blocks.push(block);
            }
            Err(e) => break ChainEnd::NoNextBlock(e),
        }
    };
    Followed {
        blocks,
        next_lsn: lsn,
        head: position,
        end,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{BlockBuilder, Entry, Ring, SUPERBLOCK_SLOT_SIZE_BYTES};
    use super::*;
    use crate::format::Offset;

    const PAGE: usize = 4096;

    /// A journal image written through a `Ring`, as the writer will: blocks of one entry each
    /// whose inline bytes are `fill` repeated.
    struct Image {
        file: Vec<u8>,
        ring: Ring,
        sequence: u64,
    }

    impl Image {
        fn new(journal_bytes: usize, first_lsn: u64) -> Self {
            let mut image = Image {
                file: vec![0u8; journal_bytes],
                ring: Ring::new(journal_bytes as u64, FIRST_BLOCK_POSITION, first_lsn),
                sequence: 0,
            };
            image.write_superblock();
            image
        }

        fn write_superblock(&mut self) {
            self.sequence += 1;
            let (start_position, start_lsn) = self.ring.start();
            let sb = Superblock {
                sequence: self.sequence,
                start_position,
                start_lsn,
                journal_bytes: self.file.len() as u64,
                shard: 0,
            };
            let at = sb.slot_position() as usize;
            sb.encode_into(&mut self.file[at..at + SUPERBLOCK_SLOT_SIZE_BYTES]);
        }

        fn write_block(&mut self, inline_bytes: usize, fill: u8) -> Option<(u64, u64)> {
            let inline = vec![fill; inline_bytes];
            let mut buf = vec![0u8; super::super::BLOCK_BYTES_MAX];
            let mut b = BlockBuilder::new();
            b.push(
                &mut buf,
                &Entry {
                    key: "t-0",
                    segment_base: Offset(0),
                    segment_id: 1,
                    record_sequence: 1,
                    start: 0,
                    inline_from: 0,
                    end: inline_bytes as u64,
                    next_offset: Offset(1),
                    inline: &inline,
                },
            )
            .ok()?;
            let bytes = b.bytes_with(0);
            let (lsn, position) = self.ring.push(bytes as u64)?;
            let len = b.finish(&mut buf, lsn);
            self.file[position as usize..position as usize + len].copy_from_slice(&buf[..len]);
            Some((lsn, position))
        }
    }

    #[test]
    fn the_chain_follows_wraps_and_stops_at_an_older_lap() {
        let mut image = Image::new(FIRST_BLOCK_POSITION as usize + 16 * PAGE, 1);
        let mut written = Vec::new();
        for i in 0..40u8 {
            let size = 1000 + usize::from(i % 3) * PAGE;
            if image.write_block(size, i).is_none() {
                // Checkpoint everything but the newest two, as the writer will.
                let keep = written[written.len() - 2];
                image.ring.release_below(keep);
                image.write_superblock();
                written.retain(|&l| l >= keep);
                let (lsn, _) = image.write_block(size, i).unwrap();
                written.push(lsn);
            } else {
                written.push(image.ring.next_lsn() - 1);
            }
        }
        let chain = read_chain(&image.file).unwrap();
        let lsns: Vec<u64> = chain.blocks.iter().map(|b| b.lsn).collect();
        assert_eq!(lsns, written);
        assert_eq!(chain.next_lsn, image.ring.next_lsn());
        assert!(matches!(chain.end, ChainEnd::NoNextBlock(_)));
    }

    #[test]
    fn a_torn_last_block_ends_the_chain_and_keeps_the_ones_before() {
        let mut image = Image::new(FIRST_BLOCK_POSITION as usize + 16 * PAGE, 7);
        image.write_block(100, 1).unwrap();
        let (_, position) = image.write_block(100, 2).unwrap();
        image.file[position as usize + 150] ^= 1; // inside the entry's inline bytes
        let chain = read_chain(&image.file).unwrap();
        assert_eq!(chain.blocks.len(), 1);
        assert_eq!(chain.next_lsn, 8);
        assert!(matches!(
            chain.end,
            ChainEnd::NoNextBlock(JournalError::BadBlock { .. })
        ));
    }

    #[test]
    fn a_block_forged_inside_a_payload_is_never_read() {
        // An entry whose inline bytes are themselves a valid block with the next lsn, placed so
        // that the forged block starts on a page boundary inside the real block.
        let mut image = Image::new(FIRST_BLOCK_POSITION as usize + 16 * PAGE, 1);
        let mut forged = vec![0u8; PAGE];
        let mut b = BlockBuilder::new();
        b.push(
            &mut forged,
            &Entry {
                key: "victim-0",
                segment_base: Offset(0),
                segment_id: 1,
                record_sequence: 1,
                start: 0,
                inline_from: 0,
                end: 3,
                next_offset: Offset(1),
                inline: b"bad",
            },
        )
        .unwrap();
        b.finish(&mut forged, 2);
        let mut inline = vec![0u8; 2 * PAGE];
        let skip =
            PAGE - super::super::BLOCK_HEADER_SIZE_BYTES - super::super::ENTRY_FIXED_SIZE_BYTES - 3;
        inline[skip..skip + PAGE].copy_from_slice(&forged);
        let mut buf = vec![0u8; 4 * PAGE];
        let mut real = BlockBuilder::new();
        real.push(
            &mut buf,
            &Entry {
                key: "t-0",
                segment_base: Offset(0),
                segment_id: 1,
                record_sequence: 1,
                start: 0,
                inline_from: 0,
                end: inline.len() as u64,
                next_offset: Offset(1),
                inline: &inline,
            },
        )
        .unwrap();
        let bytes = real.bytes_with(0) as u64;
        let (lsn, position) = image.ring.push(bytes).unwrap();
        let len = real.finish(&mut buf, lsn);
        let at = position as usize;
        image.file[at..at + len].copy_from_slice(&buf[..len]);
        assert_eq!(
            BlockView::decode(&image.file[at + PAGE..], 0).map(|b| b.lsn),
            Ok(2),
            "the forged block is valid where it lies"
        );
        let chain = read_chain(&image.file).unwrap();
        assert_eq!(chain.blocks.len(), 1);
        assert!(chain.blocks[0].entries.iter().all(|e| e.key == "t-0"));
    }

    #[test]
    fn no_superblock_is_an_error_and_an_empty_journal_has_no_blocks() {
        assert!(matches!(
            read_chain(&vec![0u8; 1 << 16]),
            Err(JournalError::NoSuperblock(_))
        ));
        let image = Image::new(FIRST_BLOCK_POSITION as usize + 4 * PAGE, 5);
        let chain = read_chain(&image.file).unwrap();
        assert!(chain.blocks.is_empty());
        assert_eq!((chain.next_lsn, chain.head), (5, FIRST_BLOCK_POSITION));
    }
}
