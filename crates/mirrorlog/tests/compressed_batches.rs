//! Inside compressed batches: every codec Kafka uses (gzip, snappy in xerial's
//! framing and raw, lz4 frames, zstd), as kafka-python and librdkafka wrote them, decompresses to
//! exactly the records kafka-python decodes from the same bytes (`testdata/fixtures/*`, each with
//! the script that regenerates it); ListOffsets by timestamp answers the first *record* at or
//! past the target inside a compressed batch, as Kafka's `LogSegment.findOffsetByTimestamp`
//! iterates a batch's records (`LogSegmentTest.testFindOffsetByTimestamp`'s rule applied
//! inside one batch); a compressed `LogAppendTime` batch's time index entry and largest
//! timestamp follow Kafka's `LogSegment.append` (the batch's max timestamp at its last offset);
//! a zip bomb answers at batch granularity without decompressing past the bound, and a corrupt
//! payload is a typed error.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::format::{
    self, BatchBuilder, BatchIter, BatchOptions, BatchView, CodecError, Compression, FormatError,
    Offset, RecordSpec, TimestampType,
};
use mirrorlog::internals::io::{SimConfig, SimIo};
use mirrorlog::internals::log::{
    Isolation, LogConfig, LogError, MirrorStart, OffsetSpec, PartitionLog, TimestampOffset,
};
use serde_json::Value;
use std::path::Path;

const CODECS: [Compression; 4] = [
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];
const T0: i64 = 1_764_403_200_000;

/// One record as kafka-python's JSON shows it: offset, timestamp, key, value (hex), headers.
type Seen = (
    i64,
    i64,
    Option<String>,
    Option<String>,
    Vec<(String, Option<String>)>,
);

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What kafka-python decoded of a batch.
fn theirs(batch: &Value) -> Vec<Seen> {
    batch["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |v: &Value| v.as_str().map(str::to_string);
            let headers = r["headers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| (h[0].as_str().unwrap().to_string(), s(&h[1])))
                .collect();
            (
                r["offset"].as_i64().unwrap(),
                r["timestamp"].as_i64().unwrap(),
                s(&r["key"]),
                s(&r["value"]),
                headers,
            )
        })
        .collect()
}

/// What the engine's format layer decodes of a batch, compressed or not.
fn ours(b: &BatchView<'_>) -> Vec<Seen> {
    let h = b.header();
    let records = b.decompressed_records(64 << 20).unwrap();
    records
        .iter()
        .map(|r| {
            let r = r.unwrap();
            let timestamp = if h.attributes.timestamp_type() == TimestampType::LogAppendTime {
                h.max_timestamp
            } else {
                h.base_timestamp + r.timestamp_delta
            };
            let headers = r
                .headers()
                .map(|x| {
                    (
                        String::from_utf8_lossy(x.key).into_owned(),
                        x.value.map(hex),
                    )
                })
                .collect();
            (
                h.base_offset.0 + i64::from(r.offset_delta),
                timestamp,
                r.key.map(hex),
                r.value.map(hex),
                headers,
            )
        })
        .collect()
}

