//! An open-addressing hash table keyed by producer id, written for the PSM.
//!
//! Layout: a power-of-two array of 4-byte *buckets* probed linearly, in groups of 16 (one cache
//! line) that each carry a generation stamp in a parallel array, and a dense, chunked array of
//! *slots* (key + value) that the buckets point into.
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
//!   match, one slot. Four bytes a bucket keep the bucket array small enough to stay in the
//!   core's cache while the slots it points to do not (512 KiB at 100,000 producers), so the
//!   slot is the one memory access a lookup waits for.
//! - Slots are dense (`0..len`), so memory follows the number of entries, not the bucket count:
//!   no allocation per entry, storage is kept across clears. The first [`SMALL_SLOTS`] live in
//!   heap chunks of [`SLOT_CHUNK_LEN`]; the rest in 2 MiB [`HugeVec`]s, which become one huge
//!   page each once full. A large table is read at random, and with 4 KiB pages each such read
//!   would also miss the TLB — under virtualisation a two-level page walk about as dear as the
//!   cache miss itself. A `HugeVec` is resident only as far as it is filled, so memory per
//!   entry does not jump by 2 MiB steps.
//! - Deletion is tombstone-free: backward-shift in the bucket array, swap-remove in the slots
//!   (the moved slot's bucket is re-pointed).
//! - Growth doubles the buckets at a load factor of 7/8 and re-inserts from the dense slots.
//!
//! Worked example of the memory per entry at 100,000 producers with the PSM's 112-byte slots:
//! buckets 131,072 × 4 B = 524,288 B and their stamps 8,192 × 4 B = 32,768 B; the first 16,384
//! slots in 16 chunks × 1,024 × 112 B = 1,835,008 B; the other 83,616 in `HugeVec`s of
//! ⌊2,097,152 / 112⌋ = 18,724: four full ones (4 × 2,097,152 B) and 8,720 slots of a fifth
//! (976,640 B, rounded up to whole pages: 978,944 B); total 11,765,248 B, i.e. 117.7 B per
//! producer.

use crate::io::HugeVec;
use std::fmt;

/// Slots per chunk of the dense slot array.
pub const SLOT_CHUNK_LEN: usize = 1024;
const SLOT_CHUNK_SHIFT: u32 = SLOT_CHUNK_LEN.trailing_zeros();
/// Slots held in heap chunks; the rest are in [`HugeVec`]s. Small tables stay on the heap (a
/// `HugeVec` is a 2 MiB mapping), large ones are mostly on huge pages.
pub const SMALL_SLOTS: usize = 16 * SLOT_CHUNK_LEN;
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

/// One dense slot: the key and its value (in this order: the PSM warms slots by offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Slot<V> {
    /// The producer id.
    pub key: i64,
    /// The value.
    pub value: V,
}

/// See the module docs.
#[derive(Clone)]
pub struct Table<V: Copy> {
    buckets: Vec<u32>,
    /// One generation stamp per [`GROUP_LEN`] buckets.
    stamps: Vec<u32>,
    /// `log2(buckets.len())`.
    bucket_bits: u32,
    generation: u32,
    chunks: Vec<Box<[Slot<V>]>>,
    /// Slots from [`SMALL_SLOTS`] on; each filled up to the highest index ever live in it.
    huge: Vec<HugeVec<Slot<V>>>,
    len: usize,
    filler: Slot<V>,
}

impl<V: Copy + fmt::Debug> fmt::Debug for Table<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|s| (s.key, s.value)))
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

