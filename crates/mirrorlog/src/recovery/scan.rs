//! One pass over a segment file: its bytes stream in with large O_DIRECT reads, several in
//! flight, through the one scanner the clean open uses too ([`crate::segment::scan`]), and
//! every batch is validated (size, CRC, increasing offsets), indexed and replayed into the
//! producer state as it arrives, so recovery reads each byte once.
//!
//! Effects are certain only below the smallest durable end the file's commit records allow
//! (the floor of the older record's tail page): every reading of the file (sealed, or any of
//! its records) agrees on the batches there. The bytes past it (at most one commit round) are
//! read again once the segment's reading is decided, and only the chosen batches take effect.

use crate::format::{BatchView, Offset};
use crate::io::{self, FileId, Io};
use crate::log::LogError;
use crate::producer_state::{AbortedTxn, BatchInfo, CompletedTxn, Origin, ProducerStateManager};
use crate::segment::commit_record::{page_floor, CommitRecord};
use crate::segment::{scan_file, BatchSink, BatchStream, CheckOnly, ScanError};
use crate::segment::{SegmentIndexes, COMMIT_SLOTS, COMMIT_SLOT_SIZE_BYTES};

/// Bytes of the commit-record slots at the end of an open segment file.
pub(super) const SLOTS_BYTES: usize = COMMIT_SLOTS * COMMIT_SLOT_SIZE_BYTES;
/// Size of each of recovery's reads.
pub const READ_BYTES: usize = crate::segment::scan::SCAN_READ_BYTES;
/// Recovery's reads in flight per segment file.
pub const READS_IN_FLIGHT: usize = crate::segment::scan::SCAN_READS_IN_FLIGHT;
/// How many batches ahead the replay prefetches producer slots.
const REPLAY_LOOKAHEAD_BATCHES: usize = 16;

/// The producer state replayed from the first batch of the log, in offset order.
#[derive(Debug)]
pub(super) struct Replayer {
    pub(super) psm: ProducerStateManager,
    pub(super) aborted: Vec<AbortedTxn>,
    /// The barrier rule's ranges, as the live path had them.
    pub(super) history: crate::log::ModeHistory,
}

impl Replayer {
    fn apply(&mut self, b: &BatchView<'_>) -> Result<(), LogError> {
        let info = BatchInfo::from_view(b, b.header().base_offset);
        let history = &self.history;
        let staged = self
            .psm
            .stage(&[info], Origin::Replication, |o| history.is_local(o))?;
        let completed = self.psm.apply(staged)?;
        self.aborted
            .extend(completed.iter().filter_map(CompletedTxn::aborted_entry));
        Ok(())
    }
}

/// The effects of the batches of one segment that took effect.
#[derive(Debug)]
pub(super) struct Accepted {
    pub(super) indexes: SegmentIndexes,
    /// `(leader epoch, base offset)` of every batch whose epoch is newer than the one before.
    pub(super) epochs: Vec<(i32, Offset)>,
    /// Offset after the last batch.
    pub(super) next: Offset,
    /// Position after the last batch.
    pub(super) end: u64,
}

impl Accepted {
    fn take(&mut self, b: &BatchView<'_>, replayer: &mut Replayer) -> Result<(), LogError> {
        let h = b.header();
        self.indexes.on_append(
            b.position() as u32,
            b.bytes().len() as u32,
            h.last_offset(),
            h.max_timestamp,
        );
        if h.partition_leader_epoch >= 0
            && self
                .epochs
                .last()
                .is_none_or(|&(e, _)| h.partition_leader_epoch > e)
        {
            self.epochs.push((h.partition_leader_epoch, h.base_offset));
        }
        self.next = Offset(h.last_offset().0 + 1);
        self.end = b.position() + b.bytes().len() as u64;
        replayer.apply(b)
    }
}