/// `(bytes, kafka-python's decoding)` of every fixture batch with records: kafka-python's own
/// batches (one per file) and librdkafka's, fetched from its mock cluster (the mock's CRC-0
/// markers left out).
fn fixtures() -> Vec<(String, Vec<u8>, Value)> {
    let root = common::repo_root().join("testdata/fixtures");
    let mut out = Vec::new();
    let kp = root.join("kafka_python");
    let mut names: Vec<_> = std::fs::read_dir(&kp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    names.sort();
    for bin in names {
        let json: Value =
            serde_json::from_slice(&std::fs::read(bin.with_extension("json")).unwrap()).unwrap();
        let name = bin.file_name().unwrap().to_string_lossy().into_owned();
        out.push((name, std::fs::read(&bin).unwrap(), json));
    }
    // Fresh bytes from librdkafka when `scripts/test.sh` produced them this run, else the
    // committed run of the same script.
    let cf = std::env::var_os("MIRRORLOG_CONFLUENT_FIXTURES")
        .map_or_else(|| root.join("confluent_kafka"), std::path::PathBuf::from);
    let bin = std::fs::read(cf.join("batches.bin")).unwrap();
    let json: Value =
        serde_json::from_slice(&std::fs::read(cf.join("batches.json")).unwrap()).unwrap();
    for b in json["batches"].as_array().unwrap() {
        if !b["crc_valid"].as_bool().unwrap() {
            continue;
        }
        let at = b["position"].as_u64().unwrap() as usize;
        let view = format::inspect(&bin[at..], 0).unwrap();
        out.push((
            format!("librdkafka batch at {at}"),
            view.bytes().to_vec(),
            b.clone(),
        ));
    }
    out
}

#[test]
fn every_codec_decompresses_to_what_kafka_python_decodes() {
    let mut codecs = std::collections::BTreeSet::new();
    for (name, bytes, json) in fixtures() {
        let b = format::inspect(&bytes, 0).unwrap();
        codecs.insert((
            name.starts_with("librdkafka"),
            b.header().attributes.codec_bits(),
        ));
        assert_eq!(ours(&b), theirs(&json), "{name}");
    }
    for writer in [false, true] {
        for codec in 0..=4 {
            assert!(
                codecs.contains(&(writer, codec)),
                "codec {codec} from {}",
                if writer { "librdkafka" } else { "kafka-python" }
            );
        }
    }
}

fn mirror_log(dir: &str, config: LogConfig) -> (SimIo, PartitionLog) {
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, Path::new(dir), config).unwrap();
    log.start_mirroring(&mut io, "east", MirrorStart::LastStableOffset)
        .unwrap();
    (io, log)
}

/// Appends `batch` mirrored at offset 0 (leader epoch 1), durably.
fn append_at_0(io: &mut SimIo, log: &mut PartitionLog, batch: Vec<u8>) {
    log.append(io, &common::stored(batch, Offset(0), 1), Origin::Mirror)
        .unwrap();
    log.commit(io).unwrap();
}

fn at(io: &mut SimIo, log: &mut PartitionLog, spec: OffsetSpec) -> Option<(i64, i64)> {
    log.offset_for_timestamp(io, spec, Isolation::ReadUncommitted)
        .unwrap()
        .map(|f| (f.offset.0, f.timestamp))
}

/// Kafka's answer from a list of batches in log order: the first batch whose largest timestamp
/// reaches `t`, then its first record at or past `t` (`LogSegment.findOffsetByTimestamp`).
fn kafkas_answer(batches: &[Vec<Seen>], maxes: &[i64], t: i64) -> Option<(i64, i64)> {
    let i = maxes.iter().position(|&m| m >= t)?;
    batches[i].iter().find(|r| r.1 >= t).map(|r| (r.0, r.1))
}

#[test]
fn list_offsets_answers_the_record_inside_a_compressed_batch() {
    // The case, from kafka-python's batches (every codec) and from our builder's: one
    // batch of 20 records at t0 + i s; t0 + 5.5 s is offset 6 at t0 + 6 s.
    let mut batches: Vec<(String, Vec<u8>)> = Vec::new();
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        let path =
            common::repo_root().join(format!("testdata/fixtures/kafka_python/timed_{codec}.bin"));
        batches.push((
            format!("kafka-python {codec}"),
            std::fs::read(path).unwrap(),
        ));
    }
    for codec in CODECS {
        let mut b = BatchBuilder::new(BatchOptions::default());
        for i in 0..20 {
            b.push(RecordSpec {
                timestamp: T0 + 1000 * i,
                key: Some(b"k"),
                value: Some(&[7; 100]),
                headers: &[],
            });
        }
        batches.push((
            format!("ours {codec:?}"),
            b.build_compressed(codec).unwrap(),
        ));
    }
    for (name, batch) in batches {
        let (mut io, mut log) =
            mirror_log("/sim/timed-0", common::log_config(1 << 20, 4096, 64 << 10));
        append_at_0(&mut io, &mut log, batch);
        let mut q = |t| at(&mut io, &mut log, OffsetSpec::Timestamp(t));
        assert_eq!(q(T0 + 5500), Some((6, T0 + 6000)), "{name}");
        assert_eq!(q(T0), Some((0, T0)), "{name}");
        assert_eq!(q(T0 + 19_000), Some((19, T0 + 19_000)), "{name}");
        assert_eq!(q(T0 + 19_001), None, "{name}");
        assert_eq!(
            at(&mut io, &mut log, OffsetSpec::MaxTimestamp),
            Some((19, T0 + 19_000)),
            "{name}"
        );
    }
}

