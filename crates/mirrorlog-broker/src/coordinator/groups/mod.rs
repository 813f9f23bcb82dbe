//! Consumer groups: their committed offsets (this file) and the classic membership protocol
//! (`classic.rs`, one group's state machine; `membership.rs`, the groups and their timers),
//! kept as Kafka keeps them: keyed records in the internal compacted topic
//! `__consumer_offsets` (`records.rs`), the group's partition chosen by its id's hash
//! (`offsets.topic.num.partitions`), read back at start-up, and offsets expired after
//! `offsets.retention.minutes`.
//!
//! Writes: a commit or deletion is one batch appended to the group's partition and durable
//! before it is answered or seen; the in-memory view then takes each record unless a record
//! written later for the same key is already applied (answers of concurrent writes may resume
//! in any order; the log's order is the truth). The topic is compacted by the engine's cleaner
//! (`cleanup.policy=compact`), so the log holds about one record per live key.

pub mod classic;
pub mod consumer;
pub mod consumer_protocol;
pub mod membership;
pub mod records;
pub mod static_members;

use mirrorlog::engine::{Engine, EngineError, Isolation, Origin, ReadRequest, TopicPartition};
use mirrorlog::format::{BatchBuilder, BatchIter, BatchOptions, Offset, RecordSpec};
use mirrorlog::format::{BatchKind, ProducerFields, NO_SEQUENCE};
use records::{GroupValue, Key, OffsetValue, RecordError};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

pub use crate::storage::topics::OFFSETS_TOPIC;

/// Kafka's `offsets.topic.num.partitions` default.
pub const OFFSETS_TOPIC_PARTITIONS_DEFAULT: i32 = 50;
/// Kafka's `offsets.retention.minutes` default (7 days).
pub const OFFSETS_RETENTION_MINUTES_DEFAULT: i64 = 7 * 24 * 60;
/// Kafka's `offsets.retention.check.interval.ms` default.
pub const OFFSETS_RETENTION_CHECK_MS_DEFAULT: u64 = 600_000;
/// Kafka's `offset.metadata.max.bytes` default.
pub const OFFSET_METADATA_MAX_BYTES_DEFAULT: usize = 4096;
/// Kafka's `group.min.session.timeout.ms` and `group.max.session.timeout.ms` defaults.
pub const SESSION_TIMEOUT_MS_DEFAULTS: (i32, i32) = (6000, 1_800_000);
/// Kafka's `offsets.topic.segment.bytes` default.
pub const OFFSETS_TOPIC_SEGMENT_BYTES_DEFAULT: u64 = 100 * 1024 * 1024;

/// The partition of `__consumer_offsets` that holds `group`, as Kafka chooses it:
/// `Utils.abs(groupId.hashCode()) % partitions`, with Java's `String.hashCode` over UTF-16.
pub fn partition_for(group: &str, partitions: i32) -> i32 {
    let hash = group
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    // Kafka's Utils.abs: i32::MIN maps to 0.
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions.max(1)
}

/// How long a deletion is remembered in memory after it is applied: longer than any write can
/// wait between its append and its answer, so that a commit written before the deletion and
/// resumed after it cannot bring the offset back.
pub const DELETION_MEMORY_MS: i64 = 120_000;

/// One key's latest record applied: the log offset it was written at, and the offset committed
/// (`None`: deleted, at `applied_ms`).
#[derive(Debug, Clone)]
struct Entry {
    log_offset: i64,
    value: Option<OffsetValue>,
    applied_ms: i64,
}

/// One group's offsets by (topic, partition).
type GroupOffsets = BTreeMap<(String, i32), Entry>;

/// Offsets written by a transaction (TxnOffsetCommit) not yet committed or aborted: per
/// (producer id, partition of `__consumer_offsets`), each record's log offset, key and value.
type PendingTxns = HashMap<(i64, i32), Vec<(i64, Key, OffsetValue)>>;

/// The committed offsets of every group, by group, then (topic, partition); and the offsets of
/// open transactions, applied when their COMMIT marker is written (or read at load), dropped
/// at ABORT.
#[derive(Default)]
pub struct Groups {
    state: Mutex<BTreeMap<String, GroupOffsets>>,
    pending: Mutex<PendingTxns>,
    /// The keys of records that did not read back at load, by group: the group's deletion
    /// tombstones them too.
    damaged_keys: Mutex<BTreeMap<String, Vec<Vec<u8>>>>,
}

