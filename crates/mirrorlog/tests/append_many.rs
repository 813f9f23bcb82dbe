//! `Engine::append_many`: a mirror destination's fetch answer — a batch for each of many
//! partitions on every shard — appended as one call. Every partition's result comes back in
//! the order given; a refused partition (unknown, or its `follows` not met) changes nothing for
//! the others; two appends to one partition in one call land in order; the answer comes once
//! everything is durable (a reopen finds every acknowledged byte), also when most of its
//! appends wait for an append buffer; `.await` works as `.wait()`.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::engine::{
    Engine, EngineConfig, EngineError, MirrorStart, PartitionAppend, PartitionConfig,
    TopicPartition,
};
use mirrorlog::format::Offset;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

const PARTITIONS: i32 = 200;

/// A batch as a source stored it: one record of `len` bytes at offset `base`.
fn fetched(p: i32, round: i32, base: i64) -> Vec<u8> {
    common::stored(
        common::producer_batch(i64::from(p) + 1, round, 1, false, 200 + p as usize),
        Offset(base),
        2,
    )
}

fn open(dir: &std::path::Path) -> Engine {
    Engine::open(
        EngineConfig::new(dir)
            .shards(3)
            .clock(common::records_clock())
            // Fewer append buffers than partitions per shard: most of a call's appends wait
            // for one, in order, as the appends of ordinary calls do.
            .append_buffers_max(8),
    )
    .unwrap()
}

/// Blocks on a future with a waker that unparks this thread (no runtime needed).
fn block_on<F: Future + Unpin>(mut f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = std::pin::Pin::new(&mut f).poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[test]
fn a_fetch_answer_for_many_partitions_is_one_call_with_every_result_in_order() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = open(dir.path());
    let tps: Vec<TopicPartition> = (0..PARTITIONS)
        .map(|p| TopicPartition::new("wide", p))
        .collect();
    for tp in &tps {
        engine
            .create_partition(tp, PartitionConfig::default())
            .wait()
            .unwrap();
        common::start_mirroring(&engine, tp, "east", MirrorStart::LastStableOffset);
    }
    let shards: std::collections::BTreeSet<usize> =
        tps.iter().map(|t| engine.shard_of(t)).collect();
    assert_eq!(shards.len(), 3, "the partitions lie on every shard");
    let mut stored: Vec<Vec<u8>> = vec![Vec::new(); PARTITIONS as usize];

    // Fetch 1: every partition's first batch, plus an unknown partition in the middle.
    let mut appends: Vec<PartitionAppend> = Vec::new();
    for (p, tp) in tps.iter().enumerate() {
        if p == 100 {
            appends.push(PartitionAppend::new(
                TopicPartition::new("nowhere", 0),
                fetched(0, 0, 0),
            ));
        }
        appends.push(PartitionAppend::new(tp.clone(), fetched(p as i32, 0, 0)));
    }
    let results = engine.append_many(appends.clone(), Origin::Mirror).wait();
    assert_eq!(results.len(), appends.len());
    for (a, r) in appends.iter().zip(&results) {
        if a.tp.topic == "nowhere" {
            assert!(
                matches!(r, Err(EngineError::UnknownPartition(tp)) if *tp == a.tp),
                "{r:?}"
            );
            continue;
        }
        let out = r.as_ref().unwrap();
        assert_eq!((out.first_offset, out.last_offset), (Offset(0), Offset(0)));
        stored[a.tp.partition as usize].extend_from_slice(&a.batches);
    }

    // Fetch 2, through `.await`: two batches for partition 0 in one call (in order), every
    // other partition's next batch meant to follow offset 1, and partition 7's meant to
    // follow offset 5 — refused (its log ends at 1), nothing written there.
    let mut appends = vec![
        PartitionAppend::new(tps[0].clone(), fetched(0, 1, 1)).following(Offset(1)),
        PartitionAppend::new(tps[0].clone(), fetched(0, 2, 2)).following(Offset(2)),
    ];
    for (p, tp) in tps.iter().enumerate().skip(1) {
        let follows = if p == 7 { Offset(5) } else { Offset(1) };
        appends.push(PartitionAppend::new(tp.clone(), fetched(p as i32, 1, 1)).following(follows));
    }
    let results = block_on(engine.append_many(appends.clone(), Origin::Mirror));
    for (a, r) in appends.iter().zip(&results) {
        let p = a.tp.partition as usize;
        if p == 7 {
            assert!(
                matches!(
                    r,
                    Err(EngineError::AppendOutOfOrder {
                        log_end: Offset(1),
                        ..
                    })
                ),
                "{r:?}"
            );
            continue;
        }
        let out = r.as_ref().unwrap();
        assert_eq!(out.first_offset, a.follows.unwrap(), "{}", a.tp);
        stored[p].extend_from_slice(&a.batches);
    }
    assert_eq!(engine.state(&tps[0]).wait().unwrap().log_end, Offset(3));
    assert_eq!(engine.state(&tps[7]).wait().unwrap().log_end, Offset(1));

    // An empty call is answered at once.
    assert!(engine
        .append_many(Vec::new(), Origin::Mirror)
        .wait()
        .is_empty());

    // Acknowledged means durable: every byte is back after a reopen.
    engine.close().unwrap();
    let engine = open(dir.path());
    for (tp, want) in tps.iter().zip(&stored) {
        let state = engine.state(tp).wait().unwrap();
        let got = common::engine_bytes(&engine, tp, state.log_start, state.log_end);
        assert!(got == *want, "{tp}: the acknowledged batches");
    }
    engine.close().unwrap();
    common::assert_verifies(dir.path());
}
