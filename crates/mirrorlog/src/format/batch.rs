//! Batch headers, the per-batch fast path, and iteration over a buffer of batches.
//!
//! Layout of a v2 batch header (big-endian; positions from the batch start):
//!
//! ```text
//!  0 baseOffset i64          8 length i32             12 partitionLeaderEpoch i32
//! 16 magic i8               17 crc u32 (covers [21, end))
//! 21 attributes i16         23 lastOffsetDelta i32   27 baseTimestamp i64
//! 35 maxTimestamp i64       43 producerId i64        51 producerEpoch i16
//! 53 baseSequence i32       57 recordsCount i32      61 records…
//! ```
//!
//! [`inspect`] is the one function the append and recovery paths call per batch: it checks the
//! size, magic and CRC, decodes the header and classifies the batch (data, marker, barrier),
//! touching the records only for control batches (one short record). Its cost is the CRC.

use super::control::{self, ControlRecord, ControlType};
use super::crc::crc32c;
use super::error::FormatError;
use super::reader::Reader;
use super::record::{validate_records, RecordIter};
use super::types::{Offset, ProducerFields};

/// Position of `baseOffset`.
pub const BASE_OFFSET_POS: usize = 0;
/// Position of `length`.
pub const LENGTH_POS: usize = 8;
/// Position of `partitionLeaderEpoch`.
pub const PARTITION_LEADER_EPOCH_POS: usize = 12;
/// Position of `magic`.
pub const MAGIC_POS: usize = 16;
/// Position of `crc`.
pub const CRC_POS: usize = 17;
/// Position of `attributes`, the first byte the CRC covers.
pub const ATTRIBUTES_POS: usize = 21;
/// Position of `lastOffsetDelta`.
pub const LAST_OFFSET_DELTA_POS: usize = 23;
/// Position of `producerId`.
pub const PRODUCER_ID_POS: usize = 43;
/// Position of `baseSequence`.
pub const BASE_SEQUENCE_POS: usize = 53;
/// Position of `recordsCount`.
pub const RECORDS_COUNT_POS: usize = 57;
/// Size of the fixed batch header; records start here.
pub const BATCH_HEADER_SIZE_BYTES: usize = 61;
/// `baseOffset` + `length`: the bytes not counted by `length`.
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// Smallest valid `length`: a header with no records.
pub const BATCH_LENGTH_MIN: i32 = 49;
/// The only magic this engine reads or writes.
pub const MAGIC_V2: i8 = 2;

const _: () = assert!(BATCH_HEADER_SIZE_BYTES - LOG_OVERHEAD_BYTES == BATCH_LENGTH_MIN as usize);
const _: () = assert!(CRC_POS + 4 == ATTRIBUTES_POS);
const _: () = assert!(RECORDS_COUNT_POS + 4 == BATCH_HEADER_SIZE_BYTES);

/// Compression codec of a batch (attribute bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Uncompressed.
    None = 0,
    /// gzip.
    Gzip = 1,
    /// Snappy.
    Snappy = 2,
    /// LZ4.
    Lz4 = 3,
    /// Zstandard.
    Zstd = 4,
}

/// What the batch timestamps mean (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// Set by the producer.
    CreateTime,
    /// Set by the broker at append.
    LogAppendTime,
}

/// The batch `attributes` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attributes(pub i16);

impl Attributes {
    const CODEC_MASK: i16 = 0b111;
    const LOG_APPEND_TIME: i16 = 1 << 3;
    const TRANSACTIONAL: i16 = 1 << 4;
    const CONTROL: i16 = 1 << 5;
    const DELETE_HORIZON: i16 = 1 << 6;

    /// Attributes built from their parts.
    #[must_use]
    pub fn new(
        compression: Compression,
        timestamp_type: TimestampType,
        transactional: bool,
        control: bool,
    ) -> Self {
        let mut bits = compression as i16;
        if timestamp_type == TimestampType::LogAppendTime {
            bits |= Self::LOG_APPEND_TIME;
        }
        if transactional {
            bits |= Self::TRANSACTIONAL;
        }
        if control {
            bits |= Self::CONTROL;
        }
        Attributes(bits)
    }

    /// The same attributes with the delete-horizon bit set (KIP-534: compaction stores the
    /// horizon in `baseTimestamp`).
    #[must_use]
    pub fn with_delete_horizon(self) -> Self {
        Attributes(self.0 | Self::DELETE_HORIZON)
    }

