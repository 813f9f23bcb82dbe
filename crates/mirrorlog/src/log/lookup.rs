//! Lookups a broker's ListOffsets and OffsetsForLeaderEpoch handlers need, with Kafka's
//! semantics (`UnifiedLog.fetchOffsetByTimestamp`, `Partition.fetchOffsetForTimestamp`,
//! `LeaderEpochFileCache.endOffsetFor`): by time from the time index, then the batches from the
//! entry found; by leader epoch from the epoch cache.

use super::{Isolation, LogError, PartitionLog};
use crate::format::{BatchIter, BatchView, CodecError, FormatError, Offset, TimestampType};
use crate::io::Io;

/// What a ListOffsets request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start (Kafka's `EARLIEST_TIMESTAMP`, -2).
    Earliest,
    /// The last fetchable offset: the high watermark, or the LSO at `ReadCommitted` (Kafka's
    /// `LATEST_TIMESTAMP`, -1).
    Latest,
    /// The first record with the largest timestamp (Kafka's `MAX_TIMESTAMP`, -3).
    MaxTimestamp,
    /// The first record whose timestamp is at or past this one (milliseconds, ≥ 0).
    Timestamp(i64),
}

/// A ListOffsets answer (Kafka's `TimestampAndOffset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    /// The record's timestamp; -1 (Kafka's `NO_TIMESTAMP`) for `Earliest` and `Latest`.
    pub timestamp: i64,
    /// The offset.
    pub offset: Offset,
    /// The leader epoch of the batch holding it (of the cache for `Earliest`/`Latest`).
    pub leader_epoch: Option<i32>,
}

/// An OffsetsForLeaderEpoch answer: the largest epoch at or below the one asked and the offset
/// where it ends. Both -1 (Kafka's `UNDEFINED_EPOCH`, `UNDEFINED_EPOCH_OFFSET`) for an epoch
/// past every known one, for -1, and for a log without epochs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    /// The epoch.
    pub leader_epoch: i32,
    /// Its end offset.
    pub end_offset: Offset,
}

/// Bytes read per step of a lookup's scan.
const LOOKUP_READ_BYTES: usize = 1 << 20;

impl PartitionLog {
    /// ListOffsets for one partition: see [`OffsetSpec`]. Offsets at or past the last
    /// fetchable offset ([`PartitionLog::read_bound`]: the high watermark, or the LSO at
    /// `ReadCommitted`) are not returned,
    /// as Kafka's `Partition.fetchOffsetForTimestamp` filters them. `None`: no such record.
    ///
    /// Inside a compressed batch the records are decompressed and searched one by one, as
    /// Kafka's `LogSegment.findOffsetByTimestamp` iterates a batch's records: the answer is the
    /// first record at or past the target. A batch that would decompress past
    /// [`LogConfig::decompressed_bytes_max`](super::LogConfig::decompressed_bytes_max) answers
    /// with its first offset at or past the log start and its largest timestamp (a consumer
    /// starting there reads past the earlier records without loss).
    ///
    /// # Errors
    /// An I/O failure or damage found on the way, a compressed payload that does not
    /// decompress included ([`FormatError::Decompression`](crate::format::FormatError)).
    pub fn offset_for_timestamp(
        &mut self,
        io: &mut dyn Io,
        spec: OffsetSpec,
        isolation: Isolation,
    ) -> Result<Option<TimestampOffset>, LogError> {
        let upper = self.read_bound(isolation);
        let target = match spec {
            OffsetSpec::Earliest => {
                return Ok(Some(TimestampOffset {
                    timestamp: -1,
                    offset: self.log_start,
                    leader_epoch: self.epochs.epoch_for(self.log_start),
                }))
            }
            OffsetSpec::Latest => {
                return Ok(Some(TimestampOffset {
                    timestamp: -1,
                    offset: upper,
                    leader_epoch: self.epochs.latest_epoch(),
                }))
            }
            OffsetSpec::Timestamp(t) => Target::AtOrAfter(t),
            OffsetSpec::MaxTimestamp => match self.largest_timestamp(io)? {
                Some(max) => Target::Exactly(max),
                None => return Ok(None),
            },
        };
        let Some(from) = self.search_start(io, target.least())? else {
            return Ok(None);
        };
        let mut from = from.max(self.log_start);
        loop {
            let mut collected = super::collected::Collected::default();
            self.read_batches(io, from, LOOKUP_READ_BYTES, upper, &mut collected)?;
            let batches = collected.finish();
            if batches.is_empty() {
                return Ok(None);
            }
            for b in BatchIter::new(&batches, 0) {
                let h = b.header();
                if h.last_offset() < from {
                    continue;
                }
                if target.may_hold(h.max_timestamp) {
                    let limit = self.config.decompressed_bytes_max();
                    if let Some(found) = first_record(&b, target, from, limit)? {
                        return Ok(Some(found));
                    }
                }
                from = Offset(h.last_offset().0 + 1);
            }
        }
    }

    /// The largest timestamp of the log's segments (Kafka's `maxTimestampSoFar`), or `None`
    /// for a log without batches.
    fn largest_timestamp(&mut self, io: &mut dyn Io) -> Result<Option<i64>, LogError> {
        let interval = self.config.segment.index_interval_bytes;
        let mut max: Option<i64> = None;
        for i in 0..self.sealed.len() {
            if self.sealed[i].next_offset <= self.log_start {
                continue;
            }
            let t = self.sealed[i].max_timestamp(io, &self.dir, interval)?;
            max = Some(max.map_or(t, |m| m.max(t)));
        }
        if self.active.data_len() > 0 {
            let t = self.active.indexes().max_timestamp();
            max = Some(max.map_or(t, |m| m.max(t)));
        }
        Ok(max)
    }

