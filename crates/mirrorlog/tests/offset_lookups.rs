//! ListOffsets and OffsetsForLeaderEpoch against Kafka's documented results: the
//! scenarios of Kafka's `LogSegmentTest.testFindOffsetByTimestamp` and `UnifiedLogTest`'s
//! `testFetchOffsetByTimestampIncludesLeaderEpoch` / `...WithMaxTimestampIncludesTimestamp`,
//! then what a broker adds: record-level answers inside multi-record batches, the isolation
//! bound, sealed segments read from their index files after a reopen, and the engine's calls.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::engine::{Engine, EngineConfig, EpochEndOffset, PartitionConfig, TopicPartition};
use mirrorlog::format::{self, BatchBuilder, BatchOptions, Offset, RecordSpec, TimestampType};
use mirrorlog::internals::io::{SimConfig, SimIo};
use mirrorlog::internals::log::{
    Isolation, LogConfig, MirrorStart, OffsetSpec, PartitionLog, TimestampOffset,
};
use std::path::Path;

const UNCOMMITTED: Isolation = Isolation::ReadUncommitted;

/// One batch of records with these timestamps.
fn batch(timestamps: &[i64], timestamp_type: TimestampType) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        timestamp_type,
        ..BatchOptions::default()
    });
    let value = [0x6d; 200];
    for &t in timestamps {
        b.push(RecordSpec {
            timestamp: t,
            key: None,
            value: Some(&value),
            headers: &[],
        });
    }
    b.build()
}

fn found(timestamp: i64, offset: i64, epoch: Option<i32>) -> Option<TimestampOffset> {
    Some(TimestampOffset {
        timestamp,
        offset: Offset(offset),
        leader_epoch: epoch,
    })
}

fn lookup(io: &mut SimIo, log: &mut PartitionLog, spec: OffsetSpec) -> Option<TimestampOffset> {
    log.offset_for_timestamp(io, spec, UNCOMMITTED).unwrap()
}

/// `LogSegmentTest.testFindOffsetByTimestamp`: offsets 40–49 with timestamps 400–490, an index
/// entry every two batches. The segment starts at 40, as Kafka's does: the log is aligned there
/// (a mirror of a source whose log start is 40) and the batches mirrored.
#[test]
fn find_offset_by_timestamp_as_kafkas_log_segment_test() {
    let mut io = SimIo::new(SimConfig::default());
    let one = common::stored(batch(&[0], TimestampType::CreateTime), Offset(0), 0);
    // An entry every two batches (Kafka's `messageSize * 2 - 1`).
    let config = common::log_config(1 << 20, (one.len() * 2 - 1) as u32, 64 << 10);
    let mut log = PartitionLog::create(&mut io, Path::new("/sim/ts-0"), config).unwrap();
    log.start_mirroring(&mut io, "east", MirrorStart::StartAt(Offset(40)))
        .unwrap();
    for i in 40..50 {
        let b = common::stored(batch(&[i * 10], TimestampType::CreateTime), Offset(i), 0);
        log.append(&mut io, &b, Origin::Mirror).unwrap();
    }
    log.commit(&mut io).unwrap();
    assert!(log.epoch_cache().entries().len() <= 1);
    let mut at = |t: i64| lookup(&mut io, &mut log, OffsetSpec::Timestamp(t)).map(|f| f.offset.0);
    // An indexed timestamp, and just past it.
    assert_eq!(at(420), Some(42));
    assert_eq!(at(421), Some(43));
    // An un-indexed one, and just past it.
    assert_eq!(at(430), Some(43));
    assert_eq!(at(431), Some(44));
    // Beyond the last timestamp.
    assert_eq!(at(491), None);
    // Before the first indexed timestamp, and before the first timestamp.
    assert_eq!(at(401), Some(41));
    assert_eq!(at(399), Some(40));
    assert_eq!(
        lookup(&mut io, &mut log, OffsetSpec::Earliest),
        found(-1, 40, Some(0))
    );
}

