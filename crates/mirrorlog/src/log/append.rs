//! Append validation and writing.
//!
//! The whole request is validated (format fast path for every batch, client rules for client
//! appends, offsets for copied appends, producer rules via a staged PSM update) before anything
//! is written; a rejected append changes nothing. Client and Coordinator appends get offsets from
//! the log end and the current leader epoch stamped in; Replication and Mirror appends keep every
//! byte, must start at the log end and increase. A Mirror append's leading batches that the log
//! already holds byte for byte (a retried fetch) are skipped; a Mirror append refused for its
//! data (malformed, not continuing the log, breaking a producer-state rule) moves the partition
//! to Failed (design.md §Mirroring).

use super::{
    classify, AppendOutcome, Extent, LogError, Mode, PartitionLog, SEGMENT_INDEX_BYTES_DEFAULT,
};
use crate::format::{self, BatchIter, FormatError, Offset, ScanEnd};
use crate::io::Io;
use crate::producer_state::{BatchInfo, Origin};

impl PartitionLog {
    /// The lookahead of a shard's turn: starts fetching the producer-state slot of
    /// the first batch of `records`, an append this turn will validate, so that the turn's
    /// appends overlap their cache misses. (A multi-batch append's staging looks ahead over its
    /// own batches.) Reads headers only; changes nothing.
    pub fn prefetch_producers(&self, records: &[u8]) {
        if let Some(id) = format::producer_id_hints(records).next() {
            self.psm.prefetch_producer(id);
        }
    }

    /// The first stage of [`PartitionLog::prefetch_producers`]: the producer's home bucket is
    /// hinted, not read (call it for every append of the turn first).
    pub fn prefetch_producer_buckets(&self, records: &[u8]) {
        if let Some(id) = format::producer_id_hints(records).next() {
            self.psm.prefetch_home(id);
        }
    }

    /// Validates and appends `records` (one or more batches). The data is durable after the
    /// next [`PartitionLog::commit`].
    ///
    /// # Errors
    /// Any validation failure (nothing written), or an I/O failure (which poisons the log unless
    /// it is `DiskFull`).
    pub fn append(
        &mut self,
        io: &mut dyn Io,
        records: &[u8],
        origin: Origin,
    ) -> Result<AppendOutcome, LogError> {
        self.append_at(io, records, origin, None)
    }

