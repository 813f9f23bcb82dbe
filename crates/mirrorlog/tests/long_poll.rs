//! The fetch path's reads (design.md §Runtime): a long-poll read waiting at the log end is woken
//! by the commit that makes bytes durable, or by `max_wait`, never earlier with fewer than
//! `min_bytes`; under concurrent appends reads return only durable, whole batches; the bounds
//! `ReadCommitted` (woken when a transaction ends) and `LogEnd` (past a managed high
//! watermark); Kafka's at-least-one-batch rule and its strict opposite.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::engine::{
    Engine, EngineConfig, Isolation, PartitionConfig, ReadRequest, TopicPartition,
};
use mirrorlog::format::{BatchIter, Offset};
use std::time::{Duration, Instant};

fn engine() -> (tempfile::TempDir, Engine, TopicPartition) {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1).pin_threads(false)).unwrap();
    let tp = TopicPartition::new("poll", 0);
    engine
        .create_partition(&tp, PartitionConfig::default())
        .wait()
        .unwrap();
    (dir, engine, tp)
}

fn batch(producer: i64, seq: i32) -> Vec<u8> {
    common::producer_batch(producer, seq, 2, false, 300)
}

/// Waits up to `within` for the call to resolve.
fn resolves_within<T>(call: &mut mirrorlog::engine::Call<T>, within: Duration) -> Option<T>
where
    T: std::fmt::Debug,
{
    let until = Instant::now() + within;
    while Instant::now() < until {
        if let Some(r) = call.try_take() {
            return Some(r.unwrap());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    None
}

#[test]
fn a_reader_at_the_end_is_woken_by_the_commit_not_before() {
    let (dir, engine, tp) = engine();
    let wait = Duration::from_secs(20);
    let mut call = engine.read(
        &tp,
        ReadRequest::new(Offset(0), 1 << 20, Isolation::ReadUncommitted).wait_for(1, wait),
    );
    assert!(
        resolves_within(&mut call, Duration::from_millis(300)).is_none(),
        "nothing to read: it waits"
    );
    let start = Instant::now();
    let b = batch(1, 0);
    engine
        .append(&tp, b.clone(), Origin::Client)
        .wait()
        .unwrap();
    let got = resolves_within(&mut call, Duration::from_secs(10)).expect("woken by the commit");
    assert!(start.elapsed() < wait / 2, "{:?}", start.elapsed());
    assert_eq!(got.records.len(), b.len(), "the one durable batch");
    assert_eq!(got.high_watermark, Offset(2));
    engine.close().unwrap();
    common::assert_verifies(dir.path());
}

#[test]
fn max_wait_resolves_with_what_there_is_and_never_earlier() {
    let (_dir, engine, tp) = engine();
    engine
        .append(&tp, batch(1, 0), Origin::Client)
        .wait()
        .unwrap();
    let one = engine
        .read(
            &tp,
            ReadRequest::new(Offset(0), 1 << 20, Isolation::ReadUncommitted),
        )
        .wait()
        .unwrap()
        .records
        .len();
    for (min_bytes, offset, expect) in [(1, Offset(2), 0), (one * 3, Offset(0), one)] {
        let wait = Duration::from_millis(250);
        let start = Instant::now();
        let r = engine
            .read(
                &tp,
                ReadRequest::new(offset, 1 << 20, Isolation::ReadUncommitted)
                    .wait_for(min_bytes, wait),
            )
            .wait()
            .unwrap();
        let took = start.elapsed();
        assert!(took >= wait, "resolved after {took:?}, before max_wait");
        assert!(took < wait * 20, "resolved after {took:?}");
        assert_eq!(r.records.len(), expect, "what there is at the deadline");
    }
    // Enough already: at once, however long the wait could be.
    let start = Instant::now();
    let r = engine
        .read(
            &tp,
            ReadRequest::new(Offset(0), 1 << 20, Isolation::ReadUncommitted)
                .wait_for(one, Duration::from_secs(30)),
        )
        .wait()
        .unwrap();
    assert_eq!(r.records.len(), one);
    assert!(start.elapsed() < Duration::from_secs(10));
    let stats = engine.stats().unwrap();
    assert_eq!(
        stats[0].reads_parked, 2,
        "the two that waited, not this one"
    );
    engine.close().unwrap();
}

#[test]
fn a_reader_wanting_three_batches_is_not_woken_by_one() {
    let (_dir, engine, tp) = engine();
    let one = batch(1, 0).len();
    let mut call = engine.read(
        &tp,
        ReadRequest::new(Offset(0), 1 << 20, Isolation::ReadUncommitted)
            .wait_for(3 * one, Duration::from_secs(30)),
    );
    for i in 0..2 {
        engine
            .append(&tp, batch(1, i * 2), Origin::Client)
            .wait()
            .unwrap();
        assert!(
            resolves_within(&mut call, Duration::from_millis(150)).is_none(),
            "{} of 3 batches durable: still waiting",
            i + 1
        );
    }
    engine
        .append(&tp, batch(1, 4), Origin::Client)
        .wait()
        .unwrap();
    let got = resolves_within(&mut call, Duration::from_secs(10)).expect("woken");
    assert_eq!(got.records.len(), 3 * one);
    engine.close().unwrap();
}

#[test]
fn read_committed_waits_for_the_transaction_to_end_and_log_end_reads_past_the_hw() {
    let (_dir, engine, tp) = engine();
    let txn = common::producer_batch(7, 0, 2, true, 100);
    engine.append(&tp, txn, Origin::Client).wait().unwrap();
    let mut committed = engine.read(
        &tp,
        ReadRequest::new(Offset(0), 1 << 20, Isolation::ReadCommitted)
            .wait_for(1, Duration::from_secs(30)),
    );
    assert!(
        resolves_within(&mut committed, Duration::from_millis(300)).is_none(),
        "the open transaction is past the LSO"
    );
    engine
        .append(&tp, common::marker(7, true), Origin::Coordinator)
        .wait()
        .unwrap();
    let got = resolves_within(&mut committed, Duration::from_secs(10)).expect("woken by the end");
    // The transaction's records are stable once it ended (the marker may still be on its way).
    assert!(
        got.last_stable_offset >= Offset(2),
        "{:?}",
        got.last_stable_offset
    );
    assert_eq!(
        BatchIter::new(&got.records, 0).count(),
        1,
        "the committed batch"
    );

    // A broker replicating on its own holds the high watermark back: consumers see nothing
    // new, its followers (LogEnd) read to the durable end.
    engine.set_high_watermark(&tp, Offset(3)).wait().unwrap();
    engine
        .append(&tp, batch(1, 0), Origin::Client)
        .wait()
        .unwrap();
    let at = |isolation| {
        engine
            .read(&tp, ReadRequest::new(Offset(3), 1 << 20, isolation))
            .wait()
            .unwrap()
            .records
    };
    assert!(at(Isolation::ReadUncommitted).is_empty());
    assert_eq!(at(Isolation::LogEnd).len(), batch(1, 0).len());
    // A consumer long-polling at the high watermark is woken when the broker moves it.
    let mut consumer = engine.read(
        &tp,
        ReadRequest::new(Offset(3), 1 << 20, Isolation::ReadUncommitted)
            .wait_for(1, Duration::from_secs(30)),
    );
    assert!(resolves_within(&mut consumer, Duration::from_millis(200)).is_none());
    engine.set_high_watermark(&tp, Offset(5)).wait().unwrap();
    let got = resolves_within(&mut consumer, Duration::from_secs(10)).expect("woken by the HW");
    assert_eq!(got.records.len(), batch(1, 0).len());
    engine.close().unwrap();
}

#[test]
fn at_least_one_batch_unless_the_limit_is_strict() {
    let (_dir, engine, tp) = engine();
    let b = batch(1, 0);
    engine
        .append(&tp, b.clone(), Origin::Client)
        .wait()
        .unwrap();
    let small = ReadRequest::new(Offset(0), 10, Isolation::ReadUncommitted);
    let r = engine.read(&tp, small).wait().unwrap();
    assert_eq!(
        r.records.len(),
        b.len(),
        "Kafka's rule: the first batch whole"
    );
    let strict = ReadRequest {
        min_one_batch: false,
        ..small
    };
    let r = engine.read(&tp, strict).wait().unwrap();
    assert!(r.records.is_empty(), "strict: nothing past max_bytes");
    engine.close().unwrap();
}

/// Readers long-polling from where they are while a writer appends: every result is whole
/// batches, continuing where the last ended, durable when read (the durable end covers it),
/// and in the end the readers hold exactly the log.
#[test]
fn long_polls_under_concurrent_appends_return_only_durable_whole_batches() {
    let (_dir, engine, tp) = engine();
    let engine = std::sync::Arc::new(engine);
    const APPENDS: i32 = 300;
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let engine = engine.clone();
            let tp = tp.clone();
            std::thread::spawn(move || {
                let mut at = Offset(0);
                let mut bytes = Vec::new();
                while at < Offset(i64::from(APPENDS) * 2) {
                    let max = [1 << 20, 700, 1][r];
                    let got = engine
                        .read(
                            &tp,
                            ReadRequest::new(at, max, Isolation::ReadUncommitted)
                                .wait_for(1 + r * 500, Duration::from_millis(50)),
                        )
                        .wait()
                        .unwrap();
                    let durable = engine.state(&tp).wait().unwrap().durable_end;
                    let mut scan = BatchIter::new(&got.records, 0);
                    for b in scan.by_ref() {
                        assert_eq!(b.header().base_offset, at, "continues where it ended");
                        at = Offset(b.header().last_offset().0 + 1);
                        assert!(at <= durable, "durable when read");
                    }
                    assert!(
                        scan.valid_end_position() == got.records.len() as u64,
                        "whole batches"
                    );
                    bytes.extend_from_slice(&got.records);
                }
                bytes
            })
        })
        .collect();
    for i in 0..APPENDS {
        let call = engine.append(&tp, batch(1, i * 2), Origin::Client);
        if i % 7 == 0 || i == APPENDS - 1 {
            call.wait().unwrap();
        } else {
            drop(call);
        }
    }
    let all = common::engine_bytes(&engine, &tp, Offset(0), Offset(i64::from(APPENDS) * 2));
    for r in readers {
        assert_eq!(r.join().unwrap(), all);
    }
}