/// `UnifiedLogTest.testFetchOffsetByTimestampIncludesLeaderEpoch` and
/// `testFetchOffsetByTimestampWithMaxTimestampIncludesTimestamp`.
#[test]
fn fetch_offset_by_timestamp_includes_the_leader_epoch_and_the_max_timestamp() {
    let mut io = SimIo::new(SimConfig::default());
    let config = common::log_config(600, 1, 64 << 10);
    let mut log = PartitionLog::create(&mut io, Path::new("/sim/ts-1"), config).unwrap();
    assert_eq!(lookup(&mut io, &mut log, OffsetSpec::Timestamp(0)), None);
    assert_eq!(lookup(&mut io, &mut log, OffsetSpec::MaxTimestamp), None);
    let first = common::RECORDS_MS;
    log.become_leader(&mut io, 0).unwrap();
    log.append(
        &mut io,
        &batch(&[first], TimestampType::CreateTime),
        Origin::Client,
    )
    .unwrap();
    log.become_leader(&mut io, 1).unwrap();
    log.append(
        &mut io,
        &batch(&[first + 1], TimestampType::CreateTime),
        Origin::Client,
    )
    .unwrap();
    log.commit(&mut io).unwrap();
    assert_eq!(
        lookup(&mut io, &mut log, OffsetSpec::Timestamp(first)),
        found(first, 0, Some(0))
    );
    assert_eq!(
        lookup(&mut io, &mut log, OffsetSpec::Timestamp(first + 1)),
        found(first + 1, 1, Some(1))
    );
    assert_eq!(
        lookup(&mut io, &mut log, OffsetSpec::Earliest),
        found(-1, 0, Some(0))
    );
    assert_eq!(
        lookup(&mut io, &mut log, OffsetSpec::Latest),
        found(-1, 2, Some(1))
    );
    // The cache is updated directly at a leader change: the latest offset carries the new epoch.
    log.become_leader(&mut io, 2).unwrap();
    assert_eq!(
        lookup(&mut io, &mut log, OffsetSpec::Latest),
        found(-1, 2, Some(2))
    );
    // OffsetsForLeaderEpoch of the same log.
    let end = |epoch, offset| EpochEndOffset {
        leader_epoch: epoch,
        end_offset: Offset(offset),
    };
    assert_eq!(log.leader_epoch_end_offset(0), end(0, 1));
    assert_eq!(log.leader_epoch_end_offset(1), end(1, 2));
    assert_eq!(log.leader_epoch_end_offset(2), end(2, 2));
    assert_eq!(log.leader_epoch_end_offset(3), end(-1, -1));

    // The max timestamp: the first record holding it, not the last batch.
    log.append(
        &mut io,
        &batch(&[first], TimestampType::CreateTime),
        Origin::Client,
    )
    .unwrap();
    log.commit(&mut io).unwrap();
    assert_eq!(
        lookup(&mut io, &mut log, OffsetSpec::MaxTimestamp),
        found(first + 1, 1, Some(1))
    );
}

