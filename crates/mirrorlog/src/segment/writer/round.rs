//! Commit rounds: the newly full pages and the commit record written (the record into the slot
//! not holding the newest valid one), then one fdatasync; the round is durable only when all
//! three completed. At most one round is in flight; appends continue into a fresh buffer. A
//! failed write or fdatasync poisons the segment.

use super::{Durable, Round, SegmentWriter, RECENT_ROUNDS_MAX};
use crate::io::{AlignedBuf, Completion, Io, Op};
use crate::segment::commit_record::{
    page_floor, CommitRecord, COMMIT_SLOTS, COMMIT_SLOT_SIZE_BYTES,
};
use crate::segment::SegmentError;

/// Most operations one commit round submits (full pages, commit record, fdatasync): a caller
/// sharing an `Io` starts a round only with this much room.
pub const ROUND_OPS_MAX: usize = 3;

impl SegmentWriter {
    /// Starts a commit round for everything appended so far, or a checkpoint of what journal
    /// rounds made durable (a commit record superseding the segment's journal entries).
    /// Returns `false` when there is nothing new and nothing to checkpoint, or a round is
    /// already in flight.
    ///
    /// # Errors
    /// A submission error (which poisons the segment) or the poisoning error.
    pub fn start_commit(&mut self, io: &mut dyn Io) -> Result<bool, SegmentError> {
        self.start_round(io, true)
    }

    /// [`SegmentWriter::start_commit`], with its own fdatasync or (`own_sync` false) waiting
    /// for the caller's sync instead (`start_checkpoint`).
    pub(super) fn start_round(
        &mut self,
        io: &mut dyn Io,
        own_sync: bool,
    ) -> Result<bool, SegmentError> {
        self.check()?;
        let nothing_new = self.data_len == self.durable.data_len;
        if self.round.is_some() || (nothing_new && self.journal_low.is_none()) {
            return Ok(false);
        }
        let pages_end = page_floor(self.data_len);
        let tail_len = (self.data_len - pages_end) as usize;
        let mut chain = Vec::with_capacity(ROUND_OPS_MAX);
        let pages_start = self.buf_start;
        chain.extend(self.take_full_pages(io, pages_end));
        // An idle writer handed its buffer back; its partial page is the durable tail.
        let tail = if self.is_detached() {
            self.durable_tail.clone()
        } else {
            self.buf.as_slice()[..tail_len].to_vec()
        };
        self.sequence += 1;
        let record = CommitRecord {
            sequence: self.sequence,
            base_offset: self.base_offset,
            data_len: self.data_len,
            next_offset: self.next_offset,
            prev_data_len: self.durable.data_len,
            tail,
            segment_id: self.segment_id,
        };
        let mut slot = self.slot_buffer(io);
        record.encode_into(slot.as_mut_slice());
        chain.push(Op::Write {
            file: self.file,
            offset: self.slot_position((self.sequence % COMMIT_SLOTS as u64) as usize),
            buf: slot,
            range: 0..COMMIT_SLOT_SIZE_BYTES,
        });
        // The fdatasync is linked behind the writes: it starts the moment they complete, with
        // no round trip through this thread.
        if own_sync {
            chain.push(Op::Fdatasync { file: self.file });
        }
        let ops = io.submit_chain(chain).map_err(|e| self.poison(e.into()))?;
        self.round = Some(Round {
            pending: ops.len() + usize::from(!own_sync),
            ops,
            pages_start,
            pages_buf: None,
            pages_end,
            data_len: self.data_len,
            next_offset: self.next_offset,
            tail: record.tail,
            block_lsn: None,
            journaled: false,
            awaits_sync: !own_sync,
        });
        self.debug_check_invariants();
        Ok(true)
    }

    /// The write of the full pages below `pages_end` not yet written, if any: they leave with
    /// the current buffer, and the partial page moves to a fresh one, where appends continue.
    /// Deferred durable pages among them are copied for reads until the write completed.
    pub(super) fn take_full_pages(&mut self, io: &mut dyn Io, pages_end: u64) -> Option<Op> {
        if pages_end <= self.buf_start {
            return None;
        }
        if self.has_deferred_pages() {
            let len = (self.synced_pages_end - self.buf_start) as usize;
            self.leaving = Some((self.buf_start, self.buf.as_slice()[..len].to_vec()));
        }
        let tail_len = (self.data_len - pages_end) as usize;
        let mut next = self.take_buffer(io);
        let from = (pages_end - self.buf_start) as usize;
        next.as_mut_slice()[..tail_len]
            .copy_from_slice(&self.buf.as_slice()[from..from + tail_len]);
        let full = std::mem::replace(&mut self.buf, next);
        let write = Op::Write {
            file: self.file,
            offset: self.buf_start,
            buf: full,
            range: 0..from,
        };
        self.buf_start = pages_end;
        Some(write)
    }

    pub(super) fn poison(&mut self, error: SegmentError) -> SegmentError {
        if self.poisoned.is_none() {
            self.poisoned = Some(error.clone());
        }
        error
    }

    /// Whether `completion` belongs to this segment's round.
    #[must_use]
    pub fn owns(&self, completion: &Completion) -> bool {
        self.round
            .as_ref()
            .is_some_and(|r| r.ops.contains(&completion.id))
    }

