//! Journal rounds (the shard does not drive them yet): a round whose durability
//! comes from the shard's journal instead of the segment's own fdatasync.
//!
//! - The bytes since the durable end go into the journal's block being filled as one entry.
//!   The full pages stay in the buffer (deferred) until it holds [`DEFERRED_PAGES_MAX_BYTES`];
//!   then the round writes them all to the segment without a sync, as one write (each page
//!   still written once). The round is durable when that write (if any) completed *and* the
//!   block is durable ([`SegmentWriter::on_journal_durable`]). Deferred pages live in the
//!   journal until a checkpoint's commit record supersedes its entries, and every commit
//!   record is written behind the pages below it.
//! - A round of [`DIRECT_ROUND_BYTES`] or more is not a journal round: its pages need their own
//!   fdatasync anyway, so it is an ordinary round (pages, commit record, one fdatasync of the
//!   segment), and a large append is written once. (The entry format can still name synced
//!   pages `[start, inline_from)`; replay reads them where they lie.)
//! - An entry names the writer (`segment_id`) and the newest commit record it follows
//!   (`record_sequence`); replay applies it only on top of that very record. A checkpoint is an
//!   ordinary commit round ([`SegmentWriter::start_commit`]): its newer record supersedes every
//!   entry of the segment, and afterwards [`SegmentWriter::journal_low`] is `None` until the
//!   next journal round. A truncation's record does the same.

use super::{Durable, Round, SegmentWriter};
use crate::io::{IoError, Op, OpId};
use crate::journal::{Entry, JournalWriteError, JournalWriter, Reserve, ENTRY_FIXED_SIZE_BYTES};
use crate::segment::commit_record::{
    page_floor, CommitRecord, COMMIT_SLOTS, COMMIT_SLOT_SIZE_BYTES,
};
use crate::segment::SegmentError;

/// A round of at least this many bytes syncs its own pages (see the module docs).
pub const DIRECT_ROUND_BYTES: u64 = 256 << 10;

/// A journal round writes the buffer's full pages once it holds this many bytes (a quarter of
/// the default 2 MiB buffer: a batch of up to 1.5 MiB still finds room without a wait); below
/// it they stay deferred (see the module docs).
pub const DEFERRED_PAGES_MAX_BYTES: u64 = 512 << 10;

/// What [`SegmentWriter::start_journal_round`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalStart {
    /// Nothing new, or a round already in flight.
    Nothing,
    /// Not before the journal's flush in flight completes (enough blocks wait for it).
    Later,
    /// Make the round durable with an ordinary commit round instead: it is large (its pages
    /// need their own fdatasync anyway, so it is written once), or the journal cannot take
    /// its entry (larger than a block, or no room in the ring until partitions checkpoint).
    NoRoom,
    /// The entry is in the block; `ops` are the segment's own operations (pages, and their
    /// fdatasync for a large round), possibly none.
    Started {
        /// The block the round waits for.
        lsn: u64,
        /// The segment's operations, for routing completions.
        ops: Vec<OpId>,
    },
}

