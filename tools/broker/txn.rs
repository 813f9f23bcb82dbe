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

use crate::producer_ids::ProducerIds;
use crate::store::{Document, StoreError};
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
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Stored {
    coordinator_epoch: i32,
    txns: BTreeMap<String, TxnMeta>,
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

fn store_err(_: StoreError) -> ResponseError {
    ResponseError::CoordinatorNotAvailable
}

impl Coordinator {
    /// Loads the coordinator from `dir` and bumps its epoch durably.
    pub fn open(dir: &std::path::Path) -> Result<Self, StoreError> {
        let doc = Document::new(dir, "transactions.json")?;
        let mut stored: Stored = doc.load()?.unwrap_or_default();
        stored.coordinator_epoch = stored.coordinator_epoch.saturating_add(1);
        doc.store(&stored)?;
        Ok(Coordinator {
            doc,
            stored,
            listener: None,
        })
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
        self.doc.store(&self.stored).map_err(store_err)
    }

    /// Completes what a crash left in `Prepare*` (at start).
    pub async fn recover(&mut self, engine: &Engine) -> Result<(), ResponseError> {
        let pending: Vec<String> = self
            .stored
            .txns
            .iter()
            .filter(|(_, m)| matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort))
            .map(|(id, _)| id.clone())
            .collect();
        for id in pending {
            self.complete(engine, &id).await?;
        }
        Ok(())
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
        let out = (m.producer_id, m.producer_epoch);
        self.save()?;
        Ok(out)
    }

    fn check(&self, id: &str, pid: i64, epoch: i16) -> Result<&TxnMeta, ResponseError> {
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

/// One marker per partition of `m`'s transaction; `listener` is told of each written.
async fn write_markers(
    engine: &Engine,
    m: &TxnMeta,
    commit: bool,
    coordinator_epoch: i32,
    listener: Option<&MarkerListener>,
) -> Result<(), ResponseError> {
    let marker = bytes::Bytes::from(build_marker(&MarkerSpec {
        base_offset: Offset(0),
        partition_leader_epoch: 0,
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
        commit,
        coordinator_epoch,
        timestamp: now_ms(),
    }));
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
