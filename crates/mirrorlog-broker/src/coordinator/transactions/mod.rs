//! The single-node transaction coordinator: `transactional.id` → producer id and epoch, state,
//! partitions, timeout; kept in `broker/transactions.json`, replaced durably at every state
//! change (Kafka keeps the same facts in `__transaction_state`).
//!
//! States and moves follow Kafka's `TransactionCoordinator`:
//! - `InitProducerId`: a new id gets a fresh producer id at epoch 0; a known one has its epoch
//!   bumped (fencing the previous producer), an `Ongoing` transaction aborted first with the
//!   bumped epoch; at the last epoch a fresh producer id is allocated.
//! - `AddPartitionsToTxn`: `Empty`/`Complete*` → `Ongoing`, partitions added.
//! - `EndTxn`: `Ongoing` → `PrepareCommit`/`PrepareAbort` (durable) → a COMMIT or ABORT marker
//!   appended to every partition as `Origin::Coordinator` with the coordinator epoch → `Complete*`
//!   (durable). A retried `EndTxn` of the same outcome succeeds.
//! - A transaction open longer than its timeout is aborted with the epoch bumped (the producer
//!   is fenced), as Kafka's `abortTimedOutTransactions` does.
//! - At start a `Prepare*` left by a crash is completed (markers written again where needed:
//!   a second marker for a closed transaction changes nothing), and the coordinator epoch is
//!   bumped, so markers of the new incarnation always carry a larger one.

use crate::coordinator::producer_ids::ProducerIds;
use crate::storage::store::{Document, StoreError};
use kafka_protocol::error::ResponseError;
use mirrorlog::engine::{Engine, EngineError, Origin, TopicPartition};
use mirrorlog::format::Offset;
use mirrorlog::format::{build_marker, MarkerSpec};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A transaction's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TxnState {
    /// No transaction since the last InitProducerId.
    Empty,
    /// Partitions added, not ended.
    Ongoing,
    /// Committing: markers being written.
    PrepareCommit,
    /// Aborting: markers being written.
    PrepareAbort,
    /// Committed.
    CompleteCommit,
    /// Aborted.
    CompleteAbort,
}

/// One transactional id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnMeta {
    /// Its producer id.
    pub producer_id: i64,
    /// Its current epoch.
    pub producer_epoch: i16,
    /// `transaction.timeout.ms`.
    pub timeout_ms: i32,
    /// Its state.
    pub state: TxnState,
    /// The partitions of the open (or ending) transaction.
    pub partitions: BTreeSet<(String, i32)>,
    /// When the open transaction started (ms since the epoch).
    pub started_ms: i64,
    /// When the id was last used (ms since the epoch): an id idle in `Empty` or `Complete*`
    /// for `transactional.id.expiration.ms` is forgotten, as Kafka forgets it. Entries of an
    /// earlier version, which had no such field, count as used when loaded.
    #[serde(default = "now_ms")]
    pub updated_ms: i64,
}