    /// The raw codec bits (0-7; 5-7 are invalid).
    #[must_use]
    pub fn codec_bits(self) -> u8 {
        (self.0 & Self::CODEC_MASK) as u8
    }

    /// The codec, or `None` for the invalid values 5-7.
    #[must_use]
    pub fn compression(self) -> Option<Compression> {
        match self.codec_bits() {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// The timestamp type.
    #[must_use]
    pub fn timestamp_type(self) -> TimestampType {
        if self.0 & Self::LOG_APPEND_TIME != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Transactional bit.
    #[must_use]
    pub fn is_transactional(self) -> bool {
        self.0 & Self::TRANSACTIONAL != 0
    }

    /// Control bit.
    #[must_use]
    pub fn is_control(self) -> bool {
        self.0 & Self::CONTROL != 0
    }

    /// Delete-horizon bit (set by compaction).
    #[must_use]
    pub fn has_delete_horizon(self) -> bool {
        self.0 & Self::DELETE_HORIZON != 0
    }
}

/// The decoded fixed header of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// `baseOffset`.
    pub base_offset: Offset,
    /// `length`: bytes after this field.
    pub length: i32,
    /// `partitionLeaderEpoch`.
    pub partition_leader_epoch: i32,
    /// `magic`.
    pub magic: i8,
    /// `crc` as stored.
    pub crc: u32,
    /// `attributes`.
    pub attributes: Attributes,
    /// `lastOffsetDelta`.
    pub last_offset_delta: i32,
    /// `baseTimestamp`.
    pub base_timestamp: i64,
    /// `maxTimestamp`.
    pub max_timestamp: i64,
    /// `producerId`, `producerEpoch`, `baseSequence`.
    pub producer: ProducerFields,
    /// `recordsCount`.
    pub records_count: i32,
}

impl BatchHeader {
    /// Decodes the 61-byte header. Performs no validation.
    #[must_use]
    pub fn decode(bytes: &[u8; BATCH_HEADER_SIZE_BYTES]) -> Self {
        let mut r = Reader::new(bytes);
        // Reads from a 61-byte array at the positions the layout above gives cannot fail;
        // `unwrap_or_default` keeps this free of panics without a branch that matters.
        let base_offset = Offset(r.i64().unwrap_or_default());
        let length = r.i32().unwrap_or_default();
        let partition_leader_epoch = r.i32().unwrap_or_default();
        let magic = r.i8().unwrap_or_default();
        let crc = r.u32().unwrap_or_default();
        let attributes = Attributes(r.i16().unwrap_or_default());
        let last_offset_delta = r.i32().unwrap_or_default();
        let base_timestamp = r.i64().unwrap_or_default();
        let max_timestamp = r.i64().unwrap_or_default();
        let producer_id = r.i64().unwrap_or_default();
        let producer_epoch = r.i16().unwrap_or_default();
        let base_sequence = r.i32().unwrap_or_default();
        let records_count = r.i32().unwrap_or_default();
        debug_assert_eq!(r.index(), BATCH_HEADER_SIZE_BYTES);
        BatchHeader {
            base_offset,
            length,
            partition_leader_epoch,
            magic,
            crc,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer: ProducerFields {
                producer_id,
                producer_epoch,
                base_sequence,
            },
            records_count,
        }
    }

    /// Total bytes of the batch including `baseOffset` and `length` (valid once `length` was
    /// checked to be at least [`BATCH_LENGTH_MIN`]).
    #[must_use]
    pub fn size_bytes(&self) -> usize {
        LOG_OVERHEAD_BYTES + self.length.max(0) as usize
    }

    /// Offset of the batch's last record: `baseOffset + lastOffsetDelta`.
    #[must_use]
    pub fn last_offset(&self) -> Offset {
        Offset(
            self.base_offset
                .0
                .saturating_add(i64::from(self.last_offset_delta)),
        )
    }
}

/// What kind of batch this is, as far as producer state and mirroring care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    /// A data batch (records for consumers).
    Data,
    /// A COMMIT or ABORT transaction marker.
    TxnMarker {
        /// COMMIT or ABORT.
        commit: bool,
        /// The coordinator epoch stored in the marker value.
        coordinator_epoch: i32,
    },
    /// The mirroring barrier (control type [`control::MIRROR_PID_RESET`]).
    Barrier,
    /// Any other control record (KRaft types, future types): stored, otherwise ignored.
    OtherControl {
        /// The control type number.
        control_type: i16,
    },
    /// A control batch with no records (left by compaction): a no-op.
    EmptyControl,
}

/// A batch whose size, magic and CRC were checked: a zero-copy view over its bytes.
#[derive(Debug, Clone, Copy)]
pub struct BatchView<'a> {
    header: BatchHeader,
    kind: BatchKind,
    bytes: &'a [u8],
    position: u64,
}

