//! Records inside an uncompressed batch: a zero-copy iterator and full structural validation.
//!
//! A record: `length varint`, `attributes i8`, `timestampDelta varlong`, `offsetDelta varint`,
//! `keyLength varint` (−1 null), key, `valueLength varint` (−1 null), value, `headerCount varint`,
//! then per header `keyLength varint` (≥ 0), key, `valueLength varint` (−1 null), value.
//!
//! Each record is parsed inside the slice its `length` declares, so a bad length can never make
//! a field read into the next record; when the fields do not use exactly `length` bytes the record
//! is rejected.

use super::error::{Field, FormatError};
use super::reader::{Reader, VarintError};
use super::types::Offset;

/// Smallest possible encoded header: key length 0 (1 byte) and value length −1 (1 byte).
const HEADER_SIZE_BYTES_MIN: usize = 2;

/// One record of an uncompressed batch, borrowed from the batch bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// Absolute position of the record's `length` varint.
    pub position: u64,
    /// Record `attributes` (unused by Kafka today).
    pub attributes: i8,
    /// `timestampDelta` from the batch `baseTimestamp`.
    pub timestamp_delta: i64,
    /// `offsetDelta` from the batch `baseOffset`.
    pub offset_delta: i32,
    /// The key, `None` when null.
    pub key: Option<&'a [u8]>,
    /// Absolute position of the key bytes.
    pub key_position: u64,
    /// The value, `None` when null.
    pub value: Option<&'a [u8]>,
    /// Absolute position of the value bytes.
    pub value_position: u64,
    header_count: i32,
    headers: &'a [u8],
}

impl<'a> RecordView<'a> {
    /// The record's headers, in order.
    #[must_use]
    pub fn headers(&self) -> HeaderIter<'a> {
        HeaderIter {
            reader: Reader::new(self.headers),
            left: self.header_count,
        }
    }

    /// Number of headers.
    #[must_use]
    pub fn header_count(&self) -> i32 {
        self.header_count
    }
}

/// One record header: a non-null key and a nullable value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// Header key (UTF-8 by convention; not checked).
    pub key: &'a [u8],
    /// Header value, `None` when null.
    pub value: Option<&'a [u8]>,
}

/// Iterator over headers that [`RecordIter`] already validated.
#[derive(Debug, Clone)]
pub struct HeaderIter<'a> {
    reader: Reader<'a>,
    left: i32,
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = Header<'a>;

    fn next(&mut self) -> Option<Header<'a>> {
        if self.left <= 0 {
            return None;
        }
        self.left -= 1;
        // The bytes were validated when the record was parsed; a failure here ends iteration.
        let key_len = usize::try_from(self.reader.varint().ok()?).ok()?;
        let key = self.reader.take(key_len)?;
        let value_len = self.reader.varint().ok()?;
        let value = match usize::try_from(value_len) {
            Ok(n) => Some(self.reader.take(n)?),
            Err(_) => None,
        };
        Some(Header { key, value })
    }
}

/// The records of a batch, decompressed ([`super::BatchView::decompressed_records`]): they own
/// their bytes, and [`DecompressedRecords::iter`] walks them as an uncompressed batch's.
/// Positions of the records it yields count from the start of the decompressed bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecompressedRecords {
    bytes: Vec<u8>,
    base_offset: Offset,
    declared: i32,
}

impl DecompressedRecords {
    pub(super) fn new(bytes: Vec<u8>, base_offset: Offset, declared: i32) -> Self {
        DecompressedRecords {
            bytes,
            base_offset,
            declared,
        }
    }

    /// The records, as an uncompressed batch's.
    #[must_use]
    pub fn iter(&self) -> RecordIter<'_> {
        RecordIter::new(&self.bytes, self.base_offset, self.declared, 0)
    }

    /// The decompressed bytes (records back to back).
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Iterator over the records of an uncompressed batch. Yields at most `recordsCount` records;
/// the first malformed record ends it with an error.
#[derive(Debug, Clone)]
pub struct RecordIter<'a> {
    reader: Reader<'a>,
    base_offset: Offset,
    declared: i32,
    parsed: i32,
    base_position: u64,
    failed: bool,
}

impl<'a> RecordIter<'a> {
    /// Records in `region` (the bytes after the batch header), `declared` of them.
    #[must_use]
    pub fn new(region: &'a [u8], base_offset: Offset, declared: i32, base_position: u64) -> Self {
        RecordIter {
            reader: Reader::new(region),
            base_offset,
            declared,
            parsed: 0,
            base_position,
            failed: false,
        }
    }