#[test]
fn list_offsets_over_librdkafkas_batches_match_kafkas_rule() {
    // Every batch librdkafka wrote (every codec, idempotent and transactional), mirrored at its
    // offsets; every record's timestamp (and one past it) answers as Kafka would.
    let mut stored = Vec::new();
    for (name, bytes, json) in fixtures() {
        if name.starts_with("librdkafka") && !json["control"].as_bool().unwrap() {
            stored.push((bytes, json));
        }
    }
    let (mut io, mut log) =
        mirror_log("/sim/rdkafka-0", common::log_config(4 << 10, 256, 64 << 10));
    for (bytes, _) in &stored {
        log.append(&mut io, bytes, Origin::Mirror).unwrap();
    }
    log.commit(&mut io).unwrap();
    let decoded: Vec<Vec<Seen>> = stored.iter().map(|(_, j)| theirs(j)).collect();
    let maxes: Vec<i64> = stored
        .iter()
        .map(|(_, j)| j["max_timestamp"].as_i64().unwrap())
        .collect();
    let mut targets: Vec<i64> = decoded
        .iter()
        .flatten()
        .flat_map(|r| [r.1, r.1 + 1])
        .collect();
    targets.sort_unstable();
    targets.dedup();
    for t in targets {
        assert_eq!(
            at(&mut io, &mut log, OffsetSpec::Timestamp(t)),
            kafkas_answer(&decoded, &maxes, t),
            "timestamp {t}"
        );
    }
}

#[test]
fn a_compressed_log_append_time_batch_indexes_as_kafka_does() {
    // Kafka's `LogSegment.append`: the time index holds (the batch's max timestamp, its last
    // offset); every record of a LogAppendTime batch reads as the batch's max timestamp, so a
    // lookup at or below it answers the batch's first offset.
    let config = common::log_config(1 << 20, 1, 64 << 10);
    let (mut io, mut log) = mirror_log("/sim/append-time-0", config);
    let mut b = BatchBuilder::new(BatchOptions {
        timestamp_type: TimestampType::LogAppendTime,
        ..BatchOptions::default()
    });
    for i in 0..10 {
        b.push(RecordSpec {
            timestamp: T0 + i,
            key: Some(b"k"),
            value: Some(&[1; 50]),
            headers: &[],
        });
    }
    let max = T0 + 9;
    for (i, codec) in CODECS.into_iter().enumerate() {
        let base = Offset(i as i64 * 10);
        log.append(
            &mut io,
            &common::stored(b.build_compressed(codec).unwrap(), base, 1),
            Origin::Mirror,
        )
        .unwrap();
    }
    log.commit(&mut io).unwrap();
    assert_eq!(
        at(&mut io, &mut log, OffsetSpec::Timestamp(T0)),
        Some((0, max))
    );
    assert_eq!(
        at(&mut io, &mut log, OffsetSpec::Timestamp(max)),
        Some((0, max))
    );
    assert_eq!(
        at(&mut io, &mut log, OffsetSpec::MaxTimestamp),
        Some((0, max))
    );
    assert_eq!(at(&mut io, &mut log, OffsetSpec::Timestamp(max + 1)), None);
    // The time index as the clean close writes it: one entry, at the first batch's last offset.
    let dir = Path::new("/sim/append-time-0");
    log.close(&mut io).unwrap();
    let file = mirrorlog::internals::segment::time_index_path(dir, Offset(0));
    let entries =
        mirrorlog::internals::segment::decode_time_index(io.file_bytes(&file).unwrap(), Offset(0))
            .unwrap();
    let entries: Vec<(i64, i64)> = entries.iter().map(|e| (e.timestamp, e.offset.0)).collect();
    assert_eq!(entries, vec![(max, 9)]);
}