#[test]
fn an_unbounded_max_wait_waits_for_the_commit_and_does_not_take_the_shard_down() {
    // `Duration::MAX` used to overflow the deadline's `Instant` and panic the shard thread
    //; it waits as long as Kafka's largest `max_wait_ms`, woken by the commit.
    let (dir, engine, tp) = engine();
    let mut call = engine.read(
        &tp,
        ReadRequest::new(Offset(0), 1 << 20, Isolation::ReadUncommitted).wait_for(1, Duration::MAX),
    );
    assert!(resolves_within(&mut call, Duration::from_millis(200)).is_none());
    let b = batch(1, 0);
    engine
        .append(&tp, b.clone(), Origin::Client)
        .wait()
        .unwrap();
    let got = resolves_within(&mut call, Duration::from_secs(10)).expect("woken by the commit");
    assert_eq!(got.records.len(), b.len());
    // The shard still serves.
    engine
        .append(&tp, batch(1, 2), Origin::Client)
        .wait()
        .unwrap();
    engine.close().unwrap();
    common::assert_verifies(dir.path());
}

#[test]
fn parked_reads_whose_callers_went_are_let_go_and_counted() {
    // A thousand long-polls whose callers drop their calls (the broker drops a fetch's when
    // its connection closes) hold nothing past the shard's next tick, though each could have
    // waited a minute; one still awaited stays parked and is answered.
    let (_dir, engine, tp) = engine();
    let wait = Duration::from_secs(60);
    let request =
        ReadRequest::new(Offset(0), 1 << 20, Isolation::ReadUncommitted).wait_for(1, wait);
    let calls: Vec<_> = (0..1000).map(|_| engine.read(&tp, request)).collect();
    let mut kept = engine.read(&tp, request);
    let parked = |engine: &Engine| {
        let s = &engine.stats().unwrap()[0];
        (s.parked_reads, s.reads_cancelled)
    };
    let until = Instant::now() + Duration::from_secs(10);
    while parked(&engine).0 < 1001 {
        assert!(Instant::now() < until, "{:?}", parked(&engine));
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(calls);
    while parked(&engine) != (1, 1000) {
        assert!(Instant::now() < until, "{:?}", parked(&engine));
        std::thread::sleep(Duration::from_millis(20));
    }
    engine
        .append(&tp, batch(1, 0), Origin::Client)
        .wait()
        .unwrap();
    let got = resolves_within(&mut kept, Duration::from_secs(10)).expect("woken by the commit");
    assert_eq!(got.high_watermark, Offset(2));
    assert_eq!(parked(&engine), (0, 1000));
    engine.close().unwrap();
}
