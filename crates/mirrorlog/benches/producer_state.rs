//! The PSM table against `HashMap`-based producer state, at 1e3, 1e5 and 1e6 producers:
//! update throughput in two shapes — single-batch idempotent client appends (duplicate check,
//! epoch and sequence rules, history push; one append at a time, so latency-bound) and mirrored
//! chunks of 64 batches from random producers (the mirror-ingest path) — lookups, independent
//! (they overlap) and as a dependent chain (each waits for the previous: the latency), clear
//! time vs table size (must stay flat), and memory per producer. The headline ratios are
//! printed at the end from interleaved rounds in one process.
//!
//! Baselines, both written the natural way on `std::collections::HashMap` with a `VecDeque` of
//! the last five batches per producer and the same rules:
//! - `hashmap_sip`: the standard library's default hasher (SipHash-1-3);
//! - `hashmap_mul`: the same map with the multiplicative hash our table uses, so the ratio
//!   against it shows what the layout buys beyond cheaper hashing;
//! - `hashmap_foldhash`: the same map with foldhash, the fast hash `mirrorlog-bench` measures
//!   against (`psm_client_turn`, `psm_mirror_chunk`).
//!
//! `psm_client_turn` is a shard's turn of 64 client appends from distinct producers: ours with
//! the lookahead (every producer's slot prefetched first, then each append in order).

use criterion::{criterion_group, BatchSize, BenchmarkId, Criterion, Throughput};
use std::hash::BuildHasherDefault;
use std::hint::black_box;
use std::time::Instant;

#[path = "support/hashmap_psm.rs"]
mod hashmap_psm;
use hashmap_psm::{
    chunk_map, chunk_ours, map, ours, turn_map, turn_ours, update_map, update_ours, MulHasher,
    Workload, CHUNK_BATCHES, TURN_APPENDS,
};

const SIZES: [usize; 3] = [1_000, 100_000, 1_000_000];

type Sip = std::collections::hash_map::RandomState;
type Mul = BuildHasherDefault<MulHasher>;
type Fold = foldhash::fast::RandomState;

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

    // A shard's turn of client appends from distinct producers: ours with the lookahead
    // (every producer's slot prefetched, then each append staged and applied in order).
    let mut group = c.benchmark_group("psm_client_turn");
    group.throughput(Throughput::Elements(TURN_APPENDS as u64));
    for n in SIZES {
        let mut buf = Vec::new();
        let mut w = Workload::new(n);
        let mut psm = ours(n, &mut w);
        group.bench_function(BenchmarkId::new("table_lookahead", n), |b| {
            b.iter(|| turn_ours(&mut psm, &mut w, &mut buf))
        });
        let mut w = Workload::new(n);
        let mut m = map::<Fold>(n, &mut w);
        group.bench_function(BenchmarkId::new("hashmap_foldhash", n), |b| {
            b.iter(|| turn_map(&mut m, &mut w, &mut buf))
        });
        let mut w = Workload::new(n);
        let mut m = map::<Sip>(n, &mut w);
        group.bench_function(BenchmarkId::new("hashmap_sip", n), |b| {
            b.iter(|| turn_map(&mut m, &mut w, &mut buf))
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
        let mut w = Workload::new(n);
        let mut m = map::<Fold>(n, &mut w);
        group.bench_function(BenchmarkId::new("hashmap_foldhash", n), |b| {
            b.iter(|| chunk_map(&mut m, &mut w, &mut buf))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("psm_lookup");
    for n in SIZES {
        let mut w = Workload::new(n);
        let psm = ours(n, &mut w);
        group.bench_function(BenchmarkId::new("table", n), |b| {
            b.iter(|| black_box(psm.view(w.producer() as i64).map(|e| e.last_seq())))
        });
        let mut w = Workload::new(n);
        let m = map::<Sip>(n, &mut w);
        group.bench_function(BenchmarkId::new("hashmap_sip", n), |b| {
            b.iter(|| black_box(m.get(w.producer() as i64)))
        });
    }
    group.finish();

    // Lookup latency: each lookup's producer depends on the previous answer.
    let mut group = c.benchmark_group("psm_lookup_chain");
    for n in SIZES {
        let mut w = Workload::new(n);
        let psm = ours(n, &mut w);
        let mut acc = 0u64;
        group.bench_function(BenchmarkId::new("table", n), |b| {
            b.iter(|| {
                let p = chained(w.producer(), acc, n);
                acc = psm.view(p).map_or(0, |e| e.last_seq() as u64);
            })
        });
        let mut w = Workload::new(n);
        let m = map::<Sip>(n, &mut w);
        group.bench_function(BenchmarkId::new("hashmap_sip", n), |b| {
            b.iter(|| {
                let p = chained(w.producer(), acc, n);
                acc = m.get(p).map_or(0, |s| s as u64);
            })
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

/// A producer for the next lookup of a dependent chain: the workload's next one, moved by the
/// previous answer's low bit, so the lookup cannot start before the previous one finished.
fn chained(producer: usize, previous: u64, n: usize) -> i64 {
    (producer ^ (previous & 1) as usize).min(n - 1) as i64
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
                black_box(psm.view(wo.producer() as i64).map(|e| e.last_seq()));
            });
            lo.push(t.elapsed().as_secs_f64() / UPDATES as f64 * 1e9);
            let t = Instant::now();
            (0..UPDATES).for_each(|_| {
                black_box(sip.get(ws.producer() as i64));
            });
            ls.push(t.elapsed().as_secs_f64() / UPDATES as f64 * 1e9);
        }
        let (lo, ls) = (median(&mut lo), median(&mut ls));
        // The same lookups as a dependent chain (each producer chosen from the previous
        // answer), so they cannot overlap: a lookup's full latency, which bounds an update.
        let (mut co_, mut cs_) = (Vec::new(), Vec::new());
        let mut acc = 0u64;
        for _ in 0..ROUNDS {
            let t = Instant::now();
            (0..UPDATES).for_each(|_| {
                let p = chained(wo.producer(), acc, n);
                acc = psm.view(p).map_or(0, |e| e.last_seq() as u64);
            });
            co_.push(t.elapsed().as_secs_f64() / UPDATES as f64 * 1e9);
            let t = Instant::now();
            (0..UPDATES).for_each(|_| {
                let p = chained(ws.producer(), acc, n);
                acc = sip.get(p).map_or(0, |s| s as u64);
            });
            cs_.push(t.elapsed().as_secs_f64() / UPDATES as f64 * 1e9);
        }
        black_box(acc);
        let (chain_o, chain_s) = (median(&mut co_), median(&mut cs_));
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
             lookup {:5.1} ns vs {:5.1} ns (x{:.2}), as a dependent chain {:5.1} ns vs {:5.1} ns (x{:.2}) | clear {:5.0} ns (HashMap::clear {:11.0} ns) | \
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
            chain_o,
            chain_s,
            chain_s / chain_o,
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
