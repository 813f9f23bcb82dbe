//! Reads of sealed segments through the ring (design.md §Runtime): a consumer far behind reads
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

/// One shard and no tail cache: every read of old data goes to the device.
fn engine_without_tail_cache(dir: &std::path::Path) -> Engine {
    Engine::open(
        EngineConfig::new(dir)
            .shards(1)
            .pin_threads(false)
            .tail_cache_bytes(0),
    )
    .unwrap()
}

/// An engine without a tail cache and a mirrored partition holding `batches` batches of varied sizes; returns them as stored.
fn backlog(dir: &std::path::Path, batches: i64) -> (Engine, TopicPartition, Vec<u8>) {
    let engine = engine_without_tail_cache(dir);
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

/// A mirrored partition whose first two segments (8 MiB each, sealed) span several read-ahead
/// chunks: batches of 2 records of about 10 KiB, appended 100 at a time. Returns the stored
/// bytes of the sealed segments.
fn large_backlog(dir: &std::path::Path) -> (Engine, TopicPartition, Vec<u8>) {
    let engine = engine_without_tail_cache(dir);
    let tp = TopicPartition::new("far", 0);
    let config = PartitionConfig {
        segment_bytes: 8 << 20,
        max_message_bytes: 1 << 20,
        append_buffer_bytes: 2 << 20,
        ..PartitionConfig::default()
    };
    engine.create_partition(&tp, config).wait().unwrap();
    common::start_mirroring(&engine, &tp, "src", MirrorStart::LastStableOffset);
    let mut all = Vec::new();
    let mut at = 0i64;
    while all.len() < 20 << 20 {
        let mut chunk = Vec::new();
        for _ in 0..100 {
            let size = 9_000 + (at as usize * 37) % 2_000;
            let b = common::producer_batch(1, at as i32, 2, false, size);
            chunk.extend_from_slice(&common::stored(b, Offset(at), 1));
            at += 2;
        }
        engine
            .append(&tp, chunk.clone(), Origin::Mirror)
            .wait()
            .unwrap();
        all.extend_from_slice(&chunk);
    }
    let sealed = engine.state(&tp).wait().unwrap();
    assert!(sealed.log_end.0 > 0);
    (engine, tp, all)
}

fn read_at(engine: &Engine, tp: &TopicPartition, at: Offset, max_bytes: usize) -> bytes::Bytes {
    let request = ReadRequest::new(at, max_bytes, Isolation::ReadUncommitted);
    engine.read(tp, request).wait().unwrap().records
}

fn next_offset(records: &[u8]) -> Offset {
    Offset(
        BatchIter::new(records, 0)
            .last()
            .unwrap()
            .header()
            .last_offset()
            .0
            + 1,
    )
}

#[test]
fn answers_are_slices_of_the_read_ahead_not_copies_and_outlive_its_buffers() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let (engine, tp, all) = large_backlog(dir.path());
    // The first sealed segment (8 MiB: two chunks), read with 256 KiB fetches, every answer
    // kept.
    let mut answers = Vec::new();
    let (mut at, mut read) = (Offset(0), 0usize);
    while read < 8 << 20 {
        let r = read_at(&engine, &tp, at, 256 << 10);
        assert_eq!(&r[..], &all[read..read + r.len()], "at {at:?}");
        read += r.len();
        at = next_offset(&r);
        answers.push(r);
        if answers.len() > 200 {
            break;
        }
    }
    // Consecutive answers from one chunk are consecutive slices of its buffer.
    let adjacent = answers
        .windows(2)
        .filter(|w| w[0].as_ptr().wrapping_add(w[0].len()) == w[1].as_ptr())
        .count();
    let seams = engine.stats().unwrap()[0].read_ahead_seam_copies;
    assert!(
        adjacent + 4 >= answers.len(),
        "{adjacent} of {} answers follow the previous one in memory",
        answers.len()
    );
    assert!(seams <= 3, "{seams} answers copied across chunks");
    // The first answer outlives its chunk: the rest of the log is read twice meanwhile (the
    // window's buffers are recycled and read into again), and it is unchanged.
    let first = answers.swap_remove(0);
    drop(answers);
    let end = engine.state(&tp).wait().unwrap().log_end;
    for _ in 0..2 {
        let mut at = Offset(0);
        while at < end {
            let r = read_at(&engine, &tp, at, 1 << 20);
            if r.is_empty() {
                break;
            }
            at = next_offset(&r);
        }
    }
    assert_eq!(&first[..], &all[..first.len()]);
    let held = engine.stats().unwrap()[0].read_ahead_bytes;
    assert!(held <= mirrorlog::internals::shard::READ_AHEAD_SHARD_BYTES);
    engine.close().unwrap();
}

#[test]
fn several_reads_in_flight_on_one_partition_are_answered_from_one_window() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let (engine, tp, all) = large_backlog(dir.path());
    // Batch boundaries within the first 3 MiB, every 20th batch.
    let starts: Vec<(Offset, usize)> = BatchIter::new(&all, 0)
        .filter(|b| b.position() < 3 << 20)
        .step_by(20)
        .map(|b| (b.header().base_offset, b.position() as usize))
        .collect();
    assert!(starts.len() >= 6);
    // The window is made by a first read; then every read is in flight at once.
    read_at(&engine, &tp, Offset(0), 64 << 10);
    let before = engine.stats().unwrap()[0].device_reads;
    let calls: Vec<_> = starts
        .iter()
        .map(|&(at, _)| {
            let request = ReadRequest::new(at, 128 << 10, Isolation::ReadUncommitted);
            engine.read(&tp, request)
        })
        .collect();
    for (call, &(at, position)) in calls.into_iter().zip(&starts) {
        let r = call.wait().unwrap().records;
        assert!(!r.is_empty(), "at {at:?}");
        assert_eq!(&r[..], &all[position..position + r.len()], "at {at:?}");
    }
    let reads = engine.stats().unwrap()[0].device_reads - before;
    assert!(
        reads <= 1,
        "{reads} device reads for {} reads the window held",
        starts.len()
    );
    engine.close().unwrap();
}

#[test]
fn a_window_nobody_reads_gives_its_memory_back() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let (engine, tp, _) = large_backlog(dir.path());
    read_at(&engine, &tp, Offset(0), 64 << 10);
    assert!(engine.stats().unwrap()[0].read_ahead_bytes > 0);
    // The engine's timer ticks the shard at least once a second.
    let idle = std::time::Duration::from_millis(mirrorlog::internals::shard::READ_AHEAD_IDLE_MS);
    let deadline = std::time::Instant::now() + idle + std::time::Duration::from_secs(5);
    while engine.stats().unwrap()[0].read_ahead_bytes > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the idle window still holds its chunks"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // A reader coming back gets a new window and the same bytes.
    let again = read_at(&engine, &tp, Offset(0), 64 << 10);
    assert!(!again.is_empty());
    engine.close().unwrap();
}
