//! 2,000 partitions on one engine: created, written concurrently by many callers with
//! every partition's appends in flight at once (rounds waiting for ring room, appends waiting for
//! one of the 64 append buffers a shard lends at once), rolled (64 KiB
//! segments), closed, reopened clean — without reading a sealed segment — and reopened unclean
//! (every clean-shutdown marker removed: each recovers from its recovery point); every
//! acknowledged batch is back each time, and `mirrorlog verify` finds nothing.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::engine::{Engine, EngineConfig, PartitionConfig, TopicPartition};
use mirrorlog::format::Offset;
use std::sync::Arc;

const PARTITIONS: usize = 2_000;
const CALLERS: usize = 16;
const ROUNDS: i32 = 12;

fn config() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 64 << 10,
        max_message_bytes: 16 << 10,
        append_buffer_bytes: 32 << 10,
        preallocate_step_bytes: 64 << 10,
        ..PartitionConfig::default()
    }
}

/// Per partition: the stored bytes acknowledged, in offset order.
fn check(engine: &Engine, tps: &[TopicPartition], acked: &[Vec<u8>], context: &str) {
    for (tp, want) in tps.iter().zip(acked) {
        let state = engine.state(tp).wait().unwrap();
        assert_eq!(
            state.log_end,
            Offset(i64::from(ROUNDS) * 2),
            "{context}: {tp}"
        );
        let got = common::engine_bytes(engine, tp, state.log_start, state.high_watermark);
        assert!(got == *want, "{context}: {tp}: the acknowledged batches");
    }
}

#[test]
fn two_thousand_partitions_written_concurrently_then_reopened_clean_and_unclean() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    // At most 64 partitions of a shard hold an append buffer at once: the rest wait for one
    // (and get it) as rounds complete.
    let engine_config = EngineConfig::new(dir.path())
        .shards(2)
        .clock(common::records_clock())
        .append_buffers_max(64);
    let engine = Arc::new(Engine::open(engine_config.clone()).unwrap());
    let tps: Vec<TopicPartition> = (0..PARTITIONS as i32)
        .map(|i| TopicPartition::new("wide", i))
        .collect();
    let created: Vec<_> = tps
        .iter()
        .map(|tp| engine.create_partition(tp, config()))
        .collect();
    for c in created {
        c.wait().unwrap();
    }
    // Each caller owns every CALLERS-th partition and keeps one append in flight on each of
    // them at once, round after round.
    let threads: Vec<_> = (0..CALLERS)
        .map(|t| {
            let engine = engine.clone();
            let tps = tps.clone();
            std::thread::spawn(move || {
                let mine: Vec<usize> = (t..PARTITIONS).step_by(CALLERS).collect();
                let mut acked: Vec<(usize, Vec<u8>)> =
                    mine.iter().map(|&p| (p, Vec::new())).collect();
                for round in 0..ROUNDS {
                    let calls: Vec<_> = mine
                        .iter()
                        .map(|&p| {
                            let b = common::producer_batch(p as i64, round * 2, 2, false, 3500);
                            (b.clone(), engine.append(&tps[p], b, Origin::Client))
                        })
                        .collect();
                    for ((b, call), (_, stored)) in calls.into_iter().zip(acked.iter_mut()) {
                        let o = call.wait().unwrap();
                        assert_eq!(o.first_offset, Offset(i64::from(round) * 2));
                        stored.extend(common::stored(b, o.first_offset, 0));
                    }
                }
                acked
            })
        })
        .collect();
    let mut acked = vec![Vec::new(); PARTITIONS];
    for t in threads {
        for (p, bytes) in t.join().unwrap() {
            acked[p] = bytes;
        }
    }
    check(&engine, &tps, &acked, "written");
    let stats = engine.stats().unwrap();
    assert!(stats.iter().all(|s| s.partitions_holding_buffers <= 64));
    assert!(
        stats
            .iter()
            .map(|s| s.appends_waiting_for_buffer)
            .sum::<u64>()
            > 0,
        "appends waited for buffers"
    );
    let segments = std::fs::read_dir(dir.path().join(tps[0].dir_name()))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "log")
        })
        .count();
    assert!(segments >= 2, "the partitions rolled ({segments} segments)");
    Arc::try_unwrap(engine).ok().unwrap().close().unwrap();

    let engine = Engine::open(engine_config.clone()).unwrap();
    assert!(engine.failed_partitions().is_empty());
    check(&engine, &tps, &acked, "clean reopen");
    engine.close().unwrap();

    for tp in &tps {
        std::fs::remove_file(dir.path().join(tp.dir_name()).join("clean-shutdown")).unwrap();
    }
    let engine = Engine::open(engine_config).unwrap();
    assert!(engine.failed_partitions().is_empty());
    check(&engine, &tps, &acked, "unclean reopen");
    engine.close().unwrap();
    common::assert_verifies(dir.path());
}