impl SegmentWriter {
    /// Starts a journal round for everything appended so far (see the module docs); `key`
    /// names the partition in the journal.
    ///
    /// # Errors
    /// A submission error or a poisoned journal (which poison the segment), or the poisoning
    /// error.
    pub fn start_journal_round(
        &mut self,
        io: &mut dyn crate::io::Io,
        journal: &mut JournalWriter,
        key: &str,
    ) -> Result<JournalStart, SegmentError> {
        self.check()?;
        if self.round.is_some() || self.data_len == self.durable.data_len {
            return Ok(JournalStart::Nothing);
        }
        let start = self.durable.data_len;
        if self.data_len - start >= DIRECT_ROUND_BYTES {
            // Its pages need their own fdatasync anyway: an ordinary round, written once.
            return Ok(JournalStart::NoRoom);
        }
        let pages_end = page_floor(self.data_len);
        let inline_from = start;
        let inline_len = (self.data_len - inline_from) as usize;
        let lsn = match journal.reserve(io, ENTRY_FIXED_SIZE_BYTES + key.len() + inline_len) {
            Reserve::At(lsn) => lsn,
            Reserve::Later => return Ok(JournalStart::Later),
            Reserve::Never => return Ok(JournalStart::NoRoom),
        };
        let from = (inline_from - self.buf_start) as usize;
        let pushed = journal.push(&Entry {
            key,
            segment_base: self.base_offset,
            segment_id: self.segment_id,
            record_sequence: self.sequence,
            start,
            inline_from,
            end: self.data_len,
            next_offset: self.next_offset,
            inline: &self.buf.as_slice()[from..from + inline_len],
        });
        match pushed {
            Ok(()) => {}
            Err(JournalWriteError::Io(e)) => return Err(self.poison(e.into())),
            Err(JournalWriteError::Refused(_)) => return Ok(JournalStart::NoRoom),
        }
        let tail_len = (self.data_len - pages_end) as usize;
        let mut chain = Vec::with_capacity(1);
        let pages_start = self.buf_start;
        // A buffer of at most a quarter of itself keeps its pages (a smaller buffer, set for
        // a partition of small batches, keeps them below a quarter of its size).
        let defer_max = DEFERRED_PAGES_MAX_BYTES.min(self.buffer_bytes as u64 / 4);
        if pages_end - self.buf_start > defer_max {
            chain.extend(self.take_full_pages(io, pages_end));
        }
        let from = (pages_end - self.buf_start) as usize;
        let tail = self.buf.as_slice()[from..from + tail_len].to_vec();
        let ops = if chain.is_empty() {
            Vec::new()
        } else {
            io.submit_chain(chain).map_err(|e| self.poison(e.into()))?
        };
        self.round = Some(Round {
            pending: ops.len() + 1,
            ops: ops.clone(),
            pages_start,
            pages_buf: None,
            pages_end,
            data_len: self.data_len,
            next_offset: self.next_offset,
            tail,
            block_lsn: Some(lsn),
            journaled: true,
            awaits_sync: false,
        });
        self.journal_low.get_or_insert(lsn);
        self.debug_check_invariants();
        Ok(JournalStart::Started { lsn, ops })
    }

    /// Writes the deferred pages (see the module docs) without a sync, as a round that makes
    /// nothing new durable: they stay durable through the journal until a checkpoint, and once
    /// written the writer can hand its buffer back (an idle partition's). Returns the round's
    /// operations, or `None` when there are no deferred pages or a round is in flight.
    ///
    /// # Errors
    /// A submission error (which poisons the segment) or the poisoning error.
    pub fn start_page_write(
        &mut self,
        io: &mut dyn crate::io::Io,
    ) -> Result<Option<Vec<OpId>>, SegmentError> {
        self.check()?;
        if self.round.is_some() || !self.has_deferred_pages() {
            return Ok(None);
        }
        let pages_start = self.buf_start;
        let pages_end = self.synced_pages_end;
        let Some(write) = self.take_full_pages(io, pages_end) else {
            return Ok(None);
        };
        let ops = io
            .submit_chain(vec![write])
            .map_err(|e| self.poison(e.into()))?;
        self.round = Some(Round {
            pending: ops.len(),
            ops: ops.clone(),
            pages_start,
            pages_buf: None,
            pages_end,
            data_len: self.durable.data_len,
            next_offset: self.durable.next_offset,
            tail: self.durable_tail.clone(),
            block_lsn: None,
            // Its entries stay the journal's until a commit record supersedes them.
            journaled: true,
            awaits_sync: false,
        });
        self.debug_check_invariants();
        Ok(Some(ops))
    }

    /// Starts a checkpoint (see [`SegmentWriter::start_commit`]) whose durability comes from a
    /// filesystem-wide sync the caller issues once its writes completed
    /// ([`SegmentWriter::checkpoint_written`], then `Io::syncfs` and
    /// [`SegmentWriter::on_synced`]): the newly full pages and the commit record, no fdatasync
    /// of their own. Many partitions' checkpoints then cost one sync. Until the sync the round
    /// is in flight, so no journal round can follow a record that is not yet durable.
    ///
    /// # Errors
    /// As [`SegmentWriter::start_commit`].
    pub fn start_checkpoint(&mut self, io: &mut dyn crate::io::Io) -> Result<bool, SegmentError> {
        self.start_round(io, false)
    }

    /// Whether the round in flight is a checkpoint waiting for the caller's sync (its writes
    /// completed or not).
    #[must_use]
    pub fn awaits_sync(&self) -> bool {
        self.round.as_ref().is_some_and(|r| r.awaits_sync)
    }

