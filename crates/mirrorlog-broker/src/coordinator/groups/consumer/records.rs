//! KIP-848 groups' records in `__consumer_offsets`, byte for byte as Kafka's group coordinator
//! writes them (`group-coordinator/src/main/resources/common/message/ConsumerGroup*`): the key
//! starts with its record type as a version (`i16`: 3 the group's epoch, 5 a member's
//! metadata, 6 the target assignment's epoch, 7 a member's target assignment, 8 a member's
//! current assignment), then its fields in Kafka's classic encoding; the value is version 0,
//! flexible (compact strings and arrays, tagged fields). A null value is a tombstone.
//!
//! Partitions are named by topic id in the records and by topic name in memory; the caller
//! maps them. Type 4 (the subscribed topics' metadata) is not written: the coordinator
//! recomputes it from the topics at the first heartbeat after a load.

use super::super::records::RecordError;
use uuid::Uuid;

/// Partitions by topic id.
pub type TopicIds = Vec<(Uuid, Vec<i32>)>;

/// A member's metadata (record type 5).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberMeta {
    /// `group.instance.id`.
    pub instance_id: Option<String>,
    /// Its rack.
    pub rack_id: Option<String>,
    /// Its client id.
    pub client_id: String,
    /// Its address.
    pub client_host: String,
    /// The topics it subscribes to.
    pub topics: Vec<String>,
    /// Its regular expression.
    pub regex: Option<String>,
    /// Its rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// The assignor it asks for.
    pub assignor: Option<String>,
}

/// A member's current assignment (record type 8).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Current {
    /// Its epoch.
    pub epoch: i32,
    /// Its previous epoch.
    pub previous_epoch: i32,
    /// Kafka's `MemberState`: 0 stable, 1 unrevoked partitions, 2 unreleased partitions.
    pub state: i8,
    /// Its partitions.
    pub assigned: TopicIds,
    /// Its partitions being revoked.
    pub revoking: TopicIds,
}

/// One record of a KIP-848 group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// The group's epoch (type 3).
    GroupEpoch {
        /// The group.
        group: String,
        /// Its epoch; `None`: the group is deleted.
        epoch: Option<i32>,
    },
    /// A member's metadata (type 5).
    Member {
        /// The group.
        group: String,
        /// The member.
        member: String,
        /// Its metadata; `None`: it left.
        value: Option<MemberMeta>,
    },
    /// The target assignment's epoch (type 6).
    TargetEpoch {
        /// The group.
        group: String,
        /// The epoch; `None`: deleted.
        epoch: Option<i32>,
    },
    /// A member's target assignment (type 7).
    Target {
        /// The group.
        group: String,
        /// The member.
        member: String,
        /// Its partitions; `None`: it left.
        partitions: Option<TopicIds>,
    },
    /// A member's current assignment (type 8).
    Current {
        /// The group.
        group: String,
        /// The member.
        member: String,
        /// Its assignment; `None`: it left.
        value: Option<Current>,
    },
}

use crate::coordinator::groups::records::put_string;

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_compact(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => out.push(0),
        Some(s) => {
            put_uvarint(out, u32::try_from(s.len() + 1).unwrap_or(u32::MAX));
            out.extend_from_slice(s.as_bytes());
        }
    }
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    put_uvarint(out, u32::try_from(n + 1).unwrap_or(u32::MAX));
}

fn put_topics(out: &mut Vec<u8>, t: &TopicIds) {
    put_len(out, t.len());
    for (id, ps) in t {
        out.extend_from_slice(id.as_bytes());
        put_len(out, ps.len());
        for p in ps {
            out.extend_from_slice(&p.to_be_bytes());
        }
        out.push(0); // tagged fields
    }
}

