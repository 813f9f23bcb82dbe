//! Delete-records (the log start, checkpointed before anything is deleted) and retention by size
//! and age. The active segment always stays.

use super::{classify, LogError, PartitionLog, LOG_START_CHECKPOINT};
use crate::format::Offset;
use crate::io::{self, Io, Op};
use crate::segment::{self};

impl PartitionLog {
    /// Total bytes of the log (sealed segments plus the active one's appended data).
    #[must_use]
    pub fn size_bytes(&self) -> u64 {
        self.sealed.iter().map(|s| s.data_len).sum::<u64>() + self.active.data_len()
    }

    /// Advances the log start to `before` (Kafka's DeleteRecords): reads below it fail, and
    /// sealed segments wholly below it are deleted. Returns the new log start.
    ///
    /// # Errors
    /// [`LogError::OffsetOutOfRange`] below 0 or beyond the high watermark, or an I/O failure.
    pub fn delete_records(&mut self, io: &mut dyn Io, before: Offset) -> Result<Offset, LogError> {
        self.check()?;
        // Kafka's `ReplicaManager.deleteRecordsOnLocalLog`: a negative offset (other than the
        // caller's own "high watermark" sentinel, resolved before it gets here) is out of range.
        if before.0 < 0 || before > self.high_watermark() {
            return Err(LogError::OffsetOutOfRange {
                offset: before,
                log_start: self.log_start,
                log_end: self.high_watermark(),
            });
        }
        if before <= self.log_start {
            return Ok(self.log_start);
        }
        // Durable before anything is deleted or acknowledged: a restart must not bring the
        // deleted records back.
        io::write_file_atomically(
            io,
            &self.dir,
            LOG_START_CHECKPOINT,
            format!("{}\n", before.0).as_bytes(),
        )
        .map_err(|e| self.poison(classify(e)))?;
        self.log_start = before;
        let mut deleted = false;
        while self.sealed.first().is_some_and(|s| s.next_offset <= before) {
            self.delete_oldest_segment(io)?;
            deleted = true;
        }
        if deleted {
            io::fsync_dir(io, &self.dir).map_err(|e| self.poison(classify(e)))?;
            // Past a gap between segments the log starts at the next segment's base, as
            // Kafka's segment deletion moves its log start.
            self.log_start = self.log_start.max(self.first_base());
            self.prune_gaps(io);
        }
        if self.epochs.truncate_from_start(before) {
            self.write_epoch_checkpoint(io)?;
        }
        self.debug_check_invariants();
        Ok(self.log_start)
    }

    /// With `delete` in `cleanup.policy`: deletes the oldest sealed segments beyond
    /// `retention.bytes`, and those whose newest record is older than `retention.ms` before
    /// `now_ms`. When every sealed segment has gone
    /// that way and the active one has expired too (non-empty, wholly durable, no round in
    /// flight), it is rolled and deleted as well, as Kafka does: an idle partition's expired
    /// data does not stay forever. Returns how many segments were deleted.
    ///
    /// # Errors
    /// An I/O failure.
    pub fn enforce_retention(&mut self, io: &mut dyn Io, now_ms: i64) -> Result<usize, LogError> {
        self.check()?;
        // `cleanup.policy=compact` alone keeps old segments (the cleaner shrinks them instead),
        // as Kafka's `deleteOldSegments` applies time and size retention only with `delete`.
        if !self.config.compaction.policy.delete {
            return Ok(0);
        }
        let mut deleted = 0;
        let expired_active = |log: &Self| {
            log.sealed.is_empty()
                && log.active.data_len() > 0
                && !log.active.round_in_flight()
                && log.durable_end() == log.log_end()
                && log.config.retention_ms.is_some_and(|ms| {
                    log.active.indexes().max_timestamp() < now_ms.saturating_sub(ms)
                })
        };
        if expired_active(self) {
            self.roll(io)?;
        }
        let interval = self.config.segment.index_interval_bytes;
        while !self.sealed.is_empty() {
            let size = self.size_bytes();
            let oldest = &mut self.sealed[0];
            let over_size = self
                .config
                .retention_bytes
                .is_some_and(|limit| size - oldest.data_len >= limit);
            let expired = match self.config.retention_ms {
                Some(ms) => {
                    oldest.max_timestamp(io, &self.dir, interval)? < now_ms.saturating_sub(ms)
                }
                None => false,
            };
            if !(over_size || expired) {
                break;
            }
            let next = oldest.next_offset;
            self.delete_oldest_segment(io)?;
            self.log_start = self.log_start.max(next).max(self.first_base());
            deleted += 1;
            if expired_active(self) {
                self.roll(io)?;
            }
        }
        if deleted > 0 {
            // The unlinks, durably: deleted segments must not come back after a power cut.
            io::fsync_dir(io, &self.dir).map_err(|e| self.poison(classify(e)))?;
            self.prune_gaps(io);
            if self.epochs.truncate_from_start(self.log_start) {
                self.write_epoch_checkpoint(io)?;
            }
        }
        self.debug_check_invariants();
        Ok(deleted)
    }

    /// The first segment's base offset.
    fn first_base(&self) -> Offset {
        self.sealed
            .first()
            .map_or(self.active.base_offset(), |s| s.base_offset)
    }

    pub(super) fn delete_oldest_segment(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        let segment = self.sealed.remove(0);
        self.segments_generation += 1;
        let base = segment.base_offset;
        let mut others = Vec::new();
        let result = io::run(io, Op::Close { file: segment.file }, &mut others)
            .and_then(|c| c.result)
            .and_then(|_| {
                for path in segment::file_paths(&self.dir, base) {
                    io::run(io, Op::Unlink { path }, &mut others)?.result?;
                }
                Ok(())
            });
        result.map_err(|e| self.poison(classify(e)))?;
        Ok(())
    }
}
