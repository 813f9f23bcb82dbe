//! Differential test against the `kafka-protocol` crate, an encoder/decoder nobody here wrote.
//! For generated records (idempotent, transactional, plain; with headers, null keys and values)
//! and for markers and the barrier, both sides must encode identical bytes, and each side must
//! decode the other's bytes to the same values. `kafka-protocol` takes `baseTimestamp` as the
//! minimum timestamp and never sets the LogAppendTime bit, so generated timestamps are
//! non-decreasing and CreateTime, where both conventions agree.

mod common;

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression as KpCompression, Record as KpRecord, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType as KpTimestampType,
};
use mirrorlog::format::{
    self, control, BarrierSpec, BatchBuilder, BatchKind, BatchOptions, ControlType, MarkerSpec,
    Offset, ProducerFields, RecordSpec,
};
use proptest::prelude::*;

/// Timestamp, key, value, headers.
type GenRecord = (
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

#[derive(Debug, Clone)]
struct Spec {
    base_offset: i64,
    leader_epoch: i32,
    producer: ProducerFields,
    transactional: bool,
    records: Vec<GenRecord>,
}

fn spec_strategy() -> impl Strategy<Value = Spec> {
    let producer = prop_oneof![
        Just(ProducerFields::NONE),
        (0i64..1 << 40, 0i16..i16::MAX, 0i32..i32::MAX - 100).prop_map(|(id, epoch, seq)| {
            ProducerFields {
                producer_id: id,
                producer_epoch: epoch,
                base_sequence: seq,
            }
        }),
    ];
    let record = (
        0i64..10_000,
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..30)),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
        proptest::collection::btree_map(
            "[a-z]{1,8}",
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..12)),
            0..4,
        )
        .prop_map(|m| m.into_iter().collect::<Vec<_>>()),
    );
    (
        0i64..1 << 45,
        -1i32..1000,
        producer,
        any::<bool>(),
        proptest::collection::vec(record, 1..10),
    )
        .prop_map(
            |(base_offset, leader_epoch, producer, transactional, mut records)| {
                // Non-decreasing timestamps: the first is then also the minimum.
                let mut t = 1_700_000_000_000;
                for r in &mut records {
                    t += r.0;
                    r.0 = t;
                }
                Spec {
                    base_offset,
                    leader_epoch,
                    producer,
                    transactional: transactional && producer.has_producer(),
                    records,
                }
            },
        )
}

fn ours(spec: &Spec) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        base_offset: Offset(spec.base_offset),
        partition_leader_epoch: spec.leader_epoch,
        producer: spec.producer,
        transactional: spec.transactional,
        ..BatchOptions::default()
    });
    for (ts, key, value, headers) in &spec.records {
        let hs: Vec<(&[u8], Option<&[u8]>)> = headers
            .iter()
            .map(|(k, v)| (k.as_bytes(), v.as_deref()))
            .collect();
        b.push(RecordSpec {
            timestamp: *ts,
            key: key.as_deref(),
            value: value.as_deref(),
            headers: &hs,
        });
    }
    b.build()
}

fn theirs_records(spec: &Spec, control: bool) -> Vec<KpRecord> {
    spec.records
        .iter()
        .enumerate()
        .map(|(i, (ts, key, value, headers))| KpRecord {
            transactional: spec.transactional,
            control,
            delete_horizon: false,
            partition_leader_epoch: spec.leader_epoch,
            producer_id: spec.producer.producer_id,
            producer_epoch: spec.producer.producer_epoch,
            timestamp_type: KpTimestampType::Creation,
            offset: spec.base_offset + i as i64,
            // kafka-protocol groups records into one batch while offset − sequence is constant.
            sequence: spec.producer.base_sequence.wrapping_add(i as i32),
            timestamp: *ts,
            key: key.clone().map(Bytes::from),
            value: value.clone().map(Bytes::from),
            headers: headers
                .iter()
                .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone().map(Bytes::from)))
                .collect::<IndexMap<_, _>>(),
        })
        .collect()
}

fn theirs(records: &[KpRecord]) -> Vec<u8> {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records,
        &RecordEncodeOptions {
            version: 2,
            compression: KpCompression::None,
        },
    )
    .expect("kafka-protocol encodes");
    buf.to_vec()
}