impl<'a> BatchView<'a> {
    /// The decoded header.
    #[must_use]
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// The batch classification.
    #[must_use]
    pub fn kind(&self) -> BatchKind {
        self.kind
    }

    /// The batch's bytes, exactly `header().size_bytes()` long.
    #[must_use]
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Absolute position of the batch start.
    #[must_use]
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The records region (compressed as a whole when the codec is not `None`).
    #[must_use]
    pub fn records_bytes(&self) -> &'a [u8] {
        self.bytes
            .get(BATCH_HEADER_SIZE_BYTES..)
            .unwrap_or_default()
    }

    /// Iterator over the records of an uncompressed batch.
    ///
    /// # Errors
    /// [`FormatError::CompressedRecords`] for a compressed batch.
    pub fn records(&self) -> Result<RecordIter<'a>, FormatError> {
        let codec = self.header.attributes.codec_bits();
        if codec != Compression::None as u8 {
            return Err(FormatError::CompressedRecords {
                offset: self.header.base_offset,
                position: self.position + ATTRIBUTES_POS as u64,
                codec,
            });
        }
        Ok(RecordIter::new(
            self.records_bytes(),
            self.header.base_offset,
            self.header.records_count,
            self.position + BATCH_HEADER_SIZE_BYTES as u64,
        ))
    }

    /// The records of the batch, decompressed to at most `limit_bytes` (an uncompressed batch's
    /// copied). Off the append path only: see [`super::compression`].
    ///
    /// # Errors
    /// [`FormatError::UnknownCompression`] for codec bits 5-7, [`FormatError::Decompression`]
    /// for a payload that does not decompress or decompresses past `limit_bytes`.
    pub fn decompressed_records(
        &self,
        limit_bytes: usize,
    ) -> Result<super::DecompressedRecords, FormatError> {
        let h = &self.header;
        let codec = h
            .attributes
            .compression()
            .ok_or(FormatError::UnknownCompression {
                offset: h.base_offset,
                position: self.position + ATTRIBUTES_POS as u64,
                codec: h.attributes.codec_bits(),
            })?;
        let bytes = super::compression::decompress(codec, self.records_bytes(), limit_bytes)
            .map_err(|source| FormatError::Decompression {
                offset: h.base_offset,
                position: self.position + BATCH_HEADER_SIZE_BYTES as u64,
                source,
            })?;
        Ok(super::DecompressedRecords::new(
            bytes,
            h.base_offset,
            h.records_count,
        ))
    }

    /// Full structural validation of the records of an uncompressed batch: count, sizes,
    /// varints, header counts. Compressed batches are opaque and pass unchanged.
    ///
    /// # Errors
    /// The first malformed field found.
    pub fn validate_records(&self) -> Result<(), FormatError> {
        if self.header.attributes.compression() != Some(Compression::None) {
            return Ok(());
        }
        validate_records(self.records()?)
    }

    /// The extra rules for batches a client sends ([`BatchView::validate_client_with`] with
    /// [`ClientRules::default`]: compressed records decompressed up to
    /// [`CLIENT_DECOMPRESSED_BYTES_MAX_DEFAULT`], any timestamp).
    ///
    /// # Errors
    /// The first rule broken.
    pub fn validate_client(&self) -> Result<(), FormatError> {
        self.validate_client_with(&ClientRules::default())
    }

    /// The rules for batches a client sends, as Kafka's `LogValidator` applies them
    /// (docs/design.md, "Record format"): no control batches; a producer id implies a
    /// sequence; at least one record, and `lastOffsetDelta` equal to `recordsCount − 1`; the
    /// records, decompressed when the batch is compressed (within `rules`' bound), exactly
    /// `recordsCount` of them, well formed, with offset deltas `0, 1, 2, …`; and each record's
    /// timestamp (`baseTimestamp` plus its delta, unless −1) within `rules.timestamps`.
    ///
    /// Kafka rewrites a compressed batch whose inner offsets are not `0, 1, 2, …`; this engine
    /// stores batches as they are written, so it refuses one.
    ///
    /// # Errors
    /// The first rule broken.
    pub fn validate_client_with(&self, rules: &ClientRules) -> Result<(), FormatError> {
        let h = &self.header;
        if h.attributes.is_control() {
            return Err(FormatError::ControlBatchFromClient {
                offset: h.base_offset,
                position: self.position + ATTRIBUTES_POS as u64,
            });
        }
        if h.records_count < 1 {
            return Err(FormatError::NoRecords {
                offset: h.base_offset,
                position: self.position + RECORDS_COUNT_POS as u64,
                count: h.records_count,
            });
        }
        if i64::from(h.last_offset_delta) != i64::from(h.records_count) - 1 {
            return Err(FormatError::LastOffsetDeltaMismatch {
                offset: h.base_offset,
                position: self.position + LAST_OFFSET_DELTA_POS as u64,
                last_offset_delta: h.last_offset_delta,
                count: h.records_count,
            });
        }
        if h.producer.has_producer() && h.producer.base_sequence < 0 {
            return Err(FormatError::MissingSequence {
                offset: h.base_offset,
                position: self.position + BASE_SEQUENCE_POS as u64,
                producer_id: h.producer.producer_id,
                base_sequence: h.producer.base_sequence,
            });
        }
        if h.attributes.compression() == Some(Compression::None) {
            self.check_client_records(self.records()?, rules)
        } else {
            let decompressed = self.decompressed_records(rules.decompressed_bytes_max)?;
            self.check_client_records(decompressed.iter(), rules)
        }
    }

    /// Walks a client batch's records: structure, count, offset deltas, timestamps.
    fn check_client_records(
        &self,
        mut records: RecordIter<'_>,
        rules: &ClientRules,
    ) -> Result<(), FormatError> {
        let h = &self.header;
        for (index, record) in records.by_ref().enumerate() {
            let record = record?;
            let index = i32::try_from(index).unwrap_or(i32::MAX);
            if record.offset_delta != index {
                return Err(FormatError::OffsetDeltaMismatch {
                    offset: h.base_offset,
                    position: record.position,
                    index,
                    offset_delta: record.offset_delta,
                });
            }
            if let Some((min, max)) = rules.timestamps {
                let timestamp = h.base_timestamp.saturating_add(record.timestamp_delta);
                if timestamp != NO_TIMESTAMP && !(min..=max).contains(&timestamp) {
                    return Err(FormatError::TimestampOutOfRange {
                        offset: h.base_offset,
                        position: record.position,
                        index,
                        timestamp,
                        min,
                        max,
                    });
                }
            }
        }
        let trailing = records.remaining_bytes();
        if trailing != 0 {
            return Err(FormatError::RecordCountMismatch {
                offset: h.base_offset,
                position: self.position + BATCH_HEADER_SIZE_BYTES as u64,
                declared: h.records_count,
                found: h.records_count,
                trailing_bytes: trailing as u64,
            });
        }
        Ok(())
    }
}

