//! What the cleaner knows of transactions while it walks the log (Kafka's
//! `CleanedTransactionMetadata`): which batches belong to aborted transactions (removed), and
//! when a COMMIT or ABORT marker may go (only once no batch of its transaction remains, and its
//! delete horizon has passed: see `filter.rs`).
//!
//! It is fed the aborted transactions overlapping the range being walked (from the `.txnindex`
//! files, whose entries live with their ABORT marker, possibly in a later segment), then every
//! batch in offset order. It is carried from one group of segments to the next within a pass.

use crate::format::{BatchHeader, BatchKind, Offset};
use crate::producer_state::AbortedTxn;
use std::collections::{BTreeMap, HashMap, HashSet};

/// See the module docs.
#[derive(Debug, Default)]
pub(super) struct CleanedTransactions {
    /// Producers whose current transaction has batches the walk saw, and is not aborted.
    ongoing_committed: HashSet<i64>,
    /// Producers whose current transaction is aborted: the transaction, and the last offset of
    /// its batches the walk saw.
    ongoing_aborted: HashMap<i64, (AbortedTxn, Option<Offset>)>,
    /// Aborted transactions not yet reached, by first offset.
    pending: BTreeMap<(Offset, i64), AbortedTxn>,
    /// ABORT markers kept whose transaction still has batches: the cleaned `.txnindex`.
    kept_aborts: Vec<AbortedTxn>,
}

impl CleanedTransactions {
    /// Adds aborted transactions the walk will reach (duplicates are ignored).
    pub(super) fn add_aborted(&mut self, aborted: impl IntoIterator<Item = AbortedTxn>) {
        for a in aborted {
            self.pending.insert((a.first_offset, a.producer_id), a);
        }
    }

    /// Moves the aborted transactions starting at or before `offset` into the ongoing set.
    fn reach(&mut self, offset: Offset) {
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 > offset {
                break;
            }
            let a = entry.remove();
            self.ongoing_aborted
                .entry(a.producer_id)
                .or_insert((a, None));
        }
    }

    /// A control batch: whether it may be discarded (its transaction has no batch left here:
    /// the walk saw none of it; an empty control batch, already cleaned). Other control
    /// batches (the barrier) are never discardable.
    pub(super) fn on_control_batch(&mut self, header: &BatchHeader, kind: BatchKind) -> bool {
        self.reach(header.last_offset());
        let producer = header.producer.producer_id;
        match kind {
            BatchKind::TxnMarker { commit: false, .. } => {
                match self.ongoing_aborted.remove(&producer) {
                    Some((txn, Some(_))) => {
                        self.kept_aborts.push(txn);
                        false
                    }
                    _ => true,
                }
            }
            BatchKind::TxnMarker { commit: true, .. } => !self.ongoing_committed.remove(&producer),
            BatchKind::EmptyControl => true,
            BatchKind::Barrier | BatchKind::OtherControl { .. } | BatchKind::Data => false,
        }
    }

    /// A data batch: whether it belongs to an aborted transaction (and may be discarded).
    pub(super) fn on_data_batch(&mut self, header: &BatchHeader) -> bool {
        let last = header.last_offset();
        self.reach(last);
        if !header.attributes.is_transactional() {
            return false;
        }
        let producer = header.producer.producer_id;
        match self.ongoing_aborted.get_mut(&producer) {
            Some((_, seen)) => {
                *seen = Some(last);
                true
            }
            None => {
                self.ongoing_committed.insert(producer);
                false
            }
        }
    }

    /// The ABORT markers kept since the last call whose transaction still has batches: the
    /// entries of the cleaned segment's `.txnindex`.
    pub(super) fn take_kept_aborts(&mut self) -> Vec<AbortedTxn> {
        std::mem::take(&mut self.kept_aborts)
    }
}
