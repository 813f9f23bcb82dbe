//! Serving requests on the shard thread: appends are validated and staged into the partition's
//! append buffer (answered later, once durable); reads, state and admin requests are answered at
//! once, with the partition's own I/O waited for in place.

use super::{AnyPart, AppendReply, Gather, ReadReply, Request, Shard, ShardIo, Waiter};
use crate::api::{EngineError, PartitionState, TopicPartition};
use crate::format::Offset;
use crate::log::{LogError, PartitionLog};
use crate::producer_state::Origin;
use std::path::PathBuf;
use std::time::Instant;

impl Shard {
    pub(super) fn slot_of(&self, tp: &TopicPartition) -> Result<usize, EngineError> {
        if let Some(e) = self.failed.get(tp) {
            return Err(EngineError::Failed {
                partition: tp.clone(),
                source: e.clone(),
            });
        }
        self.by_name
            .get(tp)
            .copied()
            .ok_or_else(|| EngineError::UnknownPartition(tp.clone()))
    }

    /// The lookahead of a turn: before the first request of the turn is served,
    /// every append's producer slot starts arriving in the cache, so the appends' misses
    /// overlap instead of each waiting for its own.
    pub(super) fn prefetch_turn(&self) {
        // Two stages, as `ProducerStateManager::prefetch_producers`: every append's home
        // bucket hinted first, then each read and its slot hinted.
        for stage in [false, true] {
            for r in &self.incoming {
                if let Request::Append { tp, batches, .. } = r {
                    if let Some(Some(part)) = self.by_name.get(tp).and_then(|&s| self.slots.get(s))
                    {
                        if stage {
                            part.log.prefetch_producers(batches);
                        } else {
                            part.log.prefetch_producer_buckets(batches);
                        }
                    }
                }
            }
        }
    }

    pub(super) fn dir_of(&self, tp: &TopicPartition) -> PathBuf {
        self.config.data_dir.join(tp.dir_name())
    }

    /// Runs `f` on the partition's log with its own completions routed to it, then
    /// acknowledges whatever became durable meanwhile.
    pub(super) fn with_log<T>(
        &mut self,
        tp: &TopicPartition,
        f: impl FnOnce(&mut PartitionLog, &mut ShardIo) -> Result<T, LogError>,
    ) -> Result<T, EngineError> {
        let slot = self.slot_of(tp)?;
        let Some(part) = self.slots[slot].as_mut() else {
            return Err(EngineError::UnknownPartition(tp.clone()));
        };
        let result = f(&mut part.log, &mut self.io);
        // A synchronous commit inside `f` may have finished the round the shard started.
        if !part.log.round_in_flight() && part.log.durable_end() < part.log.log_end() {
            part.mark_dirty(slot, Instant::now(), &mut self.ready);
        }
        self.account_buffer(slot);
        self.resolve(slot);
        result.map_err(|source| EngineError::Log {
            partition: tp.clone(),
            source,
        })
    }

