//! An open-addressing hash table keyed by producer id, written for the PSM.
//!
//! Layout: a power-of-two array of 4-byte *buckets* probed linearly, in groups of 16 (one cache
//! line) that each carry a generation stamp in a parallel array, and two dense, parallel
//! *columns* the buckets point into: the hot one holds each entry's key and hot value (one
//! cache line for the PSM: 64 bytes at 64-byte-aligned positions), the cold one its cold value
//! (the PSM's older batch history, read only when a duplicate is suspected).
//!
//! ```text
//! bucket (u32): | slot index + 1: 24 bits | fingerprint: 8 bits |     0 = empty
//! group generation (u32): the table's generation when the group was last written
//! ```
//!
//! - A bucket is occupied iff it is non-zero and its group's generation equals the table's.
//!   [`Table::clear`] bumps the generation and sets the slot count to 0: constant time, whatever
//!   the size; a stale group is wiped the first time an insert writes into it. (When the 32-bit
//!   generation wraps, after 4 billion clears, the stamps are wiped once.)
//! - The fingerprint (8 hash bits not used for the home position) lets a probe skip foreign
//!   buckets without touching their slot: a lookup reads one bucket line and, on a fingerprint
//!   match, one hot slot. Four bytes a bucket keep the bucket array small enough to stay in the
//!   core's cache while the slots it points to do not (512 KiB at 100,000 producers), so the
//!   hot slot is the one memory access a lookup waits for.
//! - Slots are dense (`0..len`), so memory follows the number of entries, not the bucket count:
//!   no allocation per entry, storage is kept across clears. In each column the first
//!   [`SMALL_SLOTS`] live in 64-byte-aligned heap chunks of [`SLOT_CHUNK_LEN`]; the rest in
//!   2 MiB [`HugeVec`]s, which become one huge page each once full. A large table is read at
//!   random, and with 4 KiB pages each such read would also miss the TLB — under
//!   virtualisation a two-level page walk about as dear as the cache miss itself. A `HugeVec`
//!   is resident only as far as it is filled, so memory per entry does not jump by 2 MiB steps.
//! - Deletion is tombstone-free: backward-shift in the bucket array, swap-remove in the columns
//!   (the moved slot's bucket is re-pointed).
//! - Growth doubles the buckets at a load factor of 7/8 and re-inserts from the dense slots.
//!
//! Worked example of the memory per entry at 100,000 producers with the PSM's 64-byte hot
//! slots and 48-byte cold values: buckets 131,072 × 4 B = 524,288 B and their stamps
//! 8,192 × 4 B = 32,768 B; hot: 256 chunks × 64 × 64 B = 1,048,576 B, then `HugeVec`s of
//! 32,768 slots for the other 83,616: two full (4,194,304 B) and 18,080 slots of a third
//! (1,157,120 B, in whole pages 1,159,168 B); cold: 256 × 64 × 48 B = 786,432 B, then
//! `HugeVec`s of 43,690: one full (2,097,152 B) and 39,926 values of a second (1,916,448 B,
//! in whole pages 1,916,928 B); total 11,759,616 B, i.e. 117.6 B per producer.

use crate::mem::HugeVec;
use std::fmt;

/// Slots per heap chunk of a column: 64 (a 4 KiB chunk of 64-byte hot slots), so that a table
/// of a few producers — most partitions of a broker — holds a few KiB, not 64 KiB per column
/// (measured by the bench's `partitions` workload).
pub const SLOT_CHUNK_LEN: usize = 64;
const SLOT_CHUNK_SHIFT: u32 = SLOT_CHUNK_LEN.trailing_zeros();
/// Slots held in heap chunks; the rest are in [`HugeVec`]s. Small tables stay on the heap (a
/// `HugeVec` is a 2 MiB mapping), large ones are mostly on huge pages.
pub const SMALL_SLOTS: usize = 256 * SLOT_CHUNK_LEN;
/// Bits of a bucket holding the slot index + 1.
const SLOT_INDEX_BITS: u32 = 24;
/// Most entries one table holds (slot index + 1 fits 24 bits).
pub const ENTRIES_MAX: usize = (1 << SLOT_INDEX_BITS) - 1;
/// Buckets per generation stamp: one cache line of buckets.
const GROUP_LEN: usize = 16;
const GROUP_SHIFT: u32 = GROUP_LEN.trailing_zeros();
/// Smallest bucket count.
const BUCKETS_MIN: usize = GROUP_LEN;
/// Load factor limit: numerator and denominator.
const LOAD_NUMERATOR: usize = 7;
const LOAD_DENOMINATOR: usize = 8;
/// Alignment of a column's storage: a cache line.
pub const LINE_BYTES: usize = 64;

