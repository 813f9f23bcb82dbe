//! Interop with kafka-python, a Kafka implementation nobody here wrote.
//!
//! (a) Batches built by kafka-python's `DefaultRecordBatchBuilder` (idempotent, transactional
//!     across the sequence wrap, multi-record with headers and nulls, gzip-compressed) are
//!     committed as fixtures with the fields kafka-python decodes from them
//!     (`testdata/fixtures/kafka_python/generate.py` regenerates both); our parser must accept each
//!     and agree field by field (records too, where uncompressed).
//! (b) A log of our batches — data of every shape, COMMIT and ABORT markers, the barrier — is
//!     parsed by kafka-python's `MemoryRecords` in a subprocess: every CRC must validate and every
//!     field must equal what we built. The interpreter is `$MIRRORLOG_PYTHON` or `.venv/bin/python`
//!     (`scripts/test.sh` creates it with the pinned `testdata/interop/requirements.txt`).

mod common;

use mirrorlog::format::{
    self, BarrierSpec, BatchBuilder, BatchIter, BatchKind, BatchOptions, BatchView, MarkerSpec,
    Offset, ProducerFields, RecordSpec, ScanEnd,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> &'static Path {
    common::repo_root()
}

fn hex(bytes: Option<&[u8]>) -> Value {
    match bytes {
        None => Value::Null,
        Some(b) => Value::String(b.iter().map(|x| format!("{x:02x}")).collect()),
    }
}

/// Checks that kafka-python's description of a batch (`expected`) matches our view of it.
fn assert_same_batch(view: &BatchView<'_>, expected: &Value, what: &str) {
    let h = view.header();
    let field = |name: &str| expected[name].clone();
    assert_eq!(field("base_offset"), h.base_offset.0, "{what}: base_offset");
    assert_eq!(
        field("leader_epoch"),
        h.partition_leader_epoch,
        "{what}: leader_epoch"
    );
    assert_eq!(field("magic"), h.magic, "{what}: magic");
    assert_eq!(field("crc"), h.crc, "{what}: crc");
    assert_eq!(field("crc_valid"), true, "{what}: crc_valid");
    assert_eq!(field("attributes"), h.attributes.0, "{what}: attributes");
    assert_eq!(
        field("compression_type"),
        h.attributes.codec_bits(),
        "{what}: codec"
    );
    assert_eq!(
        field("transactional"),
        h.attributes.is_transactional(),
        "{what}: transactional"
    );
    assert_eq!(
        field("control"),
        h.attributes.is_control(),
        "{what}: control"
    );
    assert_eq!(
        field("last_offset_delta"),
        h.last_offset_delta,
        "{what}: lastOffsetDelta"
    );
    assert_eq!(
        field("first_timestamp"),
        h.base_timestamp,
        "{what}: baseTimestamp"
    );
    assert_eq!(
        field("max_timestamp"),
        h.max_timestamp,
        "{what}: maxTimestamp"
    );
    assert_eq!(
        field("producer_id"),
        h.producer.producer_id,
        "{what}: producerId"
    );
    assert_eq!(
        field("producer_epoch"),
        h.producer.producer_epoch,
        "{what}: producerEpoch"
    );
    assert_eq!(
        field("base_sequence"),
        h.producer.base_sequence,
        "{what}: baseSequence"
    );
    assert_eq!(
        field("records_count"),
        h.records_count,
        "{what}: recordsCount"
    );
    let expected_records = expected["records"].as_array().expect("records array");
    assert_eq!(
        expected_records.len(),
        h.records_count as usize,
        "{what}: records decoded by kafka-python"
    );
    let Ok(records) = view.records() else {
        // Compressed: we keep the bytes opaque; kafka-python decompressed them, so the count
        // above is the cross-check.
        return;
    };
    let ours: Vec<_> = records.map(|r| r.expect("record parses")).collect();
    assert_eq!(ours.len(), expected_records.len(), "{what}: record count");
    for (i, (r, e)) in ours.iter().zip(expected_records).enumerate() {
        let what = format!("{what} record {i}");
        assert_eq!(
            e["offset"],
            h.base_offset.0 + i64::from(r.offset_delta),
            "{what}: offset"
        );
        assert_eq!(
            e["timestamp"],
            h.base_timestamp + r.timestamp_delta,
            "{what}: timestamp"
        );
        assert_eq!(e["key"], hex(r.key), "{what}: key");
        assert_eq!(e["value"], hex(r.value), "{what}: value");
        let headers: Vec<Value> = r
            .headers()
            .map(|x| {
                Value::Array(vec![
                    Value::String(String::from_utf8(x.key.to_vec()).expect("utf-8 header key")),
                    hex(x.value),
                ])
            })
            .collect();
        assert_eq!(e["headers"], Value::Array(headers), "{what}: headers");
        if h.attributes.is_control() {
            let key = r.key.expect("control key");
            assert_eq!(
                e["control_version"],
                i16::from_be_bytes([key[0], key[1]]),
                "{what}"
            );
            assert_eq!(
                e["control_type"],
                i16::from_be_bytes([key[2], key[3]]),
                "{what}"
            );
        }
    }
}

