//! Reopening a segment as the active one (a clean open, or a truncation into a sealed segment):
//! the kept bytes are copied into a synced commit record before anything may touch the partial
//! last page; and truncating the active segment in place.

use super::{read_file, Durable, SegmentConfig, SegmentWriter};
use crate::format::Offset;
use crate::io::{Io, Op};
use crate::segment::commit_record::{
    page_floor, CommitRecord, COMMIT_SLOTS, COMMIT_SLOT_SIZE_BYTES,
};
use crate::segment::index::SegmentIndexes;
use crate::segment::SegmentError;
use std::path::Path;

impl SegmentWriter {
    /// Reopens the sealed segment `<base_offset>.log` as the active one, cut at `data_len` bytes
    /// (a batch boundary; `next_offset` follows the last kept batch). The file is preallocated
    /// again and — before anything else may touch the partial last page — its kept bytes are
    /// copied into a commit record and synced. Bytes past `data_len` stay in the file until
    /// later pages overwrite them; the record says where the data ends.
    ///
    /// # Errors
    /// Any I/O failure, or [`SegmentError::ShortRead`] if the file is shorter than `data_len`.
    pub fn reopen(
        io: &mut dyn Io,
        dir: &Path,
        base_offset: Offset,
        config: SegmentConfig,
        sequence: u64,
        data_len: u64,
        next_offset: Offset,
    ) -> Result<Self, SegmentError> {
        Self::reopen_with_tail(
            io,
            dir,
            base_offset,
            config,
            sequence,
            data_len,
            next_offset,
            None,
        )
    }

    /// [`SegmentWriter::reopen`] where the partial last page's bytes come from `tail` (a commit
    /// record's copy, for a segment that was never sealed) instead of the file.
    ///
    /// # Errors
    /// As [`SegmentWriter::reopen`].
    #[allow(clippy::too_many_arguments)]
    pub fn reopen_with_tail(
        io: &mut dyn Io,
        dir: &Path,
        base_offset: Offset,
        config: SegmentConfig,
        sequence: u64,
        data_len: u64,
        next_offset: Offset,
        tail: Option<Vec<u8>>,
    ) -> Result<Self, SegmentError> {
        let mut w = Self::prepare(io, dir, base_offset, config, sequence)?;
        // `prepare` opened the existing file and extended it; nothing was truncated.
        let pages_end = page_floor(data_len);
        let tail = match tail {
            Some(t) => t,
            None => read_file(io, w.file, pages_end, data_len)?,
        };
        let mut kept = read_file(io, w.file, 0, pages_end)?;
        kept.extend_from_slice(&tail);
        let indexes = indexes_of(&kept, base_offset, config.index_interval_bytes);
        w.install(io, data_len, next_offset, tail, indexes)?;
        w.attach_buffer(io);
        // The kept full pages are allocated; the partial last page may be a hole (its bytes were
        // only ever in commit records), so the next reservation starts there.
        w.reserved_end = page_floor(data_len);
        Ok(w)
    }

    /// Reopens the sealed segment `<base_offset>.log` whole (`data_len` bytes, `next_offset`
    /// after its last batch) as the active one, with its indexes as the caller loaded them
    /// (from the index files, brought to the end: a clean open). Reads only the partial last
    /// page, which is copied into a synced commit record before anything may touch it.
    ///
    /// # Errors
    /// As [`SegmentWriter::reopen`].
    #[allow(clippy::too_many_arguments)]
    pub fn reopen_indexed(
        io: &mut dyn Io,
        dir: &Path,
        base_offset: Offset,
        config: SegmentConfig,
        sequence: u64,
        data_len: u64,
        next_offset: Offset,
        indexes: SegmentIndexes,
    ) -> Result<Self, SegmentError> {
        let mut w = Self::prepare(io, dir, base_offset, config, sequence)?;
        let pages_end = page_floor(data_len);
        let tail = read_file(io, w.file, pages_end, data_len)?;
        w.install(io, data_len, next_offset, tail, indexes)?;
        w.reserved_end = pages_end;
        w.attach_buffer(io);
        Ok(w)
    }

