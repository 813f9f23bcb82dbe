//! The `hashmap-psm` baseline shared by `benches/producer_state.rs` and `mirrorlog-bench`:
//! producer state written the natural way on `std::collections::HashMap` (a `VecDeque` of the
//! last five batches per producer, the same epoch and sequence rules as ours), and the
//! workload both drive — single-batch client appends by random producers in sequence order,
//! and mirrored chunks of 64 of them.

// Each includer uses a different subset.
#![allow(dead_code)]

use mirrorlog::format::{BatchKind, Offset, ProducerFields};
use mirrorlog::internals::producer_state::{
    BatchInfo, Origin, ProducerStateConfig, ProducerStateManager,
};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::hint::black_box;

/// The batch timestamps of the workload.
pub const TIMESTAMP_MS: i64 = 1_764_403_200_000;

/// Multiplicative hashing for i64 keys, as in `producer_state::table`.
#[derive(Default)]
pub struct MulHasher(u64);

impl Hasher for MulHasher {
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^ (h >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_i64(&mut self, i: i64) {
        self.0 = i as u64;
    }
}

#[derive(Clone, Copy)]
pub struct Batch {
    pub first_seq: i32,
    pub last_seq: i32,
    pub last_offset: i64,
    /// Kept as Kafka keeps it (returned with duplicates in LogAppendTime responses).
    #[allow(dead_code)]
    pub timestamp: i64,
}

pub struct Entry {
    pub epoch: i16,
    pub coordinator_epoch: i32,
    pub last_timestamp: i64,
    pub txn_first_offset: Option<i64>,
    pub batches: VecDeque<Batch>,
}

/// Producer state on a `HashMap`: the baseline.
pub struct MapPsm<S> {
    pub entries: HashMap<i64, Entry, S>,
}

#[derive(Debug)]
pub enum MapError {
    Epoch,
    Sequence,
    TxnState,
}

impl<S: BuildHasher + Default> MapPsm<S> {
    pub fn new() -> Self {
        MapPsm {
            entries: HashMap::default(),
        }
    }

    pub fn entry(&mut self, producer_id: i64) -> &mut Entry {
        self.entries.entry(producer_id).or_insert_with(|| Entry {
            epoch: -1,
            coordinator_epoch: -1,
            last_timestamp: -1,
            txn_first_offset: None,
            batches: VecDeque::with_capacity(5),
        })
    }

    /// One single-batch client append; returns the duplicate's last offset if it is a retry.
    pub fn append(&mut self, b: &BatchInfo) -> Result<Option<i64>, MapError> {
        let p = b.producer;
        let delta = (b.last_offset.0 - b.base_offset.0) as i32;
        let last_seq = ((i64::from(p.base_sequence) + i64::from(delta)) % (1 << 31)) as i32;
        let e = self.entry(p.producer_id);
        if p.producer_epoch == e.epoch {
            if let Some(d) = e
                .batches
                .iter()
                .find(|d| d.first_seq == p.base_sequence && d.last_seq == last_seq)
            {
                return Ok(Some(d.last_offset));
            }
        }
        if p.producer_epoch < e.epoch {
            return Err(MapError::Epoch);
        }
        let last = e.batches.back().map_or(-1, |d| d.last_seq);
        let ok = if p.producer_epoch != e.epoch {
            p.base_sequence == 0 || e.epoch == -1
        } else {
            i64::from(p.base_sequence) == i64::from(last) + 1
                || (p.base_sequence == 0 && last == i32::MAX)
        };
        if !ok {
            return Err(MapError::Sequence);
        }
        if e.txn_first_offset.is_some() && !b.transactional {
            return Err(MapError::TxnState);
        }
        if p.producer_epoch != e.epoch {
            e.epoch = p.producer_epoch;
            e.batches.clear();
        }
        if e.batches.len() == 5 {
            e.batches.pop_front();
        }
        e.batches.push_back(Batch {
            first_seq: p.base_sequence,
            last_seq,
            last_offset: b.last_offset.0,
            timestamp: b.timestamp,
        });
        e.last_timestamp = b.timestamp;
        e.coordinator_epoch = e.coordinator_epoch.max(-1);
        if b.transactional && e.txn_first_offset.is_none() {
            e.txn_first_offset = Some(b.base_offset.0);
        }
        Ok(None)
    }

    /// A mirrored chunk: per batch, the epoch is taken as-is and the history pushed.
    pub fn append_mirror(&mut self, batches: &[BatchInfo]) {
        for b in batches {
            let p = b.producer;
            let delta = (b.last_offset.0 - b.base_offset.0) as i32;
            let last_seq = ((i64::from(p.base_sequence) + i64::from(delta)) % (1 << 31)) as i32;
            let e = self.entry(p.producer_id);
            if p.producer_epoch != e.epoch {
                e.epoch = p.producer_epoch;
                e.batches.clear();
            }
            if e.batches.len() == 5 {
                e.batches.pop_front();
            }
            e.batches.push_back(Batch {
                first_seq: p.base_sequence,
                last_seq,
                last_offset: b.last_offset.0,
                timestamp: b.timestamp,
            });
            e.last_timestamp = b.timestamp;
        }
    }

    pub fn get(&self, producer_id: i64) -> Option<i32> {
        self.entries
            .get(&producer_id)
            .map(|e| e.batches.back().map_or(-1, |b| b.last_seq))
    }