impl TxnMeta {
    /// The first of the entry's invariants that does not hold, or `None`: a producer id and
    /// epoch that are not negative, a positive timeout, partitions not negative, and no
    /// partitions outside a transaction (`Empty`, `Complete*`).
    pub fn invariant_violation(&self) -> Option<String> {
        if self.producer_id < 0 || self.producer_epoch < 0 {
            return Some(format!(
                "producer id {} epoch {}",
                self.producer_id, self.producer_epoch
            ));
        }
        if self.timeout_ms <= 0 {
            return Some(format!("transaction timeout {} ms", self.timeout_ms));
        }
        if let Some((t, p)) = self.partitions.iter().find(|(_, p)| *p < 0) {
            return Some(format!("partition {t}-{p}"));
        }
        let open = matches!(
            self.state,
            TxnState::Ongoing | TxnState::PrepareCommit | TxnState::PrepareAbort
        );
        if !open && !self.partitions.is_empty() {
            return Some(format!(
                "{} partitions while {:?}",
                self.partitions.len(),
                self.state
            ));
        }
        None
    }
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Stored {
    coordinator_epoch: i32,
    txns: BTreeMap<String, TxnMeta>,
    /// Entries that did not read back at open, kept as they were (each written back with the
    /// document, so a later version may read them) until the operator finishes them.
    #[serde(skip)]
    unreadable: BTreeMap<String, serde_json::Value>,
}

/// Kafka's `transactional.id.expiration.ms` default (7 days).
pub const TXN_ID_EXPIRATION_MS_DEFAULT: i64 = 604_800_000;

/// What the operator's finish of a stuck transaction did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finished {
    /// The outcome written: `commit` or `abort` (`forgotten` for an entry that did not read).
    pub outcome: &'static str,
    /// Partitions that took the marker.
    pub written: Vec<(String, i32)>,
    /// Partitions that could not take it, and why (deleted, mirrored, failed).
    pub skipped: Vec<(String, i32, String)>,
}

/// Told of each marker written: its partition, the producer id, and whether it commits (the
/// group coordinator completes a transaction's offsets with it).
pub type MarkerListener = std::sync::Arc<dyn Fn(&TopicPartition, i64, bool) + Send + Sync>;

/// The coordinator.
pub struct Coordinator {
    doc: Document,
    stored: Stored,
    listener: Option<MarkerListener>,
}

/// Wall-clock milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Why the operator's finish of a stuck transaction was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FinishError {
    /// No such transactional id.
    #[error("no transaction {0}")]
    Unknown(String),
    /// It is not stuck: it ends as any transaction does.
    #[error("transaction {id} is not stuck ({state})")]
    NotStuck {
        /// The transactional id.
        id: String,
        /// Its state.
        state: String,
    },
    /// Its abort could not begin.
    #[error("beginning its abort: {0:?}")]
    Refused(ResponseError),
    /// The coordinator's file could not be written.
    #[error("storing: {0}")]
    Store(#[from] StoreError),
}

fn store_err(_: StoreError) -> ResponseError {
    ResponseError::CoordinatorNotAvailable
}

impl Coordinator {
    /// Loads the coordinator from `dir` and bumps its epoch durably. An entry that does not
    /// read back is not loaded (its id and the reason are returned, for the caller to report
    /// as damaged); it is kept in the file as it was.
    pub fn open(dir: &std::path::Path) -> Result<(Self, Vec<(String, String)>), StoreError> {
        let doc = Document::new(dir, "transactions.json")?;
        let mut stored = Stored::default();
        let mut damaged = Vec::new();
        if let Some(v) = doc.load::<serde_json::Value>()? {
            stored.coordinator_epoch = v
                .get("coordinator_epoch")
                .and_then(serde_json::Value::as_i64)
                .and_then(|e| i32::try_from(e).ok())
                .unwrap_or(0);
            let entries = v
                .get("txns")
                .and_then(serde_json::Value::as_object)
                .cloned()
                .unwrap_or_default();
            let mut producers = std::collections::HashMap::new();
            for (id, entry) in entries {
                let meta = serde_json::from_value::<TxnMeta>(entry.clone())
                    .map_err(|e| e.to_string())
                    .and_then(|meta| match meta.invariant_violation() {
                        Some(why) => Err(why),
                        None => Ok(meta),
                    })
                    .and_then(
                        |meta| match producers.insert(meta.producer_id, id.clone()) {
                            Some(other) => Err(format!(
                                "producer id {} is also {other:?}'s",
                                meta.producer_id
                            )),
                            None => Ok(meta),
                        },
                    );
                match meta {
                    Ok(meta) => {
                        stored.txns.insert(id, meta);
                    }
                    Err(why) => {
                        damaged.push((id.clone(), why));
                        stored.unreadable.insert(id, entry);
                    }
                }
            }
        }
        stored.coordinator_epoch = stored.coordinator_epoch.saturating_add(1);
        let c = Coordinator {
            doc,
            stored,
            listener: None,
        };
        c.save_document()?;
        Ok((c, damaged))
    }

