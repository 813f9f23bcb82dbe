//! The record format layer against design.md §Record format, case by case: built batches decode to what was
//! built, markers and the barrier have their exact sizes and kinds, stamping keeps CRCs valid,
//! scans tell a clean end, a zero-filled tail, a torn tail and corruption apart, and every
//! malformed case named in the spec returns its own typed error with the right byte position.
//! Malformed batches are crafted with `common::RawBatch`, which recomputes the CRC so that each
//! test reaches the check it is about.

mod common;

use common::{fix_crc, with_length, RawBatch, RawRecord};
use mirrorlog::format::{
    self, control, BarrierSpec, BatchBuilder, BatchIter, BatchKind, BatchOptions, ControlType,
    Field, FormatError, MarkerSpec, Offset, ProducerFields, RecordSpec, ScanEnd, TimestampType,
};

fn idempotent_batch(producer_id: i64, base_sequence: i32, records: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        producer: ProducerFields {
            producer_id,
            producer_epoch: 3,
            base_sequence,
        },
        ..BatchOptions::default()
    });
    for i in 0..records {
        b.push(RecordSpec {
            timestamp: 5_000 + i64::from(i),
            key: Some(b"k"),
            value: Some(b"value"),
            headers: &[],
        });
    }
    b.build()
}

fn one_record(records: Vec<u8>) -> RawBatch {
    RawBatch {
        records,
        ..RawBatch::default()
    }
}

fn plain_record() -> Vec<u8> {
    RawRecord {
        timestamp_delta: 0,
        offset_delta: 0,
        key: Some(b"k"),
        value: Some(b"v"),
        headers: &[],
    }
    .encode()
}

#[test]
fn built_data_batch_decodes_field_by_field() {
    let headers: &[(&[u8], Option<&[u8]>)] = &[(b"h1", Some(b"x")), (b"h2", None)];
    let mut b = BatchBuilder::new(BatchOptions {
        base_offset: Offset(42),
        partition_leader_epoch: 7,
        producer: ProducerFields {
            producer_id: 9,
            producer_epoch: 2,
            base_sequence: 100,
        },
        transactional: true,
        timestamp_type: TimestampType::CreateTime,
    });
    b.push(RecordSpec {
        timestamp: 1_000,
        key: Some(b"a"),
        value: Some(b"alpha"),
        headers,
    });
    b.push(RecordSpec {
        timestamp: 900,
        key: None,
        value: None,
        headers: &[],
    });
    b.push(RecordSpec {
        timestamp: 1_500,
        key: Some(b""),
        value: Some(b"gamma"),
        headers: &[],
    });
    let bytes = b.build();
    assert_eq!(bytes.len(), b.size_bytes());
    let view = format::inspect(&bytes, 0).unwrap();
    let h = view.header();
    assert_eq!(h.base_offset, Offset(42));
    assert_eq!(h.length as usize, bytes.len() - 12);
    assert_eq!(h.partition_leader_epoch, 7);
    assert_eq!(h.magic, 2);
    assert!(h.attributes.is_transactional());
    assert!(!h.attributes.is_control());
    assert_eq!(h.attributes.timestamp_type(), TimestampType::CreateTime);
    assert_eq!(h.last_offset_delta, 2);
    assert_eq!(h.last_offset(), Offset(44));
    assert_eq!(h.base_timestamp, 1_000);
    assert_eq!(h.max_timestamp, 1_500);
    assert_eq!(h.producer.producer_id, 9);
    assert_eq!(h.producer.producer_epoch, 2);
    assert_eq!(h.producer.base_sequence, 100);
    assert_eq!(h.records_count, 3);
    assert_eq!(view.kind(), BatchKind::Data);
    view.validate_client().unwrap();

    let records: Vec<_> = view.records().unwrap().map(Result::unwrap).collect();
    assert_eq!(records.len(), 3);
    assert_eq!(records[0].key, Some(&b"a"[..]));
    assert_eq!(records[0].value, Some(&b"alpha"[..]));
    let hs: Vec<_> = records[0].headers().map(|h| (h.key, h.value)).collect();
    assert_eq!(hs, vec![(&b"h1"[..], Some(&b"x"[..])), (&b"h2"[..], None)]);
    assert_eq!(records[1].timestamp_delta, -100);
    assert_eq!(records[1].offset_delta, 1);
    assert_eq!((records[1].key, records[1].value), (None, None));
    assert_eq!(records[2].key, Some(&b""[..]));
    assert_eq!(records[2].timestamp_delta, 500);
}