const _: () = assert!(SLOT_CHUNK_LEN.is_power_of_two());
const _: () = assert!(BUCKETS_MIN.is_power_of_two());
const _: () = assert!(SLOT_INDEX_BITS + 8 == 32);
const _: () = assert!(GROUP_LEN.is_power_of_two() && BUCKETS_MIN.is_multiple_of(GROUP_LEN));
const _: () = assert!(LOAD_NUMERATOR < LOAD_DENOMINATOR);

/// The table is at [`ENTRIES_MAX`] entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableFull;

impl fmt::Display for TableFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "producer table is full ({ENTRIES_MAX} entries)")
    }
}

/// One hot slot: the key and its hot value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Slot<H> {
    /// The producer id.
    pub key: i64,
    /// The hot value.
    pub value: H,
}

/// A heap chunk of a column, cache-line aligned so that 64-byte elements never straddle lines.
#[derive(Clone)]
#[repr(C, align(64))]
struct Chunk<T>([T; SLOT_CHUNK_LEN]);

const _: () = assert!(std::mem::align_of::<Chunk<u8>>() == LINE_BYTES);

/// A dense array addressed by slot index: heap chunks, then `HugeVec`s.
#[derive(Clone)]
struct Column<T: Copy> {
    chunks: Vec<Box<Chunk<T>>>,
    /// Elements from [`SMALL_SLOTS`] on; each filled up to the highest index ever live in it.
    huge: Vec<HugeVec<T>>,
    /// Initialises fresh chunks (never observable as an entry).
    filler: T,
}

impl<T: Copy> Column<T> {
    fn new(filler: T) -> Self {
        Column {
            chunks: Vec::new(),
            huge: Vec::new(),
            filler,
        }
    }

    #[inline]
    fn get(&self, index: usize) -> &T {
        if index < SMALL_SLOTS {
            &self.chunks[index >> SLOT_CHUNK_SHIFT].0[index & (SLOT_CHUNK_LEN - 1)]
        } else {
            let at = index - SMALL_SLOTS;
            let per = HugeVec::<T>::CAPACITY;
            &self.huge[at / per].as_slice()[at % per]
        }
    }

    #[inline]
    fn get_mut(&mut self, index: usize) -> &mut T {
        if index < SMALL_SLOTS {
            &mut self.chunks[index >> SLOT_CHUNK_SHIFT].0[index & (SLOT_CHUNK_LEN - 1)]
        } else {
            let at = index - SMALL_SLOTS;
            let per = HugeVec::<T>::CAPACITY;
            &mut self.huge[at / per].as_mut_slice()[at % per]
        }
    }

    /// Stores `value` at `index`, one past the live slots, making room for it first. Memory
    /// exhaustion aborts, as for any allocation in Rust.
    fn put_new(&mut self, index: usize, value: T) {
        if index < SMALL_SLOTS {
            if index >> SLOT_CHUNK_SHIFT == self.chunks.len() {
                self.chunks
                    .push(Box::new(Chunk([self.filler; SLOT_CHUNK_LEN])));
            }
            *self.get_mut(index) = value;
            return;
        }
        let at = index - SMALL_SLOTS;
        let per = HugeVec::<T>::CAPACITY;
        if at / per == self.huge.len() {
            self.huge.push(HugeVec::new_or_abort());
        }
        let vec = &mut self.huge[at / per];
        if at % per < vec.len() {
            vec.as_mut_slice()[at % per] = value;
        } else {
            vec.push(value);
        }
    }