    fn parse_next(&mut self) -> Result<RecordView<'a>, FormatError> {
        let offset = self.base_offset;
        let start = self.base_position + self.reader.index() as u64;
        if self.reader.remaining() == 0 {
            return Err(FormatError::RecordCountMismatch {
                offset,
                position: start,
                declared: self.declared,
                found: self.parsed,
                trailing_bytes: 0,
            });
        }
        let length = self
            .reader
            .varint()
            .map_err(|e| varint_error(e, offset, start, Field::RecordLength))?;
        let Ok(length_bytes) = usize::try_from(length) else {
            return Err(FormatError::InvalidLength {
                offset,
                position: start,
                field: Field::RecordLength,
                value: i64::from(length),
            });
        };
        let body_position = self.base_position + self.reader.index() as u64;
        let available = self.reader.remaining();
        let Some(body) = self.reader.take(length_bytes) else {
            return Err(FormatError::RecordSizeMismatch {
                offset,
                position: start,
                index: self.parsed,
                declared: i64::from(length),
                used: available as u64,
            });
        };
        let mut body = RecordBody {
            reader: Reader::new(body),
            offset,
            base_position: body_position,
        };
        let record = body.parse(start)?;
        if body.reader.remaining() != 0 {
            return Err(FormatError::RecordSizeMismatch {
                offset,
                position: start,
                index: self.parsed,
                declared: i64::from(length),
                used: body.reader.index() as u64,
            });
        }
        Ok(record)
    }

    /// Bytes not consumed by the records parsed so far.
    #[must_use]
    pub fn remaining_bytes(&self) -> usize {
        self.reader.remaining()
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RecordView<'a>, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.parsed >= self.declared {
            return None;
        }
        let result = self.parse_next();
        match result {
            Ok(_) => self.parsed += 1,
            Err(_) => self.failed = true,
        }
        Some(result)
    }
}

/// Walks every record and checks that exactly `recordsCount` records fill the region.
pub(crate) fn validate_records(mut records: RecordIter<'_>) -> Result<(), FormatError> {
    for record in records.by_ref() {
        record?;
    }
    let trailing = records.remaining_bytes();
    if trailing != 0 {
        return Err(FormatError::RecordCountMismatch {
            offset: records.base_offset,
            position: records.base_position + records.reader.index() as u64,
            declared: records.declared,
            found: records.parsed,
            trailing_bytes: trailing as u64,
        });
    }
    Ok(())
}

struct RecordBody<'a> {
    reader: Reader<'a>,
    offset: Offset,
    base_position: u64,
}

impl<'a> RecordBody<'a> {
    fn here(&self) -> u64 {
        self.base_position + self.reader.index() as u64
    }

    fn overrun(&self, field: Field) -> FormatError {
        FormatError::FieldOverrun {
            offset: self.offset,
            position: self.here(),
            field,
        }
    }

    fn varint(&mut self, field: Field) -> Result<i32, FormatError> {
        let position = self.here();
        self.reader
            .varint()
            .map_err(|e| varint_error(e, self.offset, position, field))
    }

    /// A length-prefixed nullable byte string; lengths below −1 are invalid.
    fn nullable_bytes(
        &mut self,
        length_field: Field,
        bytes_field: Field,
    ) -> Result<(Option<&'a [u8]>, u64), FormatError> {
        let length_position = self.here();
        let length = self.varint(length_field)?;
        let position = self.here();
        match length {
            -1 => Ok((None, position)),
            n if n < -1 => Err(FormatError::InvalidLength {
                offset: self.offset,
                position: length_position,
                field: length_field,
                value: i64::from(n),
            }),
            n => {
                let bytes = self
                    .reader
                    .take(n as usize)
                    .ok_or_else(|| self.overrun(bytes_field))?;
                Ok((Some(bytes), position))
            }
        }
    }

    fn parse(&mut self, record_position: u64) -> Result<RecordView<'a>, FormatError> {
        let attributes = self
            .reader
            .i8()
            .ok_or_else(|| self.overrun(Field::RecordAttributes))?;
        let position = self.here();
        let timestamp_delta = self
            .reader
            .varlong()
            .map_err(|e| varint_error(e, self.offset, position, Field::TimestampDelta))?;
        let offset_delta = self.varint(Field::OffsetDelta)?;
        let (key, key_position) = self.nullable_bytes(Field::KeyLength, Field::Key)?;
        let (value, value_position) = self.nullable_bytes(Field::ValueLength, Field::Value)?;
        let count_position = self.here();
        let header_count = self.varint(Field::HeaderCount)?;
        if header_count < 0 {
            return Err(FormatError::NegativeHeaderCount {
                offset: self.offset,
                position: count_position,
                count: header_count,
            });
        }
        let remaining = self.reader.remaining();
        if header_count as usize > remaining / HEADER_SIZE_BYTES_MIN {
            return Err(FormatError::HeaderCountTooLarge {
                offset: self.offset,
                position: count_position,
                count: header_count,
                remaining_bytes: remaining as u64,
            });
        }
        let headers_start = self.reader.index();
        for _ in 0..header_count {
            let key_length_position = self.here();
            let key_length = self.varint(Field::HeaderKeyLength)?;
            // Kafka rejects null header keys: a key length must be ≥ 0.
            let Ok(key_length) = usize::try_from(key_length) else {
                return Err(FormatError::InvalidLength {
                    offset: self.offset,
                    position: key_length_position,
                    field: Field::HeaderKeyLength,
                    value: i64::from(key_length),
                });
            };
            self.reader
                .take(key_length)
                .ok_or_else(|| self.overrun(Field::HeaderKey))?;
            self.nullable_bytes(Field::HeaderValueLength, Field::HeaderValue)?;
        }
        let headers = self
            .reader
            .clone_range(headers_start)
            .ok_or_else(|| self.overrun(Field::HeaderCount))?;
        Ok(RecordView {
            position: record_position,
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            key_position,
            value,
            value_position,
            header_count,
            headers,
        })
    }
}

fn varint_error(error: VarintError, offset: Offset, position: u64, field: Field) -> FormatError {
    match error {
        VarintError::TooLong => FormatError::VarintTooLong {
            offset,
            position,
            field,
        },
        VarintError::Truncated => FormatError::FieldOverrun {
            offset,
            position,
            field,
        },
    }
}
