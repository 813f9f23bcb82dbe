//! One pass over a segment file: its bytes stream in with large O_DIRECT reads, several in
//! flight, and every batch is validated (size, CRC, increasing offsets), indexed and replayed
//! into the producer state as it arrives, so recovery reads each byte once.
//!
//! Effects are certain only below the smallest durable end the file's commit records allow
//! (the floor of the older record's tail page): every reading of the file (sealed, or any of
//! its records) agrees on the batches there. The bytes past it (at most one commit round) are
//! read again once the segment's reading is decided, and only the chosen batches take effect.

use crate::format::{inspect, BatchIter, BatchView, FormatError, Offset, ScanEnd};
use crate::io::{self, FileId, Io, SequentialReader};
use crate::log::LogError;
use crate::producer_state::{AbortedTxn, BatchInfo, CompletedTxn, Origin, ProducerStateManager};
use crate::segment::commit_record::{page_floor, CommitRecord};
use crate::segment::{SegmentIndexes, COMMIT_SLOTS, COMMIT_SLOT_SIZE_BYTES};

/// Bytes of the commit-record slots at the end of an open segment file.
pub(super) const SLOTS_BYTES: usize = COMMIT_SLOTS * COMMIT_SLOT_SIZE_BYTES;
/// Size of each of recovery's reads.
pub const READ_BYTES: usize = 8 << 20;
/// Recovery's reads in flight per segment file.
pub const READS_IN_FLIGHT: usize = 4;
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

/// The streaming validation of one file's bytes.
struct Stream {
    /// Offset after the last valid batch.
    next: Offset,
    /// Position after the last valid batch.
    valid_end: u64,
    /// Batches ending at or below this take effect as they arrive.
    certain_until: u64,
    /// First valid batch that did not take effect (ends past `certain_until`).
    pending_at: Option<u64>,
    /// The start of a batch cut by a chunk boundary, at `valid_end`.
    carry: Vec<u8>,
    /// Largest batch an append can write: a longer declared length is damage.
    batch_bytes_max: u64,
    /// Why the batches stopped before the end of the file.
    stop: Option<String>,
    /// They stopped at an all-zero header at position 0: nothing was ever written there.
    zeros_from_start: bool,
}

impl Stream {
    fn batch(
        &mut self,
        b: &BatchView<'_>,
        accepted: &mut Accepted,
        replayer: &mut Replayer,
    ) -> Result<bool, LogError> {
        let h = b.header();
        if h.base_offset < self.next {
            self.stop = Some(format!(
                "batch at position {} has offset {} below {}",
                b.position(),
                h.base_offset,
                self.next
            ));
            return Ok(false);
        }
        let end = b.position() + b.bytes().len() as u64;
        if self.pending_at.is_none() && end <= self.certain_until {
            accepted.take(b, replayer)?;
        } else {
            self.pending_at.get_or_insert(b.position());
        }
        self.next = Offset(h.last_offset().0 + 1);
        self.valid_end = end;
        Ok(true)
    }

    fn stopped(&mut self, end: Option<&ScanEnd>, position: u64) {
        self.stop = Some(match end {
            Some(ScanEnd::Corrupt(e)) => e.to_string(),
            Some(ScanEnd::ZeroFilled { position }) => {
                self.zeros_from_start = *position == 0;
                format!("zeroes from position {position} on")
            }
            other => format!("{other:?} at position {position}"),
        });
    }

    /// Feeds the chunk of the file at `position`. Returns `false` once the batches stopped.
    fn feed(
        &mut self,
        mut position: u64,
        mut data: &[u8],
        accepted: &mut Accepted,
        replayer: &mut Replayer,
    ) -> Result<bool, LogError> {
        // First finish a batch cut by the previous chunk boundary.
        while !self.carry.is_empty() {
            let carried = std::mem::take(&mut self.carry);
            match inspect(&carried, self.valid_end) {
                Ok(b) => {
                    if !self.batch(&b, accepted, replayer)? {
                        return Ok(false);
                    }
                }
                Err(FormatError::Incomplete { needed_bytes, .. }) => {
                    if needed_bytes > self.batch_bytes_max {
                        self.stop = Some(format!(
                            "batch at position {} declares {needed_bytes} bytes, more than an \
                             append can write",
                            self.valid_end
                        ));
                        return Ok(false);
                    }
                    self.carry = carried;
                    let want = (needed_bytes as usize).saturating_sub(self.carry.len());
                    let take = want.min(data.len());
                    self.carry
                        .extend_from_slice(data.get(..take).unwrap_or_default());
                    data = data.get(take..).unwrap_or_default();
                    position += take as u64;
                    if take < want {
                        return Ok(true);
                    }
                }
                Err(e) => {
                    self.stop = Some(e.to_string());
                    return Ok(false);
                }
            }
        }
        let mut scan = BatchIter::new(data, position);
        // The replay's lookahead (issue 22): the producer slots of the next batches start
        // arriving while this one is validated and replayed, so their misses overlap.
        let mut ahead = crate::format::producer_id_hints(data);
        for id in ahead.by_ref().take(REPLAY_LOOKAHEAD_BATCHES) {
            replayer.psm.prefetch_producer(id);
        }
        for b in scan.by_ref() {
            if let Some(id) = ahead.next() {
                replayer.psm.prefetch_producer(id);
            }
            if !self.batch(&b, accepted, replayer)? {
                return Ok(false);
            }
        }
        match scan.end() {
            Some(ScanEnd::Clean) => Ok(true),
            Some(ScanEnd::Incomplete { .. }) => {
                let rest = (scan.valid_end_position() - position) as usize;
                self.carry = data.get(rest..).unwrap_or_default().to_vec();
                Ok(true)
            }
            end => {
                let end = end.cloned();
                self.stopped(end.as_ref(), scan.valid_end_position());
                Ok(false)
            }
        }
    }
}