/// A record's timestamp when it has none (Kafka's `RecordBatch.NO_TIMESTAMP`).
pub const NO_TIMESTAMP: i64 = -1;

/// How much a client batch's compressed records may decompress to by default:
/// 64 times Kafka's default `max.message.bytes` (a log passes its own bound).
pub const CLIENT_DECOMPRESSED_BYTES_MAX_DEFAULT: usize = 64 * 1_048_588;

/// What [`BatchView::validate_client_with`] checks beyond the fixed rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientRules {
    /// The most a compressed batch's records may decompress to; past it the batch is refused.
    pub decompressed_bytes_max: usize,
    /// The range (inclusive, milliseconds) record timestamps must lie in, when bounded
    /// (Kafka's `message.timestamp.before.max.ms` and `after.max.ms` around now).
    pub timestamps: Option<(i64, i64)>,
}

impl Default for ClientRules {
    fn default() -> Self {
        ClientRules {
            decompressed_bytes_max: CLIENT_DECOMPRESSED_BYTES_MAX_DEFAULT,
            timestamps: None,
        }
    }
}

/// The per-batch fast path: `buf` starts with a batch (and may hold more after it); checks the
/// length, magic and CRC, decodes the header, and classifies control batches.
///
/// `position` is the absolute position of `buf[0]`, used only in errors.
///
/// # Errors
/// [`FormatError::Incomplete`] when `buf` ends before the batch; any other variant when the
/// bytes can never be a valid batch.
pub fn inspect(buf: &[u8], position: u64) -> Result<BatchView<'_>, FormatError> {
    let Some(header_bytes) = buf.first_chunk::<BATCH_HEADER_SIZE_BYTES>() else {
        return Err(incomplete_header(buf, position));
    };
    let header = BatchHeader::decode(header_bytes);
    let offset = header.base_offset;
    if header.length < BATCH_LENGTH_MIN {
        return Err(FormatError::LengthTooSmall {
            offset,
            position: position + LENGTH_POS as u64,
            length: header.length,
        });
    }
    if header.magic != MAGIC_V2 {
        return Err(FormatError::InvalidMagic {
            offset,
            position: position + MAGIC_POS as u64,
            magic: header.magic,
        });
    }
    let size = header.size_bytes();
    let Some(bytes) = buf.get(..size) else {
        return Err(FormatError::Incomplete {
            position,
            needed_bytes: size as u64,
            available_bytes: buf.len() as u64,
        });
    };
    let computed = crc32c(bytes.get(ATTRIBUTES_POS..).unwrap_or_default());
    if computed != header.crc {
        return Err(FormatError::CrcMismatch {
            offset,
            position: position + CRC_POS as u64,
            stored: header.crc,
            computed,
        });
    }
    check_header_fields(&header, position)?;
    let kind = classify(&header, bytes, position)?;
    Ok(BatchView {
        header,
        kind,
        bytes,
        position,
    })
}

