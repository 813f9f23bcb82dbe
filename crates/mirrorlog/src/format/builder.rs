//! Builders for data batches, transaction markers and the barrier, used by tests, the benchmark
//! and tools, and by the engine itself to write markers and barriers.
//!
//! Builders produce batches with Kafka's conventions: `baseTimestamp` is the first record's
//! timestamp, `maxTimestamp` the largest, offset deltas count from 0. Uncompressed by default;
//! [`BatchBuilder::build_compressed`] writes any codec as Kafka's Java producer does.

use super::batch::{
    Attributes, Compression, TimestampType, ATTRIBUTES_POS, BATCH_HEADER_SIZE_BYTES, CRC_POS,
    LOG_OVERHEAD_BYTES, MAGIC_V2,
};
use super::control::{self, ControlType, BARRIER_VALUE};
use super::crc::crc32c;
use super::reader::{put_varint, put_varlong};
use super::types::{Offset, ProducerFields, NO_PARTITION_LEADER_EPOCH};

/// Size of a barrier batch as this engine writes it.
pub const BARRIER_BATCH_SIZE_BYTES: usize = 75;
/// Size of a transaction marker batch.
pub const MARKER_BATCH_SIZE_BYTES: usize = 78;

/// The batch-level settings of a data batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    /// `baseOffset` (clients send 0; the log assigns).
    pub base_offset: Offset,
    /// `partitionLeaderEpoch`.
    pub partition_leader_epoch: i32,
    /// Producer id, epoch and base sequence.
    pub producer: ProducerFields,
    /// Transactional bit.
    pub transactional: bool,
    /// Timestamp type bit.
    pub timestamp_type: TimestampType,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            base_offset: Offset(0),
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer: ProducerFields::NONE,
            transactional: false,
            timestamp_type: TimestampType::CreateTime,
        }
    }
}

/// One record to add to a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordSpec<'a> {
    /// Absolute timestamp (ms).
    pub timestamp: i64,
    /// Key, `None` for null.
    pub key: Option<&'a [u8]>,
    /// Value, `None` for null.
    pub value: Option<&'a [u8]>,
    /// Headers: key and nullable value.
    pub headers: &'a [(&'a [u8], Option<&'a [u8]>)],
}

/// Builds one v2 batch.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    options: BatchOptions,
    control: bool,
    records: Vec<u8>,
    count: i32,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
    scratch: Vec<u8>,
}

impl BatchBuilder {
    /// An empty data batch.
    #[must_use]
    pub fn new(options: BatchOptions) -> Self {
        BatchBuilder {
            options,
            control: false,
            records: Vec::new(),
            count: 0,
            base_timestamp: None,
            max_timestamp: -1,
            scratch: Vec::new(),
        }
    }

    /// Appends a record at the next offset delta.
    pub fn push(&mut self, record: RecordSpec<'_>) -> &mut Self {
        let base_timestamp = *self.base_timestamp.get_or_insert(record.timestamp);
        self.max_timestamp = self.max_timestamp.max(record.timestamp);
        let body = &mut self.scratch;
        body.clear();
        body.push(0); // record attributes
        put_varlong(body, record.timestamp.wrapping_sub(base_timestamp));
        put_varint(body, self.count);
        put_nullable(body, record.key);
        put_nullable(body, record.value);
        put_varint(body, record.headers.len() as i32);
        for (key, value) in record.headers {
            put_varint(body, key.len() as i32);
            body.extend_from_slice(key);
            put_nullable(body, *value);
        }
        put_varint(&mut self.records, body.len() as i32);
        self.records.extend_from_slice(body);
        self.count += 1;
        self
    }

    /// Records added so far.
    #[must_use]
    pub fn len(&self) -> i32 {
        self.count
    }

    /// Whether no record was added.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Size the batch will have.
    #[must_use]
    pub fn size_bytes(&self) -> usize {
        BATCH_HEADER_SIZE_BYTES + self.records.len()
    }