    /// Bytes allocated (for a `HugeVec`, the pages its elements reach).
    fn memory_bytes(&self) -> usize {
        self.chunks.len() * std::mem::size_of::<Chunk<T>>()
            + self.huge.iter().map(HugeVec::resident_bytes).sum::<usize>()
    }
}

/// See the module docs.
#[derive(Clone)]
pub struct Table<H: Copy, C: Copy> {
    buckets: Vec<u32>,
    /// One generation stamp per [`GROUP_LEN`] buckets.
    stamps: Vec<u32>,
    /// `log2(buckets.len())`.
    bucket_bits: u32,
    generation: u32,
    hot: Column<Slot<H>>,
    cold: Column<C>,
    len: usize,
}

impl<H: Copy + fmt::Debug, C: Copy + fmt::Debug> fmt::Debug for Table<H, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(key, hot, cold)| (key, (hot, cold))))
            .finish()
    }
}

#[inline]
pub(crate) fn hash(key: i64) -> u64 {
    // Fibonacci multiplicative hashing, then fold the high half down so that both the home
    // position (top bits) and the fingerprint (low byte) depend on every key bit.
    let h = (key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 29)
}

#[inline]
fn fingerprint(h: u64) -> u32 {
    (h & 0xff) as u32
}

/// The slot a non-empty bucket points to.
#[inline]
fn slot_of(bucket: u32) -> usize {
    (bucket >> 8) as usize - 1
}

impl<H: Copy, C: Copy> Table<H, C> {
    /// An empty table; the fillers initialise fresh chunks (never observable as an entry).
    #[must_use]
    pub fn new(hot_filler: H, cold_filler: C) -> Self {
        Table {
            buckets: vec![0; BUCKETS_MIN],
            stamps: vec![1; BUCKETS_MIN / GROUP_LEN],
            bucket_bits: BUCKETS_MIN.trailing_zeros(),
            generation: 1,
            hot: Column::new(Slot {
                key: 0,
                value: hot_filler,
            }),
            cold: Column::new(cold_filler),
            len: 0,
        }
    }

    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table has no entries.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated for buckets and both columns (for a `HugeVec`, the pages its elements
    /// reach).
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        self.buckets.len() * std::mem::size_of::<u32>()
            + self.stamps.len() * std::mem::size_of::<u32>()
            + self.hot.memory_bytes()
            + self.cold.memory_bytes()
    }

    /// How many of the hot column's `HugeVec`s are full, and how many of those the kernel put
    /// on a huge page.
    #[must_use]
    pub fn huge_pages(&self) -> (usize, usize) {
        let full = self.hot.huge.iter().filter(|h| h.is_full()).count();
        let collapsed = self.hot.huge.iter().filter(|h| h.collapsed()).count();
        (full, collapsed)
    }

