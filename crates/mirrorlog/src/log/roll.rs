//! Rolling: sealing the active segment (trimmed to Kafka's bytes, indexes and `.txnindex`
//! written, the producer state snapshotted under the next offset) and starting a new one.

use super::{classify, segment_gaps, write_recovery_point, LogError, PartitionLog, Sealed};
use crate::format::Offset;
use crate::io::{self, Io};
use crate::producer_state::snapshot_file_name;
use crate::segment::{self, SegmentWriter};

impl PartitionLog {
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
        self.roll_to(io, self.log_end(), true)
    }

    /// Seals the active segment (even an empty one) and starts a new one at `next`, at or past
    /// the log end. A start past the log end is a gap between segments: recorded in
    /// `segment-gaps` first, durably, so that recovery tells it from a missing segment. With
    /// `snapshot`, the producer state is snapshotted under `next` (a roll in the middle of an
    /// append has not applied the append's producer state yet: it writes none, and the next
    /// recovery rebuilds it).
    ///
    /// # Errors
    /// An I/O failure.
    pub(super) fn roll_to(
        &mut self,
        io: &mut dyn Io,
        next: Offset,
        snapshot: bool,
    ) -> Result<(), LogError> {
        debug_assert!(next >= self.log_end() && next > self.active.base_offset());
        if next > self.log_end() {
            self.record_gap(io, next)?;
        }
        let span = tracing::info_span!("roll", dir = %self.dir.display(), next = next.0);
        let _enter = span.enter();
        let sequence = self.active.sequence();
        // The sealed segment's read handle is opened first, while the roll can still be given
        // up: with no descriptor left (EMFILE) the roll fails and changes nothing, instead of
        // poisoning the partition after the swap.
        let file = match segment::open_for_reads(io, &self.dir, self.active.base_offset()) {
            Ok(f) => f,
            Err(e) => return Err(self.poison(classify(e))),
        };
        let fresh = match SegmentWriter::create(io, &self.dir, next, self.config.segment, sequence)
        {
            Ok(w) => w,
            Err(e) => {
                let _ = io::run(io, io::Op::Close { file }, &mut Vec::new());
                return Err(self.poison(classify(e)));
            }
        };
        let old = std::mem::replace(&mut self.active, fresh);
        // From here the roll cannot be undone. Sealing the old segment needs no new space nor
        // descriptor (a write into preallocated pages, a truncate): any failure there poisons,
        // ENOSPC included.
        let sealed = match old.seal(io) {
            Ok(s) => s,
            Err(e) => {
                let _ = io::run(io, io::Op::Close { file }, &mut Vec::new());
                return Err(self.poison_always(classify(e)));
            }
        };
        // The files derived from the sealed segment are new files: on ENOSPC the segment
        // still joins the log (its data whole and readable), and the next open rebuilds them
        // (found by the injected-ENOSPC tests: the sealed data used to vanish from reads).
        let txn_entries = super::encode_txn_index(&self.aborted);
        let snapshot = snapshot.then(|| self.psm.snapshot());
        let derived = sealed
            .write_indexes(io, &self.dir)
            .map_err(classify)
            .and_then(|()| {
                io::write_file(
                    io,
                    &segment::txn_index_path(&self.dir, sealed.base_offset),
                    &txn_entries,
                )
                .and_then(|()| match &snapshot {
                    Some(bytes) => {
                        io::write_file_atomically(io, &self.dir, &snapshot_file_name(next), bytes)
                    }
                    None => Ok(()),
                })
                .map_err(classify)
            });
        // Every abort of the active segment is the sealed one's now.
        let aborted = std::mem::take(&mut self.aborted);
        self.sealed
            .push(Sealed::from_segment(sealed, file, aborted));
        if let Err(e) = derived {
            self.derived_incomplete = true;
            return Err(self.poison(e));
        }
        // The sealed segment, its derived files and the snapshot at `next` are durable: a crash
        // from here need not scan it (`recovery_point.rs`). ENOSPC only costs a scan then; any
        // other failure poisons, as every failed write does.
        if snapshot.is_some() {
            self.advance_recovery_point(io, next)?;
        }
        self.debug_check_invariants();
        Ok(())
    }

    /// Moves the recovery point up to `point` (a segment base whose predecessors and snapshot are
    /// durable). ENOSPC leaves it where it was (recovery scans more); another failure poisons.
    pub(super) fn advance_recovery_point(
        &mut self,
        io: &mut dyn Io,
        point: Offset,
    ) -> Result<(), LogError> {
        if point == self.recovery_point {
            return Ok(());
        }
        match write_recovery_point(io, &self.dir, point).map_err(classify) {
            Ok(()) => {
                self.recovery_point = point;
                Ok(())
            }
            Err(LogError::DiskFull | LogError::TooManyOpenFiles { .. }) => Ok(()),
            Err(e) => Err(self.poison(e)),
        }
    }

    /// Records, durably, that the segment about to start at `base` starts past the log end;
    /// entries of segments gone since are dropped on the way.
    fn record_gap(&mut self, io: &mut dyn Io, base: Offset) -> Result<(), LogError> {
        let mut gaps = self.live_gaps();
        gaps.push(base);
        gaps.sort_unstable();
        gaps.dedup();
        segment_gaps::write_gaps(io, &self.dir, &gaps).map_err(|e| self.poison(classify(e)))?;
        self.gaps = gaps;
        Ok(())
    }

    /// The recorded gaps of segments that exist and are not the first.
    fn live_gaps(&self) -> Vec<Offset> {
        let bases = self.segment_base_offsets();
        self.gaps
            .iter()
            .copied()
            .filter(|g| bases.iter().skip(1).any(|b| b == g))
            .collect()
    }

    /// After segments were deleted (truncation, retention): drops the gaps of segments gone or
    /// now first. A failure to rewrite the file is not an error: a stale entry only names a
    /// segment that is not there.
    pub(super) fn prune_gaps(&mut self, io: &mut dyn Io) {
        let live = self.live_gaps();
        if live.len() != self.gaps.len() && segment_gaps::write_gaps(io, &self.dir, &live).is_ok() {
            self.gaps = live;
        }
    }
}
