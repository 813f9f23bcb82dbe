//! Compaction through the engine: the shard's cleaner compacts a `cleanup.policy=compact`
//! partition by itself, in the background of its loop (its counters show the work), while
//! producers keep appending; `Engine::update_config` turns compaction on for a live partition
//! and the change survives a reopen; `Engine::clean` cleans at once; nothing is cleaned while a
//! partition mirrors.

mod common;

use mirrorlog::api::{CleanupPolicy, CompactionConfig, Isolation, ManualClock, Origin};
use mirrorlog::engine::{
    CleanerConfig, Engine, EngineConfig, PartitionConfig, ReadRequest, TopicPartition,
};
use mirrorlog::format::{
    self, BatchBuilder, BatchIter, BatchOptions, Offset, ProducerFields, RecordSpec,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn config(policy: CleanupPolicy) -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 64 << 10,
        max_message_bytes: 16 << 10,
        append_buffer_bytes: 1 << 20,
        compaction: CompactionConfig {
            policy,
            ..CompactionConfig::DEFAULT
        },
        ..PartitionConfig::default()
    }
}

fn engine(dir: &std::path::Path, clock: &ManualClock) -> Engine {
    Engine::open(
        EngineConfig::new(dir)
            .shards(1)
            .pin_threads(false)
            .clock(Arc::new(clock.clone()))
            .retention_check_interval_ms(20)
            .cleaner(CleanerConfig {
                backoff_ms: 1,
                dedupe_buffer_bytes: 1 << 20,
                ..CleanerConfig::default()
            }),
    )
    .unwrap()
}

/// A batch of producer 1 from `seq` writing `keys` keys (key i of round r: `k{(r*keys+i)%space}`).
fn keyed(seq: i32, round: usize, keys: usize, space: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        producer: ProducerFields {
            producer_id: 1,
            producer_epoch: 0,
            base_sequence: seq,
        },
        ..BatchOptions::default()
    });
    let value = vec![b'v'; 100];
    for i in 0..keys {
        let key = format!("k{}", (round * keys + i) % space);
        b.push(RecordSpec {
            timestamp: common::RECORDS_MS,
            key: Some(key.as_bytes()),
            value: Some(&value),
            headers: &[],
        });
    }
    b.build()
}

/// Every record from the log start: offset → key.
fn records(engine: &Engine, tp: &TopicPartition) -> BTreeMap<i64, Vec<u8>> {
    let state = engine.state(tp).wait().unwrap();
    let mut out = BTreeMap::new();
    let mut at = state.log_start;
    while at < state.high_watermark {
        let r = engine
            .read(
                tp,
                ReadRequest::new(at, 1 << 20, Isolation::ReadUncommitted),
            )
            .wait()
            .unwrap();
        let Some(last) = BatchIter::new(&r.records, 0).last() else {
            break;
        };
        for batch in BatchIter::new(&r.records, 0) {
            let base = batch.header().base_offset.0;
            for rec in batch.records().unwrap() {
                let rec = rec.unwrap();
                out.insert(
                    base + i64::from(rec.offset_delta),
                    rec.key.unwrap().to_vec(),
                );
            }
        }
        at = Offset(last.header().last_offset().0 + 1);
    }
    out
}

fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn produce(engine: &Engine, tp: &TopicPartition, rounds: usize, seq: &mut i32) {
    for round in 0..rounds {
        engine
            .append(tp, keyed(*seq, round, 20, 100), Origin::Client)
            .wait()
            .unwrap();
        *seq += 20;
    }
}

