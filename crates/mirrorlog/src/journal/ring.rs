//! The journal's space: where the next block goes, and the guarantee that it never overwrites a
//! live block (one whose entries some partition has not yet checkpointed past).
//!
//! Blocks are placed one after another from the head; a block that does not fit before the end
//! of the file goes to [`FIRST_BLOCK_POSITION`] instead (the chain reader looks there when the
//! next lsn is not right behind the previous block). Live blocks occupy the circular range from
//! the oldest live block to the head; [`Ring::place`] refuses a block that would overlap it, and
//! the caller checkpoints partitions and [`Ring::release_below`]s until it fits.

use super::FIRST_BLOCK_POSITION;
use std::collections::VecDeque;

/// See the module docs.
#[derive(Debug, Clone)]
pub struct Ring {
    journal_bytes: u64,
    /// `(lsn, position, block_bytes)` of the live blocks, oldest first.
    live: VecDeque<(u64, u64, u64)>,
    head: u64,
    next_lsn: u64,
}

impl Ring {
    /// An empty ring of a `journal_bytes` file whose next block (lsn `next_lsn`) is placed from
    /// `head` on.
    #[must_use]
    pub fn new(journal_bytes: u64, head: u64, next_lsn: u64) -> Self {
        Ring {
            journal_bytes,
            live: VecDeque::new(),
            head: head.clamp(FIRST_BLOCK_POSITION, journal_bytes),
            next_lsn,
        }
    }

    /// The lsn the next block gets.
    #[must_use]
    pub fn next_lsn(&self) -> u64 {
        self.next_lsn
    }

    /// The oldest live block's lsn, if any block is live.
    #[must_use]
    pub fn oldest_live_lsn(&self) -> Option<u64> {
        self.live.front().map(|&(lsn, _, _)| lsn)
    }

    /// Where replay must start, for the superblock: `(position, lsn)` of the oldest live block,
    /// or of the next block when none is live.
    #[must_use]
    pub fn start(&self) -> (u64, u64) {
        self.live
            .front()
            .map_or((self.head, self.next_lsn), |&(lsn, position, _)| {
                (position, lsn)
            })
    }

    /// Bytes the blocks may use (the file less its superblocks).
    #[must_use]
    pub fn capacity_bytes(&self) -> u64 {
        self.journal_bytes - FIRST_BLOCK_POSITION
    }

    /// Bytes between the oldest live block and the head (any gap left by a wrap included).
    #[must_use]
    pub fn used_bytes(&self) -> u64 {
        match self.live.front() {
            None => 0,
            Some(&(_, tail, _)) if tail < self.head => self.head - tail,
            Some(&(_, tail, _)) => (self.journal_bytes - tail) + (self.head - FIRST_BLOCK_POSITION),
        }
    }

    /// Where a block of `block_bytes` would go, or `None` when it would overlap a live block
    /// (or is larger than the journal).
    #[must_use]
    pub fn place(&self, block_bytes: u64) -> Option<u64> {
        let fits_before =
            |from: u64, limit: u64| from.checked_add(block_bytes).is_some_and(|e| e <= limit);
        let end = self.journal_bytes;
        let Some(&(_, tail, _)) = self.live.front() else {
            return if fits_before(self.head, end) {
                Some(self.head)
            } else {
                fits_before(FIRST_BLOCK_POSITION, end).then_some(FIRST_BLOCK_POSITION)
            };
        };
        if tail < self.head {
            // Live: [tail, head).
            if fits_before(self.head, end) {
                Some(self.head)
            } else {
                fits_before(FIRST_BLOCK_POSITION, tail).then_some(FIRST_BLOCK_POSITION)
            }
        } else {
            // Wrapped. Live: [tail, end) and [FIRST_BLOCK_POSITION, head).
            fits_before(self.head, tail).then_some(self.head)
        }
    }

    /// Places a block of `block_bytes`: its `(lsn, position)`, or `None` (nothing changes) when
    /// it does not fit now.
    pub fn push(&mut self, block_bytes: u64) -> Option<(u64, u64)> {
        let position = self.place(block_bytes)?;
        let lsn = self.next_lsn;
        self.live.push_back((lsn, position, block_bytes));
        self.head = position + block_bytes;
        self.next_lsn += 1;
        Some((lsn, position))
    }

    /// Blocks with an lsn below `lsn` are no longer live: every partition checkpointed past
    /// them.
    pub fn release_below(&mut self, lsn: u64) {
        while self.live.front().is_some_and(|&(l, _, _)| l < lsn) {
            self.live.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;

    fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
        a.0 < b.0 + b.1 && b.0 < a.0 + a.1
    }

    #[test]
    fn blocks_wrap_to_the_first_position_and_never_overlap_a_live_one() {
        // Seeded pseudo-random sizes and releases; replay a failure with its seed.
        for seed in 1..=50u64 {
            let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut next = || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            let journal_bytes = FIRST_BLOCK_POSITION + 64 * PAGE;
            let mut ring = Ring::new(journal_bytes, FIRST_BLOCK_POSITION, 1);
            let mut live: Vec<(u64, u64, u64)> = Vec::new();
            for _ in 0..2000 {
                let bytes = (next() % 12 + 1) * PAGE;
                match ring.push(bytes) {
                    Some((lsn, position)) => {
                        assert!(position >= FIRST_BLOCK_POSITION, "seed {seed}");
                        assert!(position + bytes <= journal_bytes, "seed {seed}");
                        for &(_, p, b) in &live {
                            assert!(!overlaps((position, bytes), (p, b)), "seed {seed}");
                        }
                        live.push((lsn, position, bytes));
                    }
                    None => {
                        // Only refused when it could not go anywhere: release some and go on.
                        assert!(!live.is_empty() || bytes > ring.capacity_bytes());
                        let upto = live[(next() as usize) % live.len()].0 + 1;
                        ring.release_below(upto);
                        live.retain(|&(l, _, _)| l >= upto);
                    }
                }
                let used: u64 = live.iter().map(|&(_, _, b)| b).sum();
                assert!(ring.used_bytes() >= used, "seed {seed}");
                assert!(ring.used_bytes() <= ring.capacity_bytes(), "seed {seed}");
                assert_eq!(ring.oldest_live_lsn(), live.first().map(|l| l.0));
            }
        }
    }

    #[test]
    fn the_start_is_the_oldest_live_block_or_the_head() {
        let mut ring = Ring::new(FIRST_BLOCK_POSITION + 8 * PAGE, FIRST_BLOCK_POSITION, 10);
        assert_eq!(ring.start(), (FIRST_BLOCK_POSITION, 10));
        assert_eq!(ring.push(3 * PAGE), Some((10, FIRST_BLOCK_POSITION)));
        assert_eq!(
            ring.push(3 * PAGE),
            Some((11, FIRST_BLOCK_POSITION + 3 * PAGE))
        );
        // 2 pages left before the end, and the start is live: nothing fits.
        assert_eq!(ring.push(3 * PAGE), None);
        ring.release_below(11);
        assert_eq!(ring.start(), (FIRST_BLOCK_POSITION + 3 * PAGE, 11));
        assert_eq!(ring.push(3 * PAGE), Some((12, FIRST_BLOCK_POSITION)));
        assert_eq!(ring.used_bytes(), 8 * PAGE);
        ring.release_below(13);
        assert_eq!(ring.start(), (FIRST_BLOCK_POSITION + 3 * PAGE, 13));
        assert_eq!(ring.used_bytes(), 0);
        assert_eq!(ring.push(9 * PAGE), None);
    }
}
