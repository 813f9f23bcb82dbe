//! The shard and its ring under load:
//! - more dirty partitions than the ring holds rounds: rounds wait for room in the submission
//!   queue (a queue of ready rounds), a full ring is never an error and never poisons, and every
//!   append is acknowledged and durable;
//! - a non-blocking reap under `DEFER_TASKRUN` runs the ring's task work, so a busy shard that
//!   never waits still harvests its completions.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::engine::{Engine, EngineConfig, PartitionConfig, TopicPartition};
use mirrorlog::format::Offset;
use mirrorlog::internals::io::{Doorbell, Io, Op, UringIo};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn a_non_blocking_reap_runs_deferred_task_work() {
    let mut io = UringIo::new(8).unwrap();
    assert!(
        io.deferred_taskrun(),
        "this kernel offers DEFER_TASKRUN (6.1+); the test is about it"
    );
    let doorbell = Arc::new(Doorbell::new().unwrap());
    io.submit(Op::WaitDoorbell {
        doorbell: doorbell.clone(),
    })
    .unwrap();
    io.flush().unwrap();
    // Rung from another thread: the poll's wake-up is task work the kernel defers to this
    // thread's next enter that asks for events.
    let ringer = {
        let doorbell = doorbell.clone();
        std::thread::spawn(move || doorbell.ring())
    };
    ringer.join().unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.is_empty() && Instant::now() < deadline {
        io.complete(0, &mut out).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        out.len(),
        1,
        "a reap that does not wait still harvests a completion the kernel finished"
    );
    assert!(out[0].result.is_ok());
    assert_eq!(io.in_flight(), 0);
}

fn tiny() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 256 << 10,
        max_message_bytes: 64 << 10,
        append_buffer_bytes: 64 << 10,
        ..PartitionConfig::default()
    }
}

#[test]
fn more_dirty_partitions_than_the_ring_holds_wait_for_room_and_none_is_poisoned() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let mut config = EngineConfig::new(dir.path())
        .shards(1)
        .clock(common::records_clock());
    // Room for two rounds (three operations each) and the doorbell watch: 96 partitions
    // become dirty in the same turns.
    config.io_depth = 8;
    let engine = Engine::open(config.clone()).unwrap();
    let partitions: Vec<TopicPartition> = (0..96).map(|i| TopicPartition::new("wide", i)).collect();
    for tp in &partitions {
        engine.create_partition(tp, tiny()).wait().unwrap();
    }
    const ROUNDS: i32 = 5;
    for round in 0..ROUNDS {
        // Every partition's append is queued before any is waited for.
        let calls: Vec<_> = partitions
            .iter()
            .enumerate()
            .map(|(i, tp)| {
                let b = common::producer_batch(i as i64, round * 2, 2, false, 300);
                engine.append(tp, b, Origin::Client)
            })
            .collect();
        for (tp, call) in partitions.iter().zip(calls) {
            let o = call
                .wait()
                .unwrap_or_else(|e| panic!("{tp} round {round}: {e}"));
            assert_eq!(o.first_offset, Offset(i64::from(round) * 2));
        }
    }
    for tp in &partitions {
        let s = engine.state(tp).wait().unwrap();
        assert_eq!(s.durable_end, Offset(i64::from(ROUNDS) * 2), "{tp}");
    }
    let stats = engine.stats().unwrap();
    let rounds: u64 = stats.iter().map(|s| s.commit_rounds).sum();
    assert!(rounds >= 96, "every partition committed ({rounds} rounds)");
    engine.close().unwrap();
    let engine = Engine::open(config).unwrap();
    for tp in &partitions {
        assert_eq!(
            engine.state(tp).wait().unwrap().log_end,
            Offset(i64::from(ROUNDS) * 2),
            "{tp} after reopen"
        );
    }
    engine.close().unwrap();
}

#[test]
fn appends_beyond_the_buffer_bound_wait_keep_their_order_and_none_fails() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    // Two partitions of the shard may hold an append buffer; twenty are written at once.
    let config = EngineConfig::new(dir.path())
        .shards(1)
        .clock(common::records_clock())
        .append_buffers_max(2);
    let engine = Engine::open(config.clone()).unwrap();
    let partitions: Vec<TopicPartition> = (0..20).map(|i| TopicPartition::new("few", i)).collect();
    for tp in &partitions {
        engine.create_partition(tp, tiny()).wait().unwrap();
    }
    const APPENDS: i32 = 6;
    // Per partition: its appends, and a state request queued behind them; all issued before
    // any is waited for.
    let mut calls = Vec::new();
    let mut states = Vec::new();
    for (i, tp) in partitions.iter().enumerate() {
        let mine: Vec<_> = (0..APPENDS)
            .map(|k| {
                let b = common::producer_batch(i as i64, k * 2, 2, false, 500);
                engine.append(tp, b, Origin::Client)
            })
            .collect();
        calls.push(mine);
        states.push(engine.state(tp));
    }
    for (tp, mine) in partitions.iter().zip(calls) {
        for (k, call) in mine.into_iter().enumerate() {
            let o = call
                .wait()
                .unwrap_or_else(|e| panic!("{tp} append {k}: {e}"));
            assert_eq!(o.first_offset, Offset(k as i64 * 2), "{tp}: in order");
        }
    }
    for (tp, state) in partitions.iter().zip(states) {
        // The state request was answered after the appends issued before it.
        let s = state.wait().unwrap();
        assert_eq!(s.log_end, Offset(i64::from(APPENDS) * 2), "{tp}");
    }
    let stats = engine.stats().unwrap();
    assert!(
        stats[0].appends_waiting_for_buffer > 0,
        "appends waited for a buffer"
    );
    assert!(stats[0].partitions_holding_buffers <= 2, "{stats:?}");
    engine.close().unwrap();
    let engine = Engine::open(config).unwrap();
    for tp in &partitions {
        assert_eq!(
            engine.state(tp).wait().unwrap().log_end,
            Offset(i64::from(APPENDS) * 2)
        );
    }
    engine.close().unwrap();
}