impl Record {
    /// Its key and value bytes (`None`: a tombstone).
    ///
    /// # Errors
    /// A key string longer than the encoding holds (the value's strings are compact).
    pub fn encode(&self) -> Result<(Vec<u8>, Option<Vec<u8>>), RecordError> {
        let mut key = Vec::new();
        let (kind, group, member) = match self {
            Record::GroupEpoch { group, .. } => (3i16, group, None),
            Record::Member { group, member, .. } => (5, group, Some(member)),
            Record::TargetEpoch { group, .. } => (6, group, None),
            Record::Target { group, member, .. } => (7, group, Some(member)),
            Record::Current { group, member, .. } => (8, group, Some(member)),
        };
        key.extend_from_slice(&kind.to_be_bytes());
        put_string(&mut key, group)?;
        if let Some(m) = member {
            put_string(&mut key, m)?;
        }
        let mut v = vec![0, 0];
        let value = match self {
            Record::GroupEpoch { epoch, .. } | Record::TargetEpoch { epoch, .. } => {
                epoch.map(|e| {
                    v.extend_from_slice(&e.to_be_bytes());
                    v.push(0);
                    v
                })
            }
            Record::Member { value, .. } => value.as_ref().map(|m| {
                put_compact(&mut v, m.instance_id.as_deref());
                put_compact(&mut v, m.rack_id.as_deref());
                put_compact(&mut v, Some(&m.client_id));
                put_compact(&mut v, Some(&m.client_host));
                put_len(&mut v, m.topics.len());
                for t in &m.topics {
                    put_compact(&mut v, Some(t));
                }
                put_compact(&mut v, m.regex.as_deref());
                v.extend_from_slice(&m.rebalance_timeout_ms.to_be_bytes());
                put_compact(&mut v, m.assignor.as_deref());
                v.push(0);
                v
            }),
            Record::Target { partitions, .. } => partitions.as_ref().map(|t| {
                put_topics(&mut v, t);
                v.push(0);
                v
            }),
            Record::Current { value, .. } => value.as_ref().map(|c| {
                v.extend_from_slice(&c.epoch.to_be_bytes());
                v.extend_from_slice(&c.previous_epoch.to_be_bytes());
                v.push(c.state as u8);
                put_topics(&mut v, &c.assigned);
                put_topics(&mut v, &c.revoking);
                v.push(0);
                v
            }),
        };
        Ok((key, value))
    }

