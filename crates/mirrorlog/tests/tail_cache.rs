//! The shard's tail cache (design.md §Runtime): a consumer at the tail causes no device read; a
//! lagging reader reads from the device without evicting what the tail uses; what the cache
//! answers is byte for byte what the log stores (client offsets and epochs stamped, a mirrored
//! retry's stored prefix left out, aborted transactions listed); a truncation is never served
//! stale. Device reads are counted by the shard (`ShardStats::device_reads`).

mod common;

use mirrorlog::api::Origin;
use mirrorlog::engine::{
    Engine, EngineConfig, Isolation, MirrorStart, PartitionConfig, ReadRequest, TopicPartition,
};
use mirrorlog::format::{BatchIter, Offset};
use std::time::Duration;

fn open(dir: &std::path::Path, cache: usize) -> Engine {
    Engine::open(
        EngineConfig::new(dir)
            .shards(1)
            .pin_threads(false)
            .tail_cache_bytes(cache),
    )
    .unwrap()
}

fn config() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 256 << 10,
        max_message_bytes: 64 << 10,
        append_buffer_bytes: 256 << 10,
        ..PartitionConfig::default()
    }
}

fn device_reads(engine: &Engine) -> u64 {
    engine.stats().unwrap().iter().map(|s| s.device_reads).sum()
}

fn cache_hits(engine: &Engine) -> u64 {
    engine
        .stats()
        .unwrap()
        .iter()
        .map(|s| s.tail_cache_hits)
        .sum()
}

fn read(engine: &Engine, tp: &TopicPartition, at: Offset, isolation: Isolation) -> Vec<u8> {
    common::engine_bytes_at(engine, tp, at, isolation)
}

#[test]
fn a_consumer_at_the_tail_causes_no_device_read() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = open(dir.path(), 8 << 20);
    let tp = TopicPartition::new("tail", 0);
    engine.create_partition(&tp, config()).wait().unwrap();
    let before = device_reads(&engine);
    let mut at = Offset(0);
    let mut consumed = Vec::new();
    for i in 0..400 {
        // The consumer waits at the end; the producer's commit wakes it.
        let mut poll = engine.read(
            &tp,
            ReadRequest::new(at, 1 << 20, Isolation::ReadUncommitted)
                .wait_for(1, Duration::from_secs(10)),
        );
        let b = common::producer_batch(1, i * 3, 3, false, 900);
        engine.append(&tp, b, Origin::Client).wait().unwrap();
        let got = loop {
            if let Some(r) = poll.try_take() {
                break r.unwrap();
            }
            std::thread::yield_now();
        };
        let last = BatchIter::new(&got.records, 0).last().expect("a batch");
        at = Offset(last.header().last_offset().0 + 1);
        consumed.extend_from_slice(&got.records);
    }
    assert_eq!(
        device_reads(&engine) - before,
        0,
        "400 tail reads, several segments rolled"
    );
    assert!(cache_hits(&engine) >= 400);
    // What the cache answered is what the log stores: read again after a restart (an empty
    // cache, every byte from the device).
    engine.close().unwrap();
    let engine = open(dir.path(), 8 << 20);
    let before = device_reads(&engine);
    assert_eq!(
        read(&engine, &tp, Offset(0), Isolation::ReadUncommitted),
        consumed
    );
    assert!(device_reads(&engine) > before, "from the device");
    engine.close().unwrap();
    common::assert_verifies(dir.path());
}

#[test]
fn a_lagging_reader_reads_the_device_and_evicts_nothing_the_tail_uses() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = open(dir.path(), 64 << 10);
    let tp = TopicPartition::new("lag", 0);
    engine.create_partition(&tp, config()).wait().unwrap();
    for i in 0..200 {
        let b = common::producer_batch(1, i * 2, 2, false, 1000);
        engine.append(&tp, b, Origin::Client).wait().unwrap();
    }
    let cached_before = engine.stats().unwrap()[0].tail_cache_bytes;
    assert!(
        cached_before <= 64 << 10 && cached_before > 32 << 10,
        "bounded: {cached_before}"
    );
    let start = device_reads(&engine);
    let all = read(&engine, &tp, Offset(0), Isolation::ReadUncommitted);
    assert!(
        device_reads(&engine) > start,
        "the old data comes from the device"
    );
    assert_eq!(BatchIter::new(&all, 0).count(), 200);
    assert_eq!(
        engine.stats().unwrap()[0].tail_cache_bytes,
        cached_before,
        "device reads put nothing in the cache"
    );
    // The tail is still served from memory.
    let start = device_reads(&engine);
    let tail = read(&engine, &tp, Offset(396), Isolation::ReadUncommitted);
    assert_eq!(BatchIter::new(&tail, 0).count(), 2);
    assert_eq!(device_reads(&engine), start);
    engine.close().unwrap();
}