    /// Whether the round in flight is a checkpoint whose writes completed and that waits for
    /// the caller's sync.
    #[must_use]
    pub fn checkpoint_written(&self) -> bool {
        self.round
            .as_ref()
            .is_some_and(|r| r.awaits_sync && r.ops.is_empty())
    }

    /// The caller's sync covering the checkpoint in flight completed: returns the new durable
    /// state.
    pub fn on_synced(&mut self) -> Option<Durable> {
        let round = self.round.as_mut()?;
        if !(round.awaits_sync && round.ops.is_empty()) {
            return None;
        }
        round.awaits_sync = false;
        round.pending -= 1;
        (round.pending == 0).then(|| self.finish_round())
    }

    /// The journal's blocks up to `last` are durable: returns the new durable state when that
    /// finished this segment's round.
    pub fn on_journal_durable(&mut self, last: u64) -> Option<Durable> {
        let round = self.round.as_mut()?;
        if round.block_lsn.is_none_or(|lsn| lsn > last) {
            return None;
        }
        round.block_lsn = None;
        round.pending -= 1;
        (round.pending == 0).then(|| self.finish_round())
    }

    /// Makes the journal round in flight, whose own operations completed, durable without its
    /// block: a commit record covering it, synced, as a checkpoint does. For a wait in place
    /// (a roll, a truncation, a close) that cannot wait for the shard to flush the journal.
    ///
    /// # Errors
    /// A submission error, which poisons the segment.
    pub(super) fn upgrade_journal_round(
        &mut self,
        io: &mut dyn crate::io::Io,
    ) -> Result<(), SegmentError> {
        let Some(round) = self.round.as_ref() else {
            return Ok(());
        };
        if round.awaits_sync && round.ops.is_empty() {
            // A checkpoint waiting for the shard's sync: its record is written; its own
            // fdatasync makes it durable.
            let ops = io
                .submit_chain(vec![Op::Fdatasync { file: self.file }])
                .map_err(|e| self.poison(e.into()))?;
            if let Some(round) = self.round.as_mut() {
                round.pending = ops.len();
                round.ops = ops;
                round.awaits_sync = false;
            }
            return Ok(());
        }
        if round.block_lsn.is_none() || !round.ops.is_empty() {
            return Ok(());
        }
        let (round_pages_end, data_len, next_offset) =
            (round.pages_end, round.data_len, round.next_offset);
        self.sequence += 1;
        let record = CommitRecord {
            sequence: self.sequence,
            base_offset: self.base_offset,
            data_len,
            next_offset,
            prev_data_len: self.durable.data_len,
            tail: round.tail.clone(),
            segment_id: self.segment_id,
        };
        let mut slot = self.slot_buffer(io);
        record.encode_into(slot.as_mut_slice());
        // The record covers pages the round deferred: they are written first, in its chain.
        let pages_start = self.buf_start;
        let mut chain = Vec::with_capacity(3);
        let pages = self.take_full_pages(io, round_pages_end);
        let took_pages = pages.is_some();
        chain.extend(pages);
        chain.extend([
            Op::Write {
                file: self.file,
                offset: self.slot_position((self.sequence % COMMIT_SLOTS as u64) as usize),
                buf: slot,
                range: 0..COMMIT_SLOT_SIZE_BYTES,
            },
            Op::Fdatasync { file: self.file },
        ]);
        let ops = io.submit_chain(chain).map_err(|e| self.poison(e.into()))?;
        if let Some(round) = self.round.as_mut() {
            round.pending = ops.len();
            round.ops = ops;
            round.block_lsn = None;
            round.journaled = false;
            if took_pages {
                round.pages_start = pages_start;
            }
        }
        self.debug_check_invariants();
        Ok(())
    }

    /// The journal's block holding this segment's round failed: the round's state is unknown,
    /// so the segment is poisoned.
    pub fn on_journal_failed(&mut self, error: IoError) -> SegmentError {
        self.poison(error.into())
    }

    /// The lsn of the oldest journal entry of this segment that no commit record supersedes
    /// yet: the journal cannot release that block until this segment checkpoints.
    #[must_use]
    pub fn journal_low(&self) -> Option<u64> {
        self.journal_low
    }

    /// This writer's identity (see the module docs).
    #[must_use]
    pub fn segment_id(&self) -> u64 {
        self.segment_id
    }
}
