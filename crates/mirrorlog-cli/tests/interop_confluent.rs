//! Interop with bytes a real client wrote: librdkafka (confluent-kafka) producing to its
//! built-in mock cluster — idempotent producers with every codec (none, gzip, snappy, lz4,
//! zstd), a plain producer, a transactional producer committing and aborting — fetched raw over
//! the Kafka protocol by `testdata/interop/confluent_fixtures.py`. `scripts/test.sh` reruns the
//! script into `target/interop/confluent_kafka` (`MIRRORLOG_CONFLUENT_FIXTURES`); without it
//! the committed run in `testdata/fixtures/confluent_kafka/` is used.
//!
//! What it proves:
//! - every data batch passes our validation; the mock's own transaction markers carry CRC 0
//!   (the mock never computes it) and are **refused** with `CrcMismatch`, by the format layer and
//!   by a mirroring partition, which keeps its log unchanged and fails the mirror until it is
//!   restarted where it stopped;
//! - the batches appended as Mirror (markers with their CRC computed, as a real broker stores
//!   them) read back byte-identical, over many sealed segments;
//! - `mirrorlog dump --json` agrees with kafka-python's decoding of the same bytes, batch by
//!   batch, field by field (the raw fetch, and each sealed segment we wrote);
//! - kafka-python's `MemoryRecords` reads each sealed segment with every CRC valid and the
//!   offsets expected;
//! - our `.snapshot` files parse with the reader of Kafka's layout written below, and hold the
//!   producers the log has.

#[path = "../../mirrorlog/tests/common/mod.rs"]
mod common;

use mirrorlog::api::Origin;
use mirrorlog::engine::{
    Engine, EngineConfig, EngineError, MirrorStart, Mode, PartitionConfig, StartMirroring,
    TopicPartition,
};
use mirrorlog::format::{self, BatchIter, FormatError, Offset};
use mirrorlog::internals::log::LogError;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> &'static Path {
    common::repo_root()
}

fn fixtures() -> (Vec<u8>, Value) {
    let dir = std::env::var_os("MIRRORLOG_CONFLUENT_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("testdata/fixtures/confluent_kafka"));
    eprintln!("fixtures from {}", dir.display());
    let bin = std::fs::read(dir.join("batches.bin")).unwrap();
    let json: Value =
        serde_json::from_slice(&std::fs::read(dir.join("batches.json")).unwrap()).unwrap();
    (bin, json)
}

fn python() -> Option<PathBuf> {
    let p = common::venv_python();
    p.exists().then_some(p)
}

/// Each fetched batch: its bytes, and whether it is one of the mock's CRC-0 markers.
fn batches(bin: &[u8]) -> Vec<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bin.len() {
        let header: &[u8; format::BATCH_HEADER_SIZE_BYTES] = bin
            [at..at + format::BATCH_HEADER_SIZE_BYTES]
            .try_into()
            .unwrap();
        let h = format::BatchHeader::decode(header);
        let bytes = bin[at..at + h.size_bytes()].to_vec();
        out.push((bytes, h.crc == 0 && h.attributes.is_control()));
        at += h.size_bytes();
    }
    out
}

/// The CRC a broker would have stored, computed with the `crc32c` crate (not ours).
fn with_crc(mut batch: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&batch[format::CRC_POS + 4..]);
    batch[format::CRC_POS..format::CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
    batch
}

#[test]
fn real_client_batches_validate_and_the_mocks_crc0_markers_are_refused() {
    let (bin, json) = fixtures();
    let decoded = json["batches"].as_array().unwrap();
    let all = batches(&bin);
    assert_eq!(all.len(), decoded.len());
    let codecs: std::collections::BTreeSet<i64> = decoded
        .iter()
        .map(|b| b["compression_type"].as_i64().unwrap())
        .collect();
    assert_eq!(codecs.len(), 5, "every codec is in the fixture: {codecs:?}");
    let mut markers = 0;
    for ((bytes, mock_marker), d) in all.iter().zip(decoded) {
        let checked = format::inspect(bytes, 0);
        if *mock_marker {
            markers += 1;
            assert_eq!(
                d["crc_valid"], false,
                "kafka-python agrees the CRC is wrong"
            );
            assert!(
                matches!(checked, Err(FormatError::CrcMismatch { stored: 0, .. })),
                "{checked:?}"
            );
            assert!(format::inspect(&with_crc(bytes.clone()), 0).is_ok());
        } else {
            assert_eq!(d["crc_valid"], true);
            let view = checked.unwrap();
            assert_eq!(
                view.header().base_offset.0,
                d["base_offset"].as_i64().unwrap()
            );
            assert_eq!(
                view.header().producer.producer_id,
                d["producer_id"].as_i64().unwrap()
            );
        }
    }
    assert_eq!(markers, 3, "commit, abort, commit");
}

/// The log the engine holds after mirroring the fixture, and where.
struct Mirrored {
    _dir: tempfile::TempDir,
    partition: PathBuf,
    stored: Vec<u8>,
}