    /// A record from its key and value, if the key is one of these types (`Ok(None)`
    /// otherwise: another coordinator's record, kept and not used).
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<Record>, RecordError> {
        let mut k = Cursor(key);
        let kind = k.i16()?;
        if !matches!(kind, 3 | 5..=8) {
            return Ok(None);
        }
        let group = k.string()?;
        let member = if matches!(kind, 5 | 7 | 8) {
            Some(k.string()?)
        } else {
            None
        };
        let member = member.unwrap_or_default();
        let mut v = value.map(Cursor);
        if let Some(c) = v.as_mut() {
            let version = c.i16()?;
            if version != 0 {
                return Err(RecordError(format!(
                    "consumer group record type {kind}: value version {version}"
                )));
            }
        }
        Ok(Some(match (kind, v) {
            (3, v) => Record::GroupEpoch {
                group,
                epoch: v.map(|mut c| c.i32()).transpose()?,
            },
            (6, v) => Record::TargetEpoch {
                group,
                epoch: v.map(|mut c| c.i32()).transpose()?,
            },
            (5, v) => Record::Member {
                group,
                member,
                value: v
                    .map(|mut c| -> Result<MemberMeta, RecordError> {
                        let instance_id = c.compact()?;
                        let rack_id = c.compact()?;
                        let client_id = c.compact()?.unwrap_or_default();
                        let client_host = c.compact()?.unwrap_or_default();
                        let n = c.len()?;
                        let mut topics = Vec::new();
                        for _ in 0..n {
                            topics.push(c.compact()?.unwrap_or_default());
                        }
                        Ok(MemberMeta {
                            instance_id,
                            rack_id,
                            client_id,
                            client_host,
                            topics,
                            regex: c.compact()?,
                            rebalance_timeout_ms: c.i32()?,
                            assignor: c.compact()?,
                        })
                    })
                    .transpose()?,
            },
            (7, v) => Record::Target {
                group,
                member,
                partitions: v.map(|mut c| c.topics()).transpose()?,
            },
            (_, v) => Record::Current {
                group,
                member,
                value: v
                    .map(|mut c| -> Result<Current, RecordError> {
                        Ok(Current {
                            epoch: c.i32()?,
                            previous_epoch: c.i32()?,
                            state: i8::from_be_bytes([c.take(1)?[0]]),
                            assigned: c.topics()?,
                            revoking: c.topics()?,
                        })
                    })
                    .transpose()?,
            },
        }))
    }
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if self.0.len() < n {
            return Err(RecordError("a consumer group record is truncated".into()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
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

    fn string(&mut self) -> Result<String, RecordError> {
        let n =
            usize::try_from(self.i16()?).map_err(|_| RecordError("a null key string".into()))?;
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| RecordError("a key string that is not UTF-8".into()))
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
        Err(RecordError("a varint too long".into()))
    }

    /// A compact array's length (a null array is empty).
    fn len(&mut self) -> Result<usize, RecordError> {
        Ok(usize::try_from(self.uvarint()?.saturating_sub(1)).unwrap_or(usize::MAX))
    }

    fn compact(&mut self) -> Result<Option<String>, RecordError> {
        match self.uvarint()? {
            0 => Ok(None),
            n => {
                let b = self.take(usize::try_from(n - 1).unwrap_or(usize::MAX))?;
                String::from_utf8(b.to_vec())
                    .map(Some)
                    .map_err(|_| RecordError("a string that is not UTF-8".into()))
            }
        }
    }

    fn topics(&mut self) -> Result<TopicIds, RecordError> {
        let n = self.len()?;
        let mut out = Vec::new();
        for _ in 0..n {
            let id = Uuid::from_slice(self.take(16)?)
                .map_err(|_| RecordError("a bad topic id".into()))?;
            let count = self.len()?;
            let mut ps = Vec::with_capacity(count.min(4096));
            for _ in 0..count {
                ps.push(self.i32()?);
            }
            self.skip_tags()?;
            out.push((id, ps));
        }
        Ok(out)
    }

    fn skip_tags(&mut self) -> Result<(), RecordError> {
        for _ in 0..self.uvarint()? {
            let _tag = self.uvarint()?;
            let size = self.uvarint()?;
            self.take(usize::try_from(size).unwrap_or(usize::MAX))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_record_round_trips_and_its_key_is_kafkas() {
        let id = Uuid::from_bytes([7; 16]);
        let records = [
            Record::GroupEpoch {
                group: "g".into(),
                epoch: Some(4),
            },
            Record::GroupEpoch {
                group: "g".into(),
                epoch: None,
            },
            Record::TargetEpoch {
                group: "g".into(),
                epoch: Some(4),
            },
            Record::Member {
                group: "g".into(),
                member: "m".into(),
                value: Some(MemberMeta {
                    instance_id: Some("i".into()),
                    rack_id: None,
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    topics: vec!["a".into(), "b".into()],
                    regex: Some("t.*".into()),
                    rebalance_timeout_ms: 300_000,
                    assignor: Some("uniform".into()),
                }),
            },
            Record::Target {
                group: "g".into(),
                member: "m".into(),
                partitions: Some(vec![(id, vec![0, 2])]),
            },
            Record::Current {
                group: "g".into(),
                member: "m".into(),
                value: Some(Current {
                    epoch: 4,
                    previous_epoch: 3,
                    state: 1,
                    assigned: vec![(id, vec![0])],
                    revoking: vec![(id, vec![2])],
                }),
            },
            Record::Current {
                group: "g".into(),
                member: "m".into(),
                value: None,
            },
        ];
        for r in records {
            let (k, v) = r.encode().unwrap();
            assert_eq!(Record::decode(&k, v.as_deref()), Ok(Some(r)));
        }
        // Type 5's key: version 5, "g", "m".
        let (k, _) = Record::Member {
            group: "g".into(),
            member: "m".into(),
            value: None,
        }
        .encode()
        .unwrap();
        assert_eq!(k, [0, 5, 0, 1, b'g', 0, 1, b'm']);
        // The group's epoch value: version 0, the epoch, no tagged fields.
        let (_, v) = Record::GroupEpoch {
            group: "g".into(),
            epoch: Some(9),
        }
        .encode()
        .unwrap();
        assert_eq!(v.unwrap(), [0, 0, 0, 0, 0, 9, 0]);
        // Other types are not these; garbage is an error.
        assert_eq!(Record::decode(&[0, 1, 0, 1, b'g'], None), Ok(None));
        assert!(Record::decode(&[0, 3, 0, 5, b'g'], None).is_err());
        assert!(Record::decode(&[0, 3, 0, 1, b'g'], Some(&[0, 0, 1])).is_err());
    }
}