    /// Where the scan for a timestamp at or past `t` starts: in the first segment (at or past
    /// the log start) whose largest timestamp reaches `t`, at its last time-index entry below
    /// `t` (every batch up to that entry's is below `t`), else at its base. `None`: no segment
    /// reaches `t`.
    fn search_start(&mut self, io: &mut dyn Io, t: i64) -> Result<Option<Offset>, LogError> {
        let interval = self.config.segment.index_interval_bytes;
        let below = |entries: &[crate::segment::TimeEntry], base: Offset| {
            entries
                .iter()
                .take_while(|e| e.timestamp < t)
                .last()
                .map_or(base, |e| e.offset)
        };
        for i in 0..self.sealed.len() {
            if self.sealed[i].next_offset <= self.log_start
                || self.sealed[i].max_timestamp(io, &self.dir, interval)? < t
            {
                continue;
            }
            self.bound_loaded_indexes(i);
            let s = &mut self.sealed[i];
            let base = s.base_offset;
            return Ok(Some(below(
                s.indexes(io, &self.dir, interval)?.time_entries(),
                base,
            )));
        }
        let active = self.active.indexes();
        Ok((self.active.data_len() > 0 && active.max_timestamp() >= t)
            .then(|| below(active.time_entries(), self.active.base_offset())))
    }

    /// The broker made this replica leader at `epoch` (Kafka's `maybeAssignEpochStartOffset`
    /// at the log end): client and coordinator appends are stamped with it from now on, and a
    /// newer epoch starts at the log end in the epoch cache, durably, so that
    /// OffsetsForLeaderEpoch answers it before any batch carries it. Epochs may jump.
    ///
    /// # Errors
    /// An I/O failure writing the checkpoint.
    pub fn become_leader(&mut self, io: &mut dyn Io, epoch: i32) -> Result<(), LogError> {
        self.check()?;
        self.set_leader_epoch(epoch);
        if self.epochs.assign(epoch, self.log_end()) {
            self.write_epoch_checkpoint(io)?;
        }
        Ok(())
    }

    /// OffsetsForLeaderEpoch for one partition (Kafka's `endOffsetFor`): see
    /// [`EpochEndOffset`].
    #[must_use]
    pub fn leader_epoch_end_offset(&self, epoch: i32) -> EpochEndOffset {
        let (leader_epoch, end_offset) = self.epochs.end_offset_for(epoch, self.log_end());
        EpochEndOffset {
            leader_epoch,
            end_offset,
        }
    }
}

/// The timestamp a lookup looks for.
#[derive(Debug, Clone, Copy)]
enum Target {
    AtOrAfter(i64),
    Exactly(i64),
}

impl Target {
    fn least(self) -> i64 {
        match self {
            Target::AtOrAfter(t) | Target::Exactly(t) => t,
        }
    }

    fn may_hold(self, batch_max: i64) -> bool {
        match self {
            Target::AtOrAfter(t) => batch_max >= t,
            Target::Exactly(t) => batch_max == t,
        }
    }

    fn matches(self, timestamp: i64) -> bool {
        match self {
            Target::AtOrAfter(t) => timestamp >= t,
            Target::Exactly(t) => timestamp == t,
        }
    }
}

/// The first record of `b` at or past offset `from` whose timestamp matches `target` (Kafka's
/// `searchForTimestamp`): record by record, a compressed batch's decompressed first (to at
/// most `limit_bytes`); every record of a `LogAppendTime` batch carries the batch's timestamp.
/// A compressed batch past the limit answers with its first offset at or past `from` and its
/// largest timestamp.
fn first_record(
    b: &BatchView<'_>,
    target: Target,
    from: Offset,
    limit_bytes: usize,
) -> Result<Option<TimestampOffset>, LogError> {
    let h = b.header();
    let leader_epoch = (h.partition_leader_epoch >= 0).then_some(h.partition_leader_epoch);
    let decompressed;
    let records = match b.records() {
        Ok(records) => records,
        Err(_) => match b.decompressed_records(limit_bytes) {
            Ok(d) => {
                decompressed = d;
                decompressed.iter()
            }
            Err(FormatError::Decompression {
                source: CodecError::TooLarge { .. },
                ..
            }) => {
                return Ok(Some(TimestampOffset {
                    timestamp: h.max_timestamp,
                    offset: h.base_offset.max(from),
                    leader_epoch,
                }))
            }
            Err(e) => return Err(e.into()),
        },
    };
    let append_time = h.attributes.timestamp_type() == TimestampType::LogAppendTime;
    for r in records {
        // A record that does not parse: the batch's CRC held, so its producer wrote it so (or
        // it decompressed to garbage); the error names the batch.
        let r = r?;
        let timestamp = if append_time {
            h.max_timestamp
        } else {
            h.base_timestamp.saturating_add(r.timestamp_delta)
        };
        let offset = Offset(h.base_offset.0 + i64::from(r.offset_delta));
        if offset >= from && target.matches(timestamp) {
            return Ok(Some(TimestampOffset {
                timestamp,
                offset,
                leader_epoch,
            }));
        }
    }
    Ok(None)
}