#[test]
fn cached_answers_are_the_stored_bytes_and_truncation_is_never_served_stale() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = open(dir.path(), 8 << 20);
    let tp = TopicPartition::new("exact", 0);
    engine.create_partition(&tp, config()).wait().unwrap();
    engine.set_leader_epoch(&tp, 3).wait().unwrap();
    // Client batches (offsets and epoch stamped), a transaction aborted, in one or several
    // batches per append.
    let two = [
        common::producer_batch(1, 0, 2, false, 50),
        common::producer_batch(1, 2, 3, false, 50),
    ]
    .concat();
    engine.append(&tp, two, Origin::Client).wait().unwrap();
    let txn = common::producer_batch(9, 0, 2, true, 50);
    engine.append(&tp, txn, Origin::Client).wait().unwrap();
    engine
        .append(&tp, common::marker(9, false), Origin::Coordinator)
        .wait()
        .unwrap();
    let cached = engine
        .read(
            &tp,
            ReadRequest::new(Offset(0), 1 << 20, Isolation::ReadCommitted),
        )
        .wait()
        .unwrap();
    assert_eq!(cached.aborted.len(), 1, "the aborted transaction is listed");
    let stored_epochs: Vec<i32> = BatchIter::new(&cached.records, 0)
        .map(|b| b.header().partition_leader_epoch)
        .collect();
    assert_eq!(stored_epochs, vec![3, 3, 3, 3]);
    // Truncation: the cut batches are never served again, the new ones are.
    engine.truncate_to(&tp, Offset(5)).wait().unwrap();
    let after_cut = read(&engine, &tp, Offset(0), Isolation::ReadUncommitted);
    assert_eq!(BatchIter::new(&after_cut, 0).count(), 2);
    let other = common::producer_batch(2, 0, 4, false, 70);
    engine.append(&tp, other, Origin::Client).wait().unwrap();
    let now = read(&engine, &tp, Offset(0), Isolation::ReadUncommitted);
    engine.close().unwrap();
    let engine = open(dir.path(), 0);
    assert_eq!(
        read(&engine, &tp, Offset(0), Isolation::ReadUncommitted),
        now
    );
    let uncached = engine
        .read(
            &tp,
            ReadRequest::new(Offset(0), 1 << 20, Isolation::ReadCommitted),
        )
        .wait()
        .unwrap();
    assert_eq!(BatchIter::new(&uncached.records, 0).count(), 3);
    engine.close().unwrap();

    // A mirrored retry whose first batches the log holds: only the rest went in, and is cached.
    let engine = open(dir.path(), 8 << 20);
    let m = TopicPartition::new("exact", 1);
    engine.create_partition(&m, config()).wait().unwrap();
    common::start_mirroring(&engine, &m, "src", MirrorStart::LastStableOffset);
    let batch = |base: i64, seq: i32| {
        common::stored(
            common::producer_batch(4, seq, 2, false, 80),
            Offset(base),
            1,
        )
    };
    engine
        .append(&m, [batch(0, 0), batch(2, 2)].concat(), Origin::Mirror)
        .wait()
        .unwrap();
    engine
        .append(&m, [batch(2, 2), batch(4, 4)].concat(), Origin::Mirror)
        .wait()
        .unwrap();
    let cached = read(&engine, &m, Offset(0), Isolation::ReadUncommitted);
    assert_eq!(cached, [batch(0, 0), batch(2, 2), batch(4, 4)].concat());
    assert!(cache_hits(&engine) > 0);
    engine.close().unwrap();
    let engine = open(dir.path(), 0);
    assert_eq!(
        read(&engine, &m, Offset(0), Isolation::ReadUncommitted),
        cached
    );
    engine.close().unwrap();
    common::assert_verifies(dir.path());
}
