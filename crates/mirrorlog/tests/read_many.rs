//! `Engine::read_many` and `Engine::wait_any`: a fetch of many partitions on every shard as
//! one call per shard. `read_many` answers every read in the order given, each as
//! `Engine::read` answers it alone (an unknown partition's error in its place); `wait_any`
//! answers with the first partition that has bytes — promptly when an append lands, at the
//! deadline when none does — and the reads it leaves parked are let go, not held to their
//! deadline.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::engine::{
    Engine, EngineConfig, EngineError, Isolation, PartitionConfig, ReadRequest, TopicPartition,
};
use mirrorlog::format::Offset;
use std::time::{Duration, Instant};

const PARTITIONS: i32 = 90;

fn open(dir: &std::path::Path) -> Engine {
    Engine::open(
        EngineConfig::new(dir)
            .shards(3)
            .clock(common::records_clock()),
    )
    .unwrap()
}

fn batch(p: i32, seq: i32) -> Vec<u8> {
    common::producer_batch(i64::from(p) + 1, seq, 1, false, 100 + p as usize)
}

fn read(offset: i64) -> ReadRequest {
    ReadRequest::new(Offset(offset), 1 << 20, Isolation::ReadUncommitted)
}

fn partitions(engine: &Engine) -> Vec<TopicPartition> {
    let tps: Vec<TopicPartition> = (0..PARTITIONS)
        .map(|p| TopicPartition::new("wide", p))
        .collect();
    for tp in &tps {
        engine
            .create_partition(tp, PartitionConfig::default())
            .wait()
            .unwrap();
    }
    let shards: std::collections::BTreeSet<usize> =
        tps.iter().map(|t| engine.shard_of(t)).collect();
    assert_eq!(shards.len(), 3, "the partitions lie on every shard");
    tps
}

#[test]
fn many_reads_answer_as_each_read_alone_in_the_order_given() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = open(dir.path());
    let tps = partitions(&engine);
    // Partition p holds p % 4 batches.
    for (p, tp) in tps.iter().enumerate() {
        for seq in 0..(p % 4) as i32 {
            engine
                .append(tp, batch(p as i32, seq), Origin::Client)
                .wait()
                .unwrap();
        }
    }
    let mut reads: Vec<(TopicPartition, ReadRequest)> = Vec::new();
    for (p, tp) in tps.iter().enumerate() {
        if p == 45 {
            reads.push((TopicPartition::new("nowhere", 0), read(0)));
        }
        // Every other partition from its second batch on.
        reads.push((tp.clone(), read((p % 2) as i64)));
    }
    let many = engine.read_many(reads.clone()).wait();
    assert_eq!(many.len(), reads.len());
    for ((tp, req), got) in reads.iter().zip(&many) {
        if tp.topic == "nowhere" {
            assert!(
                matches!(got, Err(EngineError::UnknownPartition(t)) if t == tp),
                "{got:?}"
            );
            continue;
        }
        let alone = engine.read(tp, *req).wait().unwrap();
        let got = got.as_ref().unwrap();
        assert_eq!(got.records, alone.records, "{tp}");
        assert_eq!(got.high_watermark, alone.high_watermark, "{tp}");
        assert_eq!(got.log_start_offset, alone.log_start_offset, "{tp}");
    }
    assert!(engine.read_many(Vec::new()).wait().is_empty());
    engine.close().unwrap();
}

#[test]
fn waiting_for_any_answers_with_the_first_partition_that_gets_bytes() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = open(dir.path());
    let tps = partitions(&engine);
    let parked = |wait: Duration| -> Vec<(TopicPartition, ReadRequest)> {
        tps.iter()
            .map(|tp| (tp.clone(), read(0).wait_for(1, wait)))
            .collect()
    };

    // Nothing arrives: answered at the deadline, not before.
    let started = Instant::now();
    let at = engine.wait_any(parked(Duration::from_millis(200))).wait();
    assert!(at.is_ok(), "{at:?}");
    assert!(started.elapsed() >= Duration::from_millis(200));

    // An append to partition 61 wakes the wait at once (well before its 30 s deadline), with
    // 61's position; the other 89 reads are let go at their shards' next tick.
    let waiting = {
        let reads = parked(Duration::from_secs(30));
        let call = engine.wait_any(reads);
        std::thread::spawn(move || call.wait())
    };
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    engine
        .append(&tps[61], batch(61, 0), Origin::Client)
        .wait()
        .unwrap();
    assert_eq!(waiting.join().unwrap(), Ok(61));
    assert!(started.elapsed() < Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = engine.stats().unwrap();
        let still: usize = stats.iter().map(|s| s.parked_reads).sum();
        if still == 0 {
            let cancelled: u64 = stats.iter().map(|s| s.reads_cancelled).sum();
            assert!(cancelled >= 89, "{cancelled}");
            break;
        }
        assert!(Instant::now() < deadline, "{still} reads still parked");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Bytes already there: answered at once with the first such partition of its shard.
    let started = Instant::now();
    let at = engine.wait_any(parked(Duration::from_secs(30))).wait();
    assert_eq!(at, Ok(61));
    assert!(started.elapsed() < Duration::from_secs(5));

    // Nothing to wait for: answered at once.
    assert!(engine.wait_any(Vec::new()).wait().is_err());
    engine.close().unwrap();
}
