//! Rebuilding the producer state of an opened, truncated or recovered log: from the newest
//! usable snapshot at or below the end, then every later batch replayed with the copy rules and
//! the barrier rule of the mode history.

use super::{classify, read_direct, remove_snapshots, LogError, PartitionLog};
use crate::format::{BatchIter, Offset};
use crate::io::{FileId, Io};
use crate::producer_state::{
    snapshot_file_name, AbortedTxn, BatchInfo, Origin, ProducerStateManager,
};

/// How `assemble_with` rebuilds the producer state.
#[derive(Debug)]
pub enum Replay {
    /// From the newest snapshot at or below the end, then the batches after it.
    FromSnapshot,
    /// From the first batch of the log (snapshots ignored), rewriting derived files.
    FromStart,
    /// Already replayed from the first batch (recovery's single pass): this state and these
    /// aborted transactions; derived files are rewritten as with `FromStart`.
    Rebuilt(Box<(ProducerStateManager, Vec<AbortedTxn>)>),
}

impl PartitionLog {
    /// Offsets of the snapshot files in the directory.
    pub(super) fn snapshot_offsets(&self, io: &mut dyn Io) -> Result<Vec<Offset>, LogError> {
        let names = io
            .list_dir(&self.dir)
            .map_err(|e| LogError::Segment(e.into()))?;
        Ok(names
            .iter()
            .filter_map(|n| n.strip_suffix(".snapshot"))
            .filter_map(|n| n.parse::<i64>().ok())
            .map(Offset)
            .collect())
    }

    /// Reloads the producer state for a log that now ends at `end`: the newest snapshot at or
    /// below it (newer ones are deleted), then every batch from there replayed with the copy
    /// rules (no sequence checks), as recovery does.
    ///
    /// Snapshots are named by the segment bases they were written at (`bases`, taken before the
    /// truncation). The log has no clock yet, so no producer expires on this load. The aborts
    /// the replay finds in the active segment are kept; those in sealed segments (which their
    /// `.txnindex` holds) are returned.
    pub(super) fn rebuild_producer_state(
        &mut self,
        io: &mut dyn Io,
        end: Offset,
        bases: &[Offset],
    ) -> Result<Vec<AbortedTxn>, LogError> {
        let snapshot_bases: Vec<Offset> =
            bases.iter().copied().filter(|&b| b > Offset(0)).collect();
        let mut loaded_at = self.segment_base_offsets()[0];
        self.psm = ProducerStateManager::new(self.config.producer);
        let mut unloadable = Vec::new();
        for &b in snapshot_bases.iter().rev() {
            if b > end {
                continue;
            }
            // A snapshot that exists but cannot be read fails the open: the one below it may
            // lie under segments retention deleted, and replaying from there would lose their
            // producers (Kafka fails the log dir). A corrupt one is deleted (below).
            if let Some(bytes) = super::read_if_present(io, &self.dir.join(snapshot_file_name(b)))?
            {
                if self
                    .psm
                    .load_snapshot(&bytes, ProducerStateManager::LOAD_WITHOUT_EXPIRING_MS)
                    .is_ok()
                {
                    loaded_at = b;
                    break;
                }
                // A corrupt or truncated snapshot is deleted and the next older one used (design.md
                // §2, as Kafka's `loadFromSnapshot` does): the replay covers its range.
                self.psm = ProducerStateManager::new(self.config.producer);
                unloadable.push(b);
            }
        }
        remove_snapshots(io, &self.dir, unloadable).map_err(classify)?;
        // Snapshots past the new end describe data that no longer exists.
        remove_snapshots(
            io,
            &self.dir,
            snapshot_bases.into_iter().filter(|&b| b > end),
        )
        .map_err(classify)?;
        self.aborted.retain(|a| a.last_offset < loaded_at);
        let mut below = Vec::new();
        // Replay [loaded_at, end): only the segments holding batches at or past `loaded_at`,
        // the active one from its index entry for `loaded_at` (a clean open's snapshot is at
        // the end: nothing is read).
        let mut segments: Vec<(Option<FileId>, u64, Offset)> = self
            .sealed
            .iter()
            .map(|s| (Some(s.file), s.data_len, s.next_offset))
            .collect();
        segments.push((None, self.active.durable().data_len, self.durable_end()));
        for &(file, len, segment_end) in &segments {
            if segment_end <= loaded_at || loaded_at >= end {
                continue;
            }
            let (from, bytes) = match file {
                Some(f) => (0, read_direct(io, f, 0, len as usize)?),
                None => {
                    let from = u64::from(self.active.indexes().lookup(loaded_at)).min(len);
                    (
                        from,
                        self.active.read_durable(io, from, (len - from) as usize)?,
                    )
                }
            };
            for b in BatchIter::new(&bytes, from) {
                if b.header().base_offset < loaded_at || b.header().base_offset >= end {
                    continue;
                }
                let info = BatchInfo::from_view(&b, b.header().base_offset);
                let history = &self.history;
                let staged = self
                    .psm
                    .stage(&[info], Origin::Replication, |o| history.is_local(o))?;
                let completed = self.psm.apply(staged)?;
                // Sealed segments' aborts are in their `.txnindex`; the active one's are kept.
                let active_base = self.active.base_offset();
                for a in completed
                    .iter()
                    .filter_map(crate::producer_state::CompletedTxn::aborted_entry)
                {
                    if a.last_offset >= active_base {
                        self.aborted.push(a);
                    } else {
                        below.push(a);
                    }
                }
            }
        }
        Ok(below)
    }
}
