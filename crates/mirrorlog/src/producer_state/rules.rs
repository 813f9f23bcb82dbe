//! The Kafka rules, to be read next to Kafka's `ProducerAppendInfo`: the epoch check
//! (`checkProducerEpoch`), the sequence check (`checkSequence`, Client origin only), a data
//! batch's effect (`appendDataBatch`) and an end-transaction marker's (`appendEndTxnMarker`).
//! Each check changes nothing; the effects are applied to a pending entry.

use super::{BatchInfo, ColdHistory, CompletedTxn, HotEntry, Origin, Pending, ProducerStateError};
use crate::format::{sequence, Offset};

/// What the data and marker rules read of a producer: its entry as staged so far, and what
/// was committed before this append.
pub(super) struct Current<'a> {
    pub(super) producer_id: i64,
    pub(super) entry: &'a HotEntry,
    /// Its epoch before this append (Kafka's `currentEntry.producerEpoch`).
    pub(super) committed_epoch: i16,
    /// First offset of its open transaction, as staged.
    pub(super) txn_first_offset: Option<Offset>,
}

impl Pending {
    pub(super) fn current(&self) -> Current<'_> {
        Current {
            producer_id: self.producer_id,
            entry: &self.entry.hot,
            committed_epoch: self.committed_epoch,
            txn_first_offset: self.txn_first_offset,
        }
    }
}

/// Kafka's `checkProducerEpoch`.
fn check_epoch(
    p: &Current<'_>,
    batch: &BatchInfo,
    origin: Origin,
) -> Result<(), ProducerStateError> {
    let epoch = batch.producer.producer_epoch;
    let current_epoch = p.entry.epoch();
    if epoch < current_epoch && !origin.accepts_stale_epochs() {
        return Err(ProducerStateError::InvalidProducerEpoch {
            producer_id: p.producer_id,
            offset: batch.base_offset,
            epoch,
            current_epoch,
        });
    }
    Ok(())
}

/// Kafka's `checkSequence` (Client origin only).
fn check_sequence(p: &Current<'_>, batch: &BatchInfo) -> Result<(), ProducerStateError> {
    let epoch = batch.producer.producer_epoch;
    let current_epoch = p.entry.epoch();
    let first_seq = batch.producer.base_sequence;
    let in_order = if epoch != current_epoch {
        // A new epoch starts at 0, unless the producer's epoch is unknown.
        first_seq == 0 || current_epoch == crate::format::NO_PRODUCER_EPOCH
    } else {
        // With no epoch known before this append (no entry, or one whose history was lost to
        // retention), any sequence is accepted.
        p.committed_epoch == crate::format::NO_PRODUCER_EPOCH
            || sequence::in_sequence(p.entry.last_seq(), first_seq)
    };
    if in_order {
        Ok(())
    } else {
        Err(ProducerStateError::OutOfOrderSequence {
            producer_id: p.producer_id,
            offset: batch.base_offset,
            epoch,
            first_seq,
            current_epoch,
            last_seq: p.entry.last_seq(),
        })
    }
}

/// The rules of Kafka's `appendDataBatch`, changing nothing. Returns whether the batch opens a
/// transaction.
pub(super) fn check_data(
    p: &Current<'_>,
    batch: &BatchInfo,
    origin: Origin,
) -> Result<bool, ProducerStateError> {
    check_epoch(p, batch, origin)?;
    if origin == Origin::Client {
        check_sequence(p, batch)?;
    }
    match (p.txn_first_offset, batch.transactional) {
        (Some(txn_first_offset), false) => Err(ProducerStateError::InvalidTxnState {
            producer_id: p.producer_id,
            offset: batch.base_offset,
            txn_first_offset,
        }),
        (None, true) => Ok(true),
        _ => Ok(false),
    }
}

/// Kafka's `appendDataBatch`'s effect on the entry: the batch joins the history.
fn record_data(entry: &mut HotEntry, cold: &mut ColdHistory, batch: &BatchInfo) {
    entry.add_batch(cold, batch.producer.producer_epoch, &batch.metadata());
}

/// Kafka's `appendDataBatch` on a pending entry. Returns whether the batch opened a
/// transaction.
pub(super) fn stage_data(
    p: &mut Pending,
    batch: &BatchInfo,
    origin: Origin,
) -> Result<bool, ProducerStateError> {
    let opens = check_data(&p.current(), batch, origin)?;
    record_data(&mut p.entry.hot, &mut p.entry.cold, batch);
    if opens {
        p.txn_first_offset = Some(batch.base_offset);
    }
    Ok(opens)
}

/// Kafka's `appendEndTxnMarker`.
pub(super) fn stage_marker(
    p: &mut Pending,
    batch: &BatchInfo,
    origin: Origin,
    commit: bool,
    coordinator_epoch: i32,
) -> Result<Option<CompletedTxn>, ProducerStateError> {
    check_epoch(&p.current(), batch, origin)?;
    let current = p.entry.hot.coordinator_epoch();
    if current > coordinator_epoch && !origin.accepts_stale_epochs() {
        return Err(ProducerStateError::CoordinatorFenced {
            producer_id: p.producer_id,
            offset: batch.base_offset,
            coordinator_epoch,
            current_coordinator_epoch: current,
        });
    }
    let completed = p.txn_first_offset.take().map(|first_offset| CompletedTxn {
        producer_id: p.producer_id,
        first_offset,
        last_offset: batch.base_offset,
        aborted: !commit,
        last_stable_offset: Offset(batch.base_offset.0 + 1),
    });
    p.entry.hot.update_epoch(batch.producer.producer_epoch);
    p.entry.hot.set_coordinator_epoch(coordinator_epoch);
    p.entry.hot.set_last_timestamp(batch.timestamp);
    Ok(completed)
}
