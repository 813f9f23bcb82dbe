//! The records of `__consumer_offsets`, byte for byte as Kafka's group coordinator writes them
//! (`group-coordinator/src/main/resources/common/message/`): a key starts with its schema
//! version (`i16`), then the fields in Kafka's classic (non-flexible) encoding; so does a value.
//!
//! - Offset commit: key version 1 (`group`, `topic`, `partition`); value version 3 (`offset`,
//!   `leaderEpoch`, `metadata`, `commitTimestamp`), the version Kafka writes. Versions 0–3 of
//!   the value are read (version 1 carries an `expireTimestamp`, which is ignored as Kafka
//!   ignores it since KIP-211); version 4 is flexible and read too.
//! - Group metadata: key version 2 (`group`); value version 3 (`protocolType`, `generation`,
//!   `protocol`, `leader`, `currentStateTimestamp`, and per member its id, instance id, client
//!   id and host, timeouts, subscription and assignment), the version Kafka writes since 2.3.
//!   Versions 0–4 are read.
//!
//! A null value is a tombstone: the key's offset (or group) is deleted. Anything that does not
//! decode is a typed error naming what, never a panic.

/// Kafka's `OffsetCommitKey` version as written.
const OFFSET_KEY_VERSION: i16 = 1;
/// Kafka's `OffsetCommitValue` version as written.
const OFFSET_VALUE_VERSION: i16 = 3;
/// Kafka's `GroupMetadataKey` version.
const GROUP_KEY_VERSION: i16 = 2;
/// Kafka's `GroupMetadataValue` version as written.
const GROUP_VALUE_VERSION: i16 = 3;

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

/// A classic group's metadata as stored: written when a generation's assignment is taken, when
/// the group becomes empty, and when a static member is replaced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupValue {
    /// The protocol type (`consumer`), or empty.
    pub protocol_type: String,
    /// The generation.
    pub generation: i32,
    /// The selected protocol (assignor), when the group has members.
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// When the group entered its state (ms since the epoch), or -1.
    pub current_state_timestamp: i64,
    /// The members.
    pub members: Vec<MemberValue>,
}

/// One member of a stored group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberValue {
    /// Its member id.
    pub member_id: String,
    /// Its `group.instance.id` (static membership).
    pub group_instance_id: Option<String>,
    /// The client id it joined with.
    pub client_id: String,
    /// The address it joined from.
    pub client_host: String,
    /// Its rebalance timeout (ms).
    pub rebalance_timeout: i32,
    /// Its session timeout (ms).
    pub session_timeout: i32,
    /// Its metadata for the selected protocol.
    pub subscription: Vec<u8>,
    /// Its assignment.
    pub assignment: Vec<u8>,
}

/// A record that does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError(pub String);

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "__consumer_offsets record: {}", self.0)
    }
}