    /// Estimated heap bytes: hashbrown buckets (entry + 1 control byte) and each VecDeque.
    pub fn memory_bytes(&self) -> usize {
        let buckets = (self.entries.capacity() * 8 / 7).next_power_of_two();
        buckets * (std::mem::size_of::<(i64, Entry)>() + 1)
            + self.entries.len() * 5 * std::mem::size_of::<Batch>()
    }
}

pub fn info(producer_id: i64, base_sequence: i32, offset: i64) -> BatchInfo {
    BatchInfo {
        base_offset: Offset(offset),
        last_offset: Offset(offset + 9),
        producer: ProducerFields {
            producer_id,
            producer_epoch: 0,
            base_sequence,
        },
        transactional: false,
        kind: BatchKind::Data,
        timestamp: TIMESTAMP_MS + offset,
    }
}

/// A workload: a stream of single-batch appends by random producers, in sequence order.
pub struct Workload {
    pub rng: u64,
    pub next_seq: Vec<i32>,
    pub offset: i64,
}

impl Workload {
    pub fn new(n: usize) -> Self {
        Workload {
            rng: 0x2545_F491_4F6C_DD1D,
            next_seq: vec![0; n],
            offset: 0,
        }
    }

    pub fn producer(&mut self) -> usize {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        // Multiply-shift rather than `%`: a 64-bit division costs more than a cached lookup,
        // and the workload's cost is added to both sides of every ratio.
        ((u128::from(self.rng) * self.next_seq.len() as u128) >> 64) as usize
    }

    pub fn next(&mut self) -> BatchInfo {
        let p = self.producer();
        let b = info(p as i64, self.next_seq[p], self.offset);
        self.next_seq[p] += 10;
        self.offset += 10;
        b
    }
}

/// Batches per mirrored chunk (a 1 MiB fetch of 16 KiB batches).
pub const CHUNK_BATCHES: usize = 64;

impl Workload {
    pub fn chunk(&mut self, out: &mut Vec<BatchInfo>) {
        out.clear();
        for _ in 0..CHUNK_BATCHES {
            out.push(self.next());
        }
    }
}

pub fn chunk_ours(psm: &mut ProducerStateManager, w: &mut Workload, buf: &mut Vec<BatchInfo>) {
    w.chunk(buf);
    let staged = psm.stage(buf, Origin::Mirror, |_| true).unwrap();
    black_box(psm.apply(staged).unwrap());
}

pub fn chunk_map<S: BuildHasher + Default>(
    m: &mut MapPsm<S>,
    w: &mut Workload,
    buf: &mut Vec<BatchInfo>,
) {
    w.chunk(buf);
    m.append_mirror(buf);
}

pub fn ours(n: usize, w: &mut Workload) -> ProducerStateManager {
    let mut psm = ProducerStateManager::new(ProducerStateConfig::default());
    // Populate through the mirror path in chunks (one batch per producer).
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let batches: Vec<_> = chunk
            .iter()
            .map(|&p| {
                let b = info(p as i64, 0, w.offset);
                w.next_seq[p] = 10;
                w.offset += 10;
                b
            })
            .collect();
        let staged = psm.stage(&batches, Origin::Mirror, |_| true).unwrap();
        psm.apply(staged).unwrap();
    }
    psm
}

pub fn map<S: BuildHasher + Default>(n: usize, w: &mut Workload) -> MapPsm<S> {
    let mut m = MapPsm::new();
    for p in 0..n {
        m.append(&info(p as i64, 0, w.offset)).unwrap();
        w.next_seq[p] = 10;
        w.offset += 10;
    }
    m
}

pub fn update_ours(psm: &mut ProducerStateManager, w: &mut Workload) {
    let b = w.next();
    let staged = psm.stage(&[b], Origin::Client, |_| true).unwrap();
    black_box(psm.apply(staged).unwrap());
}

pub fn update_map<S: BuildHasher + Default>(m: &mut MapPsm<S>, w: &mut Workload) {
    let b = w.next();
    black_box(m.append(&b).unwrap());
}

/// Single-batch client appends per turn (what a shard drains from its queue at once).
pub const TURN_APPENDS: usize = 64;

/// A turn of `TURN_APPENDS` client appends on our PSM, as the shard stages it: first every
/// append's producer slot is prefetched (the lookahead), then each append is staged and applied
/// in order.
pub fn turn_ours(psm: &mut ProducerStateManager, w: &mut Workload, buf: &mut Vec<BatchInfo>) {
    buf.clear();
    buf.extend((0..TURN_APPENDS).map(|_| w.next()));
    psm.prefetch_producers(buf.iter().map(|b| b.producer.producer_id));
    for b in buf.iter() {
        let staged = psm
            .stage(std::slice::from_ref(b), Origin::Client, |_| true)
            .unwrap();
        black_box(psm.apply(staged).unwrap());
    }
}

/// The same turn on the `HashMap` PSM: the same appends, made in order.
pub fn turn_map<S: BuildHasher + Default>(
    m: &mut MapPsm<S>,
    w: &mut Workload,
    buf: &mut Vec<BatchInfo>,
) {
    buf.clear();
    buf.extend((0..TURN_APPENDS).map(|_| w.next()));
    for b in buf.iter() {
        black_box(m.append(b).unwrap());
    }
}