    /// Feeds a completion of this segment's round. Returns the new durable state when the round
    /// finished.
    ///
    /// # Errors
    /// The operation's failure, which poisons the segment.
    pub fn on_completion(
        &mut self,
        completion: Completion,
    ) -> Result<Option<Durable>, SegmentError> {
        if let Some(buf) = completion.buf {
            if buf.capacity() == COMMIT_SLOT_SIZE_BYTES {
                self.release_slot(buf);
            } else if completion.result.is_ok()
                && self
                    .round
                    .as_ref()
                    .is_some_and(|r| r.ops.contains(&completion.id))
            {
                if let Some(round) = self.round.as_mut() {
                    round.pages_buf = Some(buf);
                }
            } else {
                self.release(buf);
            }
        }
        if let Err(e) = completion.result {
            return Err(self.poison(e.into()));
        }
        let Some(round) = self.round.as_mut() else {
            return Ok(None);
        };
        if !round.ops.contains(&completion.id) {
            return Ok(None);
        }
        round.pending -= 1;
        // What is left in `ops` is what a wait in place may still wait for.
        round.ops.retain(|&id| id != completion.id);
        if round.pending > 0 {
            return Ok(None);
        }
        Ok(Some(self.finish_round()))
    }

    /// The round in flight has completed: its bytes are durable.
    pub(super) fn finish_round(&mut self) -> Durable {
        let Some(round) = self.round.take() else {
            return self.durable.clone();
        };
        if !round.journaled {
            // Its commit record supersedes every journal entry of the segment.
            self.journal_low = None;
        }
        // The deferred pages' write completed: they are read from the file (or `recent`).
        self.leaving = None;
        self.synced_pages_end = round.pages_end;
        self.durable = Durable {
            data_len: round.data_len,
            next_offset: round.next_offset,
        };
        self.durable_tail = round.tail;
        if let Some(buf) = round.pages_buf {
            let len = (round.pages_end - round.pages_start) as usize;
            self.recent.push_back((round.pages_start, buf, len));
            while self.recent.len() > RECENT_ROUNDS_MAX {
                if let Some((_, old, _)) = self.recent.pop_front() {
                    self.release(old);
                }
            }
        }
        self.debug_check_invariants();
        self.durable.clone()
    }

    /// A buffer for appends: an idle one, else the oldest resident round's, else a new one
    /// from the Io (registered with the ring where possible).
    fn take_buffer(&mut self, io: &mut dyn Io) -> AlignedBuf {
        if let Some(buf) = self.pool.try_take() {
            return buf;
        }
        match self.recent.pop_front() {
            Some((_, buf, _)) => buf,
            None => io.buffer(self.pool.buffer_size_bytes()),
        }
    }

    pub(super) fn slot_buffer(&mut self, io: &mut dyn Io) -> AlignedBuf {
        self.slot_pool
            .try_take()
            .unwrap_or_else(|| io.buffer(COMMIT_SLOT_SIZE_BYTES))
    }

    /// Keeps a buffer for reuse; one the pool does not take waits in `spare` for the Io.
    pub(super) fn release(&mut self, buf: AlignedBuf) {
        if let Some(extra) = self.pool.give(buf) {
            self.spare.push(extra);
        }
    }

    pub(super) fn release_slot(&mut self, buf: AlignedBuf) {
        if let Some(extra) = self.slot_pool.give(buf) {
            self.spare.push(extra);
        }
    }

    /// Hands every buffer the writer holds back to the Io (seal, close).
    pub(super) fn return_buffers(&mut self, io: &mut dyn Io) {
        let current = std::mem::replace(&mut self.buf, AlignedBuf::empty());
        io.recycle(current);
        for buf in self.pool.drain().chain(self.slot_pool.drain()) {
            io.recycle(buf);
        }
        for (_, buf, _) in self.recent.drain(..) {
            io.recycle(buf);
        }
        for buf in self.spare.drain(..) {
            io.recycle(buf);
        }
    }

    /// The bytes `[from, to)` if one resident round holds them all.
    pub(super) fn resident(&self, from: u64, to: u64) -> Option<&[u8]> {
        self.recent.iter().find_map(|(start, buf, len)| {
            let end = start + *len as u64;
            (from >= *start && to <= end)
                .then(|| &buf.as_slice()[(from - start) as usize..(to - start) as usize])
        })
    }

    /// Commits everything appended and waits until it is durable (set-up paths and tests; a
    /// shard multiplexes rounds instead).
    ///
    /// # Errors
    /// The round's failure.
    pub fn commit(&mut self, io: &mut dyn Io) -> Result<Durable, SegmentError> {
        // A failed round stays in `round` with operations that will never complete: waiting
        // for it again would spin forever (found by the injected-ENOSPC tests).
        self.check()?;
        if self.round.is_none() && !self.start_commit(io)? {
            return Ok(self.durable.clone());
        }
        let mut completions = Vec::new();
        while let Some(round) = &self.round {
            if round.ops.is_empty() {
                // A journal round whose block is not durable yet, or a checkpoint waiting for
                // the shard's sync: the segment makes it durable on its own instead (the
                // block's or the sync's later completion changes nothing).
                self.upgrade_journal_round(io)?;
                continue;
            }
            let ops = round.ops.clone();
            io.complete_for(&ops, &mut completions)?;
            for c in completions.drain(..) {
                if let Some(durable) = self.on_completion(c)? {
                    // A round finished; start the next if appends arrived meanwhile.
                    if self.data_len > durable.data_len {
                        self.start_commit(io)?;
                    }
                }
            }
        }
        Ok(self.durable.clone())
    }
}