    /// Cuts the active segment at `data_len` bytes (a batch boundary) with `next_offset` after
    /// it: commits what is appended, then records the cut in a new commit record (synced), so
    /// the partial page's kept bytes have a durable copy before any write touches that page.
    ///
    /// # Errors
    /// Any I/O failure (which poisons the segment).
    pub fn truncate(
        &mut self,
        io: &mut dyn Io,
        data_len: u64,
        next_offset: Offset,
    ) -> Result<(), SegmentError> {
        self.commit(io)?;
        let data_len = data_len.min(self.data_len);
        let kept = self.read_durable(io, 0, data_len as usize)?;
        let pages_end = page_floor(data_len);
        let tail = kept[pages_end as usize..].to_vec();
        let indexes = indexes_of(&kept, self.base_offset, self.config.index_interval_bytes);
        self.install(io, data_len, next_offset, tail, indexes)
    }

    /// Makes `[0, data_len)` (indexed by `indexes`) the segment's durable content: writes and
    /// syncs a commit record holding the partial page `tail`, then resets the in-memory state.
    pub(super) fn install(
        &mut self,
        io: &mut dyn Io,
        data_len: u64,
        next_offset: Offset,
        tail: Vec<u8>,
        indexes: SegmentIndexes,
    ) -> Result<(), SegmentError> {
        self.check()?;
        let pages_end = page_floor(data_len);
        self.sequence += 1;
        let record = CommitRecord {
            sequence: self.sequence,
            base_offset: self.base_offset,
            data_len,
            next_offset,
            prev_data_len: data_len,
            tail,
            segment_id: self.segment_id,
        };
        let mut slot = self.slot_buffer(io);
        record.encode_into(slot.as_mut_slice());
        let chain = vec![
            Op::Write {
                file: self.file,
                offset: self.slot_position((self.sequence % COMMIT_SLOTS as u64) as usize),
                buf: slot,
                range: 0..COMMIT_SLOT_SIZE_BYTES,
            },
            Op::Fdatasync { file: self.file },
        ];
        let ids = io.submit_chain(chain).map_err(|e| self.poison(e.into()))?;
        let mut completions = Vec::new();
        let mut pending = ids.len();
        while pending > 0 {
            io.complete(1, &mut completions)?;
            for c in completions.drain(..) {
                if ids.contains(&c.id) {
                    pending -= 1;
                    if let Some(buf) = c.buf {
                        self.release_slot(buf);
                    }
                    if let Err(e) = c.result {
                        return Err(self.poison(e.into()));
                    }
                }
            }
        }
        // Resident pages may hold bytes past the new end.
        while let Some((_, buf, _)) = self.recent.pop_front() {
            self.release(buf);
        }
        let tail_len = (data_len - pages_end) as usize;
        if !self.is_detached() {
            // A detached writer takes the tail from `durable_tail` when it attaches.
            self.buf.as_mut_slice()[..tail_len].copy_from_slice(&record.tail);
        }
        self.buf_start = pages_end;
        self.synced_pages_end = pages_end;
        self.data_len = data_len;
        self.next_offset = next_offset;
        self.durable = Durable {
            data_len,
            next_offset,
        };
        self.durable_tail = record.tail;
        self.indexes = indexes;
        self.debug_check_invariants();
        Ok(())
    }
}

/// The indexes of `kept`, the batches of a segment at `base`. They were validated by whoever
/// chose the cut; a failure here leaves the segment unindexed (reads scan from 0).
fn indexes_of(kept: &[u8], base: Offset, interval_bytes: u32) -> SegmentIndexes {
    match crate::segment::index_batches(kept, base, interval_bytes) {
        Ok((_, indexes)) => indexes,
        Err(_) => SegmentIndexes::new(base, interval_bytes),
    }
}