    /// The finished batch with a valid CRC.
    #[must_use]
    pub fn build(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size_bytes());
        self.build_into(&mut out);
        out
    }

    /// Appends the finished batch to `out`.
    pub fn build_into(&self, out: &mut Vec<u8>) {
        self.write_batch(out, Compression::None, &self.records);
    }

    /// The finished batch with its records compressed by `codec`, and a valid CRC.
    ///
    /// # Errors
    /// The encoder's failure ([`super::compression::compress`]).
    pub fn build_compressed(&self, codec: Compression) -> Result<Vec<u8>, super::CodecError> {
        let payload = super::compression::compress(codec, &self.records)?;
        let mut out = Vec::with_capacity(BATCH_HEADER_SIZE_BYTES + payload.len());
        self.write_batch(&mut out, codec, &payload);
        Ok(out)
    }

    /// Appends the header and `payload` (the records region, compressed by `codec`).
    fn write_batch(&self, out: &mut Vec<u8>, codec: Compression, payload: &[u8]) {
        let start = out.len();
        let o = &self.options;
        let attributes = Attributes::new(codec, o.timestamp_type, o.transactional, self.control);
        let length = (BATCH_HEADER_SIZE_BYTES + payload.len() - LOG_OVERHEAD_BYTES) as i32;
        let base_timestamp = self.base_timestamp.unwrap_or(-1);
        out.extend_from_slice(&o.base_offset.0.to_be_bytes());
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&o.partition_leader_epoch.to_be_bytes());
        out.push(MAGIC_V2 as u8);
        out.extend_from_slice(&[0; 4]); // crc, filled below
        out.extend_from_slice(&attributes.0.to_be_bytes());
        out.extend_from_slice(&(self.count - 1).max(0).to_be_bytes());
        out.extend_from_slice(&base_timestamp.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp.to_be_bytes());
        out.extend_from_slice(&o.producer.producer_id.to_be_bytes());
        out.extend_from_slice(&o.producer.producer_epoch.to_be_bytes());
        out.extend_from_slice(&o.producer.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.count.to_be_bytes());
        out.extend_from_slice(payload);
        let batch = out.get_mut(start..).unwrap_or_default();
        let crc = crc32c(batch.get(ATTRIBUTES_POS..).unwrap_or_default());
        if let Some(field) = batch.get_mut(CRC_POS..CRC_POS + 4) {
            field.copy_from_slice(&crc.to_be_bytes());
        }
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

/// A COMMIT or ABORT marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerSpec {
    /// `baseOffset`.
    pub base_offset: Offset,
    /// `partitionLeaderEpoch`.
    pub partition_leader_epoch: i32,
    /// The producer whose transaction ends.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i16,
    /// COMMIT (`true`) or ABORT.
    pub commit: bool,
    /// The transaction coordinator's epoch.
    pub coordinator_epoch: i32,
    /// Timestamp (ms).
    pub timestamp: i64,
}

/// Builds a 78-byte transaction marker batch: transactional + control, one record.
#[must_use]
pub fn build_marker(spec: &MarkerSpec) -> Vec<u8> {
    let control_type = if spec.commit {
        ControlType::Commit
    } else {
        ControlType::Abort
    };
    let value = control::marker_value(spec.coordinator_epoch);
    let batch = build_control(
        BatchOptions {
            base_offset: spec.base_offset,
            partition_leader_epoch: spec.partition_leader_epoch,
            producer: ProducerFields {
                producer_id: spec.producer_id,
                producer_epoch: spec.producer_epoch,
                base_sequence: -1,
            },
            transactional: true,
            timestamp_type: TimestampType::CreateTime,
        },
        control_type,
        &value,
        spec.timestamp,
    );
    debug_assert_eq!(batch.len(), MARKER_BATCH_SIZE_BYTES);
    batch
}

/// The barrier's placement and time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierSpec {
    /// `baseOffset`.
    pub base_offset: Offset,
    /// `partitionLeaderEpoch`.
    pub partition_leader_epoch: i32,
    /// Timestamp (ms).
    pub timestamp: i64,
}

/// Builds the 75-byte barrier batch: control, not transactional, no producer, one record with
/// key `(0, MIRROR_PID_RESET)` and value [`BARRIER_VALUE`].
#[must_use]
pub fn build_barrier(spec: &BarrierSpec) -> Vec<u8> {
    let batch = build_control(
        BatchOptions {
            base_offset: spec.base_offset,
            partition_leader_epoch: spec.partition_leader_epoch,
            producer: ProducerFields::NONE,
            transactional: false,
            timestamp_type: TimestampType::CreateTime,
        },
        ControlType::MirrorPidReset,
        &BARRIER_VALUE,
        spec.timestamp,
    );
    debug_assert_eq!(batch.len(), BARRIER_BATCH_SIZE_BYTES);
    batch
}

/// Builds a one-record control batch with any control type and value (tests use it for KRaft
/// types and barrier variants with a source cluster id).
#[must_use]
pub fn build_control(
    options: BatchOptions,
    control_type: ControlType,
    value: &[u8],
    timestamp: i64,
) -> Vec<u8> {
    let key = control::control_key(control_type);
    let mut builder = BatchBuilder::new(options);
    builder.control = true;
    builder.push(RecordSpec {
        timestamp,
        key: Some(&key),
        value: Some(value),
        headers: &[],
    });
    builder.build()
}
