//! The rewrite phase of a pass (Kafka's `cleanSegments` and `cleanInto`): each group of
//! segments through the rules (`filter.rs`) into one cleaned segment, swapped in for the group
//! (`swap.rs`); then the checkpoint.

use super::super::recovery_point::write_partition_checkpoint;
use super::super::{classify, LogError, PartitionLog, Sealed};
use super::filter::{filter_batch, LastRecord, Rules};
use super::swap::{self, CleanedSegment};
use super::{CleanPass, Phase, CLEANER_OFFSET_CHECKPOINT};
use crate::format::{inspect, FormatError, Offset};
use crate::io::{self, Io};
use crate::producer_state::AbortedTxn;

impl PartitionLog {
    /// Cleans one chunk of the current group (starting the group, or finishing it with its
    /// swap, when that is next). Returns the bytes read.
    pub(super) fn clean_chunk(
        &mut self,
        io: &mut dyn Io,
        pass: &mut CleanPass,
    ) -> Result<usize, LogError> {
        let (group, segment, position, mut out) = match &mut pass.phase {
            Phase::Clean {
                group,
                segment,
                position,
                out,
            } => (*group, *segment, *position, out.take()),
            _ => return Ok(0),
        };
        let result = self.clean_chunk_of(io, pass, (group, segment, position), &mut out);
        // The cleaned segment being written goes back with the pass (an error leaves it there
        // for `abandon_clean` to remove).
        if let Some(o) = out {
            match &mut pass.phase {
                Phase::Clean { out: slot, .. } => *slot = Some(o),
                _ => o.abandon(io, &self.dir),
            }
        }
        result
    }

    pub(super) fn clean_chunk_of(
        &mut self,
        io: &mut dyn Io,
        pass: &mut CleanPass,
        (group, segment, position): (usize, usize, u64),
        out: &mut Option<CleanedSegment>,
    ) -> Result<usize, LogError> {
        let Some(bases) = pass.groups.get(group).cloned() else {
            self.finish_pass(io, pass)?;
            return Ok(0);
        };
        let first = bases[0];
        let group_end_index = self
            .sealed
            .iter()
            .position(|s| s.base_offset == bases[bases.len() - 1]);
        let (Some(first_index), Some(last_index)) = (
            self.sealed.iter().position(|s| s.base_offset == first),
            group_end_index,
        ) else {
            return Err(LogError::Corrupt {
                file: self.dir.clone(),
                what: format!("cleaner: segment group {bases:?} is not in the log"),
            });
        };
        if out.is_none() {
            // A new group: its aborted transactions, and the producers' last batches now.
            let group_end = self.sealed[last_index].next_offset;
            let aborted: Vec<AbortedTxn> =
                self.aborted_between(io, first, Offset(group_end.0 - 1))?;
            pass.txn.add_aborted(aborted);
            pass.last_records = self
                .psm
                .producers()
                .map(|e| {
                    let last = e.last_data_offset();
                    (
                        e.producer_id,
                        LastRecord {
                            last_data_offset: (last.0 >= 0).then_some(last),
                            epoch: e.epoch,
                        },
                    )
                })
                .collect();
            let interval = self.config.segment.index_interval_bytes;
            *out = Some(CleanedSegment::create(io, &self.dir, first, interval).map_err(classify)?);
        }
        let index = first_index + segment;
        let seg_base = self.sealed[index].base_offset;
        let chunk = self.read_batches_at(io, index, position, pass)?;
        let Some(chunk) = chunk else {
            // This segment is done: the next of the group, or the swap.
            if index < last_index {
                pass.phase = Phase::Clean {
                    group,
                    segment: segment + 1,
                    position: 0,
                    out: None,
                };
            } else {
                let cleaned = out.take();
                pass.phase = Phase::Clean {
                    group: group + 1,
                    segment: 0,
                    position: 0,
                    out: None,
                };
                if let Some(cleaned) = cleaned {
                    self.swap_in(io, pass, cleaned, first_index, last_index)?;
                }
            }
            return Ok(0);
        };
        let Some(mut cleaned) = out.take() else {
            return Ok(0);
        };
        let last_data_len = self.sealed[last_index].data_len;
        let mut rules = Rules {
            map: &mut pass.map,
            txn: &mut pass.txn,
            last_records: &pass.last_records,
            now_ms: pass.now_ms,
            delete_retention_ms: self.config.compaction.delete_retention_ms,
            round_upper: pass.upper,
            decompressed_bytes_max: self.config.decompressed_bytes_max(),
        };
        let mut at = 0usize;
        let mut failed = None;
        while let Some(rest) = chunk.get(at..).filter(|r| !r.is_empty()) {
            let batch = match inspect(rest, position + at as u64) {
                Ok(b) => b,
                Err(FormatError::Incomplete { .. }) if at > 0 => break,
                Err(e) => {
                    failed = Some(self.corrupt(seg_base, e));
                    break;
                }
            };
            let size = batch.bytes().len();
            let last_of_segment =
                index == last_index && position + (at + size) as u64 == last_data_len;
            pass.scratch.clear();
            match filter_batch(&mut rules, &batch, last_of_segment, &mut pass.scratch) {
                Ok(f) => {
                    pass.stats.records_read += f.records_read;
                    pass.stats.records_kept += f.records_kept;
                    pass.stats.keyless_records += f.keyless;
                    if !pass.scratch.is_empty() {
                        if let Err(e) = cleaned.append(
                            io,
                            &pass.scratch,
                            batch.header().last_offset(),
                            f.max_timestamp,
                        ) {
                            failed = Some(classify(e));
                            break;
                        }
                    }
                }
                Err(e) => {
                    failed = Some(self.corrupt(seg_base, e));
                    break;
                }
            }
            at += size;
        }
        pass.stats.bytes_read += at as u64;
        pass.phase = Phase::Clean {
            group,
            segment,
            position: position + at as u64,
            out: None,
        };
        *out = Some(cleaned);
        match failed {
            Some(e) => Err(e),
            None => Ok(at),
        }
    }