/// Header checks that need no record bytes (after the CRC, so they are not reported for bytes
/// that are simply damaged).
fn check_header_fields(header: &BatchHeader, position: u64) -> Result<(), FormatError> {
    let offset = header.base_offset;
    if header.attributes.compression().is_none() {
        return Err(FormatError::UnknownCompression {
            offset,
            position: position + ATTRIBUTES_POS as u64,
            codec: header.attributes.codec_bits(),
        });
    }
    if header.records_count < 0 {
        return Err(FormatError::NegativeRecordCount {
            offset,
            position: position + RECORDS_COUNT_POS as u64,
            count: header.records_count,
        });
    }
    if header.last_offset_delta < 0 {
        return Err(FormatError::NegativeLastOffsetDelta {
            offset,
            position: position + LAST_OFFSET_DELTA_POS as u64,
            last_offset_delta: header.last_offset_delta,
        });
    }
    Ok(())
}

fn classify(header: &BatchHeader, bytes: &[u8], position: u64) -> Result<BatchKind, FormatError> {
    if !header.attributes.is_control() {
        return Ok(BatchKind::Data);
    }
    let codec = header.attributes.codec_bits();
    if codec != Compression::None as u8 {
        return Err(FormatError::CompressedControlBatch {
            offset: header.base_offset,
            position: position + ATTRIBUTES_POS as u64,
            codec,
        });
    }
    let mut records = RecordIter::new(
        bytes.get(BATCH_HEADER_SIZE_BYTES..).unwrap_or_default(),
        header.base_offset,
        header.records_count,
        position + BATCH_HEADER_SIZE_BYTES as u64,
    );
    // Kafka reads the type of a control batch from its first record.
    let Some(first) = records.next() else {
        return Ok(BatchKind::EmptyControl);
    };
    let record = first?;
    let control = ControlRecord::parse(&record, header.base_offset)?;
    Ok(match control.control_type {
        ControlType::Commit | ControlType::Abort => BatchKind::TxnMarker {
            commit: control.control_type == ControlType::Commit,
            coordinator_epoch: control::marker_coordinator_epoch(&record, header.base_offset)?,
        },
        ControlType::MirrorPidReset => BatchKind::Barrier,
        ControlType::Other(control_type) => BatchKind::OtherControl { control_type },
    })
}

fn incomplete_header(buf: &[u8], position: u64) -> FormatError {
    FormatError::Incomplete {
        position,
        needed_bytes: BATCH_HEADER_SIZE_BYTES as u64,
        available_bytes: buf.len() as u64,
    }
}