    /// Asserts the coordinator's invariants: each entry's ([`TxnMeta::invariant_violation`]),
    /// no producer id held by two transactional ids, and no id both served and unreadable.
    ///
    /// # Panics
    /// When one does not hold: a bug in the coordinator (entries loaded from disk that break
    /// one are set aside as unreadable, never served).
    pub fn check_invariants(&self) {
        let mut producers = std::collections::HashMap::new();
        for (id, m) in &self.stored.txns {
            if let Some(v) = m.invariant_violation() {
                panic!("transaction {id:?}: {v}");
            }
            if let Some(other) = producers.insert(m.producer_id, id) {
                panic!(
                    "transactions {other:?} and {id:?} share producer id {}",
                    m.producer_id
                );
            }
            assert!(
                !self.stored.unreadable.contains_key(id),
                "transaction {id:?} is both served and unreadable"
            );
        }
    }

    /// The document as stored: the entries, and those that did not read back as they were.
    /// Every state stored is checked first ([`Coordinator::check_invariants`], with debug
    /// assertions on).
    fn save_document(&self) -> Result<(), StoreError> {
        if cfg!(debug_assertions) {
            self.check_invariants();
        }
        let mut v = serde_json::to_value(&self.stored).map_err(|e| StoreError {
            path: std::path::PathBuf::from("transactions.json"),
            reason: e.to_string(),
        })?;
        if let Some(txns) = v.get_mut("txns").and_then(serde_json::Value::as_object_mut) {
            for (id, raw) in &self.stored.unreadable {
                txns.insert(id.clone(), raw.clone());
            }
        }
        self.doc.store(&v)
    }

    /// Tells `listener` of every marker written from now on.
    pub fn set_listener(&mut self, listener: MarkerListener) {
        self.listener = Some(listener);
    }

    /// Whether `tp` is a partition of `id`'s open transaction, with this producer id and epoch
    /// (a TxnOffsetCommit must follow its AddOffsetsToTxn).
    pub fn check_ongoing(
        &self,
        id: &str,
        pid: i64,
        epoch: i16,
        tp: &(String, i32),
    ) -> Result<(), ResponseError> {
        let m = self.check(id, pid, epoch)?;
        if m.state == TxnState::Ongoing && m.partitions.contains(tp) {
            Ok(())
        } else {
            Err(ResponseError::InvalidTxnState)
        }
    }

    fn save(&self) -> Result<(), ResponseError> {
        self.save_document().map_err(store_err)
    }

