//! The plan of a pass (Kafka's `LogCleanerManager.cleanableOffsets` and
//! `calculateCleanableBytes`): from the cleaner's checkpoint to the first uncleanable offset,
//! whole segments, with the dirty ratio and `max.compaction.lag.ms` deciding whether it is due.

use super::super::recovery_point::decode_recovery_point;
use super::super::{LogError, PartitionLog};
use super::CLEANER_OFFSET_CHECKPOINT;
use crate::format::{BatchHeader, Offset, BATCH_HEADER_SIZE_BYTES};
use crate::io::{self, Io};

/// What a partition offers the cleaner now (Kafka's `LogToClean`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cleanable {
    /// The first offset not yet cleaned.
    pub first_dirty: Offset,
    /// The first offset the cleaner may not clean (a segment base).
    pub first_uncleanable: Offset,
    /// Bytes of the segments below the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of the segments from the first dirty one up to the first uncleanable one.
    pub cleanable_bytes: u64,
    /// A dirty segment's first batch is older than `max.compaction.lag.ms`.
    pub overdue: bool,
}

impl Cleanable {
    /// Dirty share of the cleanable bytes, 0 to 1 (Kafka's `cleanableRatio`).
    #[must_use]
    pub fn dirty_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.cleanable_bytes;
        if total == 0 {
            return 0.0;
        }
        self.cleanable_bytes as f64 / total as f64
    }

    /// Whether a pass is due: overdue with dirty bytes, or dirtier than `min_ratio_ppm`.
    #[must_use]
    pub fn is_due(&self, min_ratio_ppm: u32) -> bool {
        self.cleanable_bytes > 0
            && (self.overdue
                || self.cleanable_bytes as u128 * 1_000_000
                    > u128::from(min_ratio_ppm)
                        * u128::from(self.clean_bytes + self.cleanable_bytes))
    }
}

impl PartitionLog {
    /// The cleaner's checkpoint (the first dirty offset), if written.
    pub fn cleaner_checkpoint(&self, io: &mut dyn Io) -> Option<Offset> {
        let bytes = io::read_file_if_present(io, &self.dir.join(CLEANER_OFFSET_CHECKPOINT))
            .ok()
            .flatten()?;
        decode_recovery_point(&String::from_utf8_lossy(&bytes))
    }

    /// What the partition offers the cleaner at `now_ms` (see the module docs), whatever its
    /// policy.
    ///
    /// # Errors
    /// An I/O failure reading segment timestamps.
    pub fn cleanable(&mut self, io: &mut dyn Io, now_ms: i64) -> Result<Cleanable, LogError> {
        let log_start = self.log_start;
        let checkpoint = self.cleaner_checkpoint(io).unwrap_or(log_start);
        let first_dirty = if checkpoint < log_start || checkpoint > self.log_end() {
            log_start
        } else {
            checkpoint
        };
        let interval = self.config.segment.index_interval_bytes;
        let lag_min = self.config.compaction.min_compaction_lag_ms.max(0);
        let lag_max = self.config.compaction.max_compaction_lag_ms.max(0);
        let mut uncleanable = self.last_stable_offset().min(self.active.base_offset());
        let mut overdue = false;
        let dirty_from = self
            .sealed
            .partition_point(|s| s.next_offset <= first_dirty);
        for i in dirty_from..self.sealed.len() {
            let s = &mut self.sealed[i];
            if s.base_offset >= uncleanable {
                break;
            }
            if lag_min > 0 && s.max_timestamp(io, &self.dir, interval)? > now_ms - lag_min {
                uncleanable = uncleanable.min(s.base_offset);
                break;
            }
            if lag_max < i64::MAX && s.data_len >= BATCH_HEADER_SIZE_BYTES as u64 {
                // The first batch's largest timestamp, from its header (Kafka's
                // `getFirstBatchTimestampForSegments`).
                let head = super::super::read_direct(io, s.file, 0, BATCH_HEADER_SIZE_BYTES)?;
                let first = head
                    .first_chunk::<BATCH_HEADER_SIZE_BYTES>()
                    .map_or(-1, |h| BatchHeader::decode(h).max_timestamp);
                overdue |= first > 0 && first < now_ms.saturating_sub(lag_max);
            }
        }
        // Rounded down to the base of the segment holding it (Kafka cleans whole segments).
        let holding = self
            .sealed
            .partition_point(|s| s.next_offset <= uncleanable);
        let first_uncleanable = self
            .sealed
            .get(holding)
            .map_or(self.active.base_offset(), |s| s.base_offset)
            .max(first_dirty.min(self.active.base_offset()));
        let (mut clean_bytes, mut cleanable_bytes) = (0, 0);
        for s in &self.sealed {
            if s.base_offset >= first_uncleanable {
                break;
            }
            if s.next_offset <= first_dirty {
                clean_bytes += s.data_len;
            } else {
                cleanable_bytes += s.data_len;
            }
        }
        Ok(Cleanable {
            first_dirty,
            first_uncleanable,
            clean_bytes,
            cleanable_bytes,
            overdue,
        })
    }
}