impl<V: Copy> Table<V> {
    /// An empty table; `filler` initialises fresh chunks (never observable as an entry).
    #[must_use]
    pub fn new(filler: V) -> Self {
        Table {
            buckets: vec![0; BUCKETS_MIN],
            stamps: vec![1; BUCKETS_MIN / GROUP_LEN],
            bucket_bits: BUCKETS_MIN.trailing_zeros(),
            generation: 1,
            chunks: Vec::new(),
            huge: Vec::new(),
            len: 0,
            filler: Slot {
                key: 0,
                value: filler,
            },
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

    /// Bytes allocated for buckets and slots (for a `HugeVec`, the pages its elements reach).
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        self.buckets.len() * std::mem::size_of::<u32>()
            + self.stamps.len() * std::mem::size_of::<u32>()
            + self.chunks.len() * SLOT_CHUNK_LEN * std::mem::size_of::<Slot<V>>()
            + self.huge.iter().map(HugeVec::resident_bytes).sum::<usize>()
    }

    /// How many of the slot `HugeVec`s are full, and how many of those the kernel put on a
    /// huge page.
    #[must_use]
    pub fn huge_pages(&self) -> (usize, usize) {
        let full = self.huge.iter().filter(|h| h.is_full()).count();
        let collapsed = self.huge.iter().filter(|h| h.collapsed()).count();
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

    #[inline]
    fn slot(&self, index: usize) -> &Slot<V> {
        if index < SMALL_SLOTS {
            &self.chunks[index >> SLOT_CHUNK_SHIFT][index & (SLOT_CHUNK_LEN - 1)]
        } else {
            let at = index - SMALL_SLOTS;
            let per = HugeVec::<Slot<V>>::CAPACITY;
            &self.huge[at / per].as_slice()[at % per]
        }
    }

    #[inline]
    fn slot_mut(&mut self, index: usize) -> &mut Slot<V> {
        if index < SMALL_SLOTS {
            &mut self.chunks[index >> SLOT_CHUNK_SHIFT][index & (SLOT_CHUNK_LEN - 1)]
        } else {
            let at = index - SMALL_SLOTS;
            let per = HugeVec::<Slot<V>>::CAPACITY;
            &mut self.huge[at / per].as_mut_slice()[at % per]
        }
    }

    /// Stores `slot` at `index == self.len`, making room for it first. Memory exhaustion
    /// aborts, as for any allocation in Rust.
    fn put_new(&mut self, index: usize, slot: Slot<V>) {
        if index < SMALL_SLOTS {
            if index >> SLOT_CHUNK_SHIFT == self.chunks.len() {
                self.chunks
                    .push(vec![self.filler; SLOT_CHUNK_LEN].into_boxed_slice());
            }
            *self.slot_mut(index) = slot;
            return;
        }
        let at = index - SMALL_SLOTS;
        let per = HugeVec::<Slot<V>>::CAPACITY;
        if at / per == self.huge.len() {
            self.huge.push(HugeVec::new_or_abort());
        }
        let vec = &mut self.huge[at / per];
        if at % per < vec.len() {
            vec.as_mut_slice()[at % per] = slot;
        } else {
            vec.push(slot);
        }
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
                if self.slot(index).key == key {
                    return Some((pos, index));
                }
            }
            pos = (pos + 1) & mask;
        }
    }

    /// The slot the home bucket of `key` points to, if that bucket is occupied: possibly
    /// another key's. For warming caches: reading it for every key of a batch before looking
    /// any of them up turns a chain of dependent cache misses into overlapping ones, since the
    /// loads of different keys are independent and the CPU issues them together. (A plain
    /// load does the work of a prefetch instruction without `unsafe`.)
    #[inline]
    pub fn home_slot(&self, key: i64) -> Option<&Slot<V>> {
        let bucket = self.bucket(self.home(hash(key)));
        if bucket == 0 {
            return None;
        }
        let index = slot_of(bucket);
        (index < self.len).then(|| self.slot(index))
    }

    /// The slot index of `key`: stable until the next insert, remove or clear.
    #[inline]
    #[must_use]
    pub fn find_slot(&self, key: i64) -> Option<usize> {
        self.find(key).map(|(_, index)| index)
    }

    /// The value in slot `index` (from [`Table::find_slot`]).
    ///
    /// # Panics
    /// If `index` is not a live slot: a caller bug, not a data error.
    #[inline]
    #[must_use]
    pub fn value_at(&self, index: usize) -> &V {
        assert!(index < self.len, "slot {index} is not live");
        &self.slot(index).value
    }

    /// The value in slot `index`, mutably.
    ///
    /// # Panics
    /// If `index` is not a live slot.
    #[inline]
    pub fn value_at_mut(&mut self, index: usize) -> &mut V {
        assert!(index < self.len, "slot {index} is not live");
        &mut self.slot_mut(index).value
    }

    /// The value of `key`.
    #[inline]
    #[must_use]
    pub fn get(&self, key: i64) -> Option<&V> {
        self.find(key).map(|(_, index)| &self.slot(index).value)
    }

    /// The value of `key`, mutably.
    #[inline]
    pub fn get_mut(&mut self, key: i64) -> Option<&mut V> {
        let (_, index) = self.find(key)?;
        Some(&mut self.slot_mut(index).value)
    }