/// What of `__consumer_offsets` did not load ([`Groups::load`]).
#[derive(Debug, Default)]
pub struct Unloaded {
    /// Groups whose records did not read back: each with the keys that failed and why.
    pub groups: BTreeMap<String, (Vec<Vec<u8>>, String)>,
    /// Records that name no group that could be read, or parts of the log that could not be
    /// read at all: where, and why.
    pub records: Vec<String>,
}

impl Unloaded {
    fn fail(&mut self, group: String, key: &[u8], reason: String) {
        let entry = self
            .groups
            .entry(group)
            .or_insert_with(|| (Vec::new(), String::new()));
        entry.0.push(key.to_vec());
        entry.1 = reason;
    }

    /// A later record of `key` replaces the one that failed.
    fn heal(&mut self, key: &[u8]) {
        if self.groups.is_empty() {
            return;
        }
        self.groups.retain(|_, (keys, _)| {
            keys.retain(|k| k != key);
            !keys.is_empty()
        });
    }
}

/// A write to `__consumer_offsets` that failed.
#[derive(Debug)]
pub enum GroupError {
    /// The engine refused or failed the append.
    Engine(EngineError),
    /// A stored record does not decode (at load).
    Record(String),
}

impl std::fmt::Display for GroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupError::Engine(e) => write!(f, "{e}"),
            GroupError::Record(e) => write!(f, "{e}"),
        }
    }
}

