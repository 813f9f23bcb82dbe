//! Reads of sealed segments through the ring (issue 20, SPEC §6): a consumer far behind reads
//! every byte as stored, whatever its fetch size, across many sealed segments, while appends to
//! another partition of the same shard go on; reads into segments deleted meanwhile (retention
//! by DeleteRecords, a truncation) answer as the log does. Device reads are counted: they are
//! the read-ahead's, not one per fetch.

mod common;

use mirrorlog::api::{LogError, Origin};
use mirrorlog::engine::{
    Engine, EngineConfig, EngineError, Isolation, MirrorStart, PartitionConfig, ReadRequest,
    TopicPartition,
};
use mirrorlog::format::{BatchIter, Offset};

fn config() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 64 << 10,
        max_message_bytes: 32 << 10,
        append_buffer_bytes: 256 << 10,
        ..PartitionConfig::default()
    }
}

/// An engine without a tail cache (every read of old data goes to the device) and a mirrored
/// partition holding `batches` batches of varied sizes; returns them as stored.
fn backlog(dir: &std::path::Path, batches: i64) -> (Engine, TopicPartition, Vec<u8>) {
    let engine = Engine::open(
        EngineConfig::new(dir)
            .shards(1)
            .pin_threads(false)
            .tail_cache_bytes(0),
    )
    .unwrap();
    let tp = TopicPartition::new("behind", 0);
    engine.create_partition(&tp, config()).wait().unwrap();
    common::start_mirroring(&engine, &tp, "src", MirrorStart::LastStableOffset);
    let mut all = Vec::new();
    let mut at = 0i64;
    for i in 0..batches {
        let size = [100, 3000, 14_000, 700, 9000][(i % 5) as usize];
        let b = common::stored(
            common::producer_batch(1, at as i32, 2, false, size),
            Offset(at),
            1,
        );
        engine
            .append(&tp, b.clone(), Origin::Mirror)
            .wait()
            .unwrap();
        all.extend_from_slice(&b);
        at += 2;
    }
    (engine, tp, all)
}

fn read_all(engine: &Engine, tp: &TopicPartition, max_bytes: usize, strict: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = Offset(0);
    loop {
        let request = ReadRequest {
            min_one_batch: !strict,
            ..ReadRequest::new(at, max_bytes, Isolation::ReadUncommitted)
        };
        let r = engine.read(tp, request).wait().unwrap();
        let Some(last) = BatchIter::new(&r.records, 0).last() else {
            return out;
        };
        assert!(!strict || r.records.len() <= max_bytes, "strict limit");
        at = Offset(last.header().last_offset().0 + 1);
        out.extend_from_slice(&r.records);
    }
}

#[test]
fn a_consumer_far_behind_reads_every_byte_as_stored_at_any_fetch_size() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let (engine, tp, all) = backlog(dir.path(), 400);
    let reads_before: u64 = engine.stats().unwrap()[0].device_reads;
    for (max_bytes, strict) in [
        (1 << 20, false),
        (20_000, false),
        (1, false),
        (40_000, true),
    ] {
        assert_eq!(
            read_all(&engine, &tp, max_bytes, strict),
            all,
            "max_bytes {max_bytes}, strict {strict}"
        );
    }
    let reads = engine.stats().unwrap()[0].device_reads - reads_before;
    let batches = 400 * 4;
    assert!(
        reads < batches / 4,
        "{reads} device reads for {batches} fetches: the read-ahead's, not one per fetch"
    );
    engine.close().unwrap();
    common::assert_verifies(dir.path());
}

#[test]
fn appends_go_on_while_a_reader_catches_up_and_deleted_segments_answer_as_the_log() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let (engine, tp, all) = backlog(dir.path(), 300);
    let live = TopicPartition::new("live", 0);
    engine.create_partition(&live, config()).wait().unwrap();
    let engine = std::sync::Arc::new(engine);
    let writer = {
        let (engine, live) = (engine.clone(), live.clone());
        std::thread::spawn(move || {
            for i in 0..200 {
                let b = common::producer_batch(9, i * 2, 2, false, 500);
                engine.append(&live, b, Origin::Client).wait().unwrap();
            }
        })
    };
    assert_eq!(read_all(&engine, &tp, 50_000, false), all);
    writer.join().unwrap();
    // A reader mid-log when the segments before and under it go.
    let mid = Offset(300);
    let first = engine
        .read(
            &tp,
            ReadRequest::new(mid, 10_000, Isolation::ReadUncommitted),
        )
        .wait()
        .unwrap();
    assert!(!first.records.is_empty());
    engine.delete_records(&tp, Offset(400)).wait().unwrap();
    let gone = engine
        .read(
            &tp,
            ReadRequest::new(mid, 10_000, Isolation::ReadUncommitted),
        )
        .wait();
    assert!(
        matches!(
            gone,
            Err(EngineError::Log {
                source: LogError::OffsetOutOfRange { .. },
                ..
            })
        ),
        "{gone:?}"
    );
    let start = engine.state(&tp).wait().unwrap().log_start;
    let rest = common::engine_bytes_at(&engine, &tp, start, Isolation::ReadUncommitted);
    assert!(all.ends_with(&rest) && !rest.is_empty());
    // A truncation under the window: what is read after it is the truncated log.
    engine.truncate_to(&tp, Offset(500)).wait().unwrap();
    let cut = common::engine_bytes_at(&engine, &tp, start, Isolation::ReadUncommitted);
    let last = BatchIter::new(&cut, 0).last().unwrap();
    assert!(last.header().last_offset() < Offset(500));
    assert!(rest.starts_with(&cut));
}
