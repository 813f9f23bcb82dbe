//! Properties of the format layer over generated inputs (thousands of cases each, replayable
//! with `MIRRORLOG_SEED`):
//! - arbitrary bytes, and valid batches with arbitrary damage behind a recomputed CRC, make every
//!   decoder return `Ok` or `Err` — never panic;
//! - any batch built from arbitrary records decodes back to exactly those records;
//! - a buffer of valid batches cut anywhere scans as clean or incomplete, never corrupt.

mod common;

use mirrorlog::format::{
    self, BatchBuilder, BatchIter, BatchOptions, Offset, ProducerFields, RecordSpec, ScanEnd,
};
use proptest::prelude::*;

type OwnedRecord = (
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(Vec<u8>, Option<Vec<u8>>)>,
);

fn record_strategy() -> impl Strategy<Value = OwnedRecord> {
    (
        -1_000_000i64..1_000_000,
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
        proptest::collection::vec(
            (
                proptest::collection::vec(any::<u8>(), 0..10),
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..10)),
            ),
            0..4,
        ),
    )
}

fn build(options: BatchOptions, records: &[OwnedRecord]) -> Vec<u8> {
    let mut b = BatchBuilder::new(options);
    for (ts, key, value, headers) in records {
        let hs: Vec<(&[u8], Option<&[u8]>)> = headers
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
        b.push(RecordSpec {
            timestamp: 1_700_000_000_000 + ts,
            key: key.as_deref(),
            value: value.as_deref(),
            headers: &hs,
        });
    }
    b.build()
}

/// Runs every decoder over `buf`; the point is that none of them panics.
fn exercise(buf: &[u8]) -> usize {
    let mut touched = 0;
    let mut scan = BatchIter::new(buf, 0);
    for batch in scan.by_ref() {
        let _ = batch.validate_client();
        let _ = batch.validate_records();
        if let Ok(records) = batch.records() {
            for record in records.flatten() {
                touched += record.headers().count();
                touched += record.key.map_or(0, <[u8]>::len);
            }
        }
    }
    assert!(scan.end().is_some());
    let _ = format::inspect(buf, 0);
    touched
}

proptest! {
    #![proptest_config(common::proptest_config("arbitrary_bytes_never_panic", 4000))]
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        exercise(&bytes);
    }
}

proptest! {
    #![proptest_config(common::proptest_config("damaged_batches_with_valid_crc_never_panic", 4000))]
    #[test]
    fn damaged_batches_with_valid_crc_never_panic(
        records in proptest::collection::vec(record_strategy(), 1..6),
        control in any::<bool>(),
        damage in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut batch = build(BatchOptions::default(), &records);
        if control {
            batch[22] |= 0x20;
        }
        // Damage only the CRC-covered part, then make the CRC right again so the record walkers
        // see the damage.
        for (at, byte) in &damage {
            let i = 21 + at.index(batch.len() - 21);
            batch[i] = *byte;
        }
        let end = 61 + cut.index(batch.len() - 60);
        batch.truncate(end.max(61));
        let length = (batch.len() - 12) as i32;
        batch[8..12].copy_from_slice(&length.to_be_bytes());
        common::fix_crc(&mut batch);
        exercise(&batch);
    }
}

proptest! {
    #![proptest_config(common::proptest_config("built_batches_round_trip", 2000))]
    #[test]
    fn built_batches_round_trip(
        records in proptest::collection::vec(record_strategy(), 1..8),
        producer_id in -1i64..1000,
        epoch in -1i16..100,
        base_sequence in 0i32..=i32::MAX,
        transactional in any::<bool>(),
        base_offset in 0i64..(1 << 50),
    ) {
        let options = BatchOptions {
            base_offset: Offset(base_offset),
            partition_leader_epoch: 3,
            producer: ProducerFields { producer_id, producer_epoch: epoch, base_sequence },
            transactional,
            ..BatchOptions::default()
        };
        let bytes = build(options, &records);
        let view = format::inspect(&bytes, 0).unwrap();
        prop_assert_eq!(view.bytes().len(), bytes.len());
        let h = view.header();
        prop_assert_eq!(h.base_offset, Offset(base_offset));
        prop_assert_eq!(h.records_count as usize, records.len());
        prop_assert_eq!(h.last_offset_delta as usize, records.len() - 1);
        prop_assert_eq!(h.producer, options.producer);
        prop_assert_eq!(h.attributes.is_transactional(), transactional);
        let max_ts = records.iter().map(|r| r.0).max().unwrap() + 1_700_000_000_000;
        prop_assert_eq!(h.max_timestamp, max_ts);
        prop_assert_eq!(h.base_timestamp, records[0].0 + 1_700_000_000_000);
        view.validate_records().unwrap();
        if producer_id >= 0 {
            view.validate_client().unwrap();
        }
        let decoded: Vec<OwnedRecord> = view
            .records()
            .unwrap()
            .map(|r| {
                let r = r.unwrap();
                (
                    h.base_timestamp + r.timestamp_delta - 1_700_000_000_000,
                    r.key.map(<[u8]>::to_vec),
                    r.value.map(<[u8]>::to_vec),
                    r.headers().map(|x| (x.key.to_vec(), x.value.map(<[u8]>::to_vec))).collect(),
                )
            })
            .collect();
        prop_assert_eq!(decoded, records);
    }
}

proptest! {
    #![proptest_config(common::proptest_config("cut_buffers_are_incomplete_never_corrupt", 2000))]
    #[test]
    fn cut_buffers_are_incomplete_never_corrupt(
        batches in proptest::collection::vec(proptest::collection::vec(record_strategy(), 1..4), 1..5),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut buf = Vec::new();
        let mut boundaries = vec![0];
        // Non-zero base offsets, as in a real log after offset 0.
        for (next, records) in (1i64..).zip(&batches) {
            let mut batch = build(BatchOptions::default(), records);
            format::stamp_base_offset(&mut batch, Offset(next << 20)).unwrap();
            buf.extend(batch);
            boundaries.push(buf.len());
        }
        let cut = cut.index(buf.len() + 1);
        let mut scan = BatchIter::new(&buf[..cut], 0);
        let whole = scan.by_ref().count();
        let expected_whole = boundaries.iter().filter(|&&b| b <= cut).count() - 1;
        prop_assert_eq!(whole, expected_whole);
        let end = scan.end().cloned();
        if boundaries.contains(&cut) {
            prop_assert_eq!(end, Some(ScanEnd::Clean));
        } else {
            prop_assert!(matches!(end, Some(ScanEnd::Incomplete { .. })), "{:?}", end);
        }
    }
}