fn mirror_fixture(bin: &[u8]) -> Mirrored {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let tp = TopicPartition::new("interop", 0);
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1)).unwrap();
    // segment.ms = 1: a batch a millisecond newer than its segment's first rolls, so the
    // fixture's batches spread over many sealed segments.
    let config = PartitionConfig {
        segment_ms: Some(1),
        ..PartitionConfig::default()
    };
    engine.create_partition(&tp, config).wait().unwrap();
    engine
        .start_mirroring(
            &tp,
            StartMirroring {
                source: "mock".into(),
                truncate_to: MirrorStart::Offset(Offset(0)),
            },
        )
        .wait()
        .unwrap();
    let mut stored = Vec::new();
    for (bytes, mock_marker) in batches(bin) {
        if mock_marker {
            let before = engine.state(&tp).wait().unwrap();
            let refused = engine.append(&tp, bytes.clone(), Origin::Mirror).wait();
            assert!(
                matches!(
                    refused,
                    Err(EngineError::Log {
                        source: LogError::Format(FormatError::CrcMismatch { .. }),
                        ..
                    })
                ),
                "{refused:?}"
            );
            let after = engine.state(&tp).wait().unwrap();
            assert_eq!(
                before.log_end, after.log_end,
                "a refused batch changes nothing"
            );
            // A corrupt batch fails the mirror (design.md §Mirroring): it must be restarted where it stopped.
            assert!(
                matches!(&after.mode, Mode::Failed { reason } if reason.contains("crc")),
                "{:?}",
                after.mode
            );
            let restarted = engine
                .start_mirroring(
                    &tp,
                    StartMirroring {
                        source: "mock".into(),
                        truncate_to: MirrorStart::Offset(after.log_end),
                    },
                )
                .wait()
                .unwrap();
            assert_eq!(restarted, after.log_end);
        }
        let bytes = if mock_marker { with_crc(bytes) } else { bytes };
        engine
            .append(&tp, bytes.clone(), Origin::Mirror)
            .wait()
            .unwrap();
        stored.extend(bytes);
    }
    let state = engine.state(&tp).wait().unwrap();
    let read = common::engine_bytes(&engine, &tp, Offset(0), state.log_end);
    assert!(read == stored, "read back byte-identical");
    engine.close().unwrap();
    common::assert_verifies(dir.path());
    Mirrored {
        partition: dir.path().join(tp.dir_name()),
        _dir: dir,
        stored,
    }
}

fn sealed_segments(partition: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(partition)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop(); // the active segment
    logs
}

fn dump_json(file: &Path) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_mirrorlog"))
        .args(["dump", "--json"])
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("base_offset").is_some() && v.get("stop").is_none())
        .collect()
}

/// `mirrorlog dump --json` against kafka-python's decoding of the same batches.
fn assert_dump_matches(ours: &[Value], theirs: &[Value]) {
    assert_eq!(ours.len(), theirs.len());
    for (o, t) in ours.iter().zip(theirs) {
        let same = |a: &str, b: &str| {
            assert_eq!(o[a], t[b], "{a} vs kafka-python {b}: {o} / {t}");
        };
        same("base_offset", "base_offset");
        same("position", "position");
        same("magic", "magic");
        same("crc", "crc");
        same("crc_valid", "crc_valid");
        same("attributes", "attributes");
        same("transactional", "transactional");
        same("control", "control");
        same("producer_id", "producer_id");
        same("producer_epoch", "producer_epoch");
        same("base_sequence", "base_sequence");
        same("partition_leader_epoch", "leader_epoch");
        same("count", "records_count");
        same("base_timestamp", "first_timestamp");
        same("max_timestamp", "max_timestamp");
        assert_eq!(
            o["last_offset"].as_i64().unwrap(),
            t["base_offset"].as_i64().unwrap() + t["last_offset_delta"].as_i64().unwrap()
        );
        let codec = ["none", "gzip", "snappy", "lz4", "zstd"]
            [t["compression_type"].as_u64().unwrap() as usize];
        assert_eq!(o["compression"], codec);
        if t["control"] == true {
            let kind = t["records"][0]["control_type"].as_i64().unwrap();
            assert_eq!(
                o["control_type"],
                if kind == 1 { "COMMIT" } else { "ABORT" }
            );
        }
    }
}

#[test]
fn mirrored_real_client_batches_read_back_and_dump_like_kafka_python() {
    let (bin, json) = fixtures();
    let m = mirror_fixture(&bin);
    // The raw fetch itself, dumped (CRC-0 markers shown invalid, as kafka-python says).
    let raw = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let raw_log = raw.path().join("00000000000000000000.log");
    std::fs::write(&raw_log, &bin).unwrap();
    assert_dump_matches(&dump_json(&raw_log), json["batches"].as_array().unwrap());

    let sealed = sealed_segments(&m.partition);
    assert!(sealed.len() >= 5, "many sealed segments: {}", sealed.len());
    let mut together = Vec::new();
    for s in &sealed {
        together.extend(std::fs::read(s).unwrap());
    }
    assert!(
        m.stored.starts_with(&together),
        "sealed segments hold the stored bytes in order"
    );

    let Some(python) = python() else {
        eprintln!("skipped the kafka-python half: no .venv (run scripts/test.sh)");
        return;
    };
    let mut expected_offset = 0i64;
    for s in &sealed {
        let parsed = common::parse_with_kafka_python(&python, s);
        assert_eq!(parsed["valid_bytes"], parsed["size"], "{}", s.display());
        let theirs = parsed["batches"].as_array().unwrap();
        for b in theirs {
            assert_eq!(b["crc_valid"], true);
            assert_eq!(b["base_offset"].as_i64().unwrap(), expected_offset);
            expected_offset += b["last_offset_delta"].as_i64().unwrap() + 1;
        }
        assert_dump_matches(&dump_json(s), theirs);
    }
    assert!(expected_offset > 0);
}