/// Writes `s` with its `i16` length. A string Kafka's encoding cannot hold (over 32,767 bytes)
/// is refused, never cut: a cut string would not read back (a character split, a key that
/// names another group).
pub(crate) fn put_string(out: &mut Vec<u8>, s: &str) -> Result<(), RecordError> {
    let n = i16::try_from(s.len()).map_err(|_| {
        RecordError(format!(
            "a {}-byte string is longer than a record can hold (32767)",
            s.len()
        ))
    })?;
    out.extend_from_slice(&n.to_be_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn put_nullable_string(out: &mut Vec<u8>, s: Option<&str>) -> Result<(), RecordError> {
    match s {
        Some(s) => put_string(out, s),
        None => {
            out.extend_from_slice(&(-1i16).to_be_bytes());
            Ok(())
        }
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) -> Result<(), RecordError> {
    let n = i32::try_from(b.len())
        .map_err(|_| RecordError(format!("{} bytes are more than a record holds", b.len())))?;
    out.extend_from_slice(&n.to_be_bytes());
    out.extend_from_slice(b);
    Ok(())
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

    fn nullable_string(&mut self) -> Result<Option<String>, RecordError> {
        let n = self.i16()?;
        match usize::try_from(n) {
            Ok(n) => self.utf8(n).map(Some),
            Err(_) => Ok(None),
        }
    }

    fn bytes(&mut self) -> Result<Vec<u8>, RecordError> {
        let n = usize::try_from(self.i32()?)
            .map_err(|_| RecordError(format!("{}: null or negative bytes", self.what)))?;
        Ok(self.take(n)?.to_vec())
    }

    fn compact_nullable_string(&mut self) -> Result<Option<String>, RecordError> {
        match self.uvarint()? {
            0 => Ok(None),
            n => self
                .utf8(usize::try_from(n - 1).unwrap_or(usize::MAX))
                .map(Some),
        }
    }

    fn compact_bytes(&mut self) -> Result<Vec<u8>, RecordError> {
        let n = self
            .uvarint()?
            .checked_sub(1)
            .ok_or_else(|| RecordError(format!("{}: null compact bytes", self.what)))?;
        Ok(self
            .take(usize::try_from(n).unwrap_or(usize::MAX))?
            .to_vec())
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

/// The group a key of `__consumer_offsets` names, read as leniently as can be (a string that
/// is not UTF-8 is shown with replacement characters), for a key whose record does not read
/// back: its group is the one that fails. Every key version Kafka's coordinators write (0-2
/// classic, 3-8 KIP-848's) starts with the group's `i16`-length string.
pub fn group_of_key(key: &[u8]) -> Option<String> {
    let version = i16::from_be_bytes([*key.first()?, *key.get(1)?]);
    if !(0..=8).contains(&version) {
        return None;
    }
    let n = usize::try_from(i16::from_be_bytes([*key.get(2)?, *key.get(3)?])).ok()?;
    let bytes = key.get(4..4 + n)?;
    Some(String::from_utf8_lossy(bytes).into_owned())
}

impl Key {
    /// The key's bytes.
    ///
    /// # Errors
    /// A string longer than the encoding holds.
    pub fn encode(&self) -> Result<Vec<u8>, RecordError> {
        let mut out = Vec::new();
        match self {
            Key::Offset {
                group,
                topic,
                partition,
            } => {
                out.extend_from_slice(&OFFSET_KEY_VERSION.to_be_bytes());
                put_string(&mut out, group)?;
                put_string(&mut out, topic)?;
                out.extend_from_slice(&partition.to_be_bytes());
            }
            Key::Group { group } => {
                out.extend_from_slice(&GROUP_KEY_VERSION.to_be_bytes());
                put_string(&mut out, group)?;
            }
        }
        Ok(out)
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
    ///
    /// # Errors
    /// Metadata longer than the encoding holds.
    pub fn encode(&self) -> Result<Vec<u8>, RecordError> {
        let mut out = Vec::with_capacity(32 + self.metadata.len());
        out.extend_from_slice(&OFFSET_VALUE_VERSION.to_be_bytes());
        out.extend_from_slice(&self.offset.to_be_bytes());
        out.extend_from_slice(&self.leader_epoch.to_be_bytes());
        put_string(&mut out, &self.metadata)?;
        out.extend_from_slice(&self.commit_timestamp.to_be_bytes());
        Ok(out)
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

impl GroupValue {
    /// The value's bytes (version 3).
    ///
    /// # Errors
    /// A string or a member list longer than the encoding holds.
    pub fn encode(&self) -> Result<Vec<u8>, RecordError> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&GROUP_VALUE_VERSION.to_be_bytes());
        put_string(&mut out, &self.protocol_type)?;
        out.extend_from_slice(&self.generation.to_be_bytes());
        put_nullable_string(&mut out, self.protocol.as_deref())?;
        put_nullable_string(&mut out, self.leader.as_deref())?;
        out.extend_from_slice(&self.current_state_timestamp.to_be_bytes());
        let members = i32::try_from(self.members.len())
            .map_err(|_| RecordError(format!("{} members", self.members.len())))?;
        out.extend_from_slice(&members.to_be_bytes());
        for m in &self.members {
            put_string(&mut out, &m.member_id)?;
            put_nullable_string(&mut out, m.group_instance_id.as_deref())?;
            put_string(&mut out, &m.client_id)?;
            put_string(&mut out, &m.client_host)?;
            out.extend_from_slice(&m.rebalance_timeout.to_be_bytes());
            out.extend_from_slice(&m.session_timeout.to_be_bytes());
            put_bytes(&mut out, &m.subscription)?;
            put_bytes(&mut out, &m.assignment)?;
        }
        Ok(out)
    }

    /// A value from its bytes, versions 0–4.
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordError> {
        let mut c = Cursor {
            bytes,
            what: "a group metadata value",
        };
        let version = c.i16()?;
        if !(0..=4).contains(&version) {
            return Err(RecordError(format!(
                "group metadata value version {version}"
            )));
        }
        let flexible = version >= 4;
        let string = |c: &mut Cursor<'_>| {
            if flexible {
                c.compact_string()
            } else {
                c.string()
            }
        };
        let nullable = |c: &mut Cursor<'_>| {
            if flexible {
                c.compact_nullable_string()
            } else {
                c.nullable_string()
            }
        };
        let bytes = |c: &mut Cursor<'_>| {
            if flexible {
                c.compact_bytes()
            } else {
                c.bytes()
            }
        };
        let protocol_type = string(&mut c)?;
        let generation = c.i32()?;
        let protocol = nullable(&mut c)?;
        let leader = nullable(&mut c)?;
        let current_state_timestamp = if version >= 2 { c.i64()? } else { -1 };
        let count = if flexible {
            let n = c.uvarint()?;
            n.checked_sub(1)
                .ok_or_else(|| RecordError("group metadata: null members".into()))?
        } else {
            u32::try_from(c.i32()?)
                .map_err(|_| RecordError("group metadata: negative member count".into()))?
        };
        let mut members = Vec::new();
        for _ in 0..count {
            let member_id = string(&mut c)?;
            let group_instance_id = if version >= 3 {
                nullable(&mut c)?
            } else {
                None
            };
            let client_id = string(&mut c)?;
            let client_host = string(&mut c)?;
            let rebalance_timeout = if version >= 1 { c.i32()? } else { -1 };
            let session_timeout = c.i32()?;
            let subscription = bytes(&mut c)?;
            let assignment = bytes(&mut c)?;
            if flexible {
                c.skip_tagged_fields()?;
            }
            members.push(MemberValue {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            });
        }
        if flexible {
            c.skip_tagged_fields()?;
        }
        Ok(GroupValue {
            protocol_type,
            generation,
            protocol,
            leader,
            current_state_timestamp,
            members,
        })
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
        assert_eq!(
            key.encode().unwrap(),
            [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]
        );
        assert_eq!(Key::decode(&key.encode().unwrap()), Ok(Some(key)));
        let value = OffsetValue {
            offset: 42,
            leader_epoch: 7,
            metadata: "m".into(),
            commit_timestamp: 1_700_000_000_000,
        };
        let bytes = value.encode().unwrap();
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
            Key::decode(&Key::Group { group: "g".into() }.encode().unwrap()),
            Ok(Some(Key::Group { group: "g".into() }))
        );
    }

    #[test]
    fn group_metadata_round_trips_and_reads_kafkas_flexible_version() {
        let value = GroupValue {
            protocol_type: "consumer".into(),
            generation: 4,
            protocol: Some("range".into()),
            leader: Some("c-1".into()),
            current_state_timestamp: 1_700_000_000_000,
            members: vec![MemberValue {
                member_id: "c-1".into(),
                group_instance_id: Some("i".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout: 300_000,
                session_timeout: 45_000,
                subscription: vec![0, 1, 2],
                assignment: vec![3],
            }],
        };
        let bytes = value.encode().unwrap();
        assert_eq!(&bytes[..2], &[0, 3]);
        assert_eq!(&bytes[2..12], b"\0\x08consumer");
        assert_eq!(GroupValue::decode(&bytes), Ok(value.clone()));
        // Version 4 (flexible): compact strings and bytes, tagged fields.
        let mut v4 = vec![0, 4, 9];
        v4.extend_from_slice(b"consumer");
        v4.extend_from_slice(&4i32.to_be_bytes());
        v4.extend_from_slice(&[6, b'r', b'a', b'n', b'g', b'e', 4, b'c', b'-', b'1']);
        v4.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        v4.extend_from_slice(&[2, 4, b'c', b'-', b'1', 2, b'i', 2, b'c']);
        v4.extend_from_slice(&[11]);
        v4.extend_from_slice(b"/127.0.0.1");
        v4.extend_from_slice(&300_000i32.to_be_bytes());
        v4.extend_from_slice(&45_000i32.to_be_bytes());
        v4.extend_from_slice(&[4, 0, 1, 2, 2, 3, 0, 0]);
        assert_eq!(GroupValue::decode(&v4), Ok(value));
        for cut in 0..bytes.len() {
            assert!(GroupValue::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(GroupValue::decode(&[0, 5]).is_err());
    }

    #[test]
    fn a_string_the_encoding_cannot_hold_is_refused_never_cut() {
        // 16,384 two-byte characters: cut at 32,767 bytes, the last would be split and the key
        // would not read back (a broker that wrote it could not restart).
        let long = "é".repeat(16_384);
        let key = Key::Group {
            group: long.clone(),
        };
        assert!(key.encode().is_err());
        let value = GroupValue {
            protocol: Some(long),
            ..GroupValue::default()
        };
        assert!(value.encode().is_err());
        let at_the_limit = Key::Group {
            group: "g".repeat(32_767),
        };
        assert_eq!(
            Key::decode(&at_the_limit.encode().unwrap()),
            Ok(Some(at_the_limit))
        );
    }
}
