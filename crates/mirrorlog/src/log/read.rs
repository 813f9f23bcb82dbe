//! Reads: whole batches from an offset, never past the high watermark (or the last stable
//! offset at `ReadCommitted`), with the aborted transactions of the range.

use super::collected::Collected;
use super::{classify, Isolation, LogError, PartitionLog, ReadResult};
use crate::format::{self, BatchIter, Offset, ScanEnd};
use crate::io::{self, FileId, Io};
use crate::segment;
use bytes::Bytes;

impl PartitionLog {
    /// Reads whole batches from `offset` (at least one batch, then up to `max_bytes`), never
    /// past the high watermark (or the LSO at `ReadCommitted`).
    ///
    /// # Errors
    /// [`LogError::OffsetOutOfRange`], or an I/O failure.
    pub fn read(
        &mut self,
        io: &mut dyn Io,
        offset: Offset,
        max_bytes: usize,
        isolation: Isolation,
    ) -> Result<ReadResult, LogError> {
        self.read_limited(io, offset, max_bytes, isolation, true)
    }

    /// The offset a read at `isolation` stops before: the high watermark, the last stable
    /// offset, or the durable end.
    #[must_use]
    pub fn read_bound(&self, isolation: Isolation) -> Offset {
        match isolation {
            Isolation::ReadUncommitted => self.high_watermark(),
            Isolation::ReadCommitted => self.last_stable_offset(),
            Isolation::LogEnd => self.durable_end(),
        }
    }