#[test]
fn the_shard_compacts_a_compacted_partition_in_the_background() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let clock = ManualClock::new(common::RECORDS_MS + 1_000);
    let engine = engine(dir.path(), &clock);
    let tp = TopicPartition::new("changelog", 0);
    engine
        .create_partition(&tp, config(CleanupPolicy::COMPACT))
        .wait()
        .unwrap();
    let mut seq = 0;
    produce(&engine, &tp, 200, &mut seq);
    eventually("a background pass", || {
        engine.stats().unwrap()[0].cleaner.passes > 0
    });
    // Producers go on while the cleaner works; every key's newest record stays readable.
    produce(&engine, &tp, 100, &mut seq);
    eventually("the sealed segments compacted", || {
        records(&engine, &tp).len() < 300 * 20 / 2
    });
    let seen = records(&engine, &tp);
    let mut newest: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
    for (offset, key) in &seen {
        newest.insert(key.clone(), *offset);
    }
    assert_eq!(newest.len(), 100, "every key is still there");
    let end = engine.state(&tp).wait().unwrap().log_end.0;
    for (key, offset) in &newest {
        // The newest record of each key is its last write (keys cycle: round r writes keys
        // (20r .. 20r+20) mod 100).
        assert!(
            end - offset <= 100,
            "{key:?} at {offset}: an older record survived, not the newest"
        );
    }
    let stats = &engine.stats().unwrap()[0].cleaner;
    assert!(
        stats.bytes_read > 0
            && stats.bytes_written > 0
            && stats.bytes_written < stats.bytes_replaced,
        "{stats:?}"
    );
    engine.close().unwrap();
}

#[test]
fn update_config_turns_compaction_on_live_and_a_reopen_keeps_it() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let clock = ManualClock::new(common::RECORDS_MS + 1_000);
    let tp = TopicPartition::new("orders", 0);
    {
        let engine = engine(dir.path(), &clock);
        engine
            .create_partition(&tp, config(CleanupPolicy::DELETE))
            .wait()
            .unwrap();
        let mut seq = 0;
        produce(&engine, &tp, 100, &mut seq);
        assert_eq!(
            engine.clean(&tp).wait().unwrap(),
            None,
            "delete: nothing to clean"
        );
        let bad = PartitionConfig {
            compaction: CompactionConfig {
                delete_retention_ms: -1,
                ..CompactionConfig::DEFAULT
            },
            ..config(CleanupPolicy::COMPACT)
        };
        assert!(
            engine.update_config(&tp, bad).wait().is_err(),
            "validated first"
        );
        engine
            .update_config(&tp, config(CleanupPolicy::COMPACT))
            .wait()
            .unwrap();
        let stats = engine.clean(&tp).wait().unwrap().expect("compact: a pass");
        assert!(stats.records_kept < stats.records_read);
        engine.close().unwrap();
    }
    let engine = engine(dir.path(), &clock);
    // Keyless client records are refused now: the reopened partition is still compacted.
    let keyless = common::producer_batch(2, 0, 1, false, 10);
    assert!(engine.append(&tp, keyless, Origin::Client).wait().is_err());
    let _ = format::Offset(0);
    engine.close().unwrap();
}

#[test]
fn the_cleaners_io_rate_is_bounded_by_log_cleaner_io_max_bytes_per_second() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let clock = ManualClock::new(common::RECORDS_MS + 1_000);
    let engine = Engine::open(
        EngineConfig::new(dir.path())
            .shards(1)
            .pin_threads(false)
            .clock(Arc::new(clock.clone()))
            .retention_check_interval_ms(20)
            .cleaner(CleanerConfig {
                backoff_ms: 1,
                dedupe_buffer_bytes: 1 << 20,
                // 32 KiB a second: a step reads at most 64 KiB, then the throttle holds the
                // cleaner for the rest of the second.
                io_max_bytes_per_second: Some(32 << 10),
                ..CleanerConfig::default()
            }),
    )
    .unwrap();
    let tp = TopicPartition::new("slow", 0);
    engine
        .create_partition(&tp, config(CleanupPolicy::COMPACT))
        .wait()
        .unwrap();
    let mut seq = 0;
    produce(&engine, &tp, 200, &mut seq);
    eventually("the cleaner starts", || {
        engine.stats().unwrap()[0].cleaner.bytes_read > 0
    });
    let started = Instant::now();
    let first = engine.stats().unwrap()[0].cleaner.bytes_read;
    std::thread::sleep(Duration::from_millis(1500));
    let read = engine.stats().unwrap()[0].cleaner.bytes_read - first;
    let seconds = started.elapsed().as_secs_f64().ceil() as u64 + 1;
    // At most one step (64 KiB, plus a batch) past the rate in each second begun.
    assert!(
        read <= seconds * ((64 << 10) + (16 << 10)),
        "{read} bytes in {seconds} s"
    );
    let unthrottled = engine.stats().unwrap()[0].cleaner;
    assert_eq!(unthrottled.passes_failed, 0);
    engine.close().unwrap();
}
