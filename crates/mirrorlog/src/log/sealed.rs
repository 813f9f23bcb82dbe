//! The sealed segments of a log. Of each, a log always knows what a clean open learns without
//! reading it — its base and end offsets, its size, a read handle — and loads the rest only when
//! a request needs it (design.md §Recovery: open cost proportional to partitions, not bytes):
//! - its offset and time indexes, from `.index`/`.timeindex` (rebuilt from the `.log` when a file
//!   is missing or fails its checks), for reads and time lookups; at most
//!   [`SEALED_INDEXES_LOADED_MAX`] segments' at once (the least recently used dropped), and
//!   dropped again when the partition has not used them since the last
//!   [`PartitionLog::release_idle_caches`];
//! - its largest timestamp (the time index's last entry), for time retention;
//! - its aborted transactions, from `.txnindex` (a missing file is none, as in Kafka), for
//!   `ReadCommitted` reads.

use super::{classify, read_direct, LogError, PartitionLog};
use crate::format::Offset;
use crate::io::{self, FileId, Io};
use crate::producer_state::{decode_txn_index, AbortedTxn};
use crate::segment::{self, SealedSegment, SegmentIndexes};
use std::path::Path;

#[derive(Debug)]
pub(super) struct Sealed {
    pub(super) base_offset: Offset,
    /// The offset after its last batch.
    pub(super) next_offset: Offset,
    /// Size of the `.log`.
    pub(super) data_len: u64,
    pub(super) file: FileId,
    indexes: Option<SegmentIndexes>,
    max_timestamp: Option<i64>,
    aborted: Option<Vec<AbortedTxn>>,
    /// Used since the last release of idle caches.
    used: bool,
    /// When its indexes were last used (`INDEX_CLOCK`), for the bound on loaded indexes.
    last_used: u64,
}

/// Most sealed segments of one log whose indexes are in memory at once; loading one more drops
/// the least recently used.
pub const SEALED_INDEXES_LOADED_MAX: usize = 8;

/// Orders uses of sealed segments' indexes (any log; only the order matters).
static INDEX_CLOCK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A sealed segment an open trusts without reading it: below the recovery point of an unclean
/// open, or any but the last of a clean one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrustedSegment {
    /// First offset.
    pub base_offset: Offset,
    /// The offset after its last batch.
    pub next_offset: Offset,
    /// Size of the `.log`.
    pub data_len: u64,
    /// Its read handle.
    pub file: FileId,
}

/// Opens the sealed segments at `bases` (in order; `next_base` is the base of the segment after
/// the last of them) without reading them (design.md §Recovery): each ends where the next begins, except
/// before a gap `segment-gaps` records (`gaps`), where its end comes from the batches after its
/// last index entry. Their sizes come from the files. The clean open and recovery (below its
/// recovery point) both open sealed segments this way.
///
/// # Errors
/// [`LogError::Corrupt`] when a segment's batches run past the next segment's base, or an I/O
/// failure.
pub fn open_trusted(
    io: &mut dyn Io,
    dir: &Path,
    bases: &[Offset],
    next_base: Offset,
    gaps: &[Offset],
    interval_bytes: u32,
) -> Result<Vec<TrustedSegment>, LogError> {
    let mut out = Vec::with_capacity(bases.len());
    for (i, &base) in bases.iter().enumerate() {
        let file = segment::open_for_reads(io, dir, base).map_err(classify)?;
        let data_len = io.file_len(file).map_err(classify)?;
        let following = bases.get(i + 1).copied().unwrap_or(next_base);
        let next = if gaps.contains(&following) {
            end_and_indexes(io, dir, base, file, data_len, interval_bytes, false)?.0
        } else {
            following
        };
        if next > following {
            return Err(LogError::Corrupt {
                file: segment::log_path(dir, base),
                what: format!(
                    "its batches end at {next}, past the next segment's base {following}"
                ),
            });
        }
        out.push(TrustedSegment {
            base_offset: base,
            next_offset: next,
            data_len,
            file,
        });
    }
    Ok(out)
}

