//! The PSM table against `HashMap`-based producer state, at 1e3, 1e5 and 1e6 producers:
//! update throughput in two shapes — single-batch idempotent client appends (duplicate check,
//! epoch and sequence rules, history push; one append at a time, so latency-bound) and mirrored
//! chunks of 64 batches from random producers (the mirror-ingest path) — lookup latency, clear
//! time vs table size (must stay flat), and memory per producer. The headline ratios are
//! printed at the end from interleaved rounds in one process.
//!
//! Baselines, both written the natural way on `std::collections::HashMap` with a `VecDeque` of
//! the last five batches per producer and the same rules:
//! - `hashmap_sip`: the standard library's default hasher (SipHash-1-3);
//! - `hashmap_mul`: the same map with the multiplicative hash our table uses, so the ratio
//!   against it shows what the layout buys beyond cheaper hashing.

use criterion::{criterion_group, BatchSize, BenchmarkId, Criterion, Throughput};
use mirrorlog::format::{BatchKind, Offset, ProducerFields};
use mirrorlog::producer_state::{BatchInfo, Origin, ProducerStateConfig, ProducerStateManager};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::hint::black_box;
use std::time::Instant;

const SIZES: [usize; 3] = [1_000, 100_000, 1_000_000];
const TIMESTAMP_MS: i64 = 1_764_403_200_000;

/// Multiplicative hashing for i64 keys, as in `producer_state::table`.
#[derive(Default)]
struct MulHasher(u64);

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
struct Batch {
    first_seq: i32,
    last_seq: i32,
    last_offset: i64,
    /// Kept as Kafka keeps it (returned with duplicates in LogAppendTime responses).
    #[allow(dead_code)]
    timestamp: i64,
}

struct Entry {
    epoch: i16,
    coordinator_epoch: i32,
    last_timestamp: i64,
    txn_first_offset: Option<i64>,
    batches: VecDeque<Batch>,
}

/// Producer state on a `HashMap`: the baseline.
struct MapPsm<S> {
    entries: HashMap<i64, Entry, S>,
}

#[derive(Debug)]
enum MapError {
    Epoch,
    Sequence,
    TxnState,
}

impl<S: BuildHasher + Default> MapPsm<S> {
    fn new() -> Self {
        MapPsm {
            entries: HashMap::default(),
        }
    }

    fn entry(&mut self, producer_id: i64) -> &mut Entry {
        self.entries.entry(producer_id).or_insert_with(|| Entry {
            epoch: -1,
            coordinator_epoch: -1,
            last_timestamp: -1,
            txn_first_offset: None,
            batches: VecDeque::with_capacity(5),
        })
    }

