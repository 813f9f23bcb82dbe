//! The engine's two figures from issue "Thread-per-core engine", each a ratio measured in
//! this run:
//!
//! 1. Group commit: 64 partitions on 2 shards, 32 caller threads (2 partitions each, one
//!    idempotent producer per partition), 1 KiB client batches, every append waited for until
//!    durable. Baseline: the same 32 threads doing a buffered `write` + `fdatasync` per append
//!    on 64 files (the page-cache design without group commit). Rounds alternate (baseline,
//!    engine, baseline, engine) so drift hits both. Appends/s and p50/p99/p999 (hdrhistogram).
//!    Goal: ≥ 10x the baseline's appends/s with p99 within 2x of its p99.
//! 2. Scaling: the shard data path on the simulated disk (in memory), each shard driven on its
//!    own thread through the embedding path (appends submitted directly, `run_once` turns):
//!    2 shards vs 1, appends/s. Goal ≥ 1.8x: the data path shares nothing.
//!
//! `cargo bench --bench engine [-- group|scaling]` runs 5 s rounds (0.2 s without `--bench`).

use hdrhistogram::Histogram;
use mirrorlog::engine::EngineError;
use mirrorlog::engine::{Engine, EngineConfig, PartitionConfig, TopicPartition};
use mirrorlog::format::{BatchBuilder, BatchOptions, ProducerFields, RecordSpec};
use mirrorlog::io::{SimConfig, SimIo};
use mirrorlog::log::AppendOutcome;
use mirrorlog::producer_state::Origin;
use mirrorlog::shard::{promise, Pending, Request, Shard, ShardConfig};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::Barrier;
use std::time::{Duration, Instant};

const PARTITIONS: usize = 64;
const CALLERS: usize = 32;
const VALUE_BYTES: usize = 950;

fn batch(producer: i64, seq: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        producer: ProducerFields {
            producer_id: producer,
            producer_epoch: 0,
            base_sequence: seq,
        },
        ..BatchOptions::default()
    });
    b.push(RecordSpec {
        timestamp: 1_764_403_200_000,
        key: None,
        value: Some(&[0x42; VALUE_BYTES]),
        headers: &[],
    });
    b.build()
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).unwrap()
}

struct Side {
    appends: u64,
    secs: f64,
    latency_us: Histogram<u64>,
}

impl Side {
    fn add(&mut self, other: Side) {
        self.appends += other.appends;
        self.secs += other.secs;
        self.latency_us.add(other.latency_us).unwrap();
    }

    fn rate(&self) -> f64 {
        self.appends as f64 / self.secs
    }

