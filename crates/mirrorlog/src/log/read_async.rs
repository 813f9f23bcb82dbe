//! What a shard needs to read sealed segments asynchronously (design.md §Runtime: older data is read with
//! large O_DIRECT reads through the ring while the shard goes on serving): where a read lies
//! ([`PartitionLog::sealed_read_at`]), whether that segment is still there, and the answer
//! built from bytes the shard read ([`PartitionLog::read_from_bytes`]) with the same rules as
//! [`PartitionLog::read`].

use super::{Isolation, LogError, PartitionLog, ReadResult};
use crate::format::{BatchIter, Offset, ScanEnd};
use crate::io::{FileId, Io};

/// A read that a sealed segment holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealedRead {
    /// The segment.
    pub base: Offset,
    /// Its open file.
    pub file: FileId,
    /// The batch boundary at or before the offset (from the index).
    pub start: u64,
    /// The segment's bytes.
    pub data_len: u64,
}

/// What bytes read from a sealed segment gave.
#[derive(Debug)]
pub enum FromBytes {
    /// The answer, and the position after its last batch.
    Done(ReadResult, u64),
    /// The first batch is not whole in the bytes: read more.
    NeedMore,
    /// The segment holds nothing from the offset (a gap before the next segment): read it
    /// the synchronous way.
    Elsewhere,
}

/// A read's parameters.
#[derive(Debug, Clone, Copy)]
pub struct ReadParams {
    /// First offset wanted.
    pub offset: Offset,
    /// Size limit.
    pub max_bytes: usize,
    /// The bound.
    pub isolation: Isolation,
    /// Kafka's at-least-one-batch rule.
    pub min_one_batch: bool,
}

impl PartitionLog {
    /// The sealed segment holding `offset`, with the batch boundary its index gives, or `None`
    /// when the read is not one for a sealed segment (active segment, out of range, past the
    /// bound, in a gap).
    ///
    /// # Errors
    /// Loading the segment's indexes failed.
    pub fn sealed_read_at(
        &mut self,
        io: &mut dyn Io,
        offset: Offset,
        isolation: Isolation,
    ) -> Result<Option<SealedRead>, LogError> {
        if offset < self.log_start
            || offset >= self.active.base_offset()
            || offset >= self.read_bound(isolation)
        {
            return Ok(None);
        }
        let Some(i) = self.sealed.iter().rposition(|s| s.base_offset <= offset) else {
            return Ok(None);
        };
        if self.sealed[i].next_offset <= offset {
            return Ok(None);
        }
        self.bound_loaded_indexes(i);
        let interval = self.config.segment.index_interval_bytes;
        let s = &mut self.sealed[i];
        let start = u64::from(s.indexes(io, &self.dir, interval)?.lookup(offset));
        Ok(Some(SealedRead {
            base: s.base_offset,
            file: s.file,
            start,
            data_len: s.data_len,
        }))
    }

    /// The open file of the sealed segment at `base`, if it is still part of the log.
    #[must_use]
    pub fn sealed_file(&self, base: Offset) -> Option<FileId> {
        self.sealed
            .iter()
            .find(|s| s.base_offset == base)
            .map(|s| s.file)
    }

    /// The answer to `read` from `bytes`, a sealed segment's bytes from `position` (a batch
    /// boundary); `to_end`: they reach the segment's end. The answer's records are a slice of
    /// `bytes`: nothing is copied.
    ///
    /// # Errors
    /// Damage in the bytes, or loading what the answer needs (aborted transactions).
    pub fn read_from_bytes(
        &mut self,
        io: &mut dyn Io,
        bytes: bytes::Bytes,
        position: u64,
        to_end: bool,
        read: ReadParams,
    ) -> Result<FromBytes, LogError> {
        if read.offset < self.log_start || read.offset > self.log_end() {
            return Ok(FromBytes::Elsewhere);
        }
        let upper = self.read_bound(read.isolation);
        let floor = if read.min_one_batch { 0 } else { usize::MAX };
        // The answer's batches are contiguous in `bytes`: `[first, end)`, a slice, no copy.
        let (mut first, mut end) = (None, position);
        let mut taken = 0usize;
        let mut last = None;
        let mut full = false;
        let mut scan = BatchIter::new(&bytes, position);
        for b in scan.by_ref() {
            let h = b.header();
            if h.last_offset() < read.offset {
                continue;
            }
            if h.last_offset() >= upper
                || (taken != floor && taken + b.bytes().len() > read.max_bytes)
            {
                full = true;
                break;
            }
            first.get_or_insert(b.position());
            taken += b.bytes().len();
            end = b.position() + b.bytes().len() as u64;
            last = Some(h.last_offset());
        }
        if !full {
            match scan.end() {
                Some(ScanEnd::Corrupt(e)) => return Err(e.clone().into()),
                _ if taken == 0 && !to_end => return Ok(FromBytes::NeedMore),
                _ if taken == 0 => return Ok(FromBytes::Elsewhere),
                _ => {}
            }
        }
        let records = match first {
            Some(f) => bytes.slice((f - position) as usize..(end - position) as usize),
            None => bytes::Bytes::new(),
        };
        let result = self.read_result(io, read.offset, records, last, read.isolation)?;
        Ok(FromBytes::Done(result, end))
    }
}