#[test]
fn marker_is_78_bytes_and_classified() {
    for commit in [true, false] {
        let bytes = format::build_marker(&MarkerSpec {
            base_offset: Offset(10),
            partition_leader_epoch: 4,
            producer_id: 77,
            producer_epoch: 5,
            commit,
            coordinator_epoch: 12,
            timestamp: 123,
        });
        assert_eq!(bytes.len(), 78);
        let view = format::inspect(&bytes, 0).unwrap();
        assert_eq!(
            view.kind(),
            BatchKind::TxnMarker {
                commit,
                coordinator_epoch: 12
            }
        );
        let h = view.header();
        assert!(h.attributes.is_control() && h.attributes.is_transactional());
        assert_eq!(h.producer.producer_id, 77);
        assert_eq!(h.producer.producer_epoch, 5);
        assert_eq!(h.producer.base_sequence, -1);
        assert_eq!(h.records_count, 1);
        view.validate_records().unwrap();
        assert!(matches!(
            view.validate_client(),
            Err(FormatError::ControlBatchFromClient { .. })
        ));
    }
}

#[test]
fn barrier_is_75_bytes_with_type_7_and_no_producer() {
    let bytes = format::build_barrier(&BarrierSpec {
        base_offset: Offset(500),
        partition_leader_epoch: 9,
        timestamp: 77,
    });
    assert_eq!(bytes.len(), 75);
    assert_eq!(control::MIRROR_PID_RESET, 7);
    let view = format::inspect(&bytes, 0).unwrap();
    assert_eq!(view.kind(), BatchKind::Barrier);
    let h = view.header();
    assert!(h.attributes.is_control() && !h.attributes.is_transactional());
    assert_eq!(h.producer, ProducerFields::NONE);
    let record = view.records().unwrap().next().unwrap().unwrap();
    assert_eq!(record.key, Some(&[0u8, 0, 0, 7][..]));
    assert_eq!(record.value, Some(&[0u8, 0, 0][..]));
}

#[test]
fn barrier_is_recognised_by_key_alone_whatever_its_value() {
    // An upstream variant appends a source cluster id; a null value is accepted too.
    for value in [&b"\x00\x00\x00\x00\x04east"[..], &[][..]] {
        let bytes = format::build_control(
            BatchOptions::default(),
            ControlType::MirrorPidReset,
            value,
            0,
        );
        assert_eq!(
            format::inspect(&bytes, 0).unwrap().kind(),
            BatchKind::Barrier
        );
    }
    let kraft = format::build_control(BatchOptions::default(), ControlType::Other(3), b"", 0);
    assert_eq!(
        format::inspect(&kraft, 0).unwrap().kind(),
        BatchKind::OtherControl { control_type: 3 }
    );
}

#[test]
fn empty_control_batch_is_a_no_op_kind() {
    let bytes = RawBatch {
        attributes: 0x20,
        records_count: 0,
        ..RawBatch::default()
    }
    .finish();
    assert_eq!(
        format::inspect(&bytes, 0).unwrap().kind(),
        BatchKind::EmptyControl
    );
}

#[test]
fn stamping_offset_and_epoch_keeps_the_crc_valid() {
    let mut bytes = idempotent_batch(1, 0, 4);
    format::stamp_base_offset(&mut bytes, Offset(1 << 40)).unwrap();
    format::stamp_partition_leader_epoch(&mut bytes, 31).unwrap();
    let view = format::inspect(&bytes, 0).unwrap();
    assert_eq!(view.header().base_offset, Offset(1 << 40));
    assert_eq!(view.header().partition_leader_epoch, 31);
    assert!(format::stamp_base_offset(&mut [0u8; 10], Offset(0)).is_err());
}

#[test]
fn scan_of_whole_batches_ends_clean() {
    let mut buf = idempotent_batch(1, 0, 3);
    buf.extend(idempotent_batch(1, 3, 2));
    buf.extend(format::build_barrier(&BarrierSpec {
        base_offset: Offset(5),
        partition_leader_epoch: 0,
        timestamp: 0,
    }));
    let mut scan = BatchIter::new(&buf, 4096);
    let positions: Vec<u64> = scan.by_ref().map(|b| b.position()).collect();
    assert_eq!(positions.len(), 3);
    assert_eq!(positions[0], 4096);
    assert_eq!(scan.end(), Some(&ScanEnd::Clean));
    assert_eq!(scan.valid_end_position(), 4096 + buf.len() as u64);
}