impl Groups {
    /// Keeps the keys of `group`'s records that did not read back (its deletion tombstones them).
    pub fn set_damaged_keys(&self, group: &str, keys: Vec<Vec<u8>>) {
        self.damaged_keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(group.to_string(), keys);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, GroupOffsets>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes one record at `log_offset`, unless one written later for its key is there.
    fn apply(&self, log_offset: i64, key: Key, value: Option<&[u8]>) -> Result<(), GroupError> {
        let Key::Offset {
            group,
            topic,
            partition,
        } = key
        else {
            // Group metadata is the membership's (`membership.rs`), taken at load.
            return Ok(());
        };
        let value = value
            .map(OffsetValue::decode)
            .transpose()
            .map_err(|e| GroupError::Record(e.to_string()))?;
        let mut state = self.lock();
        let offsets = state.entry(group).or_default();
        let slot = offsets.entry((topic, partition)).or_insert(Entry {
            log_offset: -1,
            value: None,
            applied_ms: 0,
        });
        if slot.log_offset < log_offset {
            *slot = Entry {
                log_offset,
                value,
                applied_ms: crate::coordinator::transactions::now_ms(),
            };
        }
        Ok(())
    }

    /// Reads `partitions` partitions of `__consumer_offsets` from their log start to their end
    /// into memory (start-up: the cost is the compacted log, about one record per live key):
    /// the offsets here, the groups' metadata records into `loaded`.
    ///
    /// A record that does not read back fails its group alone ([`Unloaded`]): the rest load.
    /// A later record of the same key (the tombstone a group's deletion writes) heals it, so a
    /// group the operator deleted loads again after a restart.
    pub async fn load(
        &self,
        engine: &Engine,
        partitions: i32,
        loaded: &mut membership::Loaded,
    ) -> (usize, Unloaded) {
        let mut records = 0;
        let mut unloaded = Unloaded::default();
        for p in 0..partitions {
            let tp = TopicPartition::new(OFFSETS_TOPIC, p);
            let state = match engine.state(&tp).await {
                Ok(s) => s,
                Err(e) => {
                    unloaded.records.push(format!("{tp}: {e}"));
                    continue;
                }
            };
            let mut next = state.log_start;
            while next < state.log_end {
                let read = match engine
                    .read(&tp, ReadRequest::new(next, 1 << 20, Isolation::LogEnd))
                    .await
                {
                    Ok(read) => read,
                    Err(e) => {
                        unloaded.records.push(format!("{tp} at {}: {e}", next.0));
                        break;
                    }
                };
                let before = next;
                for batch in BatchIter::new(&read.records, 0) {
                    let h = *batch.header();
                    next = Offset(h.last_offset().0 + 1);
                    if let BatchKind::TxnMarker { commit, .. } = batch.kind() {
                        if let Err(e) = self.complete_txn(p, h.producer.producer_id, commit) {
                            unloaded
                                .records
                                .push(format!("{tp} at {}: {e}", h.base_offset.0));
                        }
                    }
                    if h.attributes.is_control() {
                        continue;
                    }
                    let txn = h
                        .attributes
                        .is_transactional()
                        .then_some(h.producer.producer_id);
                    let it = match batch.records() {
                        Ok(it) => it,
                        Err(e) => {
                            unloaded
                                .records
                                .push(format!("{tp} at {}: {e}", h.base_offset.0));
                            continue;
                        }
                    };
                    for r in it {
                        let r = match r {
                            Ok(r) => r,
                            Err(e) => {
                                unloaded
                                    .records
                                    .push(format!("{tp} at {}: {e}", h.base_offset.0));
                                break;
                            }
                        };
                        let Some(raw_key) = r.key else { continue };
                        let at = h.base_offset.0 + i64::from(r.offset_delta);
                        // A later record of a key that failed heals it (its group's deletion).
                        unloaded.heal(raw_key);
                        match self.load_record(p, at, txn, raw_key, r.value, loaded) {
                            Ok(true) => records += 1,
                            Ok(false) => {}
                            Err(e) => {
                                let reason = format!("{tp} at {at}: {e}");
                                match records::group_of_key(raw_key) {
                                    Some(group) => unloaded.fail(group, raw_key, reason),
                                    None => unloaded.records.push(reason),
                                }
                            }
                        }
                    }
                }
                if next == before {
                    // Nothing readable past `next` (a batch larger than the read): stop rather
                    // than loop; what was read is kept.
                    unloaded.records.push(format!(
                        "{tp} at {}: a batch could not be read whole",
                        next.0
                    ));
                    break;
                }
            }
        }
        (records, unloaded)
    }

    /// Takes one record read at load; whether it was one of ours (another coordinator's is
    /// kept in the log and not used).
    fn load_record(
        &self,
        p: i32,
        at: i64,
        txn: Option<i64>,
        key: &[u8],
        value: Option<&[u8]>,
        loaded: &mut membership::Loaded,
    ) -> Result<bool, GroupError> {
        let record = |e: RecordError| GroupError::Record(e.to_string());
        let Some(decoded) = Key::decode(key).map_err(record)? else {
            // KIP-848 groups' records, or another coordinator's (kept).
            return match consumer::records::Record::decode(key, value).map_err(record)? {
                Some(r) => {
                    loaded.take_consumer(r);
                    Ok(true)
                }
                None => Ok(false),
            };
        };
        if let Key::Group { group } = decoded {
            let value = value.map(GroupValue::decode).transpose().map_err(record)?;
            loaded.take(group, value);
            return Ok(true);
        }
        match txn {
            Some(pid) => self.add_pending(pid, p, at, decoded, value)?,
            None => self.apply(at, decoded, value)?,
        }
        Ok(true)
    }

    /// Writes `records` (key, value or tombstone) of `group` to `tp` as one batch, durably, then
    /// applies them.
    pub async fn write(
        &self,
        engine: &Engine,
        tp: &TopicPartition,
        records: Vec<(Key, Option<OffsetValue>)>,
        now_ms: i64,
    ) -> Result<(), GroupError> {
        self.finish_write(self.start_write(engine, tp, records, now_ms))
            .await
    }

    /// Starts [`Groups::write`]: the batch is queued to the engine now, so that writes started
    /// in a connection's request order reach the log in that order (a client's pipelined
    /// asynchronous commits: the last one answered must be the one that stays).
    pub fn start_write(
        &self,
        engine: &Engine,
        tp: &TopicPartition,
        records: Vec<(Key, Option<OffsetValue>)>,
        now_ms: i64,
    ) -> Write {
        let call = if records.is_empty() {
            Ok(None)
        } else {
            encode_offsets(records.iter().map(|(k, v)| (k, v.as_ref()))).map(|encoded| {
                Some(start_append(
                    engine,
                    tp,
                    &encoded,
                    now_ms,
                    BatchOptions::default(),
                    Origin::Client,
                ))
            })
        };
        Write { call, records }
    }

    /// Waits for a started write to be durable, then applies its records.
    pub async fn finish_write(&self, w: Write) -> Result<(), GroupError> {
        let Some(call) = w.call.map_err(|e| GroupError::Record(e.to_string()))? else {
            return Ok(());
        };
        let first = call.await.map_err(GroupError::Engine)?.first_offset.0;
        for (i, (key, value)) in w.records.into_iter().enumerate() {
            let at = first + i64::try_from(i).unwrap_or(i64::MAX);
            let bytes = value
                .map(|v| v.encode())
                .transpose()
                .map_err(|e| GroupError::Record(e.to_string()))?;
            self.apply(at, key, bytes.as_deref())?;
        }
        Ok(())
    }

    /// Writes a transaction's offsets (TxnOffsetCommit) to `tp` as one transactional batch of
    /// the producer `(pid, epoch)`, durably; they are pending until its marker.
    pub async fn write_txn(
        &self,
        engine: &Engine,
        tp: &TopicPartition,
        producer: (i64, i16),
        records: Vec<(Key, OffsetValue)>,
        now_ms: i64,
    ) -> Result<(), GroupError> {
        if records.is_empty() {
            return Ok(());
        }
        let encoded = encode_offsets(records.iter().map(|(k, v)| (k, Some(v))))
            .map_err(|e| GroupError::Record(e.to_string()))?;
        let options = BatchOptions {
            producer: ProducerFields {
                producer_id: producer.0,
                producer_epoch: producer.1,
                base_sequence: NO_SEQUENCE,
            },
            transactional: true,
            ..BatchOptions::default()
        };
        // The coordinator's append: epochs checked, no sequence (Kafka's group coordinator
        // writes these without one too).
        let first = start_append(engine, tp, &encoded, now_ms, options, Origin::Coordinator)
            .await
            .map_err(GroupError::Engine)?
            .first_offset
            .0;
        let mut pending = self.pending_lock();
        let list = pending.entry((producer.0, tp.partition)).or_default();
        for (i, (key, value)) in records.into_iter().enumerate() {
            list.push((first + i64::try_from(i).unwrap_or(i64::MAX), key, value));
        }
        Ok(())
    }

    fn pending_lock(&self) -> std::sync::MutexGuard<'_, PendingTxns> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn add_pending(
        &self,
        pid: i64,
        partition: i32,
        at: i64,
        key: Key,
        value: Option<&[u8]>,
    ) -> Result<(), GroupError> {
        // A transaction writes offsets, never tombstones; one would delete nothing pending.
        let Some(value) = value else { return Ok(()) };
        let value = OffsetValue::decode(value).map_err(|e| GroupError::Record(e.to_string()))?;
        self.pending_lock()
            .entry((pid, partition))
            .or_default()
            .push((at, key, value));
        Ok(())
    }

