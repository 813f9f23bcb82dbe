//! The records of `__consumer_offsets`, byte for byte as Kafka's group coordinator writes them
//! (`group-coordinator/src/main/resources/common/message/`): a key starts with its schema
//! version (`i16`), then the fields in Kafka's classic (non-flexible) encoding; so does a value.
//!
//! - Offset commit: key version 1 (`group`, `topic`, `partition`); value version 3 (`offset`,
//!   `leaderEpoch`, `metadata`, `commitTimestamp`), the version Kafka writes. Versions 0–3 of
//!   the value are read (version 1 carries an `expireTimestamp`, which is ignored as Kafka
//!   ignores it since KIP-211); version 4 is flexible and read too.
//! - Group metadata: key version 2 (`group`). Only its key is decoded here (a group's
//!   membership is not served yet); its records are kept as written.
//!
//! A null value is a tombstone: the key's offset (or group) is deleted. Anything that does not
//! decode is a typed error naming what, never a panic.

/// Kafka's `OffsetCommitKey` version as written.
const OFFSET_KEY_VERSION: i16 = 1;
/// Kafka's `OffsetCommitValue` version as written.
const OFFSET_VALUE_VERSION: i16 = 3;
/// Kafka's `GroupMetadataKey` version.
const GROUP_KEY_VERSION: i16 = 2;

/// A record key of `__consumer_offsets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// A committed offset of a group for a partition.
    Offset {
        /// The group.
        group: String,
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// A group's metadata (membership).
    Group {
        /// The group.
        group: String,
    },
}

/// A committed offset as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    /// The next offset to consume.
    pub offset: i64,
    /// The leader epoch of the last consumed record, or -1.
    pub leader_epoch: i32,
    /// The client's metadata string.
    pub metadata: String,
    /// When it was committed (ms since the epoch).
    pub commit_timestamp: i64,
}

/// A record that does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError(pub String);

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "__consumer_offsets record: {}", self.0)
    }
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    // Kafka's strings are at most i16::MAX bytes; group ids, topic names and metadata are
    // bounded well below (offset.metadata.max.bytes, topic name 249).
    let n = i16::try_from(s.len()).unwrap_or(i16::MAX);
    out.extend_from_slice(&n.to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..usize::try_from(n).unwrap_or(0)]);
}

struct Cursor<'a> {
    bytes: &'a [u8],
    what: &'static str,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if self.bytes.len() < n {
            return Err(RecordError(format!("{} is truncated", self.what)));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16, RecordError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, RecordError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i64(&mut self) -> Result<i64, RecordError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    fn uvarint(&mut self) -> Result<u32, RecordError> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            value |= u32::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordError(format!("{}: a varint too long", self.what)))
    }

    fn string(&mut self) -> Result<String, RecordError> {
        let n = self.i16()?;
        let n = usize::try_from(n)
            .map_err(|_| RecordError(format!("{}: a null or negative string length", self.what)))?;
        self.utf8(n)
    }

    fn compact_string(&mut self) -> Result<String, RecordError> {
        let n = self.uvarint()?;
        let n = usize::try_from(
            n.checked_sub(1)
                .ok_or_else(|| RecordError(format!("{}: a null compact string", self.what)))?,
        )
        .unwrap_or(usize::MAX);
        self.utf8(n)
    }

    fn utf8(&mut self, n: usize) -> Result<String, RecordError> {
        let b = self.take(n)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| RecordError(format!("{}: a string that is not UTF-8", self.what)))
    }

    fn skip_tagged_fields(&mut self) -> Result<(), RecordError> {
        for _ in 0..self.uvarint()? {
            let _tag = self.uvarint()?;
            let size = self.uvarint()?;
            self.take(usize::try_from(size).unwrap_or(usize::MAX))?;
        }
        Ok(())
    }
}

impl Key {
    /// The key's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Key::Offset {
                group,
                topic,
                partition,
            } => {
                out.extend_from_slice(&OFFSET_KEY_VERSION.to_be_bytes());
                put_string(&mut out, group);
                put_string(&mut out, topic);
                out.extend_from_slice(&partition.to_be_bytes());
            }
            Key::Group { group } => {
                out.extend_from_slice(&GROUP_KEY_VERSION.to_be_bytes());
                put_string(&mut out, group);
            }
        }
        out
    }

    /// A key from its bytes: versions 0 and 1 are offset commits, 2 group metadata; any other
    /// (Kafka's newer coordinators' records, KIP-848's) is `Ok(None)`, kept and not used.
    pub fn decode(bytes: &[u8]) -> Result<Option<Self>, RecordError> {
        let mut c = Cursor {
            bytes,
            what: "a key",
        };
        match c.i16()? {
            0 | 1 => Ok(Some(Key::Offset {
                group: c.string()?,
                topic: c.string()?,
                partition: c.i32()?,
            })),
            2 => Ok(Some(Key::Group { group: c.string()? })),
            _ => Ok(None),
        }
    }
}