/// Decodes `bytes` with our parser into kafka-protocol's record shape, for comparison.
fn ours_decoded(bytes: &[u8]) -> Vec<KpRecord> {
    let view = format::inspect(bytes, 0).expect("our parser accepts");
    view.validate_records().expect("records valid");
    let h = *view.header();
    view.records()
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            KpRecord {
                transactional: h.attributes.is_transactional(),
                control: h.attributes.is_control(),
                delete_horizon: h.attributes.has_delete_horizon(),
                partition_leader_epoch: h.partition_leader_epoch,
                producer_id: h.producer.producer_id,
                producer_epoch: h.producer.producer_epoch,
                timestamp_type: KpTimestampType::Creation,
                offset: h.base_offset.0 + i64::from(r.offset_delta),
                sequence: h.producer.base_sequence.wrapping_add(r.offset_delta),
                timestamp: h.base_timestamp + r.timestamp_delta,
                key: r.key.map(Bytes::copy_from_slice),
                value: r.value.map(Bytes::copy_from_slice),
                headers: r
                    .headers()
                    .map(|x| {
                        (
                            StrBytes::from_string(String::from_utf8(x.key.to_vec()).unwrap()),
                            x.value.map(Bytes::copy_from_slice),
                        )
                    })
                    .collect(),
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(common::proptest_config("same_records_encode_identically", 1500))]
    #[test]
    fn same_records_encode_identically_and_decode_alike(spec in spec_strategy()) {
        let ours = ours(&spec);
        let records = theirs_records(&spec, false);
        let theirs = theirs(&records);
        prop_assert_eq!(&ours, &theirs);
        // Their decoder reads our bytes to the records we meant…
        let decoded = RecordBatchDecoder::decode(&mut Bytes::from(ours.clone())).unwrap();
        prop_assert_eq!(&decoded.records, &records);
        // …and ours reads theirs to the same.
        prop_assert_eq!(ours_decoded(&theirs), records);
    }
}

#[test]
fn markers_and_barrier_match_kafka_protocol_control_records() {
    let cases = [
        (
            ControlType::Commit,
            control::marker_value(17).to_vec(),
            true,
            55i64,
            4i16,
        ),
        (
            ControlType::Abort,
            control::marker_value(-1).to_vec(),
            true,
            1 << 33,
            0,
        ),
        (
            ControlType::MirrorPidReset,
            control::BARRIER_VALUE.to_vec(),
            false,
            -1,
            -1,
        ),
    ];
    for (control_type, value, transactional, producer_id, producer_epoch) in cases {
        let ours = match control_type {
            ControlType::MirrorPidReset => format::build_barrier(&BarrierSpec {
                base_offset: Offset(900),
                partition_leader_epoch: 12,
                timestamp: 1_700_000_000_123,
            }),
            _ => format::build_marker(&MarkerSpec {
                base_offset: Offset(900),
                partition_leader_epoch: 12,
                producer_id,
                producer_epoch,
                commit: control_type == ControlType::Commit,
                coordinator_epoch: i32::from_be_bytes(value[2..6].try_into().unwrap()),
                timestamp: 1_700_000_000_123,
            }),
        };
        let record = KpRecord {
            transactional,
            control: true,
            delete_horizon: false,
            partition_leader_epoch: 12,
            producer_id,
            producer_epoch,
            timestamp_type: KpTimestampType::Creation,
            offset: 900,
            sequence: -1,
            timestamp: 1_700_000_000_123,
            key: Some(Bytes::copy_from_slice(&control::control_key(control_type))),
            value: Some(Bytes::from(value)),
            headers: IndexMap::new(),
        };
        let theirs = theirs(std::slice::from_ref(&record));
        assert_eq!(ours, theirs, "{control_type:?}");
        let decoded = RecordBatchDecoder::decode(&mut Bytes::from(ours.clone())).unwrap();
        assert_eq!(decoded.records, vec![record]);
        let kind = format::inspect(&theirs, 0).unwrap().kind();
        match control_type {
            ControlType::MirrorPidReset => assert_eq!(kind, BatchKind::Barrier),
            ControlType::Commit => assert_eq!(
                kind,
                BatchKind::TxnMarker {
                    commit: true,
                    coordinator_epoch: 17
                }
            ),
            _ => assert_eq!(
                kind,
                BatchKind::TxnMarker {
                    commit: false,
                    coordinator_epoch: -1
                }
            ),
        }
    }
}