/// Inside a batch the answer is a record's offset and timestamp; `LogAppendTime` batches give
/// every record the batch's timestamp; a compressed batch answers with its record too (Kafka's
/// `LogSegment.findOffsetByTimestamp` iterates a batch's records; more in
/// `compressed_batches.rs`); nothing at or past the last fetchable offset is returned; sealed segments
/// answer from their index files after a reopen.
#[test]
fn answers_are_records_bounded_by_isolation_and_survive_a_reopen() {
    let mut io = SimIo::new(SimConfig::default());
    let config: LogConfig = common::log_config(4 << 10, 256, 64 << 10);
    let dir = Path::new("/sim/ts-2");
    let mut log = PartitionLog::create(&mut io, dir, config).unwrap();
    log.start_mirroring(&mut io, "east", MirrorStart::LastStableOffset)
        .unwrap();
    // Offsets 0–2: create times 100, 300, 200. 3–4: log-append time 500. 5–6: gzip, 600
    // and 700. Then 60 one-record batches (several segments) at 1000 + i.
    let mut at = 0;
    let mut put = |io: &mut SimIo, log: &mut PartitionLog, b: Vec<u8>, n: i64| {
        log.append(io, &common::stored(b, Offset(at), 3), Origin::Mirror)
            .unwrap();
        at += n;
    };
    put(
        &mut io,
        &mut log,
        batch(&[100, 300, 200], TimestampType::CreateTime),
        3,
    );
    let mut append_time = batch(&[1, 2], TimestampType::LogAppendTime);
    append_time[35..43].copy_from_slice(&500i64.to_be_bytes());
    common::fix_crc(&mut append_time);
    put(&mut io, &mut log, append_time, 2);
    let compressed = {
        let mut b = BatchBuilder::new(BatchOptions::default());
        for t in [600, 700] {
            b.push(RecordSpec {
                timestamp: t,
                key: None,
                value: Some(&[0x6d; 200]),
                headers: &[],
            });
        }
        b.build_compressed(format::Compression::Gzip).unwrap()
    };
    put(&mut io, &mut log, compressed, 2);
    for i in 0..60 {
        put(
            &mut io,
            &mut log,
            batch(&[1000 + i], TimestampType::CreateTime),
            1,
        );
    }
    log.commit(&mut io).unwrap();
    assert!(log.segment_base_offsets().len() > 3, "several segments");
    let queries = [
        (OffsetSpec::Timestamp(150), found(300, 1, Some(3))),
        (OffsetSpec::Timestamp(201), found(300, 1, Some(3))),
        (OffsetSpec::Timestamp(301), found(500, 3, Some(3))),
        (OffsetSpec::Timestamp(501), found(600, 5, Some(3))),
        (OffsetSpec::Timestamp(601), found(700, 6, Some(3))),
        (OffsetSpec::Timestamp(1030), found(1030, 37, Some(3))),
        (OffsetSpec::Timestamp(1059), found(1059, 66, Some(3))),
        (OffsetSpec::Timestamp(1060), None),
        (OffsetSpec::MaxTimestamp, found(1059, 66, Some(3))),
        (OffsetSpec::Earliest, found(-1, 0, Some(3))),
        (OffsetSpec::Latest, found(-1, 67, Some(3))),
    ];
    for (spec, want) in queries {
        assert_eq!(lookup(&mut io, &mut log, spec), want, "{spec:?}");
    }
    // A clean reopen answers from the index files.
    log.close(&mut io).unwrap();
    let mut reopened = PartitionLog::open(&mut io, dir, config).unwrap();
    for (spec, want) in queries {
        assert_eq!(
            lookup(&mut io, &mut reopened, spec),
            want,
            "reopened: {spec:?}"
        );
    }
    // Past the last fetchable offset: a broker-managed high watermark at 37 hides 37 on.
    reopened.set_high_watermark(Offset(37));
    assert_eq!(
        lookup(&mut io, &mut reopened, OffsetSpec::Timestamp(1030)),
        None
    );
    assert_eq!(
        lookup(&mut io, &mut reopened, OffsetSpec::Timestamp(1029)),
        found(1029, 36, Some(3))
    );
    assert_eq!(
        lookup(&mut io, &mut reopened, OffsetSpec::Latest),
        found(-1, 37, Some(3))
    );
    assert_eq!(
        lookup(&mut io, &mut reopened, OffsetSpec::MaxTimestamp),
        None
    );
}

