//! Shard scaling (issue "Thread-per-core engine"): the shard data path on the simulated disk
//! (in memory), each shard driven on its own thread through the embedding path (appends
//! submitted directly, `run_once` turns): 2 shards vs 1, appends/s. Goal >= 1.8x: the data path
//! shares nothing. Printed next to the machine's own 2-thread scaling of a CPU-only loop
//! (building batches), which bounds what 2 shards can show on this host.
//!
//! The engine's on-disk figures (group commit against per-append write + fdatasync, with one
//! and with 8 appends in flight per caller) are `mirrorlog-bench produce`.
//!
//! `cargo bench --bench shard_scaling` runs 5 s rounds (0.2 s without `--bench`).

use mirrorlog::api::Origin;
use mirrorlog::engine::{EngineError, PartitionConfig, TopicPartition};
use mirrorlog::format::{BatchBuilder, BatchOptions, ProducerFields, RecordSpec};
use mirrorlog::internals::io::{SimConfig, SimIo};
use mirrorlog::internals::log::AppendOutcome;
use mirrorlog::internals::shard::{promise, AppendReply, Pending, Request, Shard, ShardConfig};
use std::io::Write;
use std::time::{Duration, Instant};

const VALUE_BYTES: usize = 950;

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` does not: a short smoke run then.
    let long = std::env::args().any(|a| a == "--bench");
    scaling(if long { 5.0 } else { 0.2 });
}

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
            ..ShardConfig::new(0, std::path::PathBuf::new())
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
                    batches: batch(p as i64, seqs[p]).into(),
                    origin: Origin::Client,
                    follows: None,
                    reply: AppendReply::One(reply),
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
