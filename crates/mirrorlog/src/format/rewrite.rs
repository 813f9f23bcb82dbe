//! Rewriting a stored batch with a subset of its records, as Kafka's cleaner does
//! (`MemoryRecords.filterTo` and `buildRetainedRecordsInto`): what compaction writes.
//!
//! A rewritten batch keeps everything a reader or the producer state relies on:
//! - `baseOffset`, `lastOffsetDelta` (so the producer's last sequence survives: Kafka's
//!   `overrideLastOffset`), the producer id, epoch and base sequence, the leader epoch, the
//!   timestamp type, the transactional and control bits, and the batch's own codec;
//! - each kept record's offset (its `offsetDelta` is unchanged), absolute timestamp, key, value
//!   and headers. Record attributes are written as 0, as Kafka's builder writes them.
//!
//! What changes: `recordsCount`, `baseTimestamp` (the first kept record's timestamp, or the
//! delete horizon when one is set: KIP-534 stores it there and sets attribute bit 6, and the
//! records' timestamp deltas are taken from it), `maxTimestamp` (the largest kept timestamp;
//! a `LogAppendTime` batch keeps its own), `length` and the CRC.
//!
//! A batch kept with no records is [`write_empty_batch`]: Kafka's `writeEmptyHeader`, kept
//! only so that a producer's last sequence and epoch survive cleaning.

use super::batch::{
    Attributes, BatchHeader, BatchView, Compression, TimestampType, ATTRIBUTES_POS,
    BATCH_HEADER_SIZE_BYTES, CRC_POS, LOG_OVERHEAD_BYTES, MAGIC_V2,
};
use super::crc::crc32c;
use super::error::FormatError;
use super::reader::{put_varint, put_varlong};
use super::record::RecordView;

/// The absolute timestamp of `record` in the batch with header `header`: `baseTimestamp` plus its
/// delta, or the batch's `maxTimestamp` for a `LogAppendTime` batch (Kafka's record timestamp).
#[must_use]
pub fn record_timestamp(header: &BatchHeader, record: &RecordView<'_>) -> i64 {
    match header.attributes.timestamp_type() {
        TimestampType::LogAppendTime => header.max_timestamp,
        TimestampType::CreateTime => header.base_timestamp.wrapping_add(record.timestamp_delta),
    }
}

/// The delete horizon stored in a batch (KIP-534), if its attribute bit is set.
#[must_use]
pub fn delete_horizon_ms(header: &BatchHeader) -> Option<i64> {
    header
        .attributes
        .has_delete_horizon()
        .then_some(header.base_timestamp)
}

/// Appends to `out` the batch `batch` holding only `kept` (its records, in order, at least one),
/// with `delete_horizon_ms` stored when given (see the module docs).
///
/// # Errors
/// [`FormatError::UnknownCompression`] for codec bits 5-7, [`FormatError::Decompression`] when
/// the codec fails to encode.
pub fn rebuild_batch(
    batch: &BatchView<'_>,
    kept: &[RecordView<'_>],
    delete_horizon_ms: Option<i64>,
    out: &mut Vec<u8>,
) -> Result<(), FormatError> {
    let h = batch.header();
    let codec = h
        .attributes
        .compression()
        .ok_or(FormatError::UnknownCompression {
            offset: h.base_offset,
            position: batch.position() + ATTRIBUTES_POS as u64,
            codec: h.attributes.codec_bits(),
        })?;
    let timestamps = kept.iter().map(|r| record_timestamp(h, r));
    let first_timestamp = timestamps.clone().next().unwrap_or(-1);
    let base_timestamp = delete_horizon_ms.unwrap_or(first_timestamp);
    let max_timestamp = match h.attributes.timestamp_type() {
        TimestampType::LogAppendTime => h.max_timestamp,
        TimestampType::CreateTime => timestamps.clone().max().unwrap_or(-1),
    };
    let mut records = Vec::with_capacity(batch.bytes().len());
    let mut body = Vec::new();
    for (record, timestamp) in kept.iter().zip(timestamps) {
        body.clear();
        body.push(0);
        put_varlong(&mut body, timestamp.wrapping_sub(base_timestamp));
        put_varint(&mut body, record.offset_delta);
        put_nullable(&mut body, record.key);
        put_nullable(&mut body, record.value);
        put_varint(&mut body, record.header_count());
        for header in record.headers() {
            put_varint(&mut body, header.key.len() as i32);
            body.extend_from_slice(header.key);
            put_nullable(&mut body, header.value);
        }
        put_varint(&mut records, body.len() as i32);
        records.extend_from_slice(&body);
    }
    let payload = match codec {
        Compression::None => records,
        _ => super::compression::compress(codec, &records).map_err(|source| {
            FormatError::Decompression {
                offset: h.base_offset,
                position: batch.position() + BATCH_HEADER_SIZE_BYTES as u64,
                source,
            }
        })?,
    };
    let mut attributes = Attributes::new(
        codec,
        h.attributes.timestamp_type(),
        h.attributes.is_transactional(),
        h.attributes.is_control(),
    );
    if delete_horizon_ms.is_some() {
        attributes = attributes.with_delete_horizon();
    }
    let fields = HeaderFields {
        header: h,
        attributes,
        base_timestamp,
        max_timestamp,
        records_count: kept.len() as i32,
    };
    write_batch(&fields, &payload, out);
    Ok(())
}

/// Appends to `out` the batch of `header` with no records (Kafka's `writeEmptyHeader`): its
/// offsets, producer fields, leader epoch, timestamp type, transactional and control bits and
/// `maxTimestamp` kept, no codec, `baseTimestamp` −1.
pub fn write_empty_batch(header: &BatchHeader, out: &mut Vec<u8>) {
    let attributes = Attributes::new(
        Compression::None,
        header.attributes.timestamp_type(),
        header.attributes.is_transactional(),
        header.attributes.is_control(),
    );
    let fields = HeaderFields {
        header,
        attributes,
        base_timestamp: -1,
        max_timestamp: header.max_timestamp,
        records_count: 0,
    };
    write_batch(&fields, &[], out);
}

/// What a rewritten batch's header takes from the original, and what it sets anew.
struct HeaderFields<'a> {
    header: &'a BatchHeader,
    attributes: Attributes,
    base_timestamp: i64,
    max_timestamp: i64,
    records_count: i32,
}