    /// [`PartitionLog::append`] at `now_ms` (the shard's clock): a client's record timestamps
    /// are checked against `message.timestamp.before.max.ms` and `after.max.ms` around it.
    ///
    /// # Errors
    /// As [`PartitionLog::append`].
    pub fn append_at(
        &mut self,
        io: &mut dyn Io,
        records: &[u8],
        origin: Origin,
        now_ms: Option<i64>,
    ) -> Result<AppendOutcome, LogError> {
        self.check()?;
        match (&self.mode, origin) {
            (Mode::Local, Origin::Mirror)
            | (Mode::Paused { .. } | Mode::Failed { .. }, Origin::Mirror) => {
                return Err(LogError::NotMirroring {
                    mode: self.mode.clone(),
                })
            }
            (
                Mode::Mirroring { .. } | Mode::Paused { .. } | Mode::Failed { .. },
                Origin::Client | Origin::Coordinator,
            ) => {
                return Err(LogError::ReadOnlyPartition {
                    mode: self.mode.clone(),
                })
            }
            _ => {}
        }
        // The append buffer as configured now (the active segment's grows to it, below).
        let limit = self
            .active
            .buffer_capacity()
            .max(self.config.segment.commit_buffer_bytes)
            .min(self.config.segment.segment_bytes as usize);
        if records.len() > limit {
            return Err(LogError::AppendTooLarge {
                bytes: records.len(),
                limit,
            });
        }
        let records = if origin == Origin::Mirror {
            // Mirroring goes on: a stop that did not finish is abandoned.
            self.abandon_pending_stop(io)?;
            let stored = self.already_stored(io, records)?;
            if stored > 0 && stored == records.len() {
                // A retried fetch of batches the log holds byte for byte: nothing to do.
                let mut batches = BatchIter::new(records, 0).map(|b| *b.header());
                let first = batches.next();
                let last = batches.last().or(first);
                if let (Some(first), Some(last)) = (first, last) {
                    return Ok(AppendOutcome {
                        first_offset: first.base_offset,
                        last_offset: last.last_offset(),
                        duplicate: true,
                    });
                }
            }
            &records[stored..]
        } else {
            records
        };
        let assigns = matches!(origin, Origin::Client | Origin::Coordinator);
        let log_end = self.log_end();
        let mut next = log_end;
        let mut infos = std::mem::take(&mut self.infos);
        let mut extents = std::mem::take(&mut self.extents);
        infos.clear();
        extents.clear();
        let client_rules = self.config.client_rules(now_ms);
        let validated = (|| -> Result<(), LogError> {
            let mut scan = BatchIter::new(records, 0);
            for view in scan.by_ref() {
                if origin == Origin::Client {
                    view.validate_client_with(&client_rules)?;
                    if self.config.compaction.policy.compact {
                        require_keys(&view, self.config.decompressed_bytes_max())?;
                    }
                }
                let stored = view.header().base_offset;
                let base = if assigns {
                    next
                } else if infos.is_empty() && stored < log_end {
                    // A copied append may start past the log end, as a Kafka follower's does
                    // (design.md §Mirroring: a gap compaction or retention left on the source); the offsets
                    // in the gap are never used. One that starts below it overlaps stored
                    // offsets with other bytes (an identical retry was skipped above).
                    return Err(LogError::NotAtLogEnd {
                        expected: log_end,
                        got: stored,
                    });
                } else if stored < next {
                    return Err(LogError::OffsetsNotIncreasing {
                        previous_last: Offset(next.0 - 1),
                        got: stored,
                    });
                } else {
                    stored
                };
                let info = BatchInfo::from_view(&view, base);
                next = Offset(info.last_offset.0 + 1);
                infos.push(info);
                extents.push(Extent {
                    start: view.position() as usize,
                    len: view.bytes().len(),
                    max_timestamp: view.header().max_timestamp,
                    leader_epoch: view.header().partition_leader_epoch,
                });
            }
            match scan.end() {
                Some(ScanEnd::Clean) => {}
                Some(ScanEnd::Corrupt(e)) => return Err(e.clone().into()),
                Some(ScanEnd::Incomplete {
                    position,
                    needed_bytes,
                    available_bytes,
                }) => {
                    return Err(FormatError::Incomplete {
                        position: *position,
                        needed_bytes: *needed_bytes,
                        available_bytes: *available_bytes,
                    }
                    .into())
                }
                Some(ScanEnd::ZeroFilled { position }) => {
                    return Err(FormatError::Incomplete {
                        position: *position,
                        needed_bytes: format::BATCH_HEADER_SIZE_BYTES as u64,
                        available_bytes: 0,
                    }
                    .into())
                }
                None => {}
            }
            if infos.is_empty() {
                return Err(LogError::EmptyAppend);
            }
            Ok(())
        })();
        let mut result =
            validated.and_then(|()| self.write_validated(io, records, origin, &infos, &extents));
        self.infos = infos;
        self.extents = extents;
        // A mirrored batch that is corrupt, does not continue the log, or breaks a producer-state
        // rule (design.md §Mirroring: e.g. `InvalidTxnState`) stops mirroring of this partition only: it goes
        // Failed with the reason. Nothing of the append was written (staging changes nothing).
        if origin == Origin::Mirror {
            if let Err(e) = &result {
                if e.fails_a_mirror() {
                    self.mode = Mode::Failed {
                        reason: e.to_string(),
                    };
                    if let Err(io_error) = self.write_mode(io) {
                        result = Err(io_error);
                    }
                }
            }
        }
        result
    }

