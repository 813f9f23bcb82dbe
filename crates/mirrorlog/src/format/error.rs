//! The closed set of ways bytes can fail to be a valid Kafka v2 record batch.
//!
//! Every variant names the batch (its `baseOffset` as stored, which may itself be garbage when
//! the batch is corrupt) and the absolute byte `position` of the offending field, so an operator
//! can find it with a hex dump. `position` is the caller's base position plus the index in the
//! buffer: a file position when scanning a segment, a request position when validating an append.

use super::types::Offset;
use std::fmt;

/// A field of a batch, record, header or control record, as named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Field {
    /// Batch `length`.
    BatchLength,
    /// Batch `magic`.
    Magic,
    /// Batch `crc`.
    Crc,
    /// Batch `attributes`.
    Attributes,
    /// Batch `lastOffsetDelta`.
    LastOffsetDelta,
    /// Batch `recordsCount`.
    RecordsCount,
    /// Batch `baseSequence`.
    BaseSequence,
    /// A record's `length` varint.
    RecordLength,
    /// A record's `attributes` byte.
    RecordAttributes,
    /// A record's `timestampDelta` varlong.
    TimestampDelta,
    /// A record's `offsetDelta` varint.
    OffsetDelta,
    /// A record's `keyLength` varint.
    KeyLength,
    /// A record's key bytes.
    Key,
    /// A record's `valueLength` varint.
    ValueLength,
    /// A record's value bytes.
    Value,
    /// A record's `headerCount` varint.
    HeaderCount,
    /// A header's key length varint.
    HeaderKeyLength,
    /// A header's key bytes.
    HeaderKey,
    /// A header's value length varint.
    HeaderValueLength,
    /// A header's value bytes.
    HeaderValue,
    /// A control record's key (`version`, `type`).
    ControlKey,
    /// A transaction marker's value (`version`, `coordinatorEpoch`).
    MarkerValue,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Field::BatchLength => "length",
            Field::Magic => "magic",
            Field::Crc => "crc",
            Field::Attributes => "attributes",
            Field::LastOffsetDelta => "lastOffsetDelta",
            Field::RecordsCount => "recordsCount",
            Field::BaseSequence => "baseSequence",
            Field::RecordLength => "record length",
            Field::RecordAttributes => "record attributes",
            Field::TimestampDelta => "timestampDelta",
            Field::OffsetDelta => "offsetDelta",
            Field::KeyLength => "keyLength",
            Field::Key => "key",
            Field::ValueLength => "valueLength",
            Field::Value => "value",
            Field::HeaderCount => "headerCount",
            Field::HeaderKeyLength => "header keyLength",
            Field::HeaderKey => "header key",
            Field::HeaderValueLength => "header valueLength",
            Field::HeaderValue => "header value",
            Field::ControlKey => "control key",
            Field::MarkerValue => "marker value",
        };
        f.write_str(name)
    }
}