fn write_batch(f: &HeaderFields<'_>, payload: &[u8], out: &mut Vec<u8>) {
    let h = f.header;
    let start = out.len();
    let length = (BATCH_HEADER_SIZE_BYTES + payload.len() - LOG_OVERHEAD_BYTES) as i32;
    out.extend_from_slice(&h.base_offset.0.to_be_bytes());
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&h.partition_leader_epoch.to_be_bytes());
    out.push(MAGIC_V2 as u8);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&f.attributes.0.to_be_bytes());
    out.extend_from_slice(&h.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&f.base_timestamp.to_be_bytes());
    out.extend_from_slice(&f.max_timestamp.to_be_bytes());
    out.extend_from_slice(&h.producer.producer_id.to_be_bytes());
    out.extend_from_slice(&h.producer.producer_epoch.to_be_bytes());
    out.extend_from_slice(&h.producer.base_sequence.to_be_bytes());
    out.extend_from_slice(&f.records_count.to_be_bytes());
    out.extend_from_slice(payload);
    let batch = out.get_mut(start..).unwrap_or_default();
    let crc = crc32c(batch.get(ATTRIBUTES_POS..).unwrap_or_default());
    if let Some(field) = batch.get_mut(CRC_POS..CRC_POS + 4) {
        field.copy_from_slice(&crc.to_be_bytes());
    }
}

fn put_nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(b) => {
            put_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
        None => put_varint(out, -1),
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::format::{inspect, BatchBuilder, BatchOptions, Offset, ProducerFields, RecordSpec};

    fn batch(codec: Compression) -> Vec<u8> {
        let mut b = BatchBuilder::new(BatchOptions {
            base_offset: Offset(100),
            partition_leader_epoch: 7,
            producer: ProducerFields {
                producer_id: 42,
                producer_epoch: 3,
                base_sequence: 10,
            },
            transactional: true,
            ..BatchOptions::default()
        });
        for (i, key) in [b"a", b"b", b"c"].iter().enumerate() {
            b.push(RecordSpec {
                timestamp: 1_000 + i as i64,
                key: Some(&key[..]),
                value: (i != 1).then_some(&b"v"[..]),
                headers: &[(b"h", Some(b"x"))],
            });
        }
        b.build_compressed(codec).unwrap()
    }

    #[test]
    fn a_rebuilt_batch_keeps_offsets_producer_fields_codec_and_timestamps() {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let bytes = batch(codec);
            let view = inspect(&bytes, 0).unwrap();
            let records = view.decompressed_records(1 << 20).unwrap();
            let all: Vec<_> = records.iter().collect::<Result<_, _>>().unwrap();
            let kept = [all[1], all[2]];
            let mut out = Vec::new();
            rebuild_batch(&view, &kept, Some(9_999), &mut out).unwrap();
            let new = inspect(&out, 0).unwrap();
            let h = new.header();
            assert_eq!(h.base_offset, Offset(100));
            assert_eq!(h.last_offset(), Offset(102), "{codec:?}: last offset kept");
            assert_eq!(h.records_count, 2);
            assert_eq!(h.producer, view.header().producer);
            assert_eq!(h.partition_leader_epoch, 7);
            assert!(h.attributes.is_transactional());
            assert_eq!(h.attributes.compression(), Some(codec));
            assert_eq!(delete_horizon_ms(h), Some(9_999));
            assert_eq!(h.max_timestamp, 1_002);
            let again = new.decompressed_records(1 << 20).unwrap();
            let got: Vec<_> = again.iter().collect::<Result<_, _>>().unwrap();
            assert_eq!(got.len(), 2);
            for (g, k) in got.iter().zip(&kept) {
                assert_eq!(g.offset_delta, k.offset_delta);
                assert_eq!(g.key, k.key);
                assert_eq!(g.value, k.value);
                assert_eq!(record_timestamp(h, g), record_timestamp(view.header(), k));
                assert_eq!(g.headers().count(), 1);
            }
        }
    }

    #[test]
    fn an_empty_batch_is_kafkas_empty_header() {
        let bytes = batch(Compression::Lz4);
        let view = inspect(&bytes, 0).unwrap();
        let mut out = Vec::new();
        write_empty_batch(view.header(), &mut out);
        assert_eq!(out.len(), BATCH_HEADER_SIZE_BYTES);
        let new = inspect(&out, 0).unwrap();
        let h = new.header();
        assert_eq!(h.records_count, 0);
        assert_eq!(h.last_offset(), Offset(102));
        assert_eq!(h.base_timestamp, -1);
        assert_eq!(h.max_timestamp, 1_002);
        assert_eq!(h.attributes.compression(), Some(Compression::None));
        assert_eq!(h.producer, view.header().producer);
    }
}