    /// Finishes the cleaned segment and swaps it in for sealed segments
    /// `first_index..=last_index`.
    pub(super) fn swap_in(
        &mut self,
        io: &mut dyn Io,
        pass: &mut CleanPass,
        cleaned: CleanedSegment,
        first_index: usize,
        last_index: usize,
    ) -> Result<(), LogError> {
        let base = self.sealed[first_index].base_offset;
        let group_end = self.sealed[last_index].next_offset;
        let replaced: Vec<Offset> = self.sealed[first_index..=last_index]
            .iter()
            .map(|s| s.base_offset)
            .collect();
        let kept_aborts = pass.txn.take_kept_aborts();
        let txn_index = super::super::encode_txn_index(&kept_aborts);
        let (data_len, _, indexes) = match cleaned.finish(io, &self.dir, &txn_index) {
            Ok(done) => done,
            Err(e) => {
                swap::remove_uncommitted(io, &self.dir, base);
                return Err(classify(e));
            }
        };
        if let Err(e) = swap::commit(io, &self.dir, base) {
            // Whether the log's rename happened is unknown here: if it did, the swap is
            // committed and the next open completes it; the log must not go on as if not.
            return Err(self.poison(classify(e)));
        }
        // Committed: from here every failure poisons (the next open completes the swap).
        let old: Vec<Sealed> = self.sealed.drain(first_index..=last_index).collect();
        let mut others = Vec::new();
        for s in &old {
            if let Err(e) =
                io::run(io, io::Op::Close { file: s.file }, &mut others).and_then(|c| c.result)
            {
                return Err(self.poison_always(classify(e)));
            }
        }
        if let Err(e) = swap::complete(io, &self.dir, base, &replaced) {
            return Err(self.poison_always(classify(e)));
        }
        // The snapshots named by the replaced segments go with them, as Kafka's
        // `replaceSegments` deletes them; the first base's stays with its segment. A failure
        // leaves strays the next open removes.
        let _ = super::super::remove_snapshots(io, &self.dir, replaced.iter().copied().skip(1));
        let file = match crate::segment::open_for_reads(io, &self.dir, base) {
            Ok(f) => f,
            Err(e) => return Err(self.poison_always(classify(e))),
        };
        let meta = crate::segment::SealedSegment {
            base_offset: base,
            next_offset: group_end,
            data_len,
            indexes,
        };
        self.sealed
            .insert(first_index, Sealed::from_segment(meta, file, kept_aborts));
        self.segments_generation += 1;
        pass.generation = self.segments_generation;
        pass.stats.segments_replaced += replaced.len() as u64;
        pass.stats.segments_written += 1;
        pass.stats.bytes_written += data_len;
        self.debug_check_invariants();
        Ok(())
    }

    /// The pass is over: the checkpoint moves to its end (a failure to write it only makes the
    /// next pass map more).
    pub(super) fn finish_pass(
        &mut self,
        io: &mut dyn Io,
        pass: &mut CleanPass,
    ) -> Result<(), LogError> {
        pass.phase = Phase::Done;
        if let Err(error) = write_partition_checkpoint(
            io,
            &self.dir,
            CLEANER_OFFSET_CHECKPOINT,
            pass.stats.end_offset,
        ) {
            tracing::warn!(dir = %self.dir.display(), %error, "cleaner checkpoint not written");
        }
        Ok(())
    }
}