    fn line(&self, name: &str) -> String {
        format!(
            "  {name:<34} {:>10.0} appends/s   p50 {:>6} us  p99 {:>6} us  p999 {:>6} us",
            self.rate(),
            self.latency_us.value_at_quantile(0.5),
            self.latency_us.value_at_quantile(0.99),
            self.latency_us.value_at_quantile(0.999)
        )
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` does not: a short smoke run then.
    let long = std::env::args().any(|a| a == "--bench");
    let secs = if long { 5.0 } else { 0.2 };
    let only = |name: &str| {
        let picked: Vec<String> = std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with('-'))
            .collect();
        picked.is_empty() || picked.iter().any(|p| p == name)
    };
    if only("group") {
        group_commit(secs);
    }
    if only("scaling") {
        scaling(secs);
    }
}

/// Each of `CALLERS` threads runs `one(thread, i)` (one timed append) until the deadline.
fn timed(secs: f64, one: impl Fn(usize, u64) + Sync) -> Side {
    let barrier = Barrier::new(CALLERS);
    let per_thread: Vec<(u64, Histogram<u64>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CALLERS)
            .map(|t| {
                let (barrier, one) = (&barrier, &one);
                s.spawn(move || {
                    let mut h = histogram();
                    barrier.wait();
                    let deadline = Instant::now() + Duration::from_secs_f64(secs);
                    let mut i = 0u64;
                    while Instant::now() < deadline {
                        let t0 = Instant::now();
                        one(t, i);
                        h.record((t0.elapsed().as_micros() as u64).max(1)).unwrap();
                        i += 1;
                    }
                    (i, h)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut side = Side {
        appends: 0,
        secs,
        latency_us: histogram(),
    };
    for (n, h) in per_thread {
        side.appends += n;
        side.latency_us.add(h).unwrap();
    }
    side
}

fn group_commit(secs: f64) {
    let root = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    // Baseline files: 2 per caller, written at increasing positions.
    let files: Vec<std::fs::File> = (0..PARTITIONS)
        .map(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .read(true)
                .write(true)
                .open(root.path().join(format!("baseline-{p}")))
                .unwrap()
        })
        .collect();
    let positions: Vec<std::sync::atomic::AtomicU64> = (0..PARTITIONS)
        .map(|_| std::sync::atomic::AtomicU64::new(0))
        .collect();
    let record = batch(1, 0);
    let baseline_round = || {
        timed(secs, |t, i| {
            let p = t * 2 + (i % 2) as usize;
            let at =
                positions[p].fetch_add(record.len() as u64, std::sync::atomic::Ordering::Relaxed);
            files[p].write_all_at(&record, at).unwrap();
            files[p].sync_data().unwrap();
        })
    };

    let engine = Engine::open(
        EngineConfig::new(root.path().join("engine"))
            .shards(2)
            .cluster_id("bench"),
    )
    .unwrap();
    let tps: Vec<TopicPartition> = (0..PARTITIONS as i32)
        .map(|p| TopicPartition::new("bench", p))
        .collect();
    for tp in &tps {
        engine
            .create_partition(
                tp,
                PartitionConfig {
                    segment_bytes: 256 << 20,
                    ..PartitionConfig::default()
                },
            )
            .wait()
            .unwrap();
    }
    let seqs: Vec<std::sync::atomic::AtomicI32> = (0..PARTITIONS)
        .map(|_| std::sync::atomic::AtomicI32::new(0))
        .collect();
    let engine_round = || {
        timed(secs, |t, i| {
            let p = t * 2 + (i % 2) as usize;
            // Each partition's producer is used by one thread only: sequences stay in order.
            let seq = seqs[p].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            engine
                .append(&tps[p], batch(p as i64, seq), Origin::Client)
                .wait()
                .unwrap();
        })
    };
    // The same callers keeping WINDOW appends in flight each (one producer per partition
    // still: sequences in order), so that appends queue behind a partition's round and a
    // round covers several of them.
    const WINDOW: usize = 8;
    let pipelined_round = || {
        let mut side = timed(secs, |t, i| {
            let p = t * 2 + (i % 2) as usize;
            let calls: Vec<_> = (0..WINDOW)
                .map(|_| {
                    let seq = seqs[p].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    engine.append(&tps[p], batch(p as i64, seq), Origin::Client)
                })
                .collect();
            for c in calls {
                c.wait().unwrap();
            }
        });
        side.appends *= WINDOW as u64;
        side
    };
    let mut base = baseline_round();
    let mut eng = engine_round();
    let mut piped = pipelined_round();
    base.add(baseline_round());
    eng.add(engine_round());
    piped.add(pipelined_round());
    let stats = engine.stats().unwrap();
    let rounds: u64 = stats.iter().map(|s| s.commit_rounds).sum();
    let appends: u64 = stats.iter().map(|s| s.appends).sum();
    engine.close().unwrap();
    println!(
        "group commit: {PARTITIONS} partitions on 2 shards, {CALLERS} caller threads, {}-byte client batches, durable acks ({} s x 2 rounds each):",
        record.len(),
        secs
    );
    println!("{}", base.line("baseline write+fdatasync per append"));
    println!("{}", eng.line("engine"));
    println!(
        "  appends/s ratio engine/baseline: {:.2} (goal >= 10)   p99 ratio engine/baseline: {:.2} (goal <= 2)",
        eng.rate() / base.rate(),
        eng.latency_us.value_at_quantile(0.99) as f64
            / base.latency_us.value_at_quantile(0.99) as f64
    );
    println!(
        "{}",
        piped.line(&format!("engine, {WINDOW} in flight per caller"))
    );
    println!(
        "  (latency of a window: its {WINDOW} appends issued together, timed to the last ack)"
    );
    println!(
        "  appends/s ratio pipelined engine/baseline: {:.2}",
        piped.rate() / base.rate()
    );
    println!(
        "  engine overall: {appends} appends in {rounds} commit rounds ({:.2} appends per partition round)",
        appends as f64 / rounds.max(1) as f64
    );
}

/// One shard on this thread, `partitions` partitions, appending for `secs` with up to
/// `window` appends outstanding per partition; returns appends acknowledged.
fn drive_shard(index: usize, secs: f64, partitions: usize) -> u64 {
    let io = Box::new(SimIo::new(SimConfig {
        seed: index as u64,
        capacity: 1024,
        ..SimConfig::default()
    }));
    let mut shard = Shard::new(
        io,
        ShardConfig {
            index,
            data_dir: std::path::PathBuf::from(format!("/sim/scaling-{index}")),
            queue_depth: 64,
            commit_linger_us: 0,
        },
    )
    .unwrap();
    let tps: Vec<TopicPartition> = (0..partitions as i32)
        .map(|p| TopicPartition::new(&format!("s{index}"), p))
        .collect();
    for tp in &tps {
        let (reply, p) = promise();
        shard.submit(Request::Create {
            tp: tp.clone(),
            // Small segments and retention keep the in-memory disk at a steady size, so the
            // figure is the data path's, not the allocator's page faults.
            config: PartitionConfig {
                segment_bytes: 1 << 20,
                max_message_bytes: 64 << 10,
                retention_bytes: Some(4 << 20),
                ..PartitionConfig::default()
            },
            reply,
        });
        p.wait().unwrap().unwrap();
    }
    let mut seqs = vec![0i32; partitions];
    let mut pending: Vec<Pending<Result<AppendOutcome, EngineError>>> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut acked = 0u64;
    while Instant::now() < deadline {
        for (p, tp) in tps.iter().enumerate() {
            for _ in 0..8 {
                let (reply, pend) = promise();
                shard.submit(Request::Append {
                    tp: tp.clone(),
                    batches: batch(p as i64, seqs[p]),
                    origin: Origin::Client,
                    reply,
                });
                seqs[p] += 1;
                pending.push(pend);
            }
        }
        while !pending.is_empty() {
            shard.run_once(false).unwrap();
            pending.retain_mut(|p| match p.try_take() {
                Some(r) => {
                    r.unwrap().unwrap();
                    acked += 1;
                    false
                }
                None => true,
            });
        }
    }
    acked
}

/// The machine's own scaling, for reference: building batches (allocation and CRC, no shared
/// state) on 1 thread, then on 2, for `secs`; batches per second.
fn machine_scaling(secs: f64) -> (f64, f64) {
    let work = || {
        let deadline = Instant::now() + Duration::from_secs_f64(secs);
        let mut n = 0u64;
        while Instant::now() < deadline {
            std::hint::black_box(batch(1, n as i32));
            n += 1;
        }
        n
    };
    let t = Instant::now();
    let one = work() as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    let two: u64 = std::thread::scope(|s| {
        let a = s.spawn(work);
        let b = s.spawn(work);
        a.join().unwrap() + b.join().unwrap()
    });
    (one, two as f64 / t.elapsed().as_secs_f64())
}

fn scaling(secs: f64) {
    let (cpu_one, cpu_two) = machine_scaling(secs.min(2.0));
    println!(
        "machine: 1 thread {cpu_one:.0} batches built/s, 2 threads {cpu_two:.0}/s, ratio {:.2} (the most 2 shards can show here)",
        cpu_two / cpu_one
    );
    let partitions = 8;
    let t = Instant::now();
    let one = drive_shard(0, secs, partitions) as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    let two: u64 = std::thread::scope(|s| {
        let a = s.spawn(|| drive_shard(1, secs, partitions));
        let b = s.spawn(|| drive_shard(2, secs, partitions));
        a.join().unwrap() + b.join().unwrap()
    });
    let two = two as f64 / t.elapsed().as_secs_f64();
    println!(
        "scaling on the simulated disk ({partitions} partitions per shard, each shard on its own thread): 1 shard {one:.0} appends/s, 2 shards {two:.0} appends/s, ratio {:.2} (goal >= 1.8)",
        two / one
    );
    let _ = std::io::stdout().flush();
}