    /// One single-batch client append; returns the duplicate's last offset if it is a retry.
    fn append(&mut self, b: &BatchInfo) -> Result<Option<i64>, MapError> {
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
    fn append_mirror(&mut self, batches: &[BatchInfo]) {
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

    fn get(&self, producer_id: i64) -> Option<i32> {
        self.entries
            .get(&producer_id)
            .map(|e| e.batches.back().map_or(-1, |b| b.last_seq))
    }

    /// Estimated heap bytes: hashbrown buckets (entry + 1 control byte) and each VecDeque.
    fn memory_bytes(&self) -> usize {
        let buckets = (self.entries.capacity() * 8 / 7).next_power_of_two();
        buckets * (std::mem::size_of::<(i64, Entry)>() + 1)
            + self.entries.len() * 5 * std::mem::size_of::<Batch>()
    }
}

fn info(producer_id: i64, base_sequence: i32, offset: i64) -> BatchInfo {
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
struct Workload {
    rng: u64,
    next_seq: Vec<i32>,
    offset: i64,
}

impl Workload {
    fn new(n: usize) -> Self {
        Workload {
            rng: 0x2545_F491_4F6C_DD1D,
            next_seq: vec![0; n],
            offset: 0,
        }
    }

    fn producer(&mut self) -> usize {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % self.next_seq.len() as u64) as usize
    }

    fn next(&mut self) -> BatchInfo {
        let p = self.producer();
        let b = info(p as i64, self.next_seq[p], self.offset);
        self.next_seq[p] += 10;
        self.offset += 10;
        b
    }
}

/// Batches per mirrored chunk (a 1 MiB fetch of 16 KiB batches).
const CHUNK_BATCHES: usize = 64;

impl Workload {
    fn chunk(&mut self, out: &mut Vec<BatchInfo>) {
        out.clear();
        for _ in 0..CHUNK_BATCHES {
            out.push(self.next());
        }
    }
}

fn chunk_ours(psm: &mut ProducerStateManager, w: &mut Workload, buf: &mut Vec<BatchInfo>) {
    w.chunk(buf);
    let staged = psm.stage(buf, Origin::Mirror, |_| true).unwrap();
    black_box(psm.apply(staged).unwrap());
}

fn chunk_map<S: BuildHasher + Default>(
    m: &mut MapPsm<S>,
    w: &mut Workload,
    buf: &mut Vec<BatchInfo>,
) {
    w.chunk(buf);
    m.append_mirror(buf);
}

fn ours(n: usize, w: &mut Workload) -> ProducerStateManager {
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

fn map<S: BuildHasher + Default>(n: usize, w: &mut Workload) -> MapPsm<S> {
    let mut m = MapPsm::new();
    for p in 0..n {
        m.append(&info(p as i64, 0, w.offset)).unwrap();
        w.next_seq[p] = 10;
        w.offset += 10;
    }
    m
}

fn update_ours(psm: &mut ProducerStateManager, w: &mut Workload) {
    let b = w.next();
    let staged = psm.stage(&[b], Origin::Client, |_| true).unwrap();
    black_box(psm.apply(staged).unwrap());
}

fn update_map<S: BuildHasher + Default>(m: &mut MapPsm<S>, w: &mut Workload) {
    let b = w.next();
    black_box(m.append(&b).unwrap());
}

type Sip = std::collections::hash_map::RandomState;
type Mul = BuildHasherDefault<MulHasher>;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("psm_update");
    group.throughput(Throughput::Elements(1));
    for n in SIZES {
        let mut w = Workload::new(n);
        let mut psm = ours(n, &mut w);
        group.bench_function(BenchmarkId::new("table", n), |b| {
            b.iter(|| update_ours(&mut psm, &mut w))
        });
        let mut w = Workload::new(n);
        let mut m = map::<Sip>(n, &mut w);
        group.bench_function(BenchmarkId::new("hashmap_sip", n), |b| {
            b.iter(|| update_map(&mut m, &mut w))
        });
        let mut w = Workload::new(n);
        let mut m = map::<Mul>(n, &mut w);
        group.bench_function(BenchmarkId::new("hashmap_mul", n), |b| {
            b.iter(|| update_map(&mut m, &mut w))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("psm_mirror_chunk");
    group.throughput(Throughput::Elements(CHUNK_BATCHES as u64));
    for n in SIZES {
        let mut buf = Vec::new();
        let mut w = Workload::new(n);
        let mut psm = ours(n, &mut w);
        group.bench_function(BenchmarkId::new("table", n), |b| {
            b.iter(|| chunk_ours(&mut psm, &mut w, &mut buf))
        });
        let mut w = Workload::new(n);
        let mut m = map::<Sip>(n, &mut w);
        group.bench_function(BenchmarkId::new("hashmap_sip", n), |b| {
            b.iter(|| chunk_map(&mut m, &mut w, &mut buf))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("psm_lookup");
    for n in SIZES {
        let mut w = Workload::new(n);
        let psm = ours(n, &mut w);
        group.bench_function(BenchmarkId::new("table", n), |b| {
            b.iter(|| black_box(psm.get(w.producer() as i64).map(|e| e.last_seq())))
        });
        let mut w = Workload::new(n);
        let m = map::<Sip>(n, &mut w);
        group.bench_function(BenchmarkId::new("hashmap_sip", n), |b| {
            b.iter(|| black_box(m.get(w.producer() as i64)))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("psm_clear");
    group.sample_size(10);
    for n in SIZES {
        let mut w = Workload::new(n);
        let full = ours(n, &mut w);
        group.bench_function(BenchmarkId::new("table", n), |b| {
            b.iter_batched_ref(
                || full.clone(),
                |psm| psm.clear_for_barrier(),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Interleaved rounds of all three, so drift on this shared machine hits them alike.
fn print_ratios() {
    const UPDATES: usize = 200_000;
    const ROUNDS: usize = 9;
    println!("\nPSM vs HashMap baselines, interleaved ({ROUNDS} rounds of {UPDATES} single-batch client appends, medians):");
    for n in SIZES {
        let (mut wo, mut ws, mut wm) = (Workload::new(n), Workload::new(n), Workload::new(n));
        let mut psm = ours(n, &mut wo);
        let mut sip = map::<Sip>(n, &mut ws);
        let mut mul = map::<Mul>(n, &mut wm);
        let (mut to, mut ts, mut tm) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let t = Instant::now();
            (0..UPDATES).for_each(|_| update_ours(&mut psm, &mut wo));
            to.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            (0..UPDATES).for_each(|_| update_map(&mut sip, &mut ws));
            ts.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            (0..UPDATES).for_each(|_| update_map(&mut mul, &mut wm));
            tm.push(t.elapsed().as_secs_f64());
        }
        let (o, s, m) = (median(&mut to), median(&mut ts), median(&mut tm));
        let rate = |secs: f64| UPDATES as f64 / secs / 1e6;
        let chunks = UPDATES / CHUNK_BATCHES;
        let mut buf = Vec::new();
        let (mut co, mut cs, mut cm) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let t = Instant::now();
            (0..chunks).for_each(|_| chunk_ours(&mut psm, &mut wo, &mut buf));
            co.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            (0..chunks).for_each(|_| chunk_map(&mut sip, &mut ws, &mut buf));
            cs.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            (0..chunks).for_each(|_| chunk_map(&mut mul, &mut wm, &mut buf));
            cm.push(t.elapsed().as_secs_f64());
        }
        let (chunk_o, chunk_s, chunk_m) = (median(&mut co), median(&mut cs), median(&mut cm));
        let chunk_rate = |secs: f64| (chunks * CHUNK_BATCHES) as f64 / secs / 1e6;
        let (mut lo, mut ls) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let t = Instant::now();
            (0..UPDATES).for_each(|_| {
                black_box(psm.get(wo.producer() as i64).map(|e| e.last_seq()));
            });
            lo.push(t.elapsed().as_secs_f64() / UPDATES as f64 * 1e9);
            let t = Instant::now();
            (0..UPDATES).for_each(|_| {
                black_box(sip.get(ws.producer() as i64));
            });
            ls.push(t.elapsed().as_secs_f64() / UPDATES as f64 * 1e9);
        }
        let (lo, ls) = (median(&mut lo), median(&mut ls));
        let mut clear = Vec::new();
        for _ in 0..ROUNDS {
            let mut copy = psm.clone();
            let t = Instant::now();
            copy.clear_for_barrier();
            clear.push(t.elapsed().as_secs_f64() * 1e9);
        }
        let mut map_clear = Vec::new();
        for _ in 0..3 {
            let mut copy = map::<Sip>(n, &mut Workload::new(n));
            let t = Instant::now();
            copy.entries.clear();
            map_clear.push(t.elapsed().as_secs_f64() * 1e9);
        }
        println!(
            "  {n:>9} producers: client appends {:5.2} M/s vs hashmap_sip {:5.2} (x{:.2}) vs hashmap_mul {:5.2} (x{:.2}) | \
             mirrored batches {:5.2} M/s vs hashmap_sip {:5.2} (x{:.2}) vs hashmap_mul {:5.2} (x{:.2}) | \
             lookup {:5.1} ns vs {:5.1} ns (x{:.2}) | clear {:5.0} ns (HashMap::clear {:11.0} ns) | \
             memory {:5.1} B/producer (hashmap_sip est. {:5.1})",
            rate(o),
            rate(s),
            s / o,
            rate(m),
            m / o,
            chunk_rate(chunk_o),
            chunk_rate(chunk_s),
            chunk_s / chunk_o,
            chunk_rate(chunk_m),
            chunk_m / chunk_o,
            lo,
            ls,
            ls / lo,
            median(&mut clear),
            median(&mut map_clear),
            psm.memory_bytes() as f64 / n as f64,
            sip.memory_bytes() as f64 / n as f64,
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    print_ratios();
}