    /// Completes what a crash left in `Prepare*` (at start). A transaction whose markers cannot
    /// all be written stays as it is and is returned with the reason (the caller reports it as
    /// damaged); the others complete.
    pub async fn recover(&mut self, engine: &Engine) -> Vec<(String, String)> {
        let pending: Vec<String> = self
            .stored
            .txns
            .iter()
            .filter(|(_, m)| matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort))
            .map(|(id, _)| id.clone())
            .collect();
        let mut stuck = Vec::new();
        for id in pending {
            if let Err(e) = self.complete(engine, &id).await {
                let partitions = self
                    .stored
                    .txns
                    .get(&id)
                    .map(|m| m.partitions.clone())
                    .unwrap_or_default();
                stuck.push((
                    id,
                    format!("its markers could not all be written ({e:?}) to {partitions:?}"),
                ));
            }
        }
        stuck
    }

    /// The operator's way out for a stuck transaction: its decided outcome (`Prepare*`'s, or an
    /// abort of an `Ongoing` one, the producer fenced) is written to every partition that still
    /// takes a marker, the others (deleted, mirrored, failed) are skipped and named, and the
    /// transaction completes. An entry that did not read back is forgotten.
    ///
    /// # Errors
    /// No such transaction, one that is not stuck, or the file could not be written.
    pub async fn finish_stuck(
        &mut self,
        engine: &Engine,
        id: &str,
    ) -> Result<Finished, FinishError> {
        let unknown = || FinishError::Unknown(id.to_string());
        if self.stored.unreadable.remove(id).is_some() {
            self.save_document()?;
            return Ok(Finished {
                outcome: "forgotten",
                written: Vec::new(),
                skipped: Vec::new(),
            });
        }
        let m = self.stored.txns.get(id).ok_or_else(unknown)?;
        match m.state {
            TxnState::Ongoing => self
                .begin_end(id, false, true)
                .map_err(FinishError::Refused)?,
            TxnState::PrepareCommit | TxnState::PrepareAbort => {}
            state => {
                return Err(FinishError::NotStuck {
                    id: id.to_string(),
                    state: format!("{state:?}"),
                })
            }
        }
        let m = self.stored.txns.get(id).cloned().ok_or_else(unknown)?;
        let commit = m.state == TxnState::PrepareCommit;
        let (written, skipped) = write_markers_where_possible(
            engine,
            &m,
            commit,
            self.stored.coordinator_epoch,
            self.listener.as_ref(),
        )
        .await;
        for (t, p, why) in &skipped {
            tracing::warn!(transactional_id = id, topic = %t, partition = p, reason = %why,
                "a stuck transaction finished without its marker on this partition");
        }
        let entry = self.stored.txns.get_mut(id).ok_or_else(unknown)?;
        entry.state = if commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        entry.partitions.clear();
        entry.updated_ms = now_ms();
        self.save_document()?;
        Ok(Finished {
            outcome: if commit { "commit" } else { "abort" },
            written,
            skipped,
        })
    }

    /// Forgets every id idle (`Empty` or `Complete*`) for `expiration_ms` before `now`, as
    /// Kafka's coordinator expires transactional ids; the ids forgotten.
    pub fn expire_ids(&mut self, now: i64, expiration_ms: i64) -> Vec<String> {
        let idle: Vec<String> = self
            .stored
            .txns
            .iter()
            .filter(|(_, m)| {
                matches!(
                    m.state,
                    TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                ) && now.saturating_sub(m.updated_ms) >= expiration_ms
            })
            .map(|(id, _)| id.clone())
            .collect();
        if idle.is_empty() {
            return idle;
        }
        let before = self.stored.txns.clone();
        for id in &idle {
            self.stored.txns.remove(id);
        }
        if self.save().is_err() {
            self.stored.txns = before;
            return Vec::new();
        }
        idle
    }

    /// InitProducerId with a `transactional.id`.
    pub async fn init_producer_id(
        &mut self,
        engine: &Engine,
        ids: &mut ProducerIds,
        id: &str,
        timeout_ms: i32,
        timeout_ms_max: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), ResponseError> {
        self.refuse_unreadable(id)?;
        if timeout_ms <= 0 || timeout_ms > timeout_ms_max {
            return Err(ResponseError::InvalidTransactionTimeout);
        }
        let Some(meta) = self.stored.txns.get(id).cloned() else {
            let producer_id = ids.allocate().map_err(store_err)?;
            self.stored.txns.insert(
                id.into(),
                TxnMeta {
                    producer_id,
                    producer_epoch: 0,
                    timeout_ms,
                    state: TxnState::Empty,
                    partitions: BTreeSet::new(),
                    started_ms: 0,
                    updated_ms: now_ms(),
                },
            );
            self.save()?;
            return Ok((producer_id, 0));
        };
        if let Some((pid, epoch)) = expected {
            if pid != meta.producer_id || epoch != meta.producer_epoch {
                return Err(ResponseError::ProducerFenced);
            }
        }
        match meta.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                self.complete(engine, id).await?;
            }
            TxnState::Ongoing => {
                // Fence the old producer: abort its transaction with a bumped epoch.
                self.begin_end(id, false, true)?;
                self.complete(engine, id).await?;
            }
            _ => {}
        }
        let m = self
            .stored
            .txns
            .get_mut(id)
            .ok_or(ResponseError::UnknownServerError)?;
        if m.state == TxnState::CompleteAbort && meta.state == TxnState::Ongoing {
            // The abort above already bumped the epoch.
        } else if m.producer_epoch >= i16::MAX - 1 {
            m.producer_id = ids.allocate().map_err(store_err)?;
            m.producer_epoch = 0;
        } else {
            m.producer_epoch += 1;
        }
        m.timeout_ms = timeout_ms;
        m.state = TxnState::Empty;
        m.partitions.clear();
        m.updated_ms = now_ms();
        let out = (m.producer_id, m.producer_epoch);
        self.save()?;
        Ok(out)
    }

    /// An id whose entry did not read back is not served until the operator finishes it
    /// (a new producer id for it would let its old producer's transaction dangle).
    fn refuse_unreadable(&self, id: &str) -> Result<(), ResponseError> {
        if self.stored.unreadable.contains_key(id) {
            Err(ResponseError::CoordinatorNotAvailable)
        } else {
            Ok(())
        }
    }

    fn check(&self, id: &str, pid: i64, epoch: i16) -> Result<&TxnMeta, ResponseError> {
        self.refuse_unreadable(id)?;
        let m = self
            .stored
            .txns
            .get(id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        if m.producer_id != pid {
            return Err(ResponseError::InvalidProducerIdMapping);
        }
        if m.producer_epoch != epoch {
            return Err(ResponseError::ProducerFenced);
        }
        Ok(m)
    }

    /// AddPartitionsToTxn: `partitions` must exist (the caller checked); they join the open
    /// transaction.
    pub fn add_partitions(
        &mut self,
        id: &str,
        pid: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<(), ResponseError> {
        let m = self.check(id, pid, epoch)?;
        if matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return Err(ResponseError::ConcurrentTransactions);
        }
        let before = m.clone();
        let m = self
            .stored
            .txns
            .get_mut(id)
            .ok_or(ResponseError::UnknownServerError)?;
        if m.state != TxnState::Ongoing {
            m.state = TxnState::Ongoing;
            m.partitions.clear();
            m.started_ms = now_ms();
        }
        let grows = partitions.iter().any(|p| !m.partitions.contains(p));
        m.partitions.extend(partitions.iter().cloned());
        m.updated_ms = now_ms();
        if grows || before.state != TxnState::Ongoing {
            if let Err(e) = self.save() {
                self.stored.txns.insert(id.into(), before);
                return Err(e);
            }
        }
        Ok(())
    }

    /// EndTxn.
    pub async fn end_txn(
        &mut self,
        engine: &Engine,
        id: &str,
        pid: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), ResponseError> {
        let m = self.check(id, pid, epoch)?;
        match (m.state, commit) {
            (TxnState::Ongoing, _) => {
                self.begin_end(id, commit, false)?;
                self.complete(engine, id).await
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                self.complete(engine, id).await
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(()),
            (TxnState::PrepareCommit | TxnState::PrepareAbort, _) => {
                Err(ResponseError::ConcurrentTransactions)
            }
            _ => Err(ResponseError::InvalidTxnState),
        }
    }

    /// `Ongoing` → `Prepare*`, durably; `bump`: with the epoch bumped (a fencing abort).
    fn begin_end(&mut self, id: &str, commit: bool, bump: bool) -> Result<(), ResponseError> {
        let m = self
            .stored
            .txns
            .get_mut(id)
            .ok_or(ResponseError::UnknownServerError)?;
        let before = m.clone();
        m.state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        if bump {
            m.producer_epoch = m.producer_epoch.saturating_add(1);
        }
        if let Err(e) = self.save() {
            self.stored.txns.insert(id.into(), before);
            return Err(e);
        }
        Ok(())
    }

    /// Writes the markers of a `Prepare*` transaction, then `Complete*` durably.
    async fn complete(&mut self, engine: &Engine, id: &str) -> Result<(), ResponseError> {
        let m = self
            .stored
            .txns
            .get(id)
            .ok_or(ResponseError::UnknownServerError)?
            .clone();
        let commit = m.state == TxnState::PrepareCommit;
        write_markers(
            engine,
            &m,
            commit,
            self.stored.coordinator_epoch,
            self.listener.as_ref(),
        )
        .await?;
        let m = self
            .stored
            .txns
            .get_mut(id)
            .ok_or(ResponseError::UnknownServerError)?;
        m.state = if commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        m.partitions.clear();
        m.updated_ms = now_ms();
        self.save()
    }

    /// Aborts, with the epoch bumped, every transaction open past its timeout; the ids aborted.
    pub async fn abort_timed_out(&mut self, engine: &Engine, now: i64) -> Vec<String> {
        let late: Vec<String> = self
            .stored
            .txns
            .iter()
            .filter(|(_, m)| {
                m.state == TxnState::Ongoing && now - m.started_ms > i64::from(m.timeout_ms)
            })
            .map(|(id, _)| id.clone())
            .collect();
        let mut done = Vec::new();
        for id in late {
            if self.begin_end(&id, false, true).is_ok() && self.complete(engine, &id).await.is_ok()
            {
                done.push(id);
            }
        }
        done
    }
}

/// The marker ending `m`'s transaction.
fn marker_bytes(m: &TxnMeta, commit: bool, coordinator_epoch: i32) -> bytes::Bytes {
    bytes::Bytes::from(build_marker(&MarkerSpec {
        base_offset: Offset(0),
        partition_leader_epoch: 0,
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
        commit,
        coordinator_epoch,
        timestamp: now_ms(),
    }))
}

/// One marker per partition of `m`'s transaction where it can be written; the partitions
/// written, and those that refused it (with why).
async fn write_markers_where_possible(
    engine: &Engine,
    m: &TxnMeta,
    commit: bool,
    coordinator_epoch: i32,
    listener: Option<&MarkerListener>,
) -> (Vec<(String, i32)>, Vec<(String, i32, String)>) {
    let marker = marker_bytes(m, commit, coordinator_epoch);
    let (mut written, mut skipped) = (Vec::new(), Vec::new());
    for (t, p) in &m.partitions {
        let tp = TopicPartition::new(t, *p);
        match engine
            .append(&tp, marker.clone(), Origin::Coordinator)
            .await
        {
            Ok(_) => {
                if let Some(l) = listener {
                    l(&tp, m.producer_id, commit);
                }
                written.push((t.clone(), *p));
            }
            Err(e) => skipped.push((t.clone(), *p, e.to_string())),
        }
    }
    (written, skipped)
}

/// One marker per partition of `m`'s transaction; `listener` is told of each written.
async fn write_markers(
    engine: &Engine,
    m: &TxnMeta,
    commit: bool,
    coordinator_epoch: i32,
    listener: Option<&MarkerListener>,
) -> Result<(), ResponseError> {
    let marker = marker_bytes(m, commit, coordinator_epoch);
    let calls: Vec<_> = m
        .partitions
        .iter()
        .map(|(t, p)| {
            let tp = TopicPartition::new(t, *p);
            let call = engine.append(&tp, marker.clone(), Origin::Coordinator);
            (tp, call)
        })
        .collect();
    let mut first_error = None;
    for (tp, call) in calls {
        match call.await {
            Ok(_) => {
                if let Some(l) = listener {
                    l(&tp, m.producer_id, commit);
                }
            }
            // A partition deleted since it joined has no transaction left to end.
            Err(EngineError::UnknownPartition(_)) => {}
            Err(e) => {
                tracing::warn!(error = %e, "writing a transaction marker failed");
                first_error.get_or_insert(ResponseError::KafkaStorageError);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests;