    /// How many leading bytes of a mirrored `records` are batches the log already holds, byte
    /// for byte, wholly below the log end: a fetch retried after its first attempt was appended
    /// (design.md §Mirroring, an idempotent retry). Stops at the first batch that reaches the log end or
    /// differs from what is stored; those go through the usual checks (and a batch below the
    /// log end with other bytes fails the mirror there).
    fn already_stored(&mut self, io: &mut dyn Io, records: &[u8]) -> Result<usize, LogError> {
        let log_end = self.log_end();
        // The usual fetch continues the log: its first header says so, no CRC needed.
        let first = records
            .get(..format::BATCH_HEADER_SIZE_BYTES)
            .and_then(|h| <&[u8; format::BATCH_HEADER_SIZE_BYTES]>::try_from(h).ok())
            .map(format::BatchHeader::decode);
        if first.is_none_or(|h| h.last_offset() >= log_end) {
            return Ok(0);
        }
        let mut prefix = 0usize;
        let mut first = None;
        for b in BatchIter::new(records, 0) {
            if b.header().last_offset() >= log_end || b.header().base_offset < self.log_start {
                break;
            }
            first.get_or_insert(b.header().base_offset);
            prefix = b.position() as usize + b.bytes().len();
        }
        let Some(first) = first else {
            return Ok(0);
        };
        // The stored copy must be readable: make what the log holds durable first.
        self.commit(io)?;
        let mut collected = super::collected::Collected::default();
        self.read_batches(io, first, prefix, self.durable_end(), &mut collected)?;
        let stored = collected.finish();
        // Compare batch by batch: the longest prefix of whole batches that match.
        let mut matched = 0usize;
        for b in BatchIter::new(&records[..prefix], 0) {
            let (at, len) = (b.position() as usize, b.bytes().len());
            if stored.get(at..at + len) != Some(b.bytes()) {
                break;
            }
            matched = at + len;
        }
        Ok(matched)
    }