#[test]
fn zero_filled_tail_is_end_of_data_not_corruption() {
    let mut buf = idempotent_batch(1, 0, 3);
    let end = buf.len() as u64;
    buf.resize(buf.len() + 4096, 0);
    let mut scan = BatchIter::new(&buf, 0);
    assert_eq!(scan.by_ref().count(), 1);
    assert_eq!(scan.end(), Some(&ScanEnd::ZeroFilled { position: end }));
    // A zero tail shorter than a header but reaching past `magic` is end-of-data too.
    let mut short = idempotent_batch(1, 0, 1);
    short.extend([0u8; 20]);
    let mut scan = BatchIter::new(&short, 0);
    assert_eq!(scan.by_ref().count(), 1);
    assert!(matches!(scan.end(), Some(ScanEnd::ZeroFilled { .. })));
    // Ten zero bytes may be the start of a batch at a small offset: incomplete.
    short.truncate(short.len() - 10);
    let mut scan = BatchIter::new(&short, 0);
    assert_eq!(scan.by_ref().count(), 1);
    assert!(matches!(scan.end(), Some(ScanEnd::Incomplete { .. })));
}

#[test]
fn every_cut_inside_the_last_batch_is_incomplete_never_corrupt() {
    let first = idempotent_batch(1, 0, 3);
    let mut buf = first.clone();
    buf.extend(idempotent_batch(1, 3, 5));
    for cut in first.len() + 1..buf.len() {
        let mut scan = BatchIter::new(&buf[..cut], 0);
        assert_eq!(scan.by_ref().count(), 1, "cut at {cut}");
        match scan.end() {
            Some(ScanEnd::Incomplete {
                position,
                available_bytes,
                ..
            }) => {
                assert_eq!(*position, first.len() as u64);
                assert_eq!(*available_bytes, (cut - first.len()) as u64);
            }
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
}

#[test]
fn a_flipped_bit_is_corruption_at_the_crc() {
    let mut buf = idempotent_batch(1, 0, 3);
    let second_at = buf.len();
    buf.extend(idempotent_batch(1, 3, 3));
    buf[second_at + 70] ^= 0x10;
    let mut scan = BatchIter::new(&buf, 1000);
    assert_eq!(scan.by_ref().count(), 1);
    match scan.end() {
        Some(ScanEnd::Corrupt(FormatError::CrcMismatch { position, .. })) => {
            assert_eq!(*position, 1000 + second_at as u64 + 17);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn crc_field_of_zero_alone_is_not_end_of_data() {
    // librdkafka's mock cluster writes markers with CRC 0: they must be rejected.
    let mut marker = format::build_marker(&MarkerSpec {
        base_offset: Offset(0),
        partition_leader_epoch: 0,
        producer_id: 1,
        producer_epoch: 0,
        commit: true,
        coordinator_epoch: 0,
        timestamp: 0,
    });
    marker[17..21].fill(0);
    assert!(matches!(
        format::inspect(&marker, 0),
        Err(FormatError::CrcMismatch { stored: 0, .. })
    ));
    let mut scan = BatchIter::new(&marker, 0);
    assert_eq!(scan.by_ref().count(), 0);
    assert!(matches!(scan.end(), Some(ScanEnd::Corrupt(_))));
}

#[test]
fn length_below_49_is_corrupt_and_past_the_buffer_is_incomplete() {
    let mut bytes = one_record(plain_record()).finish();
    bytes[8..12].copy_from_slice(&48i32.to_be_bytes());
    assert!(matches!(
        format::inspect(&bytes, 100),
        Err(FormatError::LengthTooSmall {
            length: 48,
            position: 108,
            ..
        })
    ));
    bytes[8..12].copy_from_slice(&(-5i32).to_be_bytes());
    assert!(matches!(
        format::inspect(&bytes, 0),
        Err(FormatError::LengthTooSmall { length: -5, .. })
    ));
    bytes[8..12].copy_from_slice(&10_000i32.to_be_bytes());
    assert!(matches!(
        format::inspect(&bytes, 0),
        Err(FormatError::Incomplete {
            needed_bytes: 10_012,
            ..
        })
    ));
    assert!(format::inspect(&bytes[..30], 0)
        .unwrap_err()
        .is_incomplete());
}

#[test]
fn magic_other_than_2_is_rejected() {
    let bytes = RawBatch {
        magic: 1,
        ..one_record(plain_record())
    }
    .finish();
    assert!(matches!(
        format::inspect(&bytes, 0),
        Err(FormatError::InvalidMagic {
            magic: 1,
            position: 16,
            ..
        })
    ));
}

#[test]
fn negative_record_count_is_rejected() {
    let bytes = RawBatch {
        records_count: -1,
        ..one_record(plain_record())
    }
    .finish();
    assert!(matches!(
        format::inspect(&bytes, 0),
        Err(FormatError::NegativeRecordCount {
            count: -1,
            position: 57,
            ..
        })
    ));
}

#[test]
fn unknown_codec_and_compressed_control_are_rejected() {
    let bytes = RawBatch {
        attributes: 5,
        ..one_record(plain_record())
    }
    .finish();
    assert!(matches!(
        format::inspect(&bytes, 0),
        Err(FormatError::UnknownCompression { codec: 5, .. })
    ));
    let bytes = RawBatch {
        attributes: 0x20 | 1,
        ..one_record(plain_record())
    }
    .finish();
    assert!(matches!(
        format::inspect(&bytes, 0),
        Err(FormatError::CompressedControlBatch { codec: 1, .. })
    ));
}

#[test]
fn compressed_batches_are_opaque_but_accepted() {
    let bytes = RawBatch {
        attributes: 4,
        records: vec![0xde, 0xad, 0xbe, 0xef],
        ..RawBatch::default()
    }
    .finish();
    let view = format::inspect(&bytes, 0).unwrap();
    view.validate_records().unwrap();
    assert!(matches!(
        view.records(),
        Err(FormatError::CompressedRecords { codec: 4, .. })
    ));
    assert_eq!(view.records_bytes(), &[0xde, 0xad, 0xbe, 0xef]);
}

#[test]
fn fewer_records_than_declared() {
    let bytes = RawBatch {
        records_count: 2,
        last_offset_delta: 1,
        ..one_record(plain_record())
    }
    .finish();
    let err = format::inspect(&bytes, 0)
        .unwrap()
        .validate_records()
        .unwrap_err();
    assert!(
        matches!(
            err,
            FormatError::RecordCountMismatch {
                declared: 2,
                found: 1,
                trailing_bytes: 0,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn more_bytes_than_declared_records() {
    let mut records = plain_record();
    records.extend(plain_record());
    let bytes = one_record(records).finish();
    let err = format::inspect(&bytes, 0)
        .unwrap()
        .validate_records()
        .unwrap_err();
    assert!(
        matches!(
            err,
            FormatError::RecordCountMismatch {
                declared: 1,
                found: 1,
                trailing_bytes,
                ..
            } if trailing_bytes == plain_record().len() as u64
        ),
        "{err:?}"
    );
}

#[test]
fn record_length_disagreeing_with_its_fields() {
    let body = RawRecord {
        timestamp_delta: 0,
        offset_delta: 0,
        key: Some(b"k"),
        value: Some(b"v"),
        headers: &[],
    }
    .body();
    // Declares one byte more than the fields use (and the extra byte is there).
    let mut longer = Vec::new();
    format::reader::put_varint(&mut longer, body.len() as i32 + 1);
    longer.extend_from_slice(&body);
    longer.push(0);
    let err = format::inspect(&one_record(longer).finish(), 0)
        .unwrap()
        .validate_records()
        .unwrap_err();
    assert!(
        matches!(err, FormatError::RecordSizeMismatch { index: 0, .. }),
        "{err:?}"
    );
    // Declares more bytes than the batch holds.
    let mut overrun = Vec::new();
    format::reader::put_varint(&mut overrun, 200);
    overrun.extend_from_slice(&body);
    let err = format::inspect(&one_record(overrun).finish(), 0)
        .unwrap()
        .validate_records()
        .unwrap_err();
    assert!(
        matches!(err, FormatError::RecordSizeMismatch { declared: 200, .. }),
        "{err:?}"
    );
    // Declares fewer bytes than the fields need: a field overruns the record.
    let mut shorter = Vec::new();
    format::reader::put_varint(&mut shorter, body.len() as i32 - 2);
    shorter.extend_from_slice(&body[..body.len() - 2]);
    let err = format::inspect(&one_record(shorter).finish(), 0)
        .unwrap()
        .validate_records()
        .unwrap_err();
    assert!(matches!(err, FormatError::FieldOverrun { .. }), "{err:?}");
    // A negative record length.
    let err = format::inspect(&one_record(vec![0x01]).finish(), 0)
        .unwrap()
        .validate_records()
        .unwrap_err();
    assert!(
        matches!(
            err,
            FormatError::InvalidLength {
                field: Field::RecordLength,
                value: -1,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn last_offset_delta_inconsistent_with_count_fails_client_rules_only() {
    let bytes = RawBatch {
        last_offset_delta: 5,
        ..one_record(plain_record())
    }
    .finish();
    let view = format::inspect(&bytes, 0).unwrap();
    // A compacted batch from a replica or a mirror may have gaps: structurally fine.
    view.validate_records().unwrap();
    assert!(matches!(
        view.validate_client(),
        Err(FormatError::LastOffsetDeltaMismatch {
            last_offset_delta: 5,
            count: 1,
            position: 23,
            ..
        })
    ));
}

#[test]
fn producer_id_without_sequence_fails_client_rules() {
    let bytes = RawBatch {
        producer_id: 12,
        producer_epoch: 0,
        base_sequence: -1,
        ..one_record(plain_record())
    }
    .finish();
    let view = format::inspect(&bytes, 0).unwrap();
    assert!(matches!(
        view.validate_client(),
        Err(FormatError::MissingSequence {
            producer_id: 12,
            position: 53,
            ..
        })
    ));
}

#[test]
fn varint_too_long_names_its_field() {
    // attributes, timestampDelta 0, offsetDelta 0, then a 6-byte keyLength.
    let body = [0u8, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0, 0];
    let bytes = one_record(with_length(&body)).finish();
    let err = format::inspect(&bytes, 0)
        .unwrap()
        .validate_records()
        .unwrap_err();
    assert_eq!(
        err,
        FormatError::VarintTooLong {
            offset: Offset(0),
            position: 61 + 1 + 3,
            field: Field::KeyLength,
        }
    );
    // An 11-byte timestampDelta varlong.
    let mut body = vec![0u8];
    body.extend([0x80u8; 10]);
    body.extend([0, 0, 0, 0]);
    let bytes = one_record(with_length(&body)).finish();
    assert!(matches!(
        format::inspect(&bytes, 0).unwrap().validate_records(),
        Err(FormatError::VarintTooLong {
            field: Field::TimestampDelta,
            ..
        })
    ));
}

#[test]
fn lengths_below_minus_one_are_invalid() {
    // keyLength −2 (zig-zag 0x03).
    let body = [0u8, 0, 0, 0x03, 0x01, 0x00];
    let err = format::inspect(&one_record(with_length(&body)).finish(), 0)
        .unwrap()
        .validate_records()
        .unwrap_err();
    assert!(matches!(
        err,
        FormatError::InvalidLength {
            field: Field::KeyLength,
            value: -2,
            ..
        }
    ));
    // valueLength −3.
    let body = [0u8, 0, 0, 0x01, 0x05, 0x00];
    assert!(matches!(
        format::inspect(&one_record(with_length(&body)).finish(), 0)
            .unwrap()
            .validate_records(),
        Err(FormatError::InvalidLength {
            field: Field::ValueLength,
            value: -3,
            ..
        })
    ));
    // A header value length of −2, and a null header key.
    let body = [0u8, 0, 0, 0x01, 0x01, 0x02, 0x02, b'h', 0x03];
    assert!(matches!(
        format::inspect(&one_record(with_length(&body)).finish(), 0)
            .unwrap()
            .validate_records(),
        Err(FormatError::InvalidLength {
            field: Field::HeaderValueLength,
            value: -2,
            ..
        })
    ));
    let body = [0u8, 0, 0, 0x01, 0x01, 0x02, 0x01, 0x01];
    assert!(matches!(
        format::inspect(&one_record(with_length(&body)).finish(), 0)
            .unwrap()
            .validate_records(),
        Err(FormatError::InvalidLength {
            field: Field::HeaderKeyLength,
            value: -1,
            ..
        })
    ));
}

#[test]
fn header_count_negative_or_too_large() {
    let body = [0u8, 0, 0, 0x01, 0x01, 0x01];
    assert!(matches!(
        format::inspect(&one_record(with_length(&body)).finish(), 0)
            .unwrap()
            .validate_records(),
        Err(FormatError::NegativeHeaderCount { count: -1, .. })
    ));
    // headerCount 100 (zig-zag 200 = 0xc8 0x01) with 4 bytes left.
    let body = [0u8, 0, 0, 0x01, 0x01, 0xc8, 0x01, 0, 1, 0, 1];
    assert!(matches!(
        format::inspect(&one_record(with_length(&body)).finish(), 0)
            .unwrap()
            .validate_records(),
        Err(FormatError::HeaderCountTooLarge {
            count: 100,
            remaining_bytes: 4,
            ..
        })
    ));
}

#[test]
fn short_control_key_and_marker_value() {
    let key2 = RawRecord {
        timestamp_delta: 0,
        offset_delta: 0,
        key: Some(&[0, 0]),
        value: Some(&[0, 0, 0]),
        headers: &[],
    }
    .encode();
    let bytes = RawBatch {
        attributes: 0x20,
        ..one_record(key2)
    }
    .finish();
    assert!(matches!(
        format::inspect(&bytes, 0),
        Err(FormatError::ControlKeyTooShort { length: 2, .. })
    ));
    let short_value = RawRecord {
        timestamp_delta: 0,
        offset_delta: 0,
        key: Some(&[0, 0, 0, 1]),
        value: Some(&[0, 0, 0, 0]),
        headers: &[],
    }
    .encode();
    let bytes = RawBatch {
        attributes: 0x30,
        producer_id: 5,
        producer_epoch: 0,
        ..one_record(short_value)
    }
    .finish();
    assert!(matches!(
        format::inspect(&bytes, 0),
        Err(FormatError::MarkerValueTooShort { length: 4, .. })
    ));
}

#[test]
fn errors_carry_absolute_positions() {
    let mut buf = vec![0xffu8; 0];
    buf.extend(idempotent_batch(1, 0, 2));
    let at = buf.len();
    let mut bad = idempotent_batch(1, 2, 2);
    bad[16] = 9;
    fix_crc(&mut bad);
    buf.extend(bad);
    let mut scan = BatchIter::new(&buf, 1 << 20);
    scan.by_ref().count();
    assert_eq!(
        scan.end(),
        Some(&ScanEnd::Corrupt(FormatError::InvalidMagic {
            offset: Offset(0),
            position: (1 << 20) + at as u64 + 16,
            magic: 9
        }))
    );
    // Display names the field, offset and position.
    let text = FormatError::VarintTooLong {
        offset: Offset(7),
        position: 99,
        field: Field::HeaderCount,
    }
    .to_string();
    assert!(
        text.contains("offset 7") && text.contains("position 99") && text.contains("headerCount")
    );
}

/// The lookahead's header walk finds every batch's producer id without validating,
/// and stops at a cut header or an impossible length instead of running past them.
#[test]
fn producer_id_hints_walk_the_headers_and_stop_at_damage() {
    let batches: Vec<Vec<u8>> = [(7, 0), (9, 3), (-1, -1)]
        .iter()
        .map(|&(producer, seq)| common::producer_batch(producer, seq, 2, false, 30))
        .collect();
    let all = batches.concat();
    let ids: Vec<i64> = mirrorlog::format::producer_id_hints(&all).collect();
    assert_eq!(ids, [7, 9, -1]);
    // Cut inside the last header: the walk stops before it.
    let cut = &all[..batches[0].len() + batches[1].len() + 20];
    assert_eq!(
        mirrorlog::format::producer_id_hints(cut).collect::<Vec<_>>(),
        [7, 9]
    );
    // A length no batch can have ends the walk there.
    let mut bad = all.clone();
    let at = batches[0].len() + 8;
    bad[at..at + 4].copy_from_slice(&3i32.to_be_bytes());
    assert_eq!(
        mirrorlog::format::producer_id_hints(&bad).collect::<Vec<_>>(),
        [7]
    );
    assert_eq!(mirrorlog::format::producer_id_hints(&[]).count(), 0);
}
