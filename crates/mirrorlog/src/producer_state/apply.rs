//! Applying a staged append: the staged entries, open and completed transactions become the
//! state in one step (a barrier in a Local range clears the table first).

use super::table::Table;
use super::{
    ColdHistory, CompletedTxn, HotEntry, OpenTxns, PackedEntry, ProducerStateError,
    ProducerStateManager, Staged, StagedOne,
};
use crate::format::Offset;

impl ProducerStateManager {
    /// Makes a staged append the state. Returns the transactions it completed, in order.
    ///
    /// # Errors
    /// [`ProducerStateError::StaleStage`] if anything changed since `staged` was produced.
    #[inline(always)]
    pub fn apply(&mut self, staged: Staged) -> Result<&[CompletedTxn], ProducerStateError> {
        if staged.mutation != self.mutation || staged.stage != self.stage {
            return Err(ProducerStateError::StaleStage);
        }
        self.mutation += 1;
        if staged.duplicate.is_some() {
            self.staging.reset();
            return Ok(&[]);
        }
        if self.staging.has_one {
            self.staging.has_one = false;
            self.apply_one();
            return Ok(&[]);
        }
        if self.staging.has_many {
            self.staging.has_many = false;
            self.apply_distinct();
            return Ok(&[]);
        }
        Ok(self.apply_pending())
    }

    /// [`ProducerStateManager::apply`] of what `stage_batches` staged.
    #[inline(never)]
    fn apply_pending(&mut self) -> &[CompletedTxn] {
        if self.staging.clears {
            self.clear_for_barrier();
        }
        let mut txns_changed = false;
        for p in &self.staging.pending {
            let entry = p.final_entry();
            match p.slot {
                // The slot index is still valid: nothing changed since `stage` (checked above).
                Some(slot) if !self.staging.clears => {
                    let (hot, cold) = self.table.at_mut(slot as usize);
                    *hot = entry.hot;
                    *cold = entry.cold;
                }
                _ => {
                    // `stage` counted new producers against the limit, so this cannot fail.
                    let inserted = self.table.insert(p.producer_id, entry.hot, entry.cold);
                    debug_assert!(inserted.is_ok());
                }
            }
            if p.committed_txn_open && p.txn_first_offset.is_none() {
                self.open.close(p.producer_id);
                txns_changed = true;
            }
        }
        // Transactions opened by this append, in offset order, if still open at its end.
        for &(first, id) in &self.staging.started {
            let still_open = self
                .staging
                .find(id)
                .and_then(|i| self.staging.pending[i].txn_first_offset)
                == Some(first);
            if still_open {
                let opened = self.open.open(id, first);
                debug_assert!(opened.is_ok());
                txns_changed = true;
            }
        }
        // Kafka's lastStableOffset per completed transaction: transactions completed later in
        // the same append still count as open when an earlier one completes.
        let completed = &mut self.staging.completed;
        for i in 0..completed.len() {
            let done = completed[i];
            let later = completed[i + 1..]
                .iter()
                .filter(|c| c.producer_id != done.producer_id)
                .map(|c| c.first_offset)
                .min();
            let open = self.open.first_open_excluding(done.producer_id);
            let next_incomplete = match (open, later) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            completed[i].last_stable_offset =
                next_incomplete.unwrap_or(Offset(done.last_offset.0 + 1));
        }
        if txns_changed {
            self.open.tidy();
        }
        #[cfg(debug_assertions)]
        self.check_invariants();
        &self.staging.completed
    }

    /// [`ProducerStateManager::apply`] of what `stage_distinct` validated: each batch joins
    /// its producer's history as a single batch does, in offset order.
    #[inline(never)]
    fn apply_distinct(&mut self) {
        let mut opened = false;
        for one in &self.staging.many {
            opened |= record_one(&mut self.table, &mut self.open, one);
        }
        self.staging.many.clear();
        if opened {
            self.open.tidy();
        }
        #[cfg(debug_assertions)]
        self.check_invariants();
    }

    /// [`ProducerStateManager::apply`] of the single data batch `stage_one` validated: it
    /// joins the producer's history in place. A data batch never closes a transaction; it may
    /// open one.
    #[inline(always)]
    fn apply_one(&mut self) {
        // Read field by field where it lies (not copied whole: see `StagedOne`).
        if record_one(&mut self.table, &mut self.open, &self.staging.one) {
            self.open.tidy();
        }
        #[cfg(debug_assertions)]
        self.check_invariants();
    }
}

/// Records one validated data batch into its producer's entry; returns whether it opened a
/// transaction (the caller tidies the open list).
#[inline(always)]
fn record_one(
    table: &mut Table<HotEntry, ColdHistory>,
    open: &mut OpenTxns,
    one: &StagedOne,
) -> bool {
    let producer_id = one.producer_id;
    if one.slot == StagedOne::NO_SLOT {
        let mut entry = PackedEntry::FILLER;
        entry
            .hot
            .add_batch(&mut entry.cold, one.epoch, &one.metadata);
        entry.hot.set_txn_open(one.opens);
        // `stage` checked the limit, so this cannot fail.
        let inserted = table.insert(producer_id, entry.hot, entry.cold);
        debug_assert!(inserted.is_ok());
    } else {
        // Still valid: nothing changed since `stage` (checked by `apply`), and inserts append
        // slots without moving existing ones.
        let (hot, cold) = table.at_mut(one.slot as usize);
        hot.add_batch(cold, one.epoch, &one.metadata);
        if one.opens {
            hot.set_txn_open(true);
        }
    }
    if one.opens {
        let opened = open.open(producer_id, one.base_offset);
        debug_assert!(opened.is_ok());
    }
    one.opens
}