/// Why bytes are not a valid record batch. `#[non_exhaustive]`: match with a wildcard.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The buffer ends before the batch does. At the end of a log this is a torn tail; in a
    /// caller's request it is a truncated request. Never a reason to read past the buffer.
    #[error("incomplete batch at position {position}: needs {needed_bytes} bytes, {available_bytes} available")]
    Incomplete {
        /// Position of the batch start.
        position: u64,
        /// Bytes the batch needs from its start (at least the fixed header).
        needed_bytes: u64,
        /// Bytes available from the batch start.
        available_bytes: u64,
    },
    /// `length` is below the 49 bytes every v2 batch has after the length field.
    #[error(
        "batch at offset {offset}, position {position}: length {length} is below the minimum 49"
    )]
    LengthTooSmall {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the `length` field.
        position: u64,
        /// Stored `length`.
        length: i32,
    },
    /// `magic` is not 2.
    #[error("batch at offset {offset}, position {position}: magic {magic}, expected 2")]
    InvalidMagic {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the `magic` byte.
        position: u64,
        /// Stored magic.
        magic: i8,
    },
    /// The stored CRC-32C does not match the bytes it covers.
    #[error("batch at offset {offset}, position {position}: crc stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the `crc` field.
        position: u64,
        /// Stored CRC.
        stored: u32,
        /// CRC computed over bytes `[21, end)`.
        computed: u32,
    },
    /// The compression codec bits name no known codec (5, 6 or 7).
    #[error("batch at offset {offset}, position {position}: unknown compression codec {codec}")]
    UnknownCompression {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the `attributes` field.
        position: u64,
        /// Codec bits.
        codec: u8,
    },
    /// A control batch is compressed; control batches are always written uncompressed.
    #[error("control batch at offset {offset}, position {position} is compressed (codec {codec})")]
    CompressedControlBatch {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the `attributes` field.
        position: u64,
        /// Codec bits.
        codec: u8,
    },
    /// `recordsCount` is negative.
    #[error("batch at offset {offset}, position {position}: negative recordsCount {count}")]
    NegativeRecordCount {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the `recordsCount` field.
        position: u64,
        /// Stored count.
        count: i32,
    },
    /// `lastOffsetDelta` is negative.
    #[error("batch at offset {offset}, position {position}: negative lastOffsetDelta {last_offset_delta}")]
    NegativeLastOffsetDelta {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the `lastOffsetDelta` field.
        position: u64,
        /// Stored delta.
        last_offset_delta: i32,
    },
    /// The records region holds a different number of records than `recordsCount` declares
    /// (fewer: the region ended early; more: bytes remain after the last declared record).
    #[error("batch at offset {offset}, position {position}: recordsCount {declared}, records region holds {found}{}", if *.trailing_bytes > 0 { format!(" and {} trailing bytes", .trailing_bytes) } else { String::new() })]
    RecordCountMismatch {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position where the mismatch was found.
        position: u64,
        /// Declared `recordsCount`.
        declared: i32,
        /// Records parsed before the region ended.
        found: i32,
        /// Bytes left in the region after `declared` records.
        trailing_bytes: u64,
    },
    /// A record's declared `length` disagrees with the bytes its fields occupy.
    #[error("batch at offset {offset}, position {position}: record {index} declares {declared} bytes but its fields use {used}")]
    RecordSizeMismatch {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the record's `length` varint.
        position: u64,
        /// Index of the record in the batch.
        index: i32,
        /// Declared record length.
        declared: i64,
        /// Bytes its fields actually use (may exceed `declared` when a field overruns).
        used: u64,
    },
    /// A field runs past the end of its record or batch.
    #[error(
        "batch at offset {offset}, position {position}: {field} runs past the end of its record"
    )]
    FieldOverrun {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the field.
        position: u64,
        /// Which field.
        field: Field,
    },
    /// A varint is longer than 5 bytes (varlong: 10).
    #[error("batch at offset {offset}, position {position}: {field} varint is too long")]
    VarintTooLong {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the varint.
        position: u64,
        /// Which field.
        field: Field,
    },
    /// A length is below −1 (the null marker), or a record length is negative.
    #[error("batch at offset {offset}, position {position}: {field} {value} is invalid")]
    InvalidLength {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the length varint.
        position: u64,
        /// Which field.
        field: Field,
        /// Decoded value.
        value: i64,
    },
    /// A record's `headerCount` is negative.
    #[error("batch at offset {offset}, position {position}: negative headerCount {count}")]
    NegativeHeaderCount {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the `headerCount` varint.
        position: u64,
        /// Decoded count.
        count: i32,
    },
    /// `headerCount` is larger than the bytes remaining in the record could hold (each header
    /// takes at least two bytes).
    #[error("batch at offset {offset}, position {position}: headerCount {count} exceeds the {remaining_bytes} bytes remaining")]
    HeaderCountTooLarge {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the `headerCount` varint.
        position: u64,
        /// Decoded count.
        count: i32,
        /// Bytes left in the record.
        remaining_bytes: u64,
    },
    /// A control record's key is shorter than 4 bytes (`version i16`, `type i16`), or null.
    #[error("control batch at offset {offset}, position {position}: control key has {length} bytes, needs 4")]
    ControlKeyTooShort {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the key.
        position: u64,
        /// Key length (−1 for null).
        length: i32,
    },
    /// A transaction marker's value is shorter than 6 bytes (`version i16`,
    /// `coordinatorEpoch i32`), or null.
    #[error("control batch at offset {offset}, position {position}: marker value has {length} bytes, needs 6")]
    MarkerValueTooShort {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the value.
        position: u64,
        /// Value length (−1 for null).
        length: i32,
    },
    /// Client appends: `lastOffsetDelta` must be `recordsCount − 1`.
    #[error("batch at offset {offset}, position {position}: lastOffsetDelta {last_offset_delta} inconsistent with recordsCount {count}")]
    LastOffsetDeltaMismatch {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the `lastOffsetDelta` field.
        position: u64,
        /// Stored delta.
        last_offset_delta: i32,
        /// Stored count.
        count: i32,
    },
    /// Client appends: a batch must hold at least one record.
    #[error("batch at offset {offset}, position {position}: a client batch must hold at least one record (recordsCount {count})")]
    NoRecords {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the `recordsCount` field.
        position: u64,
        /// Stored count.
        count: i32,
    },
    /// Client appends: the records' offset deltas must be `0, 1, 2, …`.
    #[error("batch at offset {offset}, position {position}: record {index} has offset delta {offset_delta}, expected {index}")]
    OffsetDeltaMismatch {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the record (in the decompressed records for a compressed batch).
        position: u64,
        /// The record's index in the batch.
        index: i32,
        /// Its stored offset delta.
        offset_delta: i32,
    },
    /// Client appends: a record's timestamp is outside the partition's bounds.
    #[error("batch at offset {offset}, position {position}: timestamp {timestamp} of record {index} is out of range [{min}, {max}]")]
    TimestampOutOfRange {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the record (in the decompressed records for a compressed batch).
        position: u64,
        /// The record's index in the batch.
        index: i32,
        /// Its timestamp.
        timestamp: i64,
        /// The earliest allowed.
        min: i64,
        /// The latest allowed.
        max: i64,
    },
    /// Client appends: a client may not write control batches.
    #[error(
        "batch at offset {offset}, position {position}: clients may not append control batches"
    )]
    ControlBatchFromClient {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the `attributes` field.
        position: u64,
    },
    /// Client appends: a batch with a producer id must carry a sequence.
    #[error("batch at offset {offset}, position {position}: producer {producer_id} without a baseSequence ({base_sequence})")]
    MissingSequence {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the `baseSequence` field.
        position: u64,
        /// Stored producer id.
        producer_id: i64,
        /// Stored base sequence.
        base_sequence: i32,
    },
    /// Records of a compressed batch cannot be walked without decompressing, which this layer
    /// never does.
    #[error("batch at offset {offset}, position {position} is compressed (codec {codec}); its records are opaque here")]
    CompressedRecords {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the `attributes` field.
        position: u64,
        /// Codec bits.
        codec: u8,
    },
    /// A compressed batch's records region does not decompress (corrupt, or past the limit).
    #[error("batch at offset {offset}, position {position}: {source}")]
    Decompression {
        /// Stored `baseOffset`.
        offset: Offset,
        /// Position of the records region.
        position: u64,
        /// The codec's failure.
        source: super::CodecError,
    },
}

impl FormatError {
    /// Whether this is only a truncated buffer (a torn tail in a log), as opposed to bytes that
    /// can never become valid by reading more.
    #[must_use]
    pub fn is_incomplete(&self) -> bool {
        matches!(self, FormatError::Incomplete { .. })
    }
}
