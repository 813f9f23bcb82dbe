//! A whole pass reads each segment ahead of the rules (one read in flight while the batches of
//! the last one are mapped or filtered), so the device and the CPU work at once: without it a
//! pass spends the sum of its reads and its work, with it about the larger of the two.
//!
//! Only a whole pass ([`super::PartitionLog::clean`]) streams: every read it issues is waited
//! for before the pass returns (and before a swap closes the file). A shard's budgeted steps
//! read in place instead, since nothing may stay in flight on the shard's ring between its
//! turns without an owner to receive it.

use crate::io::{self, FileId, Io, IoError, Op, OpId, PAGE_SIZE_BYTES};

/// The segment being read: the bytes read so far from `buf_start`, and the read in flight.
#[derive(Debug)]
pub(super) struct SegmentStream {
    file: FileId,
    data_len: u64,
    /// File position of `buf[0]`.
    buf_start: u64,
    buf: Vec<u8>,
    /// The page-aligned position of the next read; reads are contiguous from the first.
    next_read: u64,
    in_flight: Option<OpId>,
    chunk_bytes: usize,
}

impl SegmentStream {
    /// A stream over `file` (`data_len` bytes) from `position`, reading `chunk_bytes` (a page
    /// multiple) at a time.
    pub(super) fn new(file: FileId, data_len: u64, position: u64, chunk_bytes: usize) -> Self {
        let page = PAGE_SIZE_BYTES as u64;
        let start = position - position % page;
        SegmentStream {
            file,
            data_len,
            buf_start: start,
            buf: Vec::new(),
            next_read: start,
            in_flight: None,
            chunk_bytes: chunk_bytes.div_ceil(PAGE_SIZE_BYTES) * PAGE_SIZE_BYTES,
        }
    }

    /// Whether the stream can serve `position` of `file` (it read up to there, contiguously).
    pub(super) fn serves(&self, file: FileId, position: u64) -> bool {
        self.file == file
            && position >= self.buf_start
            && position <= self.buf_start + self.buf.len() as u64
    }

    /// The bytes from `position` on that have arrived, at most `len` and at least `at_least`
    /// (fewer only at the segment's end), waiting for reads only to reach `at_least`; then one
    /// chunk is read ahead. Asking for little (a batch) lets the work on what has arrived
    /// overlap the next read.
    pub(super) fn read(
        &mut self,
        io: &mut dyn Io,
        position: u64,
        len: usize,
        at_least: usize,
    ) -> Result<Vec<u8>, IoError> {
        // What lies before `position` is done with (a new stream's first read starts at the
        // page holding it, so the bytes before it have not arrived yet). It is dropped once it
        // is most of the buffer: one move of what is left per chunk or so, not per read.
        let consumed = (position - self.buf_start) as usize;
        if consumed <= self.buf.len() && consumed >= self.buf.len() / 2 {
            self.buf.drain(..consumed);
            self.buf_start = position;
        }
        let target = position.saturating_add(len as u64).min(self.data_len);
        let needed = position
            .saturating_add(at_least.min(len) as u64)
            .min(self.data_len);
        while self.buf_start + (self.buf.len() as u64) < needed {
            if self.in_flight.is_none() {
                self.issue(io)?;
            }
            if !self.take(io)? {
                break;
            }
        }
        if self.in_flight.is_none() && self.next_read < self.data_len {
            self.issue(io)?;
        }
        let from = ((position - self.buf_start) as usize).min(self.buf.len());
        let to = ((target.saturating_sub(self.buf_start)) as usize).clamp(from, self.buf.len());
        Ok(self.buf[from..to].to_vec())
    }

    fn issue(&mut self, io: &mut dyn Io) -> Result<(), IoError> {
        let buf = io.buffer(self.chunk_bytes);
        let id = io.submit(Op::Read {
            file: self.file,
            offset: self.next_read,
            buf,
            len: self.chunk_bytes,
        })?;
        self.in_flight = Some(id);
        self.next_read += self.chunk_bytes as u64;
        Ok(())
    }

    /// Waits for the read in flight and appends its bytes; `false` when it brought none (the
    /// file's end).
    fn take(&mut self, io: &mut dyn Io) -> Result<bool, IoError> {
        let Some(id) = self.in_flight.take() else {
            return Ok(false);
        };
        let c = io::wait_for(io, id)?;
        let got = match &c.result {
            Ok(io::Done::Transferred { bytes }) => *bytes,
            _ => 0,
        };
        if let Some(buf) = c.buf {
            self.buf
                .extend_from_slice(buf.as_slice().get(..got).unwrap_or_default());
            io.recycle(buf);
        }
        c.result?;
        Ok(got > 0)
    }

    /// Waits for the read in flight (its bytes are not needed): the file may be closed after.
    pub(super) fn stop(mut self, io: &mut dyn Io) {
        if let Some(id) = self.in_flight.take() {
            if let Ok(c) = io::wait_for(io, id) {
                if let Some(buf) = c.buf {
                    io.recycle(buf);
                }
            }
        }
    }
}