    /// A marker of producer `pid` on `partition` of `__consumer_offsets`: its pending offsets
    /// are applied (COMMIT, each at its log offset) or dropped (ABORT).
    pub fn complete_txn(&self, partition: i32, pid: i64, commit: bool) -> Result<(), GroupError> {
        let Some(records) = self.pending_lock().remove(&(pid, partition)) else {
            return Ok(());
        };
        if commit {
            for (at, key, value) in records {
                let bytes = value
                    .encode()
                    .map_err(|e| GroupError::Record(e.to_string()))?;
                self.apply(at, key, Some(&bytes))?;
            }
        }
        Ok(())
    }

    /// Whether `group` has offsets of an open transaction for (topic, partition).
    pub fn has_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.pending_lock().values().flatten().any(|(_, k, _)| {
            matches!(k, Key::Offset { group: g, topic: t, partition: p }
                if g == group && t == topic && *p == partition)
        })
    }

    /// Starts writing `records` (key and value bytes, or tombstones) to `tp` as one batch: queued
    /// to the engine now, in the caller's order; the future answers once durable.
    pub fn start_records(
        &self,
        engine: &Engine,
        tp: &TopicPartition,
        records: &[(Vec<u8>, Option<Vec<u8>>)],
    ) -> mirrorlog::engine::Call<mirrorlog::engine::AppendOutcome> {
        start_append(
            engine,
            tp,
            records,
            crate::coordinator::transactions::now_ms(),
            BatchOptions::default(),
            Origin::Client,
        )
    }

    /// Writes the tombstones that delete `group` (its classic metadata, a KIP-848 group's
    /// epochs) to `tp`, durably.
    pub async fn delete_group(
        &self,
        engine: &Engine,
        tp: &TopicPartition,
        group: &str,
    ) -> Result<(), GroupError> {
        use consumer::records::Record;
        let record = |e: RecordError| GroupError::Record(e.to_string());
        let classic = Key::Group {
            group: group.to_string(),
        }
        .encode()
        .map_err(record)?;
        let epoch = Record::GroupEpoch {
            group: group.to_string(),
            epoch: None,
        }
        .encode()
        .map_err(record)?;
        let target = Record::TargetEpoch {
            group: group.to_string(),
            epoch: None,
        }
        .encode()
        .map_err(record)?;
        let mut records = vec![(classic, None), epoch, target];
        let damaged = self
            .damaged_keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(group)
            .unwrap_or_default();
        records.extend(damaged.into_iter().map(|k| (k, None)));
        self.start_records(engine, tp, &records)
            .await
            .map_err(GroupError::Engine)?;
        Ok(())
    }

    /// Writes `group`'s metadata record (`None`: its tombstone) to `tp`, durably.
    pub async fn write_group(
        &self,
        engine: &Engine,
        tp: &TopicPartition,
        group: &str,
        value: Option<&GroupValue>,
    ) -> Result<(), GroupError> {
        let record = |e: RecordError| GroupError::Record(e.to_string());
        let key = Key::Group {
            group: group.to_string(),
        }
        .encode()
        .map_err(record)?;
        let value = value.map(GroupValue::encode).transpose().map_err(record)?;
        let records = [(key, value)];
        let now = crate::coordinator::transactions::now_ms();
        start_append(
            engine,
            tp,
            &records,
            now,
            BatchOptions::default(),
            Origin::Client,
        )
        .await
        .map_err(GroupError::Engine)?;
        Ok(())
    }

    /// The committed offsets of `group`, all or those of `wanted` partitions.
    pub fn fetch(&self, group: &str) -> BTreeMap<(String, i32), OffsetValue> {
        self.lock()
            .get(group)
            .map(|o| {
                o.iter()
                    .filter_map(|(k, e)| e.value.clone().map(|v| (k.clone(), v)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every group with a committed offset.
    pub fn list(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, o)| o.values().any(|e| e.value.is_some()))
            .map(|(g, _)| g.clone())
            .collect()
    }

    /// Whether `group` has a committed offset.
    pub fn exists(&self, group: &str) -> bool {
        self.lock()
            .get(group)
            .is_some_and(|o| o.values().any(|e| e.value.is_some()))
    }

    /// Offsets whose retention, counted from `base(group, commit timestamp)`, ended at or
    /// before `cutoff_ms`, by group (Kafka's expiry: a simple group's offsets from their
    /// commit, an empty classic group's from when it became empty; `base` is `None` for a
    /// group whose offsets do not expire, one with members).
    pub fn expired(
        &self,
        cutoff_ms: i64,
        base: impl Fn(&str, i64) -> Option<i64>,
    ) -> BTreeMap<String, Vec<(String, i32)>> {
        let mut out: BTreeMap<String, Vec<(String, i32)>> = BTreeMap::new();
        for (group, offsets) in self.lock().iter() {
            for (tp, e) in offsets {
                if e.value
                    .as_ref()
                    .and_then(|v| base(group, v.commit_timestamp))
                    .is_some_and(|t| t <= cutoff_ms)
                {
                    out.entry(group.clone()).or_default().push(tp.clone());
                }
            }
        }
        out
    }

    /// Forgets deletions applied more than [`DELETION_MEMORY_MS`] before `now_ms`, and groups
    /// left with nothing (the log keeps the tombstones for compaction's delete retention).
    pub fn prune(&self, now_ms: i64) {
        let mut state = self.lock();
        for offsets in state.values_mut() {
            offsets.retain(|_, e| e.value.is_some() || e.applied_ms > now_ms - DELETION_MEMORY_MS);
        }
        state.retain(|_, o| !o.is_empty());
    }
}

/// A write of offsets queued to the engine ([`Groups::start_write`]).
pub struct Write {
    call: Result<Option<mirrorlog::engine::Call<mirrorlog::engine::AppendOutcome>>, RecordError>,
    records: Vec<(Key, Option<OffsetValue>)>,
}

/// A record's key and value bytes (`None`: a tombstone).
pub type EncodedRecord = (Vec<u8>, Option<Vec<u8>>);

/// The bytes of offset commits (keys, values or tombstones).
fn encode_offsets<'a>(
    records: impl Iterator<Item = (&'a Key, Option<&'a OffsetValue>)>,
) -> Result<Vec<EncodedRecord>, RecordError> {
    records
        .map(|(k, v)| Ok((k.encode()?, v.map(OffsetValue::encode).transpose()?)))
        .collect()
}

/// Queues one batch of `records` (key, value or tombstone) to `tp`; the call answers once it
/// is durable, with the first record's offset.
fn start_append(
    engine: &Engine,
    tp: &TopicPartition,
    records: &[(Vec<u8>, Option<Vec<u8>>)],
    now_ms: i64,
    options: BatchOptions,
    origin: Origin,
) -> mirrorlog::engine::Call<mirrorlog::engine::AppendOutcome> {
    let mut b = BatchBuilder::new(options);
    for (k, v) in records {
        b.push(RecordSpec {
            timestamp: now_ms,
            key: Some(k),
            value: v.as_deref(),
            headers: &[],
        });
    }
    engine.append(tp, bytes::Bytes::from(b.build()), origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partition_is_kafkas_for_the_group() {
        // Java: "my-group".hashCode() == -1_906_497_762; Utils.abs of it mod 50 = 12.
        assert_eq!(partition_for("my-group", 50), 12);
        assert_eq!(partition_for("", 50), 0);
        // Non-ASCII counts UTF-16 units as Java does: "é".hashCode() == 233.
        assert_eq!(partition_for("é", 50), 233 % 50);
        for g in ["a", "group-1", "consumer.x", "ünïcödé"] {
            assert!((0..50).contains(&partition_for(g, 50)));
        }
    }

    fn commit(groups: &Groups, at: i64, group: &str, offset: Option<i64>) {
        let key = Key::Offset {
            group: group.into(),
            topic: "t".into(),
            partition: 0,
        };
        let value = offset.map(|o| {
            OffsetValue {
                offset: o,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: at,
            }
            .encode()
            .unwrap()
        });
        groups.apply(at, key, value.as_deref()).unwrap();
    }

    #[test]
    fn the_log_order_wins_over_the_order_answers_resume_in() {
        let g = Groups::default();
        commit(&g, 11, "g", Some(20));
        // An older write resumed late is not taken over a newer one.
        commit(&g, 10, "g", Some(10));
        assert_eq!(g.fetch("g")[&("t".to_string(), 0)].offset, 20);
        // A deletion resumed before the commit it follows in the log still wins.
        commit(&g, 13, "g", None);
        commit(&g, 12, "g", Some(30));
        assert!(g.fetch("g").is_empty());
        assert!(!g.exists("g") && g.list().is_empty());
        commit(&g, 14, "h", Some(1));
        let by_commit = |_: &str, at: i64| Some(at);
        assert_eq!(
            g.expired(14, by_commit).keys().collect::<Vec<_>>(),
            vec!["h"]
        );
        assert!(g.expired(13, by_commit).is_empty());
        assert!(g.expired(14, |_, _| None).is_empty());
        // The deletion of g's offset is remembered for a while, then forgotten.
        g.prune(crate::coordinator::transactions::now_ms());
        assert_eq!(g.lock().len(), 2);
        g.prune(crate::coordinator::transactions::now_ms() + DELETION_MEMORY_MS + 1);
        assert_eq!(g.lock().len(), 1);
    }
}