    /// Removes every entry in constant time.
    pub fn clear(&mut self) {
        self.len = 0;
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Once per 2^32 clears: stale stamps could alias the restarted generation.
            self.stamps.fill(0);
            self.generation = 1;
        }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.buckets.len() - 1
    }

    #[inline]
    fn home(&self, h: u64) -> usize {
        (h >> (64 - self.bucket_bits)) as usize
    }

    /// The bucket at `pos`, or 0 (empty) when its group is stale.
    #[inline]
    fn bucket(&self, pos: usize) -> u32 {
        if self.stamps[pos >> GROUP_SHIFT] == self.generation {
            self.buckets[pos]
        } else {
            0
        }
    }

    /// Writes the bucket at `pos`, first wiping its group if it is stale.
    #[inline]
    fn set_bucket(&mut self, pos: usize, bucket: u32) {
        let group = pos >> GROUP_SHIFT;
        if self.stamps[group] != self.generation {
            let start = group << GROUP_SHIFT;
            self.buckets[start..start + GROUP_LEN].fill(0);
            self.stamps[group] = self.generation;
        }
        self.buckets[pos] = bucket;
    }

    #[inline]
    fn pack(slot: usize, fp: u32) -> u32 {
        ((slot as u32 + 1) << 8) | fp
    }

    /// The bucket position and slot index of `key`, if present.
    #[inline]
    fn find(&self, key: i64) -> Option<(usize, usize)> {
        let h = hash(key);
        let fp = fingerprint(h);
        let mask = self.mask();
        let mut pos = self.home(h);
        loop {
            let bucket = self.bucket(pos);
            if bucket == 0 {
                return None;
            }
            if bucket & 0xff == fp {
                let index = slot_of(bucket);
                if self.hot.get(index).key == key {
                    return Some((pos, index));
                }
            }
            pos = (pos + 1) & mask;
        }
    }

    /// Starts fetching the home bucket of `key` (and its group's stamp) without reading it:
    /// the first stage of a lookahead, so that the [`Table::home_index`] reads of a whole batch
    /// of keys find their buckets arriving instead of each waiting in turn.
    #[inline]
    pub fn prefetch_home(&self, key: i64) {
        let pos = self.home(hash(key));
        crate::mem::prefetch_read(&self.stamps[pos >> GROUP_SHIFT]);
        crate::mem::prefetch_read(&self.buckets[pos]);
    }

    /// The slot index the home bucket of `key` points to, if that bucket is occupied: possibly
    /// another key's. For warming caches: prefetching its slot for every key of a batch before
    /// looking any of them up turns a chain of dependent cache misses into overlapping ones.
    #[inline]
    #[must_use]
    pub fn home_index(&self, key: i64) -> Option<usize> {
        let bucket = self.bucket(self.home(hash(key)));
        if bucket == 0 {
            return None;
        }
        let index = slot_of(bucket);
        (index < self.len).then_some(index)
    }

    /// The slot index of `key`: stable until the next insert, remove or clear.
    #[inline]
    #[must_use]
    pub fn find_slot(&self, key: i64) -> Option<usize> {
        self.find(key).map(|(_, index)| index)
    }

    /// The hot slot at `index` (from [`Table::find_slot`] or [`Table::home_index`]).
    ///
    /// # Panics
    /// If `index` is not a live slot: a caller bug, not a data error.
    #[inline]
    #[must_use]
    pub fn slot_at(&self, index: usize) -> &Slot<H> {
        assert!(index < self.len, "slot {index} is not live");
        self.hot.get(index)
    }

    /// The hot value in slot `index`.
    ///
    /// # Panics
    /// If `index` is not a live slot.
    #[inline]
    #[must_use]
    pub fn hot_at(&self, index: usize) -> &H {
        &self.slot_at(index).value
    }

    /// The cold value in slot `index`.
    ///
    /// # Panics
    /// If `index` is not a live slot.
    #[inline]
    #[must_use]
    pub fn cold_at(&self, index: usize) -> &C {
        assert!(index < self.len, "slot {index} is not live");
        self.cold.get(index)
    }

    /// Both values in slot `index`, mutably.
    ///
    /// # Panics
    /// If `index` is not a live slot.
    #[inline]
    pub fn at_mut(&mut self, index: usize) -> (&mut H, &mut C) {
        assert!(index < self.len, "slot {index} is not live");
        (&mut self.hot.get_mut(index).value, self.cold.get_mut(index))
    }

    /// The values of `key`.
    #[inline]
    #[must_use]
    pub fn get(&self, key: i64) -> Option<(&H, &C)> {
        self.find(key)
            .map(|(_, index)| (&self.hot.get(index).value, self.cold.get(index)))
    }

    /// The hot value of `key`.
    #[inline]
    #[must_use]
    pub fn get_hot(&self, key: i64) -> Option<&H> {
        self.find(key).map(|(_, index)| &self.hot.get(index).value)
    }

    /// Inserts or replaces the values of `key`.
    ///
    /// # Errors
    /// [`TableFull`] when `key` is new and the table holds [`ENTRIES_MAX`] entries.
    pub fn insert(&mut self, key: i64, hot: H, cold: C) -> Result<(), TableFull> {
        if let Some((_, index)) = self.find(key) {
            let (h, c) = self.at_mut(index);
            *h = hot;
            *c = cold;
            return Ok(());
        }
        if self.len >= ENTRIES_MAX {
            return Err(TableFull);
        }
        if (self.len + 1) * LOAD_DENOMINATOR > self.buckets.len() * LOAD_NUMERATOR {
            self.grow();
        }
        let index = self.len;
        self.hot.put_new(index, Slot { key, value: hot });
        self.cold.put_new(index, cold);
        self.len += 1;
        self.place(key, index);
        Ok(())
    }

    /// Puts a bucket for `key` → `index` at the first free position of its probe sequence.
    fn place(&mut self, key: i64, index: usize) {
        let h = hash(key);
        let mask = self.mask();
        let mut pos = self.home(h);
        while self.bucket(pos) != 0 {
            pos = (pos + 1) & mask;
        }
        self.set_bucket(pos, Self::pack(index, fingerprint(h)));
    }

    fn grow(&mut self) {
        let buckets = self.buckets.len() * 2;
        self.buckets = vec![0; buckets];
        self.stamps = vec![self.generation; buckets / GROUP_LEN];
        self.bucket_bits = buckets.trailing_zeros();
        for index in 0..self.len {
            let key = self.hot.get(index).key;
            self.place(key, index);
        }
    }

    /// Removes `key`, returning its values.
    pub fn remove(&mut self, key: i64) -> Option<(H, C)> {
        let (pos, index) = self.find(key)?;
        let removed = (self.hot.get(index).value, *self.cold.get(index));
        self.remove_bucket(pos);
        // Swap-remove in the dense columns and re-point the moved slot's bucket.
        let last = self.len - 1;
        if index != last {
            let moved = *self.hot.get(last);
            *self.hot.get_mut(index) = moved;
            *self.cold.get_mut(index) = *self.cold.get(last);
            self.repoint(moved.key, last, index);
        }
        self.len = last;
        Some(removed)
    }

    /// Backward-shift deletion: pulls later members of the probe run into the hole so that no
    /// lookup ever stops early at it.
    fn remove_bucket(&mut self, mut hole: usize) {
        let mask = self.mask();
        let mut next = (hole + 1) & mask;
        loop {
            let bucket = self.bucket(next);
            if bucket == 0 {
                break;
            }
            let key = self.hot.get(slot_of(bucket)).key;
            let home = self.home(hash(key));
            // The bucket at `next` may move to `hole` iff its home is not in (hole, next]
            // cyclically: moving it must not put it before its home.
            let distance_to_next = next.wrapping_sub(home) & mask;
            let distance_to_hole = hole.wrapping_sub(home) & mask;
            if distance_to_hole <= distance_to_next {
                // `hole` was occupied, so its group is current.
                self.buckets[hole] = bucket;
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.buckets[hole] = 0;
    }

    fn repoint(&mut self, key: i64, from: usize, to: usize) {
        let h = hash(key);
        let mask = self.mask();
        let mut pos = self.home(h);
        loop {
            let bucket = self.bucket(pos);
            debug_assert!(bucket != 0, "moved key {key} has no bucket");
            if slot_of(bucket) == from {
                self.buckets[pos] = Self::pack(to, fingerprint(h));
                return;
            }
            pos = (pos + 1) & mask;
        }
    }

    /// Every entry as `(key, hot, cold)`, in slot order (insertion order, disturbed by
    /// removals).
    pub fn iter(&self) -> impl Iterator<Item = (i64, &H, &C)> + '_ {
        (0..self.len).map(move |index| {
            let slot = self.hot.get(index);
            (slot.key, &slot.value, self.cold.get(index))
        })
    }

    /// Keeps only the entries for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(i64, &H, &C) -> bool) {
        let mut index = 0;
        while index < self.len {
            let slot = *self.hot.get(index);
            if keep(slot.key, &slot.value, self.cold.get(index)) {
                index += 1;
            } else {
                // The last slot moves into `index`; look at it next.
                self.remove(slot.key);
            }
        }
    }

    /// Checks every structural invariant; for tests and debug builds. Panics on a violation.
    pub fn check_invariants(&self) {
        assert!(self.buckets.len().is_power_of_two());
        assert_eq!(self.stamps.len() * GROUP_LEN, self.buckets.len());
        assert!(
            self.len * LOAD_DENOMINATOR <= self.buckets.len() * LOAD_NUMERATOR || self.len == 0
        );
        let mut seen = vec![false; self.len];
        let mask = self.mask();
        for pos in 0..self.buckets.len() {
            let bucket = self.bucket(pos);
            if bucket == 0 {
                continue;
            }
            let index = slot_of(bucket);
            assert!(index < self.len, "bucket {pos} points past the slots");
            assert!(!seen[index], "two buckets point at slot {index}");
            seen[index] = true;
            let key = self.hot.get(index).key;
            let h = hash(key);
            assert_eq!(bucket & 0xff, fingerprint(h), "fingerprint of {key}");
            // Every bucket between the home and the bucket is occupied (no early stop).
            let mut p = self.home(h);
            while p != pos {
                assert!(self.bucket(p) != 0, "hole in the probe run of {key}");
                p = (p + 1) & mask;
            }
        }
        assert!(seen.iter().all(|&s| s), "a slot has no bucket");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The cold value the tests store with hot value `v`: both columns must move together.
    fn cold_of(v: u64) -> u32 {
        (v as u32).rotate_left(7) ^ 0xa5a5
    }

    fn get(table: &Table<u64, u32>, key: i64) -> Option<u64> {
        let (&hot, &cold) = table.get(key)?;
        assert_eq!(
            cold,
            cold_of(hot),
            "cold value of {key} travels with its hot one"
        );
        assert_eq!(table.get_hot(key), Some(&hot));
        Some(hot)
    }

    #[test]
    fn insert_get_remove_against_hashmap() {
        let mut table = Table::new(0u64, 0u32);
        let mut model = HashMap::new();
        let mut x: u64 = 0x1234_5678;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x % 3000) as i64;
            match x % 5 {
                // Now and then a clear: later inserts land in stale groups among live ones.
                _ if x.is_multiple_of(4093) => {
                    table.clear();
                    model.clear();
                }
                0..=2 => {
                    table.insert(key, step, cold_of(step)).unwrap();
                    model.insert(key, step);
                }
                3 => assert_eq!(
                    table.remove(key),
                    model.remove(&key).map(|v| (v, cold_of(v)))
                ),
                _ => assert_eq!(get(&table, key), model.get(&key).copied()),
            }
            if step % 1000 == 0 {
                table.check_invariants();
            }
        }
        table.check_invariants();
        assert_eq!(table.len(), model.len());
        for (k, v) in &model {
            assert_eq!(get(&table, *k), Some(*v));
        }
    }

    #[test]
    fn slots_are_cache_line_aligned_in_both_tiers() {
        // The PSM's hot slot is 64 bytes: each must start a cache line, on the heap and in
        // the huge tier alike.
        let mut table = Table::new([0u64; 7], 0u8);
        for k in 0..(SMALL_SLOTS as i64 + 100) {
            table.insert(k, [k as u64; 7], 1).unwrap();
        }
        for index in [
            0,
            1,
            SLOT_CHUNK_LEN,
            SMALL_SLOTS - 1,
            SMALL_SLOTS,
            SMALL_SLOTS + 99,
        ] {
            let at = std::ptr::from_ref(table.slot_at(index)) as usize;
            assert_eq!(at % LINE_BYTES, 0, "slot {index} at {at:#x}");
        }
    }

    #[test]
    fn large_tables_use_huge_vecs_and_agree_with_hashmap() {
        // 80,000 entries: 16,384 in heap chunks, then a full HugeVec (32,768 hot slots of 64
        // bytes, 43,690 cold values of 48) and part of a second and third. Removals move
        // slots across the tiers; a clear and refill reuses the HugeVecs' pages.
        // Values as wide as the PSM's.
        let mut table = Table::new([0u64; 7], [0u64; 6]);
        let mut model = HashMap::new();
        for k in 0..80_000i64 {
            table
                .insert(k * 7919, [k as u64; 7], [!k as u64; 6])
                .unwrap();
            model.insert(k * 7919, k as u64);
        }
        let (full, _) = table.huge_pages();
        assert!(full >= 1, "at least one HugeVec filled");
        table.check_invariants();
        let mut x: u64 = 0x9e37_79b9;
        for step in 0..40_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x % 90_000) as i64 * 7919;
            if x.is_multiple_of(3) {
                assert_eq!(
                    table.remove(key),
                    model.remove(&key).map(|v| ([v; 7], [!v; 6]))
                );
            } else {
                table.insert(key, [step; 7], [!step; 6]).unwrap();
                model.insert(key, step);
            }
        }
        table.check_invariants();
        assert_eq!(table.len(), model.len());
        for (k, v) in &model {
            assert_eq!(table.get(*k), Some((&[*v; 7], &[!*v; 6])));
        }
        let before = table.memory_bytes();
        table.clear();
        for k in 0..50_000i64 {
            table.insert(-k, [1; 7], [2; 6]).unwrap();
        }
        table.check_invariants();
        assert_eq!(table.get(-49_999), Some((&[1; 7], &[2; 6])));
        assert_eq!(table.get(7919), None);
        assert!(table.memory_bytes() <= before, "a refill reuses storage");
    }

    #[test]
    fn clear_is_a_generation_bump_and_the_table_is_reusable() {
        let mut table = Table::new(0u64, 0u32);
        for k in 0..5000 {
            table.insert(k, k as u64, cold_of(k as u64)).unwrap();
        }
        let chunks = table.hot.chunks.len();
        table.clear();
        assert!(table.is_empty());
        assert_eq!(get(&table, 17), None);
        assert_eq!(table.iter().count(), 0);
        table.check_invariants();
        for k in 100..200 {
            table.insert(k, 1, cold_of(1)).unwrap();
        }
        assert_eq!(table.len(), 100);
        assert_eq!(get(&table, 150), Some(1));
        assert_eq!(get(&table, 50), None);
        assert_eq!(
            table.hot.chunks.len(),
            chunks,
            "chunks are kept across clears"
        );
        table.check_invariants();
    }

    #[test]
    fn generation_wrap_wipes_buckets_once() {
        let mut table = Table::new(0u64, 0u32);
        table.insert(1, 1, cold_of(1)).unwrap();
        table.generation = u32::MAX;
        table.stamps.fill(u32::MAX);
        table.buckets.fill(0);
        table.len = 0;
        table.insert(2, 2, cold_of(2)).unwrap();
        table.clear();
        assert_eq!(table.generation, 1);
        assert_eq!(get(&table, 2), None);
        table.insert(3, 3, cold_of(3)).unwrap();
        table.check_invariants();
    }

    #[test]
    fn retain_removes_matching_entries() {
        let mut table = Table::new(0u64, 0u32);
        for k in 0..1000 {
            table.insert(k, k as u64, cold_of(k as u64)).unwrap();
        }
        table.retain(|k, _, _| k % 3 == 0);
        assert_eq!(table.len(), 334);
        assert!(table
            .iter()
            .all(|(k, &hot, &cold)| k % 3 == 0 && hot == k as u64 && cold == cold_of(hot)));
        table.check_invariants();
    }

    #[test]
    fn negative_and_extreme_keys() {
        let mut table = Table::new(0u64, 0u32);
        for k in [i64::MIN, -1, 0, i64::MAX, 1 << 62] {
            table.insert(k, 7, cold_of(7)).unwrap();
        }
        assert_eq!(table.len(), 5);
        assert_eq!(get(&table, i64::MIN), Some(7));
        table.check_invariants();
    }
}