/// How a scan over a buffer of batches ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanEnd {
    /// The buffer held whole batches and nothing else.
    Clean,
    /// From `position` on, the buffer is zeroes (preallocated, never written): at least the bytes
    /// through `magic`, and the whole header where the buffer holds one.
    ZeroFilled {
        /// Where the zeroes start.
        position: u64,
    },
    /// The buffer ends inside a batch that starts at `position` (a torn or unfinished tail).
    Incomplete {
        /// Where the incomplete batch starts.
        position: u64,
        /// Bytes the batch needs.
        needed_bytes: u64,
        /// Bytes present.
        available_bytes: u64,
    },
    /// Bytes that can never be valid: the scan stopped at the error.
    Corrupt(FormatError),
}

/// Iterates the batches of a buffer, stopping at the first batch that is not whole and valid.
/// After the iterator returns `None`, [`BatchIter::end`] says why.
#[derive(Debug, Clone)]
pub struct BatchIter<'a> {
    buf: &'a [u8],
    index: usize,
    base_position: u64,
    end: Option<ScanEnd>,
}

impl<'a> BatchIter<'a> {
    /// Iterator over `buf`, whose first byte is at absolute `base_position`.
    #[must_use]
    pub fn new(buf: &'a [u8], base_position: u64) -> Self {
        BatchIter {
            buf,
            index: 0,
            base_position,
            end: None,
        }
    }

    /// How the scan ended; `None` while it is still going.
    #[must_use]
    pub fn end(&self) -> Option<&ScanEnd> {
        self.end.as_ref()
    }

    /// Absolute position just past the last batch returned.
    #[must_use]
    pub fn valid_end_position(&self) -> u64 {
        self.base_position + self.index as u64
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = BatchView<'a>;

    fn next(&mut self) -> Option<BatchView<'a>> {
        if self.end.is_some() {
            return None;
        }
        let rest = self.buf.get(self.index..).unwrap_or_default();
        let position = self.valid_end_position();
        if rest.is_empty() {
            self.end = Some(ScanEnd::Clean);
            return None;
        }
        // Zeroes through `magic` can never start a batch (magic must be 2), so they mark
        // preallocated space. Fewer zero bytes than that may be the start of a batch whose
        // `baseOffset` happens to begin with zeroes: that is an incomplete tail.
        let header_len = rest.len().min(BATCH_HEADER_SIZE_BYTES);
        if header_len > MAGIC_POS
            && rest
                .get(..header_len)
                .is_some_and(|h| h.iter().all(|&b| b == 0))
        {
            self.end = Some(ScanEnd::ZeroFilled { position });
            return None;
        }
        match inspect(rest, position) {
            Ok(view) => {
                self.index += view.bytes().len();
                Some(view)
            }
            Err(FormatError::Incomplete {
                position,
                needed_bytes,
                available_bytes,
            }) => {
                self.end = Some(ScanEnd::Incomplete {
                    position,
                    needed_bytes,
                    available_bytes,
                });
                None
            }
            Err(error) => {
                self.end = Some(ScanEnd::Corrupt(error));
                None
            }
        }
    }
}

/// Overwrites `baseOffset` in place. The CRC does not cover it, so the batch stays valid.
///
/// # Errors
/// [`FormatError::Incomplete`] when `batch` is shorter than a header.
pub fn stamp_base_offset(batch: &mut [u8], offset: Offset) -> Result<(), FormatError> {
    stamp(batch, BASE_OFFSET_POS, &offset.0.to_be_bytes())
}

/// Overwrites `partitionLeaderEpoch` in place. The CRC does not cover it.
///
/// # Errors
/// [`FormatError::Incomplete`] when `batch` is shorter than a header.
pub fn stamp_partition_leader_epoch(batch: &mut [u8], epoch: i32) -> Result<(), FormatError> {
    stamp(batch, PARTITION_LEADER_EPOCH_POS, &epoch.to_be_bytes())
}

fn stamp(batch: &mut [u8], at: usize, value: &[u8]) -> Result<(), FormatError> {
    if batch.len() < BATCH_HEADER_SIZE_BYTES {
        return Err(incomplete_header(batch, 0));
    }
    match batch.get_mut(at..at + value.len()) {
        Some(field) => {
            field.copy_from_slice(value);
            Ok(())
        }
        None => Err(incomplete_header(batch, 0)),
    }
}