/// What the scan found out about one segment file.
#[derive(Debug)]
pub(super) struct Scanned {
    pub(super) base: Offset,
    pub(super) file: FileId,
    /// The durable data: `[0, accepted.end)`.
    pub(super) accepted: Accepted,
    /// For a segment read through a commit record: its tail.
    pub(super) open_tail: Option<Vec<u8>>,
    pub(super) whole_batches: bool,
    pub(super) record_validates: bool,
    pub(super) record_present: bool,
    /// Nothing was ever written at its start: zeros from position 0, or no byte at all.
    pub(super) starts_zeroed: bool,
    /// As its preallocation left it (see `Facts::untouched`): zeros from its start, and longer
    /// than the data region (a sealed file never is).
    pub(super) untouched: bool,
    /// The newest sequence number of the file's commit records (0 without any): a reopened
    /// segment's records must outrank every record already there.
    pub(super) sequence: u64,
    /// Batches took effect that the chosen reading does not hold (a file that is neither
    /// whole nor readable through a record): the caller must replay the producer state again.
    pub(super) replay_spoiled: bool,
    /// Why neither a sealed nor an open reading works, for the corruption error.
    pub(super) problem: String,
}

/// A batch that takes effect: indexed, its epoch noted, replayed.
struct Effects<'a> {
    accepted: &'a mut Accepted,
    replayer: &'a mut Replayer,
}

impl BatchSink for Effects<'_> {
    type Error = LogError;
    fn take(&mut self, b: &BatchView<'_>) -> Result<(), LogError> {
        self.accepted.take(b, self.replayer)
    }
    fn lookahead(&self) -> usize {
        REPLAY_LOOKAHEAD_BATCHES
    }
    fn ahead(&mut self, producer_id: i64) {
        self.replayer.psm.prefetch_producer(producer_id);
    }
}

fn segment_error(e: crate::io::IoError) -> LogError {
    LogError::Segment(e.into())
}

