//! Control records: transaction markers and the mirroring barrier.
//!
//! A control record's key is `version i16 (0)`, `type i16`. Transaction markers (types 0 ABORT,
//! 1 COMMIT) carry the value `version i16 (0)`, `coordinatorEpoch i32`. The barrier is type
//! [`MIRROR_PID_RESET`] with value `version i16 (0)` and one zero byte (empty tagged fields);
//! readers recognise it by the key type alone and accept any value, because an upstream variant
//! appends a source cluster id.

use super::error::FormatError;
use super::reader::Reader;
use super::record::RecordView;
use super::types::Offset;

/// Control type of an ABORT marker.
pub const ABORT: i16 = 0;
/// Control type of a COMMIT marker.
pub const COMMIT: i16 = 1;
/// Control type of the mirroring barrier. Not yet allocated upstream (KIP-1279): this constant
/// is the only place the number lives.
pub const MIRROR_PID_RESET: i16 = 7;
/// The control key version this engine writes and expects.
pub const CONTROL_KEY_VERSION: i16 = 0;
/// Size of a control key: `version i16`, `type i16`.
pub const CONTROL_KEY_SIZE_BYTES: usize = 4;
/// Size of a marker value: `version i16`, `coordinatorEpoch i32`.
pub const MARKER_VALUE_SIZE_BYTES: usize = 6;
/// The barrier value this engine writes: `version i16 (0)`, empty tagged fields.
pub const BARRIER_VALUE: [u8; 3] = [0, 0, 0];

/// The type of a control record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlType {
    /// ABORT marker.
    Abort,
    /// COMMIT marker.
    Commit,
    /// The mirroring barrier.
    MirrorPidReset,
    /// Any other type (KRaft records 2-6, future types).
    Other(i16),
}

impl ControlType {
    /// The type for a raw number.
    #[must_use]
    pub fn from_raw(raw: i16) -> Self {
        match raw {
            ABORT => ControlType::Abort,
            COMMIT => ControlType::Commit,
            MIRROR_PID_RESET => ControlType::MirrorPidReset,
            other => ControlType::Other(other),
        }
    }

    /// The raw number.
    #[must_use]
    pub fn raw(self) -> i16 {
        match self {
            ControlType::Abort => ABORT,
            ControlType::Commit => COMMIT,
            ControlType::MirrorPidReset => MIRROR_PID_RESET,
            ControlType::Other(other) => other,
        }
    }
}

/// A decoded control key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlRecord {
    /// Key version as stored (readers accept any, as Kafka does for forward compatibility).
    pub version: i16,
    /// The control type.
    pub control_type: ControlType,
}

impl ControlRecord {
    /// Decodes the control key of `record`.
    ///
    /// # Errors
    /// [`FormatError::ControlKeyTooShort`] when the key is null or shorter than 4 bytes.
    pub fn parse(record: &RecordView<'_>, offset: Offset) -> Result<Self, FormatError> {
        let too_short = |length: i32| FormatError::ControlKeyTooShort {
            offset,
            position: record.key_position,
            length,
        };
        let key = record.key.ok_or_else(|| too_short(-1))?;
        let mut r = Reader::new(key);
        let (Some(version), Some(raw)) = (r.i16(), r.i16()) else {
            return Err(too_short(key.len() as i32));
        };
        Ok(ControlRecord {
            version,
            control_type: ControlType::from_raw(raw),
        })
    }
}

/// The coordinator epoch in a transaction marker's value.
///
/// # Errors
/// [`FormatError::MarkerValueTooShort`] when the value is null or shorter than 6 bytes.
pub fn marker_coordinator_epoch(
    record: &RecordView<'_>,
    offset: Offset,
) -> Result<i32, FormatError> {
    let too_short = |length: i32| FormatError::MarkerValueTooShort {
        offset,
        position: record.value_position,
        length,
    };
    let value = record.value.ok_or_else(|| too_short(-1))?;
    let mut r = Reader::new(value);
    let (Some(_version), Some(epoch)) = (r.i16(), r.i32()) else {
        return Err(too_short(value.len() as i32));
    };
    Ok(epoch)
}

/// The 4-byte control key for `control_type`.
#[must_use]
pub fn control_key(control_type: ControlType) -> [u8; CONTROL_KEY_SIZE_BYTES] {
    let mut key = [0u8; CONTROL_KEY_SIZE_BYTES];
    let (version, kind) = key.split_at_mut(2);
    version.copy_from_slice(&CONTROL_KEY_VERSION.to_be_bytes());
    kind.copy_from_slice(&control_type.raw().to_be_bytes());
    key
}

/// The 6-byte marker value for `coordinator_epoch`.
#[must_use]
pub fn marker_value(coordinator_epoch: i32) -> [u8; MARKER_VALUE_SIZE_BYTES] {
    let mut value = [0u8; MARKER_VALUE_SIZE_BYTES];
    let (version, epoch) = value.split_at_mut(2);
    version.copy_from_slice(&0i16.to_be_bytes());
    epoch.copy_from_slice(&coordinator_epoch.to_be_bytes());
    value
}
