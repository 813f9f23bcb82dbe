//! Truncation (Kafka's `truncateTo`): the segment holding the cut is reopened with its cut
//! durable first (under the segment intent), later segments are deleted, and the producer state,
//! epoch cache, mode history and aborted-transaction list are cut to the new end.

use super::{
    classify, clear_intent, read_direct, unlink_if_present, write_intent, write_recovery_point,
    LogError, PartitionLog,
};
use crate::format::{BatchIter, Offset};
use crate::io::{self, Io, Op};
use crate::producer_state::snapshot_file_name;
use crate::segment::{self, SegmentWriter};

impl PartitionLog {
    /// Truncates the log so that it ends at `offset`: the batch holding `offset` and everything
    /// after it go, and the log end becomes `offset` (Kafka's `truncateTo`). Later segments are
    /// deleted, the segment holding the cut becomes the active one again, the producer state is
    /// rebuilt from the newest snapshot at or below the new end plus a replay, and the epoch
    /// cache and aborted-transaction list are cut. When `offset` lies past the batches that
    /// remain (in an offset gap, or inside the batch that went), a new empty segment starts at
    /// `offset` so the end is durable (recorded in `segment-gaps`). Returns the new log end.
    ///
    /// # Errors
    /// [`LogError::OffsetOutOfRange`] below the log start, or an I/O failure.
    pub fn truncate_to(&mut self, io: &mut dyn Io, offset: Offset) -> Result<Offset, LogError> {
        self.check()?;
        if offset >= self.log_end() {
            return Ok(self.log_end());
        }
        self.segments_generation += 1;
        if offset < self.log_start {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start,
                log_end: self.log_end(),
            });
        }
        self.commit(io)?;
        let bases_before = self.segment_base_offsets();
        // The segment holding the cut and the cut's position in it.
        let in_active = offset >= self.active.base_offset();
        let (index, base) = if in_active {
            (self.sealed.len(), self.active.base_offset())
        } else {
            let i = self
                .sealed
                .iter()
                .rposition(|s| s.base_offset <= offset)
                .unwrap_or(0);
            (i, self.sealed[i].base_offset)
        };
        // The holding segment is about to change (and the snapshots past the cut to go): a crash
        // from here must scan it again.
        if base < self.recovery_point {
            write_recovery_point(io, &self.dir, base).map_err(|e| self.poison(classify(e)))?;
            self.recovery_point = base;
        }
        let bytes = if in_active {
            self.active
                .read_durable(io, 0, self.active.durable().data_len as usize)?
        } else {
            read_direct(
                io,
                self.sealed[index].file,
                0,
                self.sealed[index].data_len as usize,
            )?
        };
        // The batch holding `offset`, or the first after it, goes with everything after it;
        // the batches before it end at `data_end`.
        let mut cut_position = bytes.len() as u64;
        let mut data_end = base;
        for b in BatchIter::new(&bytes, 0) {
            if b.header().last_offset() >= offset {
                cut_position = b.position();
                break;
            }
            data_end = Offset(b.header().last_offset().0 + 1);
        }
        let new_end = offset;
        // Snapshots past the new end describe records about to go: delete them first, so that
        // no crash leaves one to be loaded over the records appended after the truncation.
        for b in self
            .snapshot_offsets(io)?
            .into_iter()
            .filter(|&b| b > data_end)
        {
            unlink_if_present(io, self.dir.join(snapshot_file_name(b)))
                .map_err(|e| self.poison(classify(e)))?;
        }
        // ... durably: an unlink the directory never recorded comes back after a power cut.
        io::fsync_dir(io, &self.dir).map_err(|e| self.poison(classify(e)))?;
        let sequence = self.active.sequence();
        if in_active {
            self.active
                .truncate(io, cut_position, data_end)
                .map_err(|e| self.poison(classify(e)))?;
        } else {
            // Reopen the holding segment first (its cut is durable before anything is deleted),
            // then delete everything after it; the intent covers a crash in between.
            write_intent(io, &self.dir, base, cut_position).map_err(|e| self.poison(e))?;
            let reopened = SegmentWriter::reopen(
                io,
                &self.dir,
                base,
                self.config.segment,
                sequence,
                cut_position,
                data_end,
            )
            .map_err(|e| self.poison(classify(e)))?;
            let old_active = std::mem::replace(&mut self.active, reopened);
            let old_base = old_active.base_offset();
            old_active.close(io).map_err(|e| self.poison(classify(e)))?;
            self.delete_segment_files(io, old_base)?;
            while self.sealed.len() > index {
                let Some(s) = self.sealed.pop() else { break };
                let mut others = Vec::new();
                io::run(io, Op::Close { file: s.file }, &mut others)
                    .and_then(|c| c.result)
                    .map_err(|e| self.poison(classify(e)))?;
                if s.base_offset != base {
                    self.delete_segment_files(io, s.base_offset)?;
                }
            }
            clear_intent(io, &self.dir).map_err(|e| self.poison(e))?;
            self.prune_gaps(io);
        }
        if self.epochs.truncate_from_end(data_end) {
            self.write_epoch_checkpoint(io)?;
        }
        // The mode history loses the cut ranges; the mode itself does not change.
        let kind = self.current_kind();
        if self.history.truncate(new_end, kind) {
            self.write_history(io)?;
        }
        let mut snapshots = bases_before;
        snapshots.extend(self.snapshot_offsets(io)?);
        self.rebuild_producer_state(io, data_end, &snapshots)?;
        if new_end > data_end {
            // The end lies in an offset gap (or inside the batch that went): the log ends
            // there, as Kafka's `truncateTo` sets it, and a segment named by it makes that
            // durable (design.md §Mirroring: a follower's next append starts there).
            self.roll_to(io, new_end, true)?;
        }
        self.debug_check_invariants();
        Ok(new_end)
    }

    fn delete_segment_files(&mut self, io: &mut dyn Io, base: Offset) -> Result<(), LogError> {
        for path in segment::file_paths(&self.dir, base) {
            unlink_if_present(io, path).map_err(|e| self.poison(classify(e)))?;
        }
        Ok(())
    }
}