/// Checks that `data` (at `position`, continuing from offset `next`) is whole valid batches
/// with increasing offsets; returns the offset after the last.
fn validates(data: &[u8], position: u64, mut next: Offset) -> Result<Offset, String> {
    let mut scan = BatchIter::new(data, position);
    for b in scan.by_ref() {
        let h = b.header();
        if h.base_offset < next {
            return Err(format!(
                "batch at position {} has offset {} below {next}",
                b.position(),
                h.base_offset
            ));
        }
        next = Offset(h.last_offset().0 + 1);
    }
    match scan.end() {
        Some(ScanEnd::Clean) => Ok(next),
        other => Err(format!(
            "{other:?} at position {}",
            scan.valid_end_position()
        )),
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
    let batch_bytes_max = (config.segment.commit_buffer_bytes as u64)
        .min(config.segment.segment_bytes)
        .max(crate::format::BATCH_HEADER_SIZE_BYTES as u64);
    let mut stream = Stream {
        next: base,
        valid_end: 0,
        certain_until: records
            .iter()
            .map(|r| page_floor(r.data_len))
            .min()
            .unwrap_or(len),
        pending_at: None,
        carry: Vec::new(),
        batch_bytes_max,
        stop: None,
        zeros_from_start: false,
    };
    let mut accepted = Accepted {
        indexes: SegmentIndexes::new(base, config.segment.index_interval_bytes),
        epochs: Vec::new(),
        next: base,
        end: 0,
    };
    let mut reader = SequentialReader::new(file, 0, len, READ_BYTES, READS_IN_FLIGHT);
    let streamed = loop {
        let chunk = match reader.next(io) {
            Ok(Some(c)) => c,
            Ok(None) => break Ok(()),
            Err(e) => break Err(segment_error(e)),
        };
        let more = stream.feed(chunk.position, chunk.data(), &mut accepted, replayer);
        io.recycle(chunk.buf);
        match more {
            Ok(true) => {}
            Ok(false) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    reader.stop(io).map_err(segment_error)?;
    streamed?;
    if stream.stop.is_none() && !stream.carry.is_empty() {
        stream.stop = Some(format!(
            "the file ends inside a batch at position {}",
            stream.valid_end
        ));
    }
    let mut scanned = Scanned {
        base,
        file,
        accepted,
        open_tail: None,
        whole_batches: false,
        record_validates: false,
        record_present: !records.is_empty(),
        // An empty file too: a roll's new segment whose preallocation never became durable.
        starts_zeroed: stream.zeros_from_start || len == 0,
        untouched: stream.zeros_from_start
            && len > crate::segment::data_region_bytes(config.segment.segment_bytes),
        sequence: records.iter().map(|r| r.sequence).max().unwrap_or(0),
        replay_spoiled: false,
        problem: String::new(),
    };
    let first_pending = stream.pending_at.unwrap_or(scanned.accepted.end);
    // A sealed file is whole batches to its last byte. (The table checks this first: a sealed
    // segment whose last batch ends in 16 KiB of zero-valued record bytes must not pass for an
    // open segment that never committed.)
    if stream.stop.is_none() && stream.valid_end == len {
        scanned.whole_batches = true;
        if first_pending < len {
            let data = io::read_direct(io, file, first_pending, (len - first_pending) as usize)
                .map_err(segment_error)?;
            take_all(&data, first_pending, &mut scanned.accepted, replayer)?;
        }
        return Ok(scanned);
    }
    scanned.problem = stream.stop.clone().unwrap_or_default();
    for r in &records {
        let floor = page_floor(r.data_len);
        // The batch where the stream stopped can only be whole in this reading if it spans the
        // record's floor (below the floor the record's bytes are the file's).
        if floor < first_pending || floor > stream.valid_end + batch_bytes_max {
            scanned.problem = format!(
                "no commit record's data validates: {}",
                stream.stop.as_deref().unwrap_or("")
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

/// Takes every batch of `data` (already validated) at `position`.
fn take_all(
    data: &[u8],
    position: u64,
    accepted: &mut Accepted,
    replayer: &mut Replayer,
) -> Result<(), LogError> {
    for b in BatchIter::new(data, position) {
        accepted.take(&b, replayer)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{BatchBuilder, BatchOptions, ProducerFields, RecordSpec};
    use crate::producer_state::ProducerStateConfig;

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n.max(1)
        }
    }

    fn batches(rng: &mut Rng, count: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut offset = 0i64;
        let mut seq = 0;
        for _ in 0..count {
            let records = 1 + rng.below(5) as i32;
            let mut b = BatchBuilder::new(BatchOptions {
                base_offset: Offset(offset),
                producer: ProducerFields {
                    producer_id: 7,
                    producer_epoch: 0,
                    base_sequence: seq,
                },
                ..BatchOptions::default()
            });
            let value = vec![0x33; rng.below(3000) as usize];
            for _ in 0..records {
                b.push(RecordSpec {
                    timestamp: 1,
                    key: None,
                    value: Some(&value),
                    headers: &[],
                });
            }
            out.extend_from_slice(&b.build());
            offset += i64::from(records);
            seq += records;
        }
        out
    }

    /// Feeding a buffer in chunks cut anywhere finds the same batches, and the same place
    /// where they stop, as one pass over the whole buffer; every batch takes effect once.
    #[test]
    fn chunked_feeding_matches_a_whole_pass() {
        let seed = std::env::var("MIRRORLOG_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x5ca7_7e55_u64);
        for case in 0..300u64 {
            let mut rng = Rng((seed.wrapping_add(case)) | 1);
            let count = 1 + rng.below(12) as usize;
            let mut data = batches(&mut rng, count);
            // Then: nothing, zeroes, garbage, or a cut batch.
            match rng.below(4) {
                1 => data.extend(std::iter::repeat_n(0u8, 1 + rng.below(5000) as usize)),
                2 => data.extend((0..rng.below(200)).map(|i| i as u8 ^ 0xa5)),
                3 => {
                    let more = batches(&mut rng, 1);
                    let cut = rng.below(more.len() as u64) as usize;
                    data.extend_from_slice(&more[..cut]);
                }
                _ => {}
            }
            let mut whole = BatchIter::new(&data, 0);
            let expected: Vec<u64> = whole.by_ref().map(|b| b.position()).collect();
            let expected_end = whole.valid_end_position();
            let mut replayer = Replayer {
                psm: ProducerStateManager::new(ProducerStateConfig::default()),
                aborted: Vec::new(),
                history: crate::log::ModeHistory::default(),
            };
            let mut accepted = Accepted {
                indexes: SegmentIndexes::new(Offset(0), 4096),
                epochs: Vec::new(),
                next: Offset(0),
                end: 0,
            };
            let mut stream = Stream {
                next: Offset(0),
                valid_end: 0,
                certain_until: u64::MAX,
                pending_at: None,
                carry: Vec::new(),
                batch_bytes_max: 1 << 20,
                stop: None,
                zeros_from_start: false,
            };
            let mut at = 0;
            while at < data.len() {
                let n = (1 + rng.below(9000) as usize).min(data.len() - at);
                if !stream
                    .feed(at as u64, &data[at..at + n], &mut accepted, &mut replayer)
                    .unwrap()
                {
                    break;
                }
                at += n;
            }
            assert_eq!(stream.valid_end, expected_end, "case {case}");
            assert_eq!(accepted.end, expected_end, "case {case}");
            let ends_clean = expected_end == data.len() as u64;
            assert_eq!(
                stream.stop.is_none() && stream.carry.is_empty(),
                ends_clean,
                "case {case}"
            );
            let entry = replayer.psm.get(7).expect("producer replayed");
            let records: i32 = BatchIter::new(&data, 0)
                .map(|b| b.header().records_count)
                .sum();
            assert_eq!(entry.last_seq(), records - 1, "case {case}");
            let next = BatchIter::new(&data, 0)
                .last()
                .map_or(0, |b| b.header().last_offset().0 + 1);
            assert_eq!(accepted.next, Offset(next), "case {case}");
            // The generated batches are all found; garbage or zeroes after them never pass.
            assert_eq!(expected.len(), count, "case {case}");
        }
    }
}
