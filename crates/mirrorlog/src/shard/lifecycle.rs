//! The partitions' lifecycle on a shard: create (with `partition.config`), open (the clean path
//! or recovery; a failure is served as Failed), delete, clean close of all, and the stop that
//! answers everything still waiting.

use super::{partition_histogram, Part, PartitionStats, Shard};
use crate::api::{EngineError, PartitionConfig, TopicPartition, PARTITION_CONFIG_FILE};
use crate::io::{self, Io};
use crate::log::{LogError, PartitionLog};
use std::collections::VecDeque;

impl Shard {
    pub(super) fn insert(
        &mut self,
        tp: TopicPartition,
        log: PartitionLog,
        config: PartitionConfig,
    ) {
        let slot = match self.slots.iter().position(Option::is_none) {
            Some(s) => s,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        self.slots[slot] = Some(Part {
            stats: PartitionStats {
                partition: tp.clone(),
                appends: 0,
                append_bytes: 0,
                commit_rounds: 0,
                appends_waiting: 0,
                append_latency_us: partition_histogram(),
            },
            tp: tp.clone(),
            log,
            config,
            waiters: VecDeque::new(),
            dirty_since: None,
            queued: false,
            appended_since_tick: true,
            holds_buffer: false,
            blocked: VecDeque::new(),
            waiting_for_buffer: false,
            handing_back: false,
            parked: Vec::new(),
            tail: VecDeque::new(),
            window: None,
            device_reads: VecDeque::new(),
            key: tp.dir_name(),
            checkpoint_wanted: false,
        });
        self.by_name.insert(tp, slot);
    }

    pub(super) fn create(
        &mut self,
        tp: TopicPartition,
        config: PartitionConfig,
    ) -> Result<(), EngineError> {
        tp.validate()?;
        config.validate()?;
        if self.by_name.contains_key(&tp) || self.failed.contains_key(&tp) {
            return Err(EngineError::PartitionExists(tp));
        }
        let dir = self.dir_of(&tp);
        let span = tracing::info_span!("create_partition", partition = %tp);
        let _enter = span.enter();
        self.io.create_dir(&dir)?;
        // The new directory's entry, durably, before anything in it is acknowledged.
        io::fsync_dir(&mut self.io, &self.config.data_dir)?;
        let log_error = |source| EngineError::Log {
            partition: tp.clone(),
            source,
        };
        let names = self.io.list_dir(&dir)?;
        if names.iter().any(|n| n.ends_with(".log")) {
            return Err(EngineError::PartitionExists(tp));
        }
        io::write_file_atomically(
            &mut self.io,
            &dir,
            PARTITION_CONFIG_FILE,
            config.encode().as_bytes(),
        )?;
        let log =
            PartitionLog::create(&mut self.io, &dir, config.log_config()).map_err(log_error)?;
        self.insert(tp, log, config);
        Ok(())
    }

    /// Opens one partition directory: the clean path when it was closed cleanly, recovery
    /// otherwise. A failure leaves the partition Failed (every call returns the cause).
    pub(super) fn open_partition(&mut self, tp: &TopicPartition) -> Result<(), EngineError> {
        let dir = self.dir_of(tp);
        let span = tracing::info_span!("open_partition", partition = %tp);
        let _enter = span.enter();
        // Without the file, the defaults (a partition created before it existed); a file that
        // cannot be read or decoded fails the partition: opening it with the defaults would
        // silently change its retention, limits and policy.
        let config_path = dir.join(PARTITION_CONFIG_FILE);
        let config = crate::log::read_if_present(&mut self.io, &config_path).and_then(|bytes| {
            bytes.map_or(Ok(PartitionConfig::default()), |bytes| {
                PartitionConfig::decode(&String::from_utf8_lossy(&bytes)).map_err(|e| {
                    LogError::Corrupt {
                        file: config_path.clone(),
                        what: e.to_string(),
                    }
                })
            })
        });
        let opened = config.and_then(|config| {
            let log_config = config.log_config();
            let log = match PartitionLog::open(&mut self.io, &dir, log_config) {
                Err(LogError::NeedsRecovery { .. }) => {
                    let span = tracing::info_span!("recovery", partition = %tp);
                    let _enter = span.enter();
                    crate::recovery::recover(&mut self.io, &dir, log_config)
                }
                other => other,
            };
            log.map(|log| (log, config))
        });
        match opened {
            Ok((mut log, config)) => {
                // Producers a snapshot brought back are judged by the real time (design.md §Producer state).
                log.remove_expired_producers(self.config.clock.now_ms());
                self.insert(tp.clone(), log, config);
                Ok(())
            }
            Err(source) => {
                tracing::error!(partition = %tp, error = %source, "partition failed at open");
                self.failed.insert(tp.clone(), source.clone());
                Err(EngineError::Failed {
                    partition: tp.clone(),
                    source,
                })
            }
        }
    }

    /// Takes the partition out of the shard, first finishing its round in flight.
    pub(super) fn take(&mut self, tp: &TopicPartition) -> Option<Part> {
        let slot = *self.by_name.get(tp)?;
        while self.slots[slot]
            .as_ref()
            .is_some_and(|p| p.log.round_in_flight())
        {
            // A journal round waits for the block being filled: it goes now.
            self.flush_journal(true);
            match self.io.reap(true) {
                Ok(cs) => self.dispatch(cs),
                Err(_) => break,
            }
        }
        // Long-poll reads get what there is now; reads on the device are finished in place.
        self.answer_parked(slot);
        self.abandon_cleaning(slot);
        self.drop_read_ahead(slot);
        self.checkpoint_progress(slot, true);
        self.by_name.remove(tp);
        let part = self.slots[slot].take();
        if part.as_ref().is_some_and(|p| p.holds_buffer) {
            self.attached = self.attached.saturating_sub(1);
            self.admit_waiters();
        }
        part
    }

    pub(super) fn delete(&mut self, tp: &TopicPartition) -> Result<(), EngineError> {
        let dir = self.dir_of(tp);
        if self.failed.remove(tp).is_none() {
            let Some(mut part) = self.take(tp) else {
                return Err(EngineError::UnknownPartition(tp.clone()));
            };
            let e = LogError::OffsetOutOfRange {
                offset: part.log.log_end(),
                log_start: part.log.log_start(),
                log_end: part.log.log_end(),
            };
            Self::fail_waiters(&mut part, &e);
            // Closing writes a snapshot and a marker about to be deleted: cheap, and it closes
            // every file before the directory goes.
            let _ = part.log.close(&mut self.io);
        }
        self.io.remove_dir(&dir)?;
        // The partition must not come back after a power cut.
        io::fsync_dir(&mut self.io, &self.config.data_dir)?;
        Ok(())
    }

    pub(super) fn close_all(&mut self) -> Vec<(TopicPartition, EngineError)> {
        let span = tracing::info_span!("shard_close", shard = self.config.index);
        let _enter = span.enter();
        let mut failures = Vec::new();
        // Appends waiting for a buffer go in first: close commits them with the rest.
        self.closing = true;
        self.admit_waiters();
        let names: Vec<TopicPartition> = self.by_name.keys().cloned().collect();
        for tp in names {
            let Some(part) = self.take(&tp) else {
                continue;
            };
            // Appends staged but not yet durable become durable in close's commit.
            let end = part.log.log_end();
            let Part { log, waiters, .. } = part;
            let closed = log.close(&mut self.io);
            for w in waiters {
                w.reply.fulfil(match &closed {
                    Ok(()) if w.needed <= end => Ok(w.outcome),
                    Ok(()) => Err(EngineError::ShardStopped(self.config.index)),
                    Err(source) => Err(EngineError::Log {
                        partition: tp.clone(),
                        source: source.clone(),
                    }),
                });
            }
            if let Err(source) = closed {
                failures.push((
                    tp.clone(),
                    EngineError::Log {
                        partition: tp,
                        source,
                    },
                ));
            }
        }
        self.close_journal();
        self.closed = true;
        failures
    }

    /// Answers everything still queued or waiting with `ShardStopped` and reaps the doorbell
    /// watch, so dropping the `Io` does not wait on it.
    pub(super) fn stop(&mut self) {
        for r in self.queue.close() {
            drop(r);
        }
        for part in self.slots.iter_mut().flatten() {
            // Dropped requests resolve as broken: `ShardStopped`.
            part.blocked.clear();
            for w in part.waiters.drain(..) {
                w.reply
                    .fulfil(Err(EngineError::ShardStopped(self.config.index)));
            }
        }
        if self.watching {
            self.doorbell.ring();
            while self.watching {
                match self.io.reap(true) {
                    Ok(cs) => self.dispatch(cs),
                    Err(_) => break,
                }
            }
        }
    }

    /// Changes the partition's settings live (see `Engine::update_config`).
    pub(super) fn update_config(
        &mut self,
        tp: &TopicPartition,
        config: PartitionConfig,
    ) -> Result<(), EngineError> {
        config.validate()?;
        let slot = self.slot_of(tp)?;
        let dir = self.dir_of(tp);
        // Durable before it applies: a restart keeps what was acknowledged.
        io::write_file_atomically(
            &mut self.io,
            &dir,
            PARTITION_CONFIG_FILE,
            config.encode().as_bytes(),
        )?;
        let Some(part) = self.slots[slot].as_mut() else {
            return Err(EngineError::UnknownPartition(tp.clone()));
        };
        let compaction_changed = part.config.compaction != config.compaction;
        part.log.set_config(config.log_config());
        part.config = config;
        if compaction_changed {
            // A pass on the old policy stops; the next look uses the new one.
            self.abandon_cleaning(slot);
        }
        Ok(())
    }
}