#[test]
fn a_zip_bomb_answers_at_batch_granularity_and_corruption_is_typed() {
    // 8 MiB of zeros in one record compress to kilobytes; max.message.bytes 64 KiB bounds what
    // a lookup decompresses to 4 MiB, so the answer is the batch's (base offset, max timestamp).
    let config = LogConfig {
        max_message_bytes: 64 << 10,
        timestamp_before_max_ms: None,
        timestamp_after_max_ms: None,
        ..common::log_config(1 << 20, 4096, 64 << 10)
    };
    assert_eq!(config.decompressed_bytes_max(), 4 << 20);
    let zeros = vec![0u8; 8 << 20];
    for codec in CODECS {
        let (mut io, mut log) = mirror_log("/sim/bomb-0", config);
        let mut b = BatchBuilder::new(BatchOptions::default());
        b.push(RecordSpec {
            timestamp: T0,
            key: None,
            value: Some(&zeros),
            headers: &[],
        });
        b.push(RecordSpec {
            timestamp: T0 + 5,
            key: None,
            value: None,
            headers: &[],
        });
        let mut bomb = b.build_compressed(codec).unwrap();
        if codec == Compression::Snappy {
            // Snappy's ratio is at most about 21: its bomb is a block that declares 1 GiB
            // (refused before anything is allocated).
            bomb.truncate(format::BATCH_HEADER_SIZE_BYTES);
            bomb.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x04, 0, 0, 0]);
            let length = (bomb.len() - 12) as i32;
            bomb[8..12].copy_from_slice(&length.to_be_bytes());
            common::fix_crc(&mut bomb);
        }
        assert!(bomb.len() < 64 << 10, "{codec:?}: {} bytes", bomb.len());
        append_at_0(&mut io, &mut log, bomb);
        assert_eq!(
            log.offset_for_timestamp(
                &mut io,
                OffsetSpec::Timestamp(T0 + 1),
                Isolation::ReadUncommitted
            )
            .unwrap(),
            Some(TimestampOffset {
                timestamp: T0 + 5,
                offset: Offset(0),
                leader_epoch: Some(1),
            }),
            "{codec:?}"
        );
    }
    // A payload its codec cannot decode (the CRC is right: the producer wrote it so).
    for codec in CODECS {
        let (mut io, mut log) = mirror_log("/sim/corrupt-0", config);
        let mut b = BatchBuilder::new(BatchOptions::default());
        b.push(RecordSpec {
            timestamp: T0,
            key: None,
            value: Some(b"value"),
            headers: &[],
        });
        let mut batch = b.build_compressed(codec).unwrap();
        let n = batch.len();
        for x in &mut batch[format::BATCH_HEADER_SIZE_BYTES..n] {
            *x = 0xa5;
        }
        common::fix_crc(&mut batch);
        append_at_0(&mut io, &mut log, batch);
        let r = log.offset_for_timestamp(
            &mut io,
            OffsetSpec::Timestamp(T0),
            Isolation::ReadUncommitted,
        );
        assert!(
            matches!(
                r,
                Err(LogError::Format(FormatError::Decompression {
                    source: CodecError::Corrupt { .. },
                    ..
                }))
            ),
            "{codec:?}: {r:?}"
        );
    }
    // BatchIter still walks such batches: compressed batches stay opaque on every other path.
    let mut b = BatchBuilder::new(BatchOptions::default());
    b.push(RecordSpec::default());
    let one = b.build_compressed(Compression::Zstd).unwrap();
    assert_eq!(BatchIter::new(&one, 0).count(), 1);
}