    /// Inserts or replaces the value of `key`.
    ///
    /// # Errors
    /// [`TableFull`] when `key` is new and the table holds [`ENTRIES_MAX`] entries.
    pub fn insert(&mut self, key: i64, value: V) -> Result<(), TableFull> {
        if let Some(existing) = self.get_mut(key) {
            *existing = value;
            return Ok(());
        }
        if self.len >= ENTRIES_MAX {
            return Err(TableFull);
        }
        if (self.len + 1) * LOAD_DENOMINATOR > self.buckets.len() * LOAD_NUMERATOR {
            self.grow();
        }
        let index = self.len;
        self.put_new(index, Slot { key, value });
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
            let key = self.slot(index).key;
            self.place(key, index);
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: i64) -> Option<V> {
        let (pos, index) = self.find(key)?;
        let removed = self.slot(index).value;
        self.remove_bucket(pos);
        // Swap-remove in the dense slots and re-point the moved slot's bucket.
        let last = self.len - 1;
        if index != last {
            let moved = *self.slot(last);
            *self.slot_mut(index) = moved;
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
            let key = self.slot(slot_of(bucket)).key;
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

    /// Every entry, in slot order (insertion order, disturbed by removals).
    pub fn iter(&self) -> impl Iterator<Item = &Slot<V>> + '_ {
        (0..self.len).map(move |index| self.slot(index))
    }

    /// Keeps only the entries for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(i64, &V) -> bool) {
        let mut index = 0;
        while index < self.len {
            let slot = *self.slot(index);
            if keep(slot.key, &slot.value) {
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
            let key = self.slot(index).key;
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

    #[test]
    fn insert_get_remove_against_hashmap() {
        let mut table = Table::new(0u64);
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
                    table.insert(key, step).unwrap();
                    model.insert(key, step);
                }
                3 => assert_eq!(table.remove(key), model.remove(&key)),
                _ => assert_eq!(table.get(key), model.get(&key)),
            }
            if step % 1000 == 0 {
                table.check_invariants();
            }
        }
        table.check_invariants();
        assert_eq!(table.len(), model.len());
        for (k, v) in &model {
            assert_eq!(table.get(*k), Some(v));
        }
    }

    #[test]
    fn large_tables_use_huge_vecs_and_agree_with_hashmap() {
        // 60,000 entries: 16,384 in heap chunks, then one full HugeVec (18,724 slots) and part
        // of a second and third. Removals move slots across the tiers; a clear and refill
        // reuses the HugeVecs' pages.
        // Values as wide as the PSM's, so slots are 112 bytes as there.
        let mut table = Table::new([0u64; 13]);
        let mut model = HashMap::new();
        for k in 0..60_000i64 {
            table.insert(k * 7919, [k as u64; 13]).unwrap();
            model.insert(k * 7919, [k as u64; 13]);
        }
        let (full, _) = table.huge_pages();
        assert!(full >= 1, "at least one HugeVec filled");
        table.check_invariants();
        let mut x: u64 = 0x9e37_79b9;
        for step in 0..40_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x % 70_000) as i64 * 7919;
            if x.is_multiple_of(3) {
                assert_eq!(table.remove(key), model.remove(&key));
            } else {
                table.insert(key, [step; 13]).unwrap();
                model.insert(key, [step; 13]);
            }
        }
        table.check_invariants();
        assert_eq!(table.len(), model.len());
        for (k, v) in &model {
            assert_eq!(table.get(*k), Some(v));
        }
        let before = table.memory_bytes();
        table.clear();
        for k in 0..50_000i64 {
            table.insert(-k, [1; 13]).unwrap();
        }
        table.check_invariants();
        assert_eq!(table.get(-49_999), Some(&[1; 13]));
        assert_eq!(table.get(7919), None);
        assert!(table.memory_bytes() <= before, "a refill reuses storage");
    }

    #[test]
    fn clear_is_a_generation_bump_and_the_table_is_reusable() {
        let mut table = Table::new(0u32);
        for k in 0..5000 {
            table.insert(k, k as u32).unwrap();
        }
        let chunks = table.chunks.len();
        table.clear();
        assert!(table.is_empty());
        assert_eq!(table.get(17), None);
        assert_eq!(table.iter().count(), 0);
        table.check_invariants();
        for k in 100..200 {
            table.insert(k, 1).unwrap();
        }
        assert_eq!(table.len(), 100);
        assert_eq!(table.get(150), Some(&1));
        assert_eq!(table.get(50), None);
        assert_eq!(table.chunks.len(), chunks, "chunks are kept across clears");
        table.check_invariants();
    }

    #[test]
    fn generation_wrap_wipes_buckets_once() {
        let mut table = Table::new(0u8);
        table.insert(1, 1).unwrap();
        table.generation = u32::MAX;
        table.stamps.fill(u32::MAX);
        table.buckets.fill(0);
        table.len = 0;
        table.insert(2, 2).unwrap();
        table.clear();
        assert_eq!(table.generation, 1);
        assert_eq!(table.get(2), None);
        table.insert(3, 3).unwrap();
        table.check_invariants();
    }

    #[test]
    fn retain_removes_matching_entries() {
        let mut table = Table::new(0i64);
        for k in 0..1000 {
            table.insert(k, k).unwrap();
        }
        table.retain(|k, _| k % 3 == 0);
        assert_eq!(table.len(), 334);
        assert!(table.iter().all(|s| s.key % 3 == 0));
        table.check_invariants();
    }

    #[test]
    fn negative_and_extreme_keys() {
        let mut table = Table::new(0u8);
        for k in [i64::MIN, -1, 0, i64::MAX, 1 << 62] {
            table.insert(k, 7).unwrap();
        }
        assert_eq!(table.len(), 5);
        assert_eq!(table.get(i64::MIN), Some(&7));
        table.check_invariants();
    }
}