#[test]
fn kafka_python_batches_are_accepted_and_decoded_identically() {
    let dir = repo().join("testdata/fixtures/kafka_python");
    let names = [
        "idempotent",
        "transactional_headers",
        "plain_headers",
        "gzip_idempotent",
    ];
    for name in names {
        let bytes = std::fs::read(dir.join(format!("{name}.bin"))).expect("fixture .bin");
        let expected: Value =
            serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json"))).unwrap())
                .expect("fixture .json");
        let view = format::inspect(&bytes, 0).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            view.bytes().len(),
            bytes.len(),
            "{name}: whole file is one batch"
        );
        assert_eq!(view.kind(), BatchKind::Data);
        // These are exactly what a client sends: the client rules hold too.
        view.validate_client()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_same_batch(&view, &expected, name);
    }
}

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("MIRRORLOG_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = repo().join(".venv/bin/python");
    assert!(
        venv.exists(),
        "kafka-python interop needs {} (run scripts/test.sh, which creates it, or set MIRRORLOG_PYTHON)",
        venv.display()
    );
    venv
}

#[test]
fn our_batches_are_read_by_kafka_python_memory_records() {
    let mut log = Vec::new();
    let mut next = 0i64;
    let mut push = |log: &mut Vec<u8>, mut batch: Vec<u8>| {
        format::stamp_base_offset(&mut batch, Offset(next)).unwrap();
        format::stamp_partition_leader_epoch(&mut batch, 3).unwrap();
        next = format::inspect(&batch, 0).unwrap().header().last_offset().0 + 1;
        log.extend(batch);
    };
    let shapes: [(ProducerFields, bool); 3] = [
        (ProducerFields::NONE, false),
        (
            ProducerFields {
                producer_id: 11,
                producer_epoch: 1,
                base_sequence: 0,
            },
            false,
        ),
        (
            ProducerFields {
                producer_id: 12,
                producer_epoch: 0,
                base_sequence: i32::MAX - 1,
            },
            true,
        ),
    ];
    for (producer, transactional) in shapes {
        let mut b = BatchBuilder::new(BatchOptions {
            producer,
            transactional,
            ..BatchOptions::default()
        });
        for i in 0..4u8 {
            b.push(RecordSpec {
                timestamp: 1_764_403_200_000 + i64::from(i) * 7,
                key: (i != 1).then_some(&b"key"[..]),
                value: (i != 2).then_some(&[i; 100][..]),
                headers: &[(b"trace", Some(b"t-1")), (b"empty", None)],
            });
        }
        push(&mut log, b.build());
    }
    for commit in [true, false] {
        push(
            &mut log,
            format::build_marker(&MarkerSpec {
                base_offset: Offset(0),
                partition_leader_epoch: 0,
                producer_id: 12,
                producer_epoch: 0,
                commit,
                coordinator_epoch: 41,
                timestamp: 1_764_403_201_000,
            }),
        );
    }
    push(
        &mut log,
        format::build_barrier(&BarrierSpec {
            base_offset: Offset(0),
            partition_leader_epoch: 0,
            timestamp: 1_764_403_202_000,
        }),
    );

    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &log).unwrap();
    let output = Command::new(python())
        .arg(repo().join("testdata/interop/parse_with_kafka_python.py"))
        .arg(file.path())
        .output()
        .expect("run kafka-python");
    assert!(
        output.status.success(),
        "kafka-python failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let parsed: Value = serde_json::from_slice(&output.stdout).expect("JSON from the script");
    assert_eq!(
        parsed["valid_bytes"],
        log.len(),
        "kafka-python read every byte"
    );
    let theirs = parsed["batches"].as_array().unwrap();

    let mut scan = BatchIter::new(&log, 0);
    let ours: Vec<_> = scan.by_ref().collect();
    assert_eq!(scan.end(), Some(&ScanEnd::Clean));
    assert_eq!(ours.len(), 6);
    assert_eq!(theirs.len(), ours.len());
    for (i, (view, expected)) in ours.iter().zip(theirs).enumerate() {
        assert_eq!(expected["position"], view.position(), "batch {i}");
        assert_same_batch(view, expected, &format!("batch {i}"));
    }
    // kafka-python sees the barrier as a control record of type 7, version 0.
    let barrier = &theirs[5]["records"][0];
    assert_eq!(barrier["control_type"], 7);
    assert_eq!(barrier["control_version"], 0);
    assert_eq!(theirs[3]["records"][0]["control_type"], 1);
    assert_eq!(theirs[4]["records"][0]["control_type"], 0);
}
