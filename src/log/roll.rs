//! Rolling: sealing the active segment (trimmed to Kafka's bytes, indexes and `.txnindex`
//! written, the producer state snapshotted under the next offset) and starting a new one.

use super::{classify, LogError, PartitionLog, Sealed};
use crate::io::{self, Io};
use crate::producer_state::snapshot_file_name;
use crate::segment::{self, SealedSegment, SegmentWriter};

impl PartitionLog {
    /// The `.txnindex` of a sealed segment: the aborted transactions whose ABORT marker it
    /// holds.
    pub(super) fn txn_index_bytes(&self, sealed: &SealedSegment) -> Vec<u8> {
        self.aborted
            .iter()
            .filter(|a| a.last_offset >= sealed.base_offset && a.last_offset < sealed.next_offset)
            .flat_map(|a| a.encode())
            .collect()
    }

    /// Seals the active segment, snapshots the producer state and starts a new segment.
    ///
    /// # Errors
    /// An I/O failure.
    pub fn roll(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        self.check()?;
        if self.active.data_len() == 0 {
            // An empty segment stays: a new one would start at the same offset (found by the
            // log model test: two segments with one file name).
            return Ok(());
        }
        let next = self.log_end();
        let span = tracing::info_span!("roll", dir = %self.dir.display(), next = next.0);
        let _enter = span.enter();
        let sequence = self.active.sequence();
        let fresh = match SegmentWriter::create(io, &self.dir, next, self.config.segment, sequence)
        {
            Ok(w) => w,
            Err(e) => return Err(self.poison(classify(e))),
        };
        let old = std::mem::replace(&mut self.active, fresh);
        // From here the roll cannot be undone. Sealing and reopening the old segment need no
        // new space (a write into preallocated pages, a truncate, an open of an existing
        // file): any failure there poisons, ENOSPC included.
        let sealed = match old.seal(io) {
            Ok(s) => s,
            Err(e) => return Err(self.poison_always(classify(e))),
        };
        let file = match segment::open_for_reads(io, &self.dir, sealed.base_offset) {
            Ok(f) => f,
            Err(e) => return Err(self.poison_always(classify(e))),
        };
        // The files derived from the sealed segment are new files: on ENOSPC the segment
        // still joins the log (its data whole and readable), and the next open rebuilds them
        // (found by the injected-ENOSPC tests: the sealed data used to vanish from reads).
        let txn_entries = self.txn_index_bytes(&sealed);
        let snapshot = self.psm.snapshot();
        let derived = sealed
            .write_indexes(io, &self.dir)
            .map_err(classify)
            .and_then(|()| {
                io::write_file(
                    io,
                    &segment::txn_index_path(&self.dir, sealed.base_offset),
                    &txn_entries,
                )
                .and_then(|()| {
                    io::write_file_atomically(io, &self.dir, &snapshot_file_name(next), &snapshot)
                })
                .map_err(classify)
            });
        self.sealed.push(Sealed { meta: sealed, file });
        if let Err(e) = derived {
            self.derived_incomplete = true;
            return Err(self.poison(e));
        }
        self.debug_check_invariants();
        Ok(())
    }
}