/// At `ReadCommitted` the bound is the last stable offset: a record of an open transaction is
/// not an answer, and `Latest` is the LSO.
#[test]
fn read_committed_lookups_stop_at_the_last_stable_offset() {
    let mut io = SimIo::new(SimConfig::default());
    let config = common::log_config(1 << 20, 4096, 64 << 10);
    let mut log = PartitionLog::create(&mut io, Path::new("/sim/ts-3"), config).unwrap();
    log.append(
        &mut io,
        &common::producer_batch(1, 0, 2, false, 10),
        Origin::Client,
    )
    .unwrap();
    // Producer 2's open transaction: offsets 2 and 3, timestamps past every other record's.
    let mut open = BatchBuilder::new(BatchOptions {
        producer: format::ProducerFields {
            producer_id: 2,
            producer_epoch: 0,
            base_sequence: 0,
        },
        transactional: true,
        ..BatchOptions::default()
    });
    for t in [common::RECORDS_MS + 10, common::RECORDS_MS + 11] {
        open.push(RecordSpec {
            timestamp: t,
            key: None,
            value: Some(b"txn"),
            headers: &[],
        });
    }
    log.append(&mut io, &open.build(), Origin::Client).unwrap();
    log.commit(&mut io).unwrap();
    let t = common::RECORDS_MS;
    let committed = |io: &mut SimIo, log: &mut PartitionLog, spec| {
        log.offset_for_timestamp(io, spec, Isolation::ReadCommitted)
            .unwrap()
    };
    assert_eq!(
        committed(&mut io, &mut log, OffsetSpec::Latest).map(|f| f.offset),
        Some(Offset(2))
    );
    assert_eq!(
        committed(&mut io, &mut log, OffsetSpec::Timestamp(t + 1)).map(|f| f.offset),
        Some(Offset(1))
    );
    // The open transaction's records are past the LSO: no answer there, one below it.
    assert_eq!(
        committed(&mut io, &mut log, OffsetSpec::Timestamp(t + 10)),
        None
    );
    assert_eq!(
        lookup(&mut io, &mut log, OffsetSpec::Timestamp(t + 10)).map(|f| f.offset),
        Some(Offset(2))
    );
    assert_eq!(
        lookup(&mut io, &mut log, OffsetSpec::Latest).map(|f| f.offset),
        Some(Offset(4))
    );
    log.append(&mut io, &common::marker(2, true), Origin::Coordinator)
        .unwrap();
    log.commit(&mut io).unwrap();
    assert_eq!(
        committed(&mut io, &mut log, OffsetSpec::Latest).map(|f| f.offset),
        Some(Offset(5))
    );
    assert_eq!(
        committed(&mut io, &mut log, OffsetSpec::Timestamp(t + 10)).map(|f| f.offset),
        Some(Offset(2)),
        "committed now"
    );
}

/// The engine's calls reach the partition: ListOffsets, OffsetsForLeaderEpoch and a leader
/// epoch that jumps (KIP-1279 bumps a destination's epoch by large steps).
#[test]
fn the_engine_answers_list_offsets_and_offsets_for_leader_epoch() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1).pin_threads(false)).unwrap();
    let tp = TopicPartition::new("lookups", 0);
    engine
        .create_partition(&tp, PartitionConfig::default())
        .wait()
        .unwrap();
    engine.set_leader_epoch(&tp, 4).wait().unwrap();
    for i in 0..3 {
        let b = common::producer_batch(1, i * 2, 2, false, 10);
        engine.append(&tp, b, Origin::Client).wait().unwrap();
    }
    engine.set_leader_epoch(&tp, 1_000_004).wait().unwrap();
    engine
        .append(
            &tp,
            common::producer_batch(1, 6, 2, false, 10),
            Origin::Client,
        )
        .wait()
        .unwrap();
    let epoch = |e| engine.epoch_end_offset(&tp, e).wait().unwrap();
    assert_eq!(
        epoch(4),
        EpochEndOffset {
            leader_epoch: 4,
            end_offset: Offset(6)
        }
    );
    assert_eq!(
        epoch(500),
        EpochEndOffset {
            leader_epoch: 4,
            end_offset: Offset(6)
        },
        "an epoch inside the jump belongs to the one before it"
    );
    assert_eq!(epoch(1_000_004).end_offset, Offset(8));
    let spec = |s| {
        engine
            .offset_for_timestamp(&tp, s, UNCOMMITTED)
            .wait()
            .unwrap()
    };
    assert_eq!(
        spec(OffsetSpec::Timestamp(common::RECORDS_MS + 1)),
        found(common::RECORDS_MS + 1, 1, Some(4))
    );
    assert_eq!(spec(OffsetSpec::Latest), found(-1, 8, Some(1_000_004)));
    // Stamped into the stored batches.
    let r = engine
        .read(
            &tp,
            mirrorlog::engine::ReadRequest::new(Offset(6), 1 << 20, UNCOMMITTED),
        )
        .wait()
        .unwrap();
    let first = format::BatchIter::new(&r.records, 0).next().unwrap();
    assert_eq!(first.header().partition_leader_epoch, 1_000_004);
    engine.close().unwrap();
    common::assert_verifies(dir.path());
}