impl OffsetValue {
    /// The value's bytes (version 3).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + self.metadata.len());
        out.extend_from_slice(&OFFSET_VALUE_VERSION.to_be_bytes());
        out.extend_from_slice(&self.offset.to_be_bytes());
        out.extend_from_slice(&self.leader_epoch.to_be_bytes());
        put_string(&mut out, &self.metadata);
        out.extend_from_slice(&self.commit_timestamp.to_be_bytes());
        out
    }

    /// A value from its bytes, versions 0–4.
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordError> {
        let mut c = Cursor {
            bytes,
            what: "an offset commit value",
        };
        let version = c.i16()?;
        match version {
            0..=3 => {
                let offset = c.i64()?;
                let leader_epoch = if version >= 3 { c.i32()? } else { -1 };
                let metadata = c.string()?;
                let commit_timestamp = c.i64()?;
                if version == 1 {
                    let _expire_timestamp = c.i64()?;
                }
                Ok(OffsetValue {
                    offset,
                    leader_epoch,
                    metadata,
                    commit_timestamp,
                })
            }
            4 => {
                let offset = c.i64()?;
                let leader_epoch = c.i32()?;
                let metadata = c.compact_string()?;
                let commit_timestamp = c.i64()?;
                c.skip_tagged_fields()?;
                Ok(OffsetValue {
                    offset,
                    leader_epoch,
                    metadata,
                    commit_timestamp,
                })
            }
            v => Err(RecordError(format!("offset commit value version {v}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_commit_has_kafkas_bytes_and_round_trips() {
        let key = Key::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
        };
        // version 1, "g", "t", partition 3.
        assert_eq!(key.encode(), [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]);
        assert_eq!(Key::decode(&key.encode()), Ok(Some(key)));
        let value = OffsetValue {
            offset: 42,
            leader_epoch: 7,
            metadata: "m".into(),
            commit_timestamp: 1_700_000_000_000,
        };
        let bytes = value.encode();
        assert_eq!(&bytes[..2], &[0, 3]);
        assert_eq!(&bytes[2..10], &42i64.to_be_bytes());
        assert_eq!(&bytes[10..14], &7i32.to_be_bytes());
        assert_eq!(&bytes[14..17], &[0, 1, b'm']);
        assert_eq!(OffsetValue::decode(&bytes), Ok(value));
    }

    #[test]
    fn older_and_flexible_values_decode_and_garbage_is_an_error() {
        // Version 1: offset, metadata, commit and expire timestamps.
        let mut v1 = vec![0, 1];
        v1.extend_from_slice(&5i64.to_be_bytes());
        v1.extend_from_slice(&[0, 0]);
        v1.extend_from_slice(&9i64.to_be_bytes());
        v1.extend_from_slice(&(-1i64).to_be_bytes());
        let d = OffsetValue::decode(&v1).unwrap();
        assert_eq!((d.offset, d.leader_epoch, d.commit_timestamp), (5, -1, 9));
        // Version 4: compact string, tagged fields.
        let mut v4 = vec![0, 4];
        v4.extend_from_slice(&6i64.to_be_bytes());
        v4.extend_from_slice(&2i32.to_be_bytes());
        v4.extend_from_slice(&[3, b'a', b'b']);
        v4.extend_from_slice(&8i64.to_be_bytes());
        v4.push(0);
        let d = OffsetValue::decode(&v4).unwrap();
        assert_eq!(
            (d.offset, d.leader_epoch, d.metadata.as_str()),
            (6, 2, "ab")
        );
        assert!(OffsetValue::decode(&[0, 3, 1]).is_err());
        assert!(OffsetValue::decode(&[0, 9]).is_err());
        assert!(Key::decode(&[0]).is_err());
        assert!(Key::decode(&[0, 1, 0, 5, b'x']).is_err());
        assert_eq!(Key::decode(&[0, 7, 1, 2]), Ok(None));
        assert_eq!(
            Key::decode(&Key::Group { group: "g".into() }.encode()),
            Ok(Some(Key::Group { group: "g".into() }))
        );
    }
}