    pub(super) fn handle_request(&mut self, request: Request) {
        if let Some(slot) = self.queued_behind(&request) {
            return self.queue_for_buffer(slot, request);
        }
        match request {
            Request::Append {
                tp,
                batches,
                origin,
                follows,
                reply,
            } => match self.must_wait_for_buffer(&tp) {
                Some(slot) => self.queue_for_buffer(
                    slot,
                    Request::Append {
                        tp,
                        batches,
                        origin,
                        follows,
                        reply,
                    },
                ),
                None => self.append(tp, batches, origin, follows, reply),
            },
            Request::AppendMany {
                appends,
                origin,
                reply,
            } => {
                let parts = Gather::split(appends.len(), self.config.index, reply);
                for (a, part) in appends.into_iter().zip(parts) {
                    self.handle_request(Request::Append {
                        tp: a.tp,
                        batches: a.batches,
                        origin,
                        follows: a.follows,
                        reply: AppendReply::Part(part),
                    });
                }
            }
            Request::Read { tp, request, reply } => self.read(tp, request, reply),
            Request::ReadMany { reads, reply } => {
                let parts = Gather::split(reads.len(), self.config.index, reply);
                for ((tp, request), part) in reads.into_iter().zip(parts) {
                    self.read(tp, request, ReadReply::Part(part));
                }
            }
            Request::WaitAny { reads, reply } => {
                let parts = AnyPart::split(reads.len(), self.config.index, reply);
                for ((tp, request), part) in reads.into_iter().zip(parts) {
                    self.read(tp, request, ReadReply::Any(part));
                }
            }
            Request::State { tp, reply } => {
                let r = self.with_log(&tp, |log, _| {
                    Ok(PartitionState {
                        log_start: log.log_start(),
                        high_watermark: log.high_watermark(),
                        last_stable_offset: log.last_stable_offset(),
                        log_end: log.log_end(),
                        durable_end: log.durable_end(),
                        producer_count: log.producer_state().len(),
                        mode: log.mode().clone(),
                        leader_epoch: log.leader_epoch(),
                        latest_epoch: log.latest_epoch(),
                        size_bytes: log.size_bytes(),
                    })
                });
                reply.fulfil(r);
            }
            Request::Producers { tp, reply } => {
                let r = self.with_log(&tp, |log, _| Ok(log.producer_state().producers().collect()));
                reply.fulfil(r);
            }
            Request::TruncateTo { tp, offset, reply } => {
                let span = tracing::info_span!("truncate", partition = %tp, offset = offset.0);
                let _enter = span.enter();
                let r = self.with_log(&tp, |log, io| log.truncate_to(io, offset));
                self.forget_tail_of(&tp);
                self.drop_waiters_past(&tp);
                reply.fulfil(r);
            }
            Request::DeleteRecords { tp, before, reply } => {
                let r = self.with_log(&tp, |log, io| {
                    // Only durable records can be deleted: settle what is in flight first.
                    log.commit(io)?;
                    log.delete_records(io, before)
                });
                self.forget_tail_of(&tp);
                reply.fulfil(r);
            }
            Request::SetHighWatermark { tp, offset, reply } => {
                let r = self.with_log(&tp, |log, _| {
                    log.set_high_watermark(offset);
                    Ok(())
                });
                reply.fulfil(r);
            }
            Request::Create { tp, config, reply } => {
                let r = self
                    .start_journal(&[])
                    .and_then(|_| self.create(tp, config));
                reply.fulfil(r);
            }
            Request::StartJournal { orphans, reply } => {
                reply.fulfil(self.start_journal(&orphans));
            }
            Request::Delete { tp, reply } => reply.fulfil(self.delete(&tp)),
            Request::Clean { tp, reply } => {
                let r = self.slot_of(&tp).and_then(|slot| {
                    self.clean_now(slot).map_err(|source| EngineError::Log {
                        partition: tp.clone(),
                        source,
                    })
                });
                reply.fulfil(r);
            }
            Request::UpdateConfig { tp, config, reply } => {
                reply.fulfil(self.update_config(&tp, config));
            }
            Request::Open { partitions, reply } => {
                if let Err(e) = self.start_journal(&[]) {
                    reply.fulfil(Err(e));
                    return;
                }
                let results = partitions
                    .into_iter()
                    .map(|tp| {
                        let r = self.open_partition(&tp);
                        (tp, r)
                    })
                    .collect();
                reply.fulfil(Ok(results));
            }
            Request::StartMirroring {
                tp,
                source,
                start,
                reply,
            } => {
                let span =
                    tracing::info_span!("start_mirroring", partition = %tp, source = %source);
                let _enter = span.enter();
                let r = self.with_log(&tp, |log, io| log.start_mirroring(io, &source, start));
                self.forget_tail_of(&tp);
                self.drop_waiters_past(&tp);
                reply.fulfil(r);
            }
            Request::StopMirroring {
                tp,
                leader_epoch,
                open_transactions,
                reply,
            } => {
                let span = tracing::info_span!("stop_mirroring", partition = %tp, leader_epoch);
                let _enter = span.enter();
                let now_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64);
                let r = self.with_log(&tp, |log, io| {
                    log.stop_mirroring(io, leader_epoch, open_transactions, now_ms)
                });
                self.forget_tail_of(&tp);
                self.drop_waiters_past(&tp);
                reply.fulfil(r);
            }
            Request::PauseMirroring { tp, pause, reply } => {
                let r = self.with_log(&tp, |log, io| {
                    if pause {
                        log.pause_mirroring(io)
                    } else {
                        log.resume_mirroring(io)
                    }
                });
                reply.fulfil(r);
            }
            Request::RealignMirror { tp, at, reply } => {
                let span = tracing::info_span!("realign_mirror", partition = %tp, at = at.0);
                let _enter = span.enter();
                let r = self.with_log(&tp, |log, io| log.realign_mirror(io, at));
                self.forget_tail_of(&tp);
                self.drop_waiters_past(&tp);
                reply.fulfil(r);
            }
            Request::OffsetForTimestamp {
                tp,
                spec,
                isolation,
                reply,
            } => {
                let r = self.with_log(&tp, |log, io| log.offset_for_timestamp(io, spec, isolation));
                reply.fulfil(r);
            }
            Request::EpochEndOffset { tp, epoch, reply } => {
                let r = self.with_log(&tp, |log, _| Ok(log.leader_epoch_end_offset(epoch)));
                reply.fulfil(r);
            }
            Request::SetLeaderEpoch { tp, epoch, reply } => {
                let r = self.with_log(&tp, |log, io| log.become_leader(io, epoch));
                reply.fulfil(r);
            }
            Request::Stats { reply } => reply.fulfil(Ok(self.stats())),
            Request::Tick => self.on_tick(),
            Request::Halt => self.halted = true,
            Request::Close { reply } => {
                let failures = self.close_all();
                reply.fulfil(Ok(failures));
            }
        }
    }

    pub(super) fn append(
        &mut self,
        tp: TopicPartition,
        batches: bytes::Bytes,
        origin: Origin,
        follows: Option<Offset>,
        reply: AppendReply,
    ) {
        let since = Instant::now();
        let slot = match self.slot_of(&tp) {
            Ok(s) => s,
            Err(e) => return reply.fulfil(Err(e)),
        };
        let Some(part) = self.slots[slot].as_mut() else {
            return reply.fulfil(Err(EngineError::UnknownPartition(tp)));
        };
        // max.message.bytes, per batch, from the length fields alone (the log validates the
        // rest; a malformed length is its error to report). A mirrored batch is stored as the
        // source accepted it, whatever the local limit (design.md §Mirroring, "as-is means as-is"), as a
        // Kafka follower never applies the limit to what it replicates: its only bound is the
        // append buffer a batch must fit in whole (`append_buffer_bytes`, which the broker
        // raises with the topic's `max.message.bytes`, synced from the source)
        // (and in a segment: recovery reads no batch larger than either).
        let limit = if origin == Origin::Client {
            part.config.max_message_bytes
        } else {
            let segment = usize::try_from(part.config.segment_bytes).unwrap_or(usize::MAX);
            part.config.append_buffer_bytes.min(segment)
        };
        // The format's header-only walk; a batch the buffer ends inside still has its
        // declared size checked, a length no batch can have stops it (the log reports the
        // malformed batch: garbage read as a length must not come back as MessageTooLarge).
        let mut walk = crate::format::frames(&batches);
        let too_large = walk
            .by_ref()
            .map(|f| f.bytes.len())
            .find(|&size| size > limit)
            .or_else(|| walk.cut_batch_size().filter(|&size| size > limit));
        if let Some(size) = too_large {
            return reply.fulfil(Err(EngineError::MessageTooLarge {
                partition: tp,
                bytes: size,
                limit,
            }));
        }
        let from = part.log.log_end();
        if let Some(follows) = follows.filter(|&f| from < f) {
            return reply.fulfil(Err(EngineError::AppendOutOfOrder {
                partition: tp,
                follows,
                log_end: from,
            }));
        }
        part.appended_since_tick = true;
        let now_ms = (origin == Origin::Client).then(|| self.config.clock.now_ms());
        let result = part.log.append_at(&mut self.io, &batches, origin, now_ms);
        match result {
            Ok(outcome) => {
                if !outcome.duplicate {
                    self.cache_append(slot, from, &batches, origin, outcome.first_offset);
                }
                let Some(part) = self.slots[slot].as_mut() else {
                    return reply.fulfil(Err(EngineError::UnknownPartition(tp)));
                };
                part.waiters.push_back(Waiter {
                    needed: Offset(outcome.last_offset.0 + 1),
                    outcome,
                    bytes: batches.len(),
                    since,
                    reply,
                });
                if part.log.durable_end() < part.log.log_end() {
                    part.mark_dirty(slot, since, &mut self.ready);
                }
                self.resolve(slot);
            }
            Err(source) => reply.fulfil(Err(EngineError::Log {
                partition: tp,
                source,
            })),
        }
        // The append may have taken a buffer (or a roll changed the active segment's).
        self.account_buffer(slot);
    }
}
