//! The cleaner's dedupe map: key → the offset of its newest record in the dirty section, as
//! Kafka's `SkimpyOffsetMap` keeps it — a fixed table of 24-byte slots (a 128-bit hash of the
//! key and the offset), open addressing with linear probing, filled to at most
//! [`DEDUPE_LOAD_FACTOR_PPM`] of its slots (Kafka's `log.cleaner.io.buffer.load.factor`).
//!
//! Keys are never stored: two keys whose 128-bit hashes collide would share a slot (Kafka takes
//! the same risk with MD5; at 10^9 keys the chance is about 10^-21). The hash is SipHash-1-3
//! under two fixed keys, so a run replays exactly.
//!
//! Unlike Kafka's, the table is not allocated whole: it starts at [`DEDUPE_SLOTS_INITIAL`] and
//! doubles (rehashing) whenever it is [`DEDUPE_GROW_AT_PPM`] full, up to the buffer's slots. A
//! pass over 100,000 keys then probes a 6 MiB table, not a 64 MiB one (measured: lookups in
//! the whole buffer were a third of a pass's CPU, cache and TLB misses), and an idle cleaner
//! holds little. The bound and the "full" rule are the buffer's, as Kafka's.

use crate::format::Offset;
use std::hash::Hasher;

/// Bytes of one slot: the key's 128-bit hash and the offset.
pub const DEDUPE_SLOT_BYTES: usize = 24;
/// The share of slots a pass fills before it stops mapping, in millionths (Kafka's 0.9).
pub const DEDUPE_LOAD_FACTOR_PPM: u64 = 900_000;
/// Slots of a new table (1.5 MiB).
pub const DEDUPE_SLOTS_INITIAL: usize = 1 << 16;
/// A table below the buffer's size doubles when this full, in millionths.
pub const DEDUPE_GROW_AT_PPM: u64 = 600_000;

const _: () = assert!(DEDUPE_SLOT_BYTES == 3 * std::mem::size_of::<u64>());

/// See the module docs.
#[derive(Debug)]
pub struct OffsetMap {
    /// `[hash_hi, hash_lo, offset]` per slot; a slot with both hash words 0 is free (a hash is
    /// never all zeroes: its low bit is forced to 1).
    slots: Vec<[u64; 3]>,
    /// Slots the buffer holds: the table's bound.
    slots_max: usize,
    entries: usize,
    latest_offset: Offset,
    lookups: u64,
    probes: u64,
}

impl OffsetMap {
    /// A map in `buffer_bytes` (at least one slot).
    #[must_use]
    pub fn new(buffer_bytes: usize) -> Self {
        let slots_max = (buffer_bytes / DEDUPE_SLOT_BYTES).max(2);
        OffsetMap {
            slots: vec![[0; 3]; slots_max.min(DEDUPE_SLOTS_INITIAL)],
            slots_max,
            entries: 0,
            latest_offset: Offset(-1),
            lookups: 0,
            probes: 0,
        }
    }

    /// Slots the buffer holds (the table's bound).
    #[must_use]
    pub fn slots(&self) -> usize {
        self.slots_max
    }