impl Sealed {
    /// A segment just sealed (a roll, recovery's scan): everything known, indexes in memory
    /// until the partition goes idle.
    pub(super) fn from_segment(
        meta: SealedSegment,
        file: FileId,
        aborted: Vec<AbortedTxn>,
    ) -> Self {
        Sealed {
            base_offset: meta.base_offset,
            next_offset: meta.next_offset,
            data_len: meta.data_len,
            file,
            max_timestamp: Some(meta.indexes.max_timestamp()),
            indexes: Some(meta.indexes),
            aborted: Some(aborted),
            used: true,
            last_used: INDEX_CLOCK.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// A segment an open trusts without reading it: nothing loaded.
    pub(super) fn trusted(t: TrustedSegment) -> Self {
        Sealed {
            base_offset: t.base_offset,
            next_offset: t.next_offset,
            data_len: t.data_len,
            file: t.file,
            indexes: None,
            max_timestamp: None,
            aborted: None,
            used: false,
            last_used: 0,
        }
    }

    /// Its indexes, loaded from the index files (or rebuilt from the `.log`) if needed.
    ///
    /// # Errors
    /// [`LogError::Corrupt`] when the rebuild finds damaged batches, or a read failure.
    pub(super) fn indexes(
        &mut self,
        io: &mut dyn Io,
        dir: &Path,
        interval_bytes: u32,
    ) -> Result<&SegmentIndexes, LogError> {
        self.used = true;
        self.last_used = INDEX_CLOCK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.indexes.is_none() {
            let loaded = match segment::read_index_files(
                io,
                dir,
                self.base_offset,
                self.data_len,
                Some(self.next_offset),
                interval_bytes,
            ) {
                Some(ix) => ix,
                None => return self.rebuild_indexes(io, dir, interval_bytes),
            };
            self.max_timestamp = Some(loaded.max_timestamp());
            self.indexes = Some(loaded);
        }
        Ok(self
            .indexes
            .get_or_insert_with(|| SegmentIndexes::new(self.base_offset, interval_bytes)))
    }

    /// Rebuilds its indexes from its batches (the loaded ones did not match them).
    ///
    /// # Errors
    /// [`LogError::Corrupt`] for damaged batches, or a read failure.
    pub(super) fn rebuild_indexes(
        &mut self,
        io: &mut dyn Io,
        dir: &Path,
        interval_bytes: u32,
    ) -> Result<&SegmentIndexes, LogError> {
        self.used = true;
        let bytes = read_direct(io, self.file, 0, self.data_len as usize)?;
        let (_, rebuilt) = segment::index_batches(&bytes, self.base_offset, interval_bytes)
            .map_err(|what| LogError::Corrupt {
                file: segment::log_path(dir, self.base_offset),
                what,
            })?;
        self.max_timestamp = Some(rebuilt.max_timestamp());
        Ok(self.indexes.insert(rebuilt))
    }

    /// Its largest timestamp: the time index's last entry (without loading the offset index).
    ///
    /// # Errors
    /// As [`Sealed::indexes`].
    pub(super) fn max_timestamp(
        &mut self,
        io: &mut dyn Io,
        dir: &Path,
        interval_bytes: u32,
    ) -> Result<i64, LogError> {
        if let Some(t) = self.max_timestamp {
            return Ok(t);
        }
        let from_file =
            segment::read_derivable(io, &segment::time_index_path(dir, self.base_offset))
                .and_then(|b| segment::decode_time_index(&b, self.base_offset).ok())
                .and_then(|entries| entries.last().map(|e| e.timestamp));
        let t = match from_file {
            Some(t) => t,
            None => self.indexes(io, dir, interval_bytes)?.max_timestamp(),
        };
        self.max_timestamp = Some(t);
        Ok(t)
    }

    /// Its aborted transactions (those whose ABORT marker it holds), from `.txnindex`.
    ///
    /// # Errors
    /// [`LogError::Corrupt`] for a damaged `.txnindex`.
    pub(super) fn aborted(
        &mut self,
        io: &mut dyn Io,
        dir: &Path,
    ) -> Result<&[AbortedTxn], LogError> {
        if self.aborted.is_none() {
            let path = segment::txn_index_path(dir, self.base_offset);
            // Unreadable fails the read that needed it (a reader must never get aborted
            // records as committed), naming the file.
            let entries = match super::read_if_present(io, &path)? {
                Some(bytes) => decode_txn_index(&bytes).map_err(|e| LogError::Corrupt {
                    file: path.clone(),
                    what: e.to_string(),
                })?,
                None => Vec::new(),
            };
            self.aborted = Some(entries);
        }
        Ok(self.aborted.as_deref().unwrap_or(&[]))
    }

    /// The indexes, if loaded.
    pub(super) fn loaded_indexes(&self) -> Option<&SegmentIndexes> {
        self.indexes.as_ref()
    }

    /// The aborted transactions, if loaded.
    pub(super) fn loaded_aborted(&self) -> Option<&[AbortedTxn]> {
        self.aborted.as_deref()
    }

    /// Drops the indexes unless used since the last call.
    fn release_if_idle(&mut self) -> bool {
        let released = !self.used && self.indexes.take().is_some();
        self.used = false;
        released
    }
}

/// A `.txnindex`'s bytes: the entries in order.
pub(super) fn encode_txn_index(entries: &[AbortedTxn]) -> Vec<u8> {
    entries.iter().flat_map(AbortedTxn::encode).collect()
}

impl PartitionLog {
    /// Gives each sealed segment from number `from` on the aborts whose marker it holds and
    /// keeps the rest (the active segment's), from `all`, the list of those segments' aborts
    /// in offset order (the segments before `from` keep theirs, in their `.txnindex`).
    pub(super) fn distribute_aborted(&mut self, all: Vec<AbortedTxn>, from: usize) {
        for s in self.sealed.iter_mut().skip(from) {
            s.aborted = Some(
                all.iter()
                    .filter(|a| a.last_offset >= s.base_offset && a.last_offset < s.next_offset)
                    .copied()
                    .collect(),
            );
        }
        let active_base = self.active.base_offset();
        self.aborted = all
            .into_iter()
            .filter(|a| a.last_offset >= active_base)
            .collect();
    }

    /// Drops the loaded indexes of sealed segments not used since the previous call (a shard
    /// calls it on its timer), so an idle partition holds none. Returns how many were dropped.
    pub fn release_idle_caches(&mut self) -> usize {
        self.sealed
            .iter_mut()
            .map(|s| usize::from(s.release_if_idle()))
            .sum()
    }

    /// Hands the active segment's buffers back to the Io if everything appended is durable
    /// and no round is in flight (an idle partition then holds no append buffer; the next
    /// append takes one again). Returns whether it did.
    pub fn release_buffers(&mut self, io: &mut dyn Io) -> bool {
        self.active.release_buffers(io)
    }

    /// Makes room for the indexes of sealed segment number `using` (about to be used): when
    /// [`SEALED_INDEXES_LOADED_MAX`] others are loaded, the least recently used go.
    pub(super) fn bound_loaded_indexes(&mut self, using: usize) {
        if self.sealed.get(using).is_none_or(|s| s.indexes.is_some()) {
            return;
        }
        let mut loaded: Vec<(u64, usize)> = self
            .sealed
            .iter()
            .enumerate()
            .filter(|(_, s)| s.indexes.is_some())
            .map(|(i, s)| (s.last_used, i))
            .collect();
        if loaded.len() < SEALED_INDEXES_LOADED_MAX {
            return;
        }
        loaded.sort_unstable();
        for &(_, i) in &loaded[..=loaded.len() - SEALED_INDEXES_LOADED_MAX] {
            self.sealed[i].indexes = None;
        }
    }

    /// Whether the active segment holds an append buffer.
    #[must_use]
    pub fn holds_append_buffer(&self) -> bool {
        !self.active.is_detached()
    }

    /// How many sealed segments have their indexes in memory.
    #[must_use]
    pub fn loaded_sealed_indexes(&self) -> usize {
        self.sealed.iter().filter(|s| s.indexes.is_some()).count()
    }
}

/// The offset after the last batch of the segment at `base` (`file`, `data_len` bytes) and its
/// indexes: from its index files and the batches after their last entry, or — when a file is
/// missing or does not match the batches — from all its batches. With `for_appends` (the segment
/// is reopened as the active one) the time index's sealing entry is dropped first, so the
/// indexes are those appending its batches built.
///
/// # Errors
/// [`LogError::Corrupt`] when the batches themselves are damaged, or a read failure.
pub(super) fn end_and_indexes(
    io: &mut dyn Io,
    dir: &Path,
    base: Offset,
    file: FileId,
    data_len: u64,
    interval_bytes: u32,
    for_appends: bool,
) -> Result<(Offset, SegmentIndexes), LogError> {
    if let Some(mut indexes) =
        segment::read_index_files(io, dir, base, data_len, None, interval_bytes)
    {
        if for_appends {
            indexes.forget_sealing_entry();
        }
        match segment::scan_tail(io, file, base, data_len, &mut indexes) {
            Ok(next) => return Ok((next, indexes)),
            Err(segment::TailError::Io(e)) => return Err(classify(e)),
            // The index does not match the batches: rebuild it from them.
            Err(segment::TailError::Damaged(_)) => {}
        }
    }
    let bytes = io::read_direct(io, file, 0, data_len as usize).map_err(classify)?;
    let (next, indexes) =
        segment::index_batches(&bytes, base, interval_bytes).map_err(|what| LogError::Corrupt {
            file: segment::log_path(dir, base),
            what,
        })?;
    Ok((next, indexes))
}