/// Streams the segment file `base` of `dir`, replaying its batches into `replayer`.
pub(super) fn scan_segment(
    io: &mut dyn Io,
    dir: &std::path::Path,
    base: Offset,
    config: &crate::log::LogConfig,
    replayer: &mut Replayer,
) -> Result<Scanned, LogError> {
    let file = crate::segment::open_for_reads(io, dir, base).map_err(segment_error)?;
    let len = io.file_len(file).map_err(segment_error)?;
    let mut records: Vec<CommitRecord> = Vec::new();
    if len >= SLOTS_BYTES as u64 {
        let slots_at = len - SLOTS_BYTES as u64;
        let slots = io::read_direct(io, file, slots_at, SLOTS_BYTES).map_err(segment_error)?;
        records = slots
            .chunks(COMMIT_SLOT_SIZE_BYTES)
            .filter_map(|s| CommitRecord::decode(s).ok())
            .filter(|r| r.base_offset == base && r.data_len <= slots_at)
            .collect();
        // Newest first: an older record wins only when the newest round's pages were lost
        // (that round was never acknowledged).
        records.sort_by_key(|r| std::cmp::Reverse(r.sequence));
    }
    // The largest batch any config of the partition could have written: its settings may have
    // been lowered since (`Engine::update_config`), and a batch written under the old ones is
    // still acknowledged data, not damage.
    let batch_bytes_max = (config.segment.commit_buffer_bytes as u64)
        .max(crate::api::APPEND_BUFFER_BYTES_MAX as u64)
        .max(crate::format::BATCH_HEADER_SIZE_BYTES as u64);
    let certain_until = records
        .iter()
        .map(|r| page_floor(r.data_len))
        .min()
        .unwrap_or(len);
    let mut stream = BatchStream::new(0, base, certain_until, batch_bytes_max);
    let mut accepted = Accepted {
        indexes: SegmentIndexes::new(base, config.segment.index_interval_bytes),
        epochs: Vec::new(),
        next: base,
        end: 0,
    };
    let mut effects = Effects {
        accepted: &mut accepted,
        replayer,
    };
    scan_file(io, file, 0, len, &mut stream, &mut effects).map_err(|e| match e {
        ScanError::Io(e) => segment_error(e),
        ScanError::Sink(e) => e,
    })?;
    let mut scanned = Scanned {
        base,
        file,
        accepted,
        open_tail: None,
        whole_batches: false,
        record_validates: false,
        record_present: !records.is_empty(),
        // An empty file too: a roll's new segment whose preallocation never became durable.
        starts_zeroed: stream.zeros_from_start() || len == 0,
        untouched: stream.zeros_from_start()
            && len > crate::segment::data_region_bytes(config.segment.segment_bytes),
        sequence: records.iter().map(|r| r.sequence).max().unwrap_or(0),
        replay_spoiled: false,
        problem: String::new(),
    };
    let first_pending = stream.pending_at().unwrap_or(scanned.accepted.end);
    // A sealed file is whole batches to its last byte. (The table checks this first: a sealed
    // segment whose last batch ends in 16 KiB of zero-valued record bytes must not pass for an
    // open segment that never committed.)
    if stream.whole_to(len) {
        scanned.whole_batches = true;
        if first_pending < len {
            let data = io::read_direct(io, file, first_pending, (len - first_pending) as usize)
                .map_err(segment_error)?;
            take_all(&data, first_pending, &mut scanned.accepted, replayer)?;
        }
        return Ok(scanned);
    }
    scanned.problem = stream.stop().unwrap_or_default().to_string();
    for r in &records {
        let floor = page_floor(r.data_len);
        // The batch where the stream stopped can only be whole in this reading if it spans the
        // record's floor (below the floor the record's bytes are the file's).
        if floor < first_pending || floor > stream.valid_end() + batch_bytes_max {
            scanned.problem = format!(
                "no commit record's data validates: {}",
                stream.stop().unwrap_or("")
            );
            continue;
        }
        let mut data = io::read_direct(io, file, first_pending, (floor - first_pending) as usize)
            .map_err(segment_error)?;
        data.extend_from_slice(&r.tail);
        // The record names the offset after its last batch too: a base offset damaged where
        // no CRC covers it (Kafka's CRC starts at `attributes`) must not pass.
        let checked = validates(&data, first_pending, scanned.accepted.next).and_then(|next| {
            if next == r.next_offset {
                Ok(())
            } else {
                Err(format!(
                    "the batches end at offset {next}, the commit record at {}",
                    r.next_offset
                ))
            }
        });
        match checked {
            Ok(()) => {
                take_all(&data, first_pending, &mut scanned.accepted, replayer)?;
                scanned.record_validates = true;
                scanned.open_tail = Some(r.tail.clone());
                return Ok(scanned);
            }
            Err(e) => scanned.problem = format!("no commit record's data validates: {e}"),
        }
    }
    // Neither reading holds: whatever took effect is not this segment's durable data.
    scanned.replay_spoiled = scanned.accepted.end > 0;
    Ok(scanned)
}

/// Checks with the one scanner that `data` (at `position`, continuing from offset `next`) is
/// whole valid batches with increasing offsets; returns the offset after the last.
fn validates(data: &[u8], position: u64, next: Offset) -> Result<Offset, String> {
    let mut stream = BatchStream::new(position, next, u64::MAX, u64::MAX);
    let Ok(whole) = stream.feed_all(position, data, &mut CheckOnly);
    if whole {
        Ok(stream.next_offset())
    } else {
        Err(stream.stop().unwrap_or("no batches").to_string())
    }
}

/// Takes every batch of `data` (already validated) at `position`.
fn take_all(
    data: &[u8],
    position: u64,
    accepted: &mut Accepted,
    replayer: &mut Replayer,
) -> Result<(), LogError> {
    let mut stream = BatchStream::new(position, accepted.next, u64::MAX, u64::MAX);
    stream.feed_all(position, data, &mut Effects { accepted, replayer })?;
    Ok(())
}