    fn write_validated(
        &mut self,
        io: &mut dyn Io,
        records: &[u8],
        origin: Origin,
        infos: &[BatchInfo],
        extents: &[Extent],
    ) -> Result<AppendOutcome, LogError> {
        let history = &self.history;
        let staged = self.psm.stage(infos, origin, |o| history.is_local(o))?;
        if let Some(original) = staged.duplicate {
            return Ok(AppendOutcome {
                first_offset: original.first_offset(),
                last_offset: original.last_offset,
                duplicate: true,
            });
        }
        let size = records.len() as u64;
        // A roll starts the new segment at the append's first offset (Kafka's roll offset; the
        // log end, or past it for a batch too far from the active segment's base).
        if self.overflows_active(infos[0].last_offset) || self.needs_roll(size, extents) {
            self.roll_to(io, infos[0].base_offset, true)?;
        }
        // A batch larger than the active segment's buffer (the partition's append buffer was
        // raised with its `max.message.bytes` since the segment began): everything before it
        // made durable, then the buffer grown to the config's.
        if size > self.active.buffer_capacity() as u64 {
            self.commit(io)?;
            self.active
                .grow_buffer(io, self.config.segment.commit_buffer_bytes);
        }
        if (self.active.buffer_room() as u64) < size {
            self.commit(io)?;
        }
        // An idle partition handed its append buffer back: take one again.
        self.active.attach_buffer(io);
        // Disk for the append, before any of it is copied: ENOSPC fails the append, changing
        // nothing, and the partition works again once space is freed.
        self.active
            .reserve_for(io, size)
            .map_err(|e| self.poison(classify(e)))?;
        let stamp = matches!(origin, Origin::Client | Origin::Coordinator);
        let mut epochs_changed = false;
        for (i, (info, e)) in infos.iter().zip(extents).enumerate() {
            if i > 0 && self.overflows_active(info.last_offset) {
                // A copied append across an offset gap wider than the index's relative offsets:
                // the batches from here go into a segment of their own.
                // Part of the append is in the old segment already: a failure now must not
                // leave it acknowledged in part, so it poisons the log (the next open recovers
                // what was durable), DiskFull included.
                if let Err(e) = self.roll_to(io, info.base_offset, false) {
                    return Err(self.poison_always(e));
                }
                let rest = (records.len() - e.start) as u64;
                self.active.attach_buffer(io);
                if let Err(e) = self.active.reserve_for(io, rest) {
                    return Err(self.poison_always(classify(e)));
                }
            }
            // Checked once during validation; not again here (the CRC is the cost).
            let result = self.active.append_stamped(
                &records[e.start..e.start + e.len],
                stamp.then_some((info.base_offset, self.leader_epoch)),
                info.last_offset,
                e.max_timestamp,
            );
            if let Err(e) = result {
                return Err(self.poison(classify(e)));
            }
            let epoch = if stamp {
                self.leader_epoch
            } else {
                e.leader_epoch
            };
            epochs_changed |= self.epochs.assign(epoch, info.base_offset);
        }
        if epochs_changed {
            // The batches are in the append buffer already: a failure now must not turn the
            // append into an error the caller would retry (found by the injected-ENOSPC
            // tests: the batch stayed, the producer state missed it; and again by the injected
            // EMFILE ones). The checkpoint is derived from the batches; on ENOSPC or EMFILE it
            // is written by the next epoch change or `close`, and recovery rebuilds it. Any
            // other failure has poisoned the log.
            match self.write_epoch_checkpoint(io) {
                Ok(()) | Err(LogError::DiskFull | LogError::TooManyOpenFiles { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let completed = self.psm.apply(staged)?;
        self.aborted.extend(
            completed
                .iter()
                .filter_map(crate::producer_state::CompletedTxn::aborted_entry),
        );
        self.debug_check_invariants();
        Ok(AppendOutcome {
            first_offset: infos[0].base_offset,
            last_offset: infos[infos.len() - 1].last_offset,
            duplicate: false,
        })
    }

    /// Whether a batch ending at `last_offset` is too far from the active segment's base for
    /// the 32-bit relative offsets of `.index` and `.timeindex` (Kafka's
    /// `canConvertToRelativeOffset`). A batch's own offsets always fit a segment at its base
    /// (its last offset delta is an `i32`).
    fn overflows_active(&self, last_offset: Offset) -> bool {
        last_offset.0 - self.active.base_offset().0 > i64::from(i32::MAX)
    }

    /// Kafka's roll conditions for an append of `size` bytes to a non-empty segment: the segment
    /// would exceed `segment.bytes`; a batch is `segment.ms` newer than the segment's first; or
    /// the offset index is full. (A batch whose offsets overflow the segment's relative offsets
    /// rolls even an empty segment, before it: [`PartitionLog::overflows_active`].)
    fn needs_roll(&self, size: u64, extents: &[Extent]) -> bool {
        let active = &self.active;
        if active.data_len() == 0 {
            return false;
        }
        let full = active.data_len() + size > self.config.segment.segment_bytes;
        let aged = match (
            self.config.segment_ms,
            active.indexes().first_batch_timestamp(),
        ) {
            (Some(ms), Some(first)) => extents
                .iter()
                .any(|e| e.max_timestamp.saturating_sub(first) > ms),
            _ => false,
        };
        let index_bytes = self
            .config
            .segment_index_bytes
            .unwrap_or(SEGMENT_INDEX_BYTES_DEFAULT);
        let index_full = (active.indexes().offset_entries().len() as u64 + 1) * 8 > index_bytes;
        full || aged || index_full
    }
}

/// A compacted log takes client records only with a key (Kafka's `LogValidator`), compressed
/// batches included (their records are decompressed, within the log's bound, to check).
fn require_keys(view: &crate::format::BatchView<'_>, limit_bytes: usize) -> Result<(), LogError> {
    let check = |records: crate::format::RecordIter<'_>| -> Result<(), LogError> {
        let mut indexes = Vec::new();
        for (index, record) in records.enumerate() {
            if record?.key.is_none() {
                indexes.push(index);
            }
        }
        if indexes.is_empty() {
            Ok(())
        } else {
            Err(LogError::KeylessRecordInCompactedLog {
                offset: view.header().base_offset,
                indexes,
            })
        }
    };
    if view.header().attributes.compression() == Some(crate::format::Compression::None) {
        check(view.records()?)
    } else {
        check(view.decompressed_records(limit_bytes)?.iter())
    }
}