    /// Keys mapped.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether no key is mapped.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Whether the map took as many keys as a pass puts in it (the load factor).
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.entries as u64 * 1_000_000 >= self.slots_max as u64 * DEDUPE_LOAD_FACTOR_PPM
    }

    /// Bytes the buffer may take (its bound).
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        self.slots_max * DEDUPE_SLOT_BYTES
    }

    /// Bytes the table takes now.
    #[must_use]
    pub fn allocated_bytes(&self) -> usize {
        self.slots.len() * DEDUPE_SLOT_BYTES
    }

    /// Filled share of the buffer, 0 to 1.
    #[must_use]
    pub fn utilization(&self) -> f64 {
        self.entries as f64 / self.slots_max as f64
    }

    /// Empties the map for a new pass (the table shrinks back to its first size).
    pub fn clear(&mut self) {
        let initial = self.slots_max.min(DEDUPE_SLOTS_INITIAL);
        if self.slots.len() > initial {
            self.slots = vec![[0; 3]; initial];
        } else {
            self.slots.fill([0; 3]);
        }
        self.entries = 0;
        self.latest_offset = Offset(-1);
    }

    /// Doubles the table (up to the buffer's slots) when it is [`DEDUPE_GROW_AT_PPM`] full.
    fn grow_if_loaded(&mut self) {
        let n = self.slots.len();
        if n >= self.slots_max
            || (self.entries as u64 + 1) * 1_000_000 < n as u64 * DEDUPE_GROW_AT_PPM
        {
            return;
        }
        let bigger = (n * 2).min(self.slots_max);
        let old = std::mem::replace(&mut self.slots, vec![[0; 3]; bigger]);
        for slot in old.into_iter().filter(|s| s[0] != 0 || s[1] != 0) {
            let mut i = (slot[1] as usize) % bigger;
            while self.slots[i][0] != 0 || self.slots[i][1] != 0 {
                i = if i + 1 == bigger { 0 } else { i + 1 };
            }
            self.slots[i] = slot;
        }
    }

    /// The last offset the pass mapped (Kafka's `latestOffset`): records past it are newer
    /// than anything the map knows and are always kept.
    #[must_use]
    pub fn latest_offset(&self) -> Offset {
        self.latest_offset
    }

    /// Sets [`OffsetMap::latest_offset`].
    pub fn set_latest_offset(&mut self, offset: Offset) {
        self.latest_offset = offset;
    }

    /// Maps `key` to `offset` (a newer offset of a key replaces the older one). The caller stops
    /// before the map is full ([`OffsetMap::is_full`]); a full table still takes updates of
    /// known keys, and a new key into a table with no free slot is refused (`false`).
    pub fn put(&mut self, key: &[u8], offset: Offset) -> bool {
        self.grow_if_loaded();
        let (hi, lo) = hash(key);
        let n = self.slots.len();
        let mut i = (lo as usize) % n;
        for _ in 0..n {
            let slot = &mut self.slots[i];
            if slot[0] == 0 && slot[1] == 0 {
                *slot = [hi, lo, offset.0 as u64];
                self.entries += 1;
                return true;
            }
            if slot[0] == hi && slot[1] == lo {
                slot[2] = offset.0 as u64;
                return true;
            }
            i = if i + 1 == n { 0 } else { i + 1 };
        }
        false
    }

    /// The newest mapped offset of `key`, if the pass mapped it.
    pub fn get(&mut self, key: &[u8]) -> Option<Offset> {
        let (hi, lo) = hash(key);
        let n = self.slots.len();
        let mut i = (lo as usize) % n;
        self.lookups += 1;
        for _ in 0..n {
            self.probes += 1;
            let slot = &self.slots[i];
            if slot[0] == 0 && slot[1] == 0 {
                return None;
            }
            if slot[0] == hi && slot[1] == lo {
                return Some(Offset(slot[2] as i64));
            }
            i = if i + 1 == n { 0 } else { i + 1 };
        }
        None
    }

    /// Average slots probed per lookup since the map was made.
    #[must_use]
    pub fn probes_per_lookup(&self) -> f64 {
        if self.lookups == 0 {
            return 0.0;
        }
        self.probes as f64 / self.lookups as f64
    }
}

/// The key's 128-bit hash (never all zeroes).
fn hash(key: &[u8]) -> (u64, u64) {
    let mut a = std::hash::DefaultHasher::new();
    a.write(key);
    let mut b = std::hash::DefaultHasher::new();
    b.write_u8(0x5c);
    b.write(key);
    (a.finish(), b.finish() | 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_offset_of_a_key_wins_and_unknown_keys_are_absent() {
        let mut map = OffsetMap::new(24 * 100);
        assert_eq!(map.slots(), 100);
        assert_eq!(map.memory_bytes(), 2400);
        for i in 0..50i64 {
            assert!(map.put(format!("k{}", i % 10).as_bytes(), Offset(i)));
        }
        assert_eq!(map.len(), 10);
        assert_eq!(map.get(b"k3"), Some(Offset(43)));
        assert_eq!(map.get(b"nope"), None);
        assert!(!map.is_full());
        for i in 10..90i64 {
            map.put(format!("k{i}").as_bytes(), Offset(i));
        }
        assert!(map.is_full(), "90 of 100 slots is Kafka's load factor");
        map.clear();
        assert!(map.is_empty());
        assert_eq!(map.get(b"k3"), None);
    }

    #[test]
    fn the_table_grows_to_the_buffer_and_keeps_every_key() {
        let mut map = OffsetMap::new(24 * 1_000_000);
        assert_eq!(map.allocated_bytes(), 24 * DEDUPE_SLOTS_INITIAL);
        for i in 0..200_000i64 {
            assert!(map.put(&i.to_le_bytes(), Offset(i)));
        }
        assert!(map.allocated_bytes() <= 24 * 524_288 && map.allocated_bytes() > 24 * 200_000);
        for i in (0..200_000i64).step_by(997) {
            assert_eq!(map.get(&i.to_le_bytes()), Some(Offset(i)));
        }
        assert!(!map.is_full());
        map.clear();
        assert_eq!(map.allocated_bytes(), 24 * DEDUPE_SLOTS_INITIAL);
    }

    #[test]
    fn a_table_with_no_free_slot_refuses_new_keys_but_updates_known_ones() {
        let mut map = OffsetMap::new(48);
        assert!(map.put(b"a", Offset(1)));
        assert!(map.put(b"b", Offset(2)));
        assert!(!map.put(b"c", Offset(3)));
        assert!(map.put(b"a", Offset(4)));
        assert_eq!(map.get(b"a"), Some(Offset(4)));
    }
}