    /// [`PartitionLog::read`], where `min_one_batch: false` makes `max_bytes` strict: a first
    /// batch larger than it is not returned (Kafka's `minOneMessage`, which a fetch sets for
    /// its first partition only).
    ///
    /// # Errors
    /// As [`PartitionLog::read`].
    pub fn read_limited(
        &mut self,
        io: &mut dyn Io,
        offset: Offset,
        max_bytes: usize,
        isolation: Isolation,
        min_one_batch: bool,
    ) -> Result<ReadResult, LogError> {
        let upper = self.read_bound(isolation);
        if offset < self.log_start || offset > self.log_end() {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start,
                log_end: self.log_end(),
            });
        }
        let mut records = Collected::default();
        if offset < upper {
            self.read_batches_limited(io, offset, max_bytes, upper, min_one_batch, &mut records)?;
        }
        let records = records.finish();
        let last = format::BatchIter::new(&records, 0)
            .last()
            .map(|b| b.header().last_offset());
        self.read_result(io, offset, records, last, isolation)
    }

    /// The answer to a read from `offset` that found `records` (whole batches, the last ending
    /// at offset `last`), wherever they came from (the log, the tail cache, a read-ahead): the
    /// offsets readers see, the aborted transactions of the range at `ReadCommitted`, and the
    /// durable bytes after it.
    ///
    /// # Errors
    /// Loading a sealed segment's `.txnindex` or indexes failed.
    pub(crate) fn read_result(
        &mut self,
        io: &mut dyn Io,
        offset: Offset,
        records: Bytes,
        last: Option<Offset>,
        isolation: Isolation,
    ) -> Result<ReadResult, LogError> {
        let aborted = match last {
            Some(l) if isolation == Isolation::ReadCommitted => {
                self.aborted_between(io, offset, l)?
            }
            _ => Vec::new(),
        };
        let next = last.map_or(offset, |l| Offset(l.0 + 1));
        Ok(ReadResult {
            records,
            high_watermark: self.high_watermark(),
            last_stable_offset: self.last_stable_offset(),
            log_start_offset: self.log_start,
            aborted,
            bytes_after: self.durable_bytes_after(io, next)?,
        })
    }

    /// Durable bytes from the batch holding `offset` to the durable end (to the index entry at
    /// or below `offset`: at most `index.interval.bytes` and a batch more).
    ///
    /// # Errors
    /// Loading a sealed segment's indexes failed.
    pub fn durable_bytes_after(
        &mut self,
        io: &mut dyn Io,
        offset: Offset,
    ) -> Result<u64, LogError> {
        if offset >= self.durable_end() {
            return Ok(0);
        }
        let active_len = self.active.durable().data_len;
        if offset >= self.active.base_offset() {
            let p = u64::from(self.active.indexes().lookup(offset));
            return Ok(active_len.saturating_sub(p));
        }
        let Some(i) = self
            .sealed
            .iter()
            .rposition(|s| s.base_offset <= offset)
            .or((!self.sealed.is_empty()).then_some(0))
        else {
            return Ok(active_len);
        };
        self.bound_loaded_indexes(i);
        let interval = self.config.segment.index_interval_bytes;
        let s = &mut self.sealed[i];
        let p = u64::from(s.indexes(io, &self.dir, interval)?.lookup(offset));
        let later: u64 = self.sealed[i + 1..].iter().map(|s| s.data_len).sum();
        Ok(self.sealed[i].data_len.saturating_sub(p) + later + active_len)
    }

    /// The aborted transactions overlapping `[offset, last]`: their ABORT marker at or past
    /// `offset`, their first offset at or before `last`. Markers live in the segment holding
    /// `offset` or a later one; as Kafka's `collectAbortedTransactions`, the search stops at a
    /// segment holding an abort whose last stable offset is past `last` (every transaction open
    /// before then had completed).
    pub(super) fn aborted_between(
        &mut self,
        io: &mut dyn Io,
        offset: Offset,
        last: Offset,
    ) -> Result<Vec<crate::producer_state::AbortedTxn>, LogError> {
        let mut out = Vec::new();
        let overlaps = |a: &&crate::producer_state::AbortedTxn| {
            a.last_offset >= offset && a.first_offset <= last
        };
        let first = self.sealed.partition_point(|s| s.next_offset <= offset);
        for s in &mut self.sealed[first..] {
            let entries = s.aborted(io, &self.dir)?;
            out.extend(entries.iter().filter(overlaps).copied());
            if entries.iter().any(|a| a.last_stable_offset > last) {
                return Ok(out);
            }
        }
        out.extend(self.aborted.iter().filter(overlaps).copied());
        Ok(out)
    }

    /// Appends to `out` the whole batches from the one holding `offset` (at least one, then up
    /// to `max_bytes`) that end below `upper`, which is at most the durable end. An offset past
    /// the last batch of its segment (in a gap between segments) reads from the next segment on,
    /// as Kafka's read moves to the next segment.
    ///
    /// # Errors
    /// [`LogError::Corrupt`] for damage below the durable end, or an I/O failure.
    pub(super) fn read_batches(
        &mut self,
        io: &mut dyn Io,
        offset: Offset,
        max_bytes: usize,
        upper: Offset,
        out: &mut Collected,
    ) -> Result<(), LogError> {
        self.read_batches_limited(io, offset, max_bytes, upper, true, out)
    }

    /// [`PartitionLog::read_batches`]; without `min_one_batch`, nothing past `max_bytes`.
    fn read_batches_limited(
        &mut self,
        io: &mut dyn Io,
        offset: Offset,
        max_bytes: usize,
        upper: Offset,
        min_one_batch: bool,
        out: &mut Collected,
    ) -> Result<(), LogError> {
        // The caller's buffer may hold bytes already (a lookup's scan): the limit is for what
        // this read adds; "at least one" means one more than was there.
        let floor = if min_one_batch { out.len() } else { usize::MAX };
        // The segment holding `offset`: the last one starting at or before it (the active one
        // is number `sealed.len()`).
        let mut segment = if offset >= self.active.base_offset() {
            self.sealed.len()
        } else {
            self.sealed
                .iter()
                .rposition(|s| s.base_offset <= offset)
                .unwrap_or(self.sealed.len())
        };
        let before = out.len();
        loop {
            let reached_upper =
                self.read_segment(io, segment, offset, (max_bytes, floor), upper, out)?;
            if reached_upper || out.len() > before || segment >= self.sealed.len() {
                return Ok(());
            }
            segment += 1;
        }
    }

    /// [`PartitionLog::read_batches`] within segment number `segment`. Returns whether it
    /// stopped at `upper` or at the size limit (nothing later is read).
    fn read_segment(
        &mut self,
        io: &mut dyn Io,
        segment: usize,
        offset: Offset,
        limit: (usize, usize),
        upper: Offset,
        out: &mut Collected,
    ) -> Result<bool, LogError> {
        let sealed_index = (segment < self.sealed.len()).then_some(segment);
        let interval = self.config.segment.index_interval_bytes;
        let (start, end) = match sealed_index {
            None => (
                self.active.indexes().lookup(offset),
                self.active.durable().data_len,
            ),
            Some(i) => {
                self.bound_loaded_indexes(i);
                let s = &mut self.sealed[i];
                (
                    s.indexes(io, &self.dir, interval)?.lookup(offset),
                    s.data_len,
                )
            }
        };
        let before = out.len();
        let scanned = self.scan_segment(io, sealed_index, start, end, offset, limit, upper, out);
        match (scanned, sealed_index) {
            // A sealed segment's index file passed its checks yet points where no batch starts
            // (damage Kafka's sanity check does not see either): rebuild the indexes from the
            // batches and read again; damage in the batches themselves still fails.
            (Err(_), Some(i)) if start > 0 && out.len() == before => {
                let s = &mut self.sealed[i];
                let start = s.rebuild_indexes(io, &self.dir, interval)?.lookup(offset);
                self.scan_segment(io, sealed_index, start, end, offset, limit, upper, out)
            }
            (result, _) => result,
        }
    }

    /// Scans segment number `segment` (`None`: the active one) from `start`, a batch boundary,
    /// to `end` for [`PartitionLog::read_segment`]. `limit`: `max_bytes`, and the length of
    /// `out` at which one batch may exceed it (`usize::MAX`: none may).
    #[allow(clippy::too_many_arguments)]
    fn scan_segment(
        &mut self,
        io: &mut dyn Io,
        sealed_index: Option<usize>,
        start: u32,
        end: u64,
        offset: Offset,
        (max_bytes, floor): (usize, usize),
        upper: Offset,
        out: &mut Collected,
    ) -> Result<bool, LogError> {
        let mut position = u64::from(start);
        let chunk = max_bytes.max(64 << 10);
        while position < end {
            let want = chunk.min((end - position) as usize);
            let bytes: Bytes = match sealed_index {
                Some(i) => read_direct(io, self.sealed[i].file, position, want)?,
                None => self.active.read_durable(io, position, want)?,
            }
            .into();
            let mut scan = BatchIter::new(&bytes, position);
            for b in scan.by_ref() {
                let h = b.header();
                if h.last_offset() < offset {
                    continue;
                }
                if h.last_offset() >= upper {
                    return Ok(true);
                }
                if out.len() != floor && out.len() + b.bytes().len() > max_bytes {
                    // Full: nothing later is read either (a strict limit's first batch that
                    // does not fit ends the read empty, not at a later batch).
                    return Ok(true);
                }
                let at = (b.position() - position) as usize;
                out.push(&bytes, at, at + b.bytes().len());
            }
            match scan.end() {
                Some(ScanEnd::Incomplete { position: p, .. }) if *p > position => position = *p,
                Some(ScanEnd::Incomplete { needed_bytes, .. }) => {
                    // A batch larger than the chunk: read it whole next time — unless its length
                    // field claims more than the segment holds below the durable end, which only
                    // damage can do (found by review: a bad length made a read allocate up to
                    // 2 GiB before any CRC could refuse the batch).
                    if *needed_bytes > end - position {
                        let base = match sealed_index {
                            Some(i) => self.sealed[i].base_offset,
                            None => self.active.base_offset(),
                        };
                        return Err(LogError::Corrupt {
                            file: segment::log_path(&self.dir, base),
                            what: format!(
                                "the batch at position {position} claims {needed_bytes} bytes, {} remain below the durable end",
                                end - position
                            ),
                        });
                    }
                    let need = *needed_bytes as usize;
                    let bytes: Bytes = match sealed_index {
                        Some(i) => read_direct(io, self.sealed[i].file, position, need)?,
                        None => self.active.read_durable(io, position, need)?,
                    }
                    .into();
                    if bytes.len() < need {
                        break;
                    }
                    let b = format::inspect(&bytes, position)?;
                    if b.header().last_offset() >= offset {
                        if b.header().last_offset() >= upper {
                            return Ok(true);
                        }
                        if out.len() != floor && out.len() + b.bytes().len() > max_bytes {
                            return Ok(true);
                        }
                        out.push(&bytes, 0, b.bytes().len());
                        if out.len() >= max_bytes {
                            break;
                        }
                    }
                    position += need as u64;
                }
                Some(ScanEnd::Corrupt(e)) => return Err(e.clone().into()),
                _ => break,
            }
        }
        Ok(false)
    }
}

pub(super) fn read_direct(
    io: &mut dyn Io,
    file: FileId,
    position: u64,
    len: usize,
) -> Result<Vec<u8>, LogError> {
    io::read_direct(io, file, position, len).map_err(classify)
}
