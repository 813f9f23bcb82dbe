//! A client's batches are checked as Kafka's `LogValidator` checks them before anything is
//! written (docs/design.md, "Record format"), through the engine's public API: compressed
//! batches are decompressed and their records walked (count, offset deltas), a batch with no
//! record is refused, and record timestamps are held to `message.timestamp.before.max.ms` and
//! `message.timestamp.after.max.ms` around the engine's clock. Each refusal names the rule and
//! leaves the log as it was; a mirrored batch (stored as-is) is not held to them.

mod common;

use mirrorlog::api::{
    EngineError, ManualClock, Origin, PartitionConfig, StartMirroring, TopicPartition,
};
use mirrorlog::engine::{Engine, EngineConfig, MirrorStart};
use mirrorlog::format::{BatchBuilder, BatchOptions, Compression, FormatError, Offset, RecordSpec};
use mirrorlog::internals::log::LogError;
use std::sync::Arc;

const NOW: i64 = 1_764_403_200_000;

fn batch(timestamps: &[i64], compression: Compression) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions::default());
    for &t in timestamps {
        b.push(RecordSpec {
            timestamp: t,
            key: None,
            value: Some(b"v"),
            headers: &[],
        });
    }
    b.build_compressed(compression).unwrap()
}

/// Rewrites a batch's `recordsCount` (and `lastOffsetDelta` to match) and fixes its CRC.
fn claim_count(mut b: Vec<u8>, count: i32) -> Vec<u8> {
    b[23..27].copy_from_slice(&(count - 1).to_be_bytes());
    b[57..61].copy_from_slice(&count.to_be_bytes());
    common::fix_crc(&mut b);
    b
}

fn format_error(e: EngineError) -> FormatError {
    match e {
        EngineError::Log {
            source: LogError::Format(f),
            ..
        } => f,
        other => panic!("not a format refusal: {other}"),
    }
}

fn engine(dir: &std::path::Path) -> (Engine, TopicPartition) {
    let clock = Arc::new(ManualClock::new(NOW));
    let engine = Engine::open(EngineConfig::new(dir).shards(1).clock(clock)).unwrap();
    let tp = TopicPartition::new("t", 0);
    let config = PartitionConfig {
        message_timestamp_before_max_ms: Some(60_000),
        message_timestamp_after_max_ms: Some(1_000),
        ..PartitionConfig::default()
    };
    engine.create_partition(&tp, config).wait().unwrap();
    (engine, tp)
}

#[test]
fn compressed_batches_whose_records_do_not_match_their_header_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, tp) = engine(dir.path());
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        // Two records said to be 2^31 - 1: refused, nothing stored.
        let lying = claim_count(batch(&[NOW, NOW], codec), i32::MAX);
        let e = format_error(
            engine
                .append(&tp, lying, Origin::Client)
                .wait()
                .unwrap_err(),
        );
        assert!(
            matches!(e, FormatError::RecordCountMismatch { .. }),
            "{codec:?}: {e}"
        );
        // Said to be one: records left over.
        let lying = claim_count(batch(&[NOW, NOW], codec), 1);
        let e = format_error(
            engine
                .append(&tp, lying, Origin::Client)
                .wait()
                .unwrap_err(),
        );
        assert!(
            matches!(e, FormatError::RecordCountMismatch { .. }),
            "{codec:?}: {e}"
        );
        // The truth is taken.
        let good = batch(&[NOW, NOW], codec);
        engine.append(&tp, good, Origin::Client).wait().unwrap();
    }
    // An empty gzip payload claiming i32::MAX records (a header over nothing).
    let mut empty = batch(&[NOW], Compression::Gzip);
    empty.truncate(61);
    empty[8..12].copy_from_slice(&49i32.to_be_bytes());
    let empty = claim_count(empty, i32::MAX);
    let e = format_error(
        engine
            .append(&tp, empty, Origin::Client)
            .wait()
            .unwrap_err(),
    );
    assert!(matches!(e, FormatError::Decompression { .. }), "{e}");
    assert_eq!(engine.state(&tp).wait().unwrap().log_end, Offset(8));
}

#[test]
fn a_batch_without_records_and_records_out_of_order_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, tp) = engine(dir.path());
    let mut none = batch(&[NOW], Compression::None);
    none.truncate(61);
    none[8..12].copy_from_slice(&49i32.to_be_bytes());
    none[57..61].copy_from_slice(&0i32.to_be_bytes());
    common::fix_crc(&mut none);
    let e = format_error(engine.append(&tp, none, Origin::Client).wait().unwrap_err());
    assert!(matches!(e, FormatError::NoRecords { count: 0, .. }), "{e}");
    // Offset deltas 0, 0 instead of 0, 1 (a record's delta is its third varint field).
    let mut twice = batch(&[NOW, NOW], Compression::None);
    let second = 61 + 1 + usize::from(twice[61] >> 1);
    // The record's body: length varint, attributes, timestamp delta (0), offset delta.
    assert_eq!(
        twice[second + 3],
        2,
        "offset delta 1 is the zig-zag varint 2"
    );
    twice[second + 3] = 0;
    common::fix_crc(&mut twice);
    let e = format_error(
        engine
            .append(&tp, twice, Origin::Client)
            .wait()
            .unwrap_err(),
    );
    assert!(
        matches!(
            e,
            FormatError::OffsetDeltaMismatch {
                index: 1,
                offset_delta: 0,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(engine.state(&tp).wait().unwrap().log_end, Offset(0));
}

#[test]
fn record_timestamps_are_held_to_the_partitions_bounds_around_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, tp) = engine(dir.path());
    for (t, ok) in [
        (NOW, true),
        (NOW - 60_000, true),
        (NOW - 60_001, false),
        (NOW + 1_000, true),
        (NOW + 1_001, false),
        (-1, true),
    ] {
        for codec in [Compression::None, Compression::Zstd] {
            let r = engine
                .append(&tp, batch(&[NOW, t], codec), Origin::Client)
                .wait();
            match r {
                Ok(_) => assert!(ok, "{t} taken"),
                Err(e) => {
                    assert!(!ok, "{t} refused: {e}");
                    let e = format_error(e);
                    assert!(
                        matches!(e, FormatError::TimestampOutOfRange { index: 1, timestamp, .. } if timestamp == t),
                        "{e}"
                    );
                }
            }
        }
    }
    // A mirror stores what its source wrote, whatever its timestamps.
    let mirrored = TopicPartition::new("m", 0);
    engine
        .create_partition(
            &mirrored,
            PartitionConfig {
                message_timestamp_before_max_ms: Some(1),
                ..PartitionConfig::default()
            },
        )
        .wait()
        .unwrap();
    engine
        .start_mirroring(
            &mirrored,
            StartMirroring {
                source: "src".into(),
                truncate_to: MirrorStart::LastStableOffset,
            },
        )
        .wait()
        .unwrap();
    engine
        .append(&mirrored, batch(&[1], Compression::None), Origin::Mirror)
        .wait()
        .unwrap();
}