/// One producer entry of a Kafka snapshot file (version 1).
#[derive(Debug, PartialEq, Eq)]
struct KafkaSnapshotEntry {
    producer_id: i64,
    epoch: i16,
    last_sequence: i32,
    last_offset: i64,
    offset_delta: i32,
    timestamp: i64,
    coordinator_epoch: i32,
    current_txn_first_offset: i64,
}

/// Kafka's `.snapshot` layout, read independently of `src/producer_state/snapshot.rs`:
/// version i16 (1), crc u32 (CRC-32C of everything after it), entry count i32, then per entry
/// producer_id i64, epoch i16, last_sequence i32, last_offset i64, offset_delta i32,
/// timestamp i64, coordinator_epoch i32, current_txn_first_offset i64 (all big-endian).
fn read_kafka_snapshot(bytes: &[u8]) -> Vec<KafkaSnapshotEntry> {
    let mut at = 0usize;
    let mut take = |n: usize| {
        let s = &bytes[at..at + n];
        at += n;
        s
    };
    let version = i16::from_be_bytes(take(2).try_into().unwrap());
    assert_eq!(version, 1);
    let crc = u32::from_be_bytes(take(4).try_into().unwrap());
    assert_eq!(crc, crc32c::crc32c(&bytes[6..]), "snapshot CRC");
    let count = i32::from_be_bytes(take(4).try_into().unwrap());
    let entries = (0..count)
        .map(|_| KafkaSnapshotEntry {
            producer_id: i64::from_be_bytes(take(8).try_into().unwrap()),
            epoch: i16::from_be_bytes(take(2).try_into().unwrap()),
            last_sequence: i32::from_be_bytes(take(4).try_into().unwrap()),
            last_offset: i64::from_be_bytes(take(8).try_into().unwrap()),
            offset_delta: i32::from_be_bytes(take(4).try_into().unwrap()),
            timestamp: i64::from_be_bytes(take(8).try_into().unwrap()),
            coordinator_epoch: i32::from_be_bytes(take(4).try_into().unwrap()),
            current_txn_first_offset: i64::from_be_bytes(take(8).try_into().unwrap()),
        })
        .collect();
    assert_eq!(at, bytes.len(), "nothing after the entries");
    entries
}

#[test]
fn our_snapshots_parse_with_an_independent_reader_of_kafkas_layout() {
    let (bin, json) = fixtures();
    let m = mirror_fixture(&bin);
    let mut snapshots: Vec<PathBuf> = std::fs::read_dir(&m.partition)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "snapshot"))
        .collect();
    snapshots.sort();
    assert!(!snapshots.is_empty());
    // The newest snapshot (written at the clean close, at the log end) holds every producer
    // that wrote data: the idempotent ones and the transactional one, at their last batch.
    let newest = read_kafka_snapshot(&std::fs::read(snapshots.last().unwrap()).unwrap());
    let decoded = json["batches"].as_array().unwrap();
    let mut last_data: std::collections::BTreeMap<i64, &Value> = Default::default();
    for b in decoded {
        let pid = b["producer_id"].as_i64().unwrap();
        if pid >= 0 && b["control"] == false {
            last_data.insert(pid, b);
        }
    }
    let pids: Vec<i64> = newest.iter().map(|e| e.producer_id).collect();
    assert_eq!(
        pids.iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        last_data.keys().copied().collect(),
        "{newest:?}"
    );
    for e in &newest {
        let b = last_data[&e.producer_id];
        let last_offset =
            b["base_offset"].as_i64().unwrap() + b["last_offset_delta"].as_i64().unwrap();
        assert_eq!(e.last_offset, last_offset, "{e:?}");
        assert_eq!(
            i64::from(e.last_sequence),
            b["base_sequence"].as_i64().unwrap() + b["last_offset_delta"].as_i64().unwrap()
        );
        assert_eq!(
            i64::from(e.offset_delta),
            b["last_offset_delta"].as_i64().unwrap()
        );
        assert_eq!(i64::from(e.epoch), b["producer_epoch"].as_i64().unwrap());
        assert_eq!(e.current_txn_first_offset, -1, "every transaction ended");
    }
    // Every snapshot parses.
    for s in &snapshots {
        let _ = read_kafka_snapshot(&std::fs::read(s).unwrap());
    }
    // The stored log is what was fetched, markers' CRCs aside.
    assert_eq!(BatchIter::new(&m.stored, 0).count(), decoded.len());
}
