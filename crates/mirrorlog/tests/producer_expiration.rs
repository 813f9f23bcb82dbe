//! Producer expiration and retention on a clock (design.md §Producer state, Kafka's `ProducerStateManagerTest`
//! expiration cases), through the public API with a `ManualClock`:
//! - an idle producer expires on every partition, idle ones too, once
//!   `producer.id.expiration.ms` has passed and a check runs
//!   (`producer.id.expiration.check.interval.ms`); its next batch is then accepted at any
//!   sequence, as an unknown producer's;
//! - a producer with an open transaction never expires;
//! - entries a snapshot brings back at open are judged by the real time (the clock's now);
//! - `retention.ms` reaches an idle partition on its timer, rolling and deleting an expired
//!   active segment as Kafka does.

mod common;

use mirrorlog::api::{ManualClock, Origin, ProducerStateError};
use mirrorlog::engine::{Engine, EngineConfig, EngineError, PartitionConfig, TopicPartition};
use mirrorlog::format::Offset;
use mirrorlog::internals::log::LogError;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The timestamp `common::producer_batch` gives its records.
const RECORDS_MS: i64 = 1_764_403_200_000;
const EXPIRATION_MS: i64 = 60_000;

fn config() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 256 << 10,
        max_message_bytes: 64 << 10,
        append_buffer_bytes: 1 << 20,
        producer_id_expiration_ms: EXPIRATION_MS,
        ..PartitionConfig::default()
    }
}

fn engine(dir: &std::path::Path, clock: &ManualClock, check_ms: u64) -> Engine {
    Engine::open(
        EngineConfig::new(dir)
            .shards(1)
            .pin_threads(false)
            .clock(Arc::new(clock.clone()))
            .producer_id_expiration_check_interval_ms(check_ms)
            .retention_check_interval_ms(check_ms),
    )
    .unwrap()
}

/// Waits (real time, bounded) until `done` holds: the timer ticks at least once a second.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn idle_producers_expire_on_the_timer_and_come_back_as_unknown_producers() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let clock = ManualClock::new(RECORDS_MS + 1_000);
    let engine = engine(dir.path(), &clock, 50);
    let busy = TopicPartition::new("busy", 0);
    let idle = TopicPartition::new("idle", 0);
    for tp in [&busy, &idle] {
        engine.create_partition(tp, config()).wait().unwrap();
        engine
            .append(
                tp,
                common::producer_batch(1, 0, 2, false, 50),
                Origin::Client,
            )
            .wait()
            .unwrap();
        // Producer 2 leaves a transaction open: it never expires.
        engine
            .append(
                tp,
                common::producer_batch(2, 0, 1, true, 50),
                Origin::Client,
            )
            .wait()
            .unwrap();
    }
    // Not yet expired: a gap in producer 1's sequence is refused.
    let gap = engine
        .append(
            &busy,
            common::producer_batch(1, 10, 1, false, 50),
            Origin::Client,
        )
        .wait();
    assert!(
        matches!(
            gap,
            Err(EngineError::Log {
                source: LogError::ProducerState(ProducerStateError::OutOfOrderSequence { .. }),
                ..
            })
        ),
        "{gap:?}"
    );
    clock.advance(EXPIRATION_MS);
    for tp in [&busy, &idle] {
        eventually("producer 1 expires", || {
            common::producer_ids(&engine, tp) == [2]
        });
    }
    // Now unknown: any sequence is accepted.
    engine
        .append(
            &busy,
            common::producer_batch(1, 10, 1, false, 50),
            Origin::Client,
        )
        .wait()
        .unwrap();
    assert_eq!(common::producer_ids(&engine, &busy), [1, 2]);
    engine.close().unwrap();
}

#[test]
fn a_snapshot_loaded_at_open_is_judged_by_the_clock() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let clock = ManualClock::new(RECORDS_MS + 1_000);
    let tp = TopicPartition::new("snap", 0);
    // A check interval far longer than the test: only the load can expire anything.
    let first = engine(dir.path(), &clock, 3_600_000);
    first.create_partition(&tp, config()).wait().unwrap();
    for producer in [1, 3] {
        first
            .append(
                &tp,
                common::producer_batch(producer, 0, 2, false, 50),
                Origin::Client,
            )
            .wait()
            .unwrap();
    }
    first
        .append(
            &tp,
            common::producer_batch(2, 0, 1, true, 50),
            Origin::Client,
        )
        .wait()
        .unwrap();
    first.close().unwrap();
    // Reopened before the expiration: all three come back.
    let again = engine(dir.path(), &clock, 3_600_000);
    assert_eq!(common::producer_ids(&again, &tp), [1, 2, 3]);
    again.close().unwrap();
    clock.advance(EXPIRATION_MS + 1);
    let later = engine(dir.path(), &clock, 3_600_000);
    assert_eq!(
        common::producer_ids(&later, &tp),
        [2],
        "only the open transaction survives"
    );
    later.close().unwrap();
}

#[test]
fn retention_ms_reaches_an_idle_partition_and_its_active_segment() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let clock = ManualClock::new(RECORDS_MS + 1_000);
    let engine = engine(dir.path(), &clock, 50);
    let tp = TopicPartition::new("old", 0);
    let retained = PartitionConfig {
        segment_bytes: 64 << 10,
        retention_ms: Some(10_000),
        ..config()
    };
    engine.create_partition(&tp, retained).wait().unwrap();
    for seq in (0..120).step_by(4) {
        engine
            .append(
                &tp,
                common::producer_batch(1, seq, 4, false, 1000),
                Origin::Client,
            )
            .wait()
            .unwrap();
    }
    let before = engine.state(&tp).wait().unwrap();
    assert_eq!(before.log_start, Offset(0));
    assert_eq!(before.log_end, Offset(120));
    // Nothing new arrives; the records' age passes retention.ms.
    clock.advance(20_000);
    eventually("every segment, the active one too, is deleted", || {
        engine.state(&tp).wait().unwrap().log_start == Offset(120)
    });
    let after = engine.state(&tp).wait().unwrap();
    assert_eq!(after.log_end, Offset(120));
    // The partition keeps working from there.
    let out = engine
        .append(
            &tp,
            common::producer_batch(1, 120, 1, false, 10),
            Origin::Client,
        )
        .wait()
        .unwrap();
    assert_eq!(out.first_offset, Offset(120));
    engine.close().unwrap();
    common::assert_verifies(dir.path());
}
