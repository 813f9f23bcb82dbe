//! The public handle a broker embeds: [`Engine`] starts the shards (one pinned thread each,
//! its own io_uring), opens every partition found in the data directory on its shard (all
//! shards in parallel; recovery where a partition was not closed cleanly), and routes each
//! call to the partition's shard. Every call returns a [`Call`]: a future for any async
//! runtime, or `.wait()` for blocking callers.
//!
//! ```no_run
//! use mirrorlog::engine::{Engine, EngineConfig, PartitionConfig, TopicPartition};
//! use mirrorlog::engine::Origin;
//! # fn batches() -> Vec<u8> { Vec::new() }
//! let engine = Engine::open(EngineConfig::new("/var/lib/mirrorlog").cluster_id("east").shards(2))?;
//! let tp = TopicPartition::new("orders", 0);
//! engine.create_partition(&tp, PartitionConfig::default()).wait()?;
//! let out = engine.append(&tp, batches(), Origin::Client).wait()?; // durable when it returns
//! engine.close()?;
//! # Ok::<(), mirrorlog::engine::EngineError>(())
//! ```
//!
//! Files: `config.rs` (the engine's settings and the `Io` backend), `lock.rs` (the data
//! directory's `.lock`), `meta.rs` (its `meta.properties`: the cluster it belongs to), `routing.rs` (which shard serves a partition), `timer.rs` (the
//! thread that ticks the shards for producer expiration and retention); the [`Call`] future lives
//! with the shard's promise (`shard/call.rs`), and the API's vocabulary in [`crate::api`].

mod config;
mod lock;
mod many;
mod meta;
mod routing;
mod timer;

use config::make_io;
pub use config::{
    CleanerConfig, EngineConfig, IoBackend, CHECK_INTERVAL_MS_MAX, CLUSTER_ID_BYTES_MAX,
    DEDUPE_BUFFER_BYTES_MAX, DEDUPE_BUFFER_BYTES_PER_SHARD_MIN, IO_DEPTH_DEFAULT,
    JOURNAL_GROUP_WINDOW_US_MAX, PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS_DEFAULT,
    QUEUE_DEPTH_DEFAULT, QUEUE_DEPTH_MAX, RETENTION_CHECK_INTERVAL_MS_DEFAULT, SHARDS_MAX,
};
use lock::lock_data_dir;
pub use lock::LOCK_FILE;
pub use many::{AppendMany, Many, ReadMany, WaitAny};
pub use meta::META_PROPERTIES;

pub use crate::api::{
    AppendOutcome, EngineError, EpochEndOffset, Isolation, MirrorStart, Mode, OffsetSpec,
    OpenTransactions, Origin, PartitionAppend, PartitionConfig, PartitionState, ProducerEntry,
    ReadRequest, ReadResult, StartMirroring, StopMirroring, StopOutcome, TimestampOffset,
    TopicPartition, APPEND_BUFFER_BYTES_MAX,
};
use crate::format::Offset;
use crate::io;
pub use crate::io::SimConfig;
pub use crate::journal::{
    check_size as check_journal_bytes, JournalError, JOURNAL_BYTES_DEFAULT, JOURNAL_BYTES_MAX,
    JOURNAL_BYTES_MIN,
};
use crate::shard::{
    promise, AppendReply, OpenResults, Reply, Request, Shard, ShardConfig, ShardHandle,
};
pub use crate::shard::{Call, PartitionStats, ShardStats};
use std::thread::JoinHandle;

/// The engine: shards and the routing of calls to them.
pub struct Engine {
    config: EngineConfig,
    shards: Vec<ShardHandle>,
    threads: Vec<JoinHandle<Result<(), EngineError>>>,
    /// Partitions that failed at open, with the cause (they answer every call with it).
    failed: Vec<(TopicPartition, EngineError)>,
    closed: bool,
    /// Ticks the shards for their periodic work.
    timer: Option<timer::Timer>,
    /// The data directory's `.lock`, held exclusively (`flock`) while the engine is open, so a
    /// second engine (another process or this one) cannot open the same partitions.
    _lock: Option<std::fs::File>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("data_dir", &self.config.data_dir)
            .field("shards", &self.shards.len())
            .finish()
    }
}

impl Engine {
    /// Starts the shards and opens every partition in the data directory, each on its shard,
    /// all shards in parallel (recovering those not closed cleanly). A partition that fails
    /// to open (corruption) does not stop the engine: it is served as Failed, and listed by
    /// [`Engine::failed_partitions`].
    ///
    /// # Errors
    /// Invalid configuration, the data directory, or a shard that could not start.
    pub fn open(mut config: EngineConfig) -> Result<Self, EngineError> {
        config.validate()?;
        let span = tracing::info_span!("engine_open", dir = %config.data_dir.display(), shards = config.shards);
        let _enter = span.enter();
        if config.backend.on_disk() {
            std::fs::create_dir_all(&config.data_dir).map_err(|e| {
                EngineError::Io(io::IoError::from_errno(
                    io::OpKind::Directory,
                    e.raw_os_error().unwrap_or(libc::EIO),
                ))
            })?;
        }
        let lock = if config.backend.on_disk() {
            let lock = lock_data_dir(&config.data_dir)?;
            config.cluster_id = meta::check_cluster_id(&config.data_dir, &config.cluster_id)?;
            Some(lock)
        } else {
            None
        };
        // Shard i runs on the i-th CPU of the process's allowed set (a container's cpuset).
        let cpus = io::allowed_cpus();
        let mut shards = Vec::with_capacity(config.shards);
        let mut threads = Vec::with_capacity(config.shards);
        for index in 0..config.shards {
            let (tx, rx) = std::sync::mpsc::channel();
            let shard_config = ShardConfig {
                index,
                data_dir: config.data_dir.clone(),
                queue_depth: config.queue_depth,
                commit_linger_us: config.commit_linger_us,
                clock: config.clock.clone(),
                producer_id_expiration_check_interval_ms: config
                    .producer_id_expiration_check_interval_ms,
                retention_check_interval_ms: config.retention_check_interval_ms,
                append_buffers_max: config.append_buffers_max,
                tail_cache_bytes: config.tail_cache_bytes,
                journal_bytes: config.journal_bytes,
                journal_group_window_us: config.journal_group_window_us,
                cleaner: config.shard_cleaner(),
            };
            let backend = config.backend.clone();
            let depth = config.io_depth;
            let pin = config.pin_threads;
            let cpu = io::shard_cpu(&cpus, index);
            let thread = std::thread::Builder::new()
                .name(format!("mirrorlog-shard-{index}"))
                .spawn(move || {
                    if pin {
                        // Best effort: a restricted cpuset still runs, just unpinned.
                        if let Err(e) = io::pin_current_thread(cpu) {
                            tracing::warn!(shard = index, cpu, error = %e, "could not pin shard thread");
                        }
                    }
                    let started =
                        make_io(&backend, depth, index).and_then(|io| Shard::new(io, shard_config));
                    match started {
                        Ok(mut shard) => {
                            let _ = tx.send(Ok(shard.handle()));
                            shard.run()
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e.clone()));
                            Err(e)
                        }
                    }
                })
                .map_err(|e| {
                    EngineError::Io(io::IoError::from_errno(
                        io::OpKind::Open,
                        e.raw_os_error().unwrap_or(libc::EAGAIN),
                    ))
                })?;
            threads.push(thread);
            let handle = rx.recv().map_err(|_| EngineError::ShardStopped(index))??;
            shards.push(handle);
        }
        let mut engine = Engine {
            config,
            shards,
            threads,
            failed: Vec::new(),
            closed: false,
            timer: None,
            _lock: lock,
        };
        engine.start_journals()?;
        engine.open_existing()?;
        let interval_ms = engine
            .config
            .producer_id_expiration_check_interval_ms
            .min(engine.config.retention_check_interval_ms);
        engine.timer = Some(
            timer::Timer::start(engine.shards.clone(), interval_ms).map_err(|e| {
                EngineError::Io(io::IoError::from_errno(
                    io::OpKind::Open,
                    e.raw_os_error().unwrap_or(libc::EAGAIN),
                ))
            })?,
        );
        Ok(engine)
    }

    /// The entries of the data directory (an unreadable one is skipped, as a vanished one).
    fn data_dir_entries(&self) -> Result<Vec<std::fs::DirEntry>, EngineError> {
        let entries = std::fs::read_dir(&self.config.data_dir).map_err(|e| {
            EngineError::Io(io::IoError::from_errno(
                io::OpKind::ListDir,
                e.raw_os_error().unwrap_or(libc::EIO),
            ))
        })?;
        Ok(entries.flatten().collect())
    }

    /// One request per `(shard, argument)`, all sent before any is waited for (the shards
    /// work in parallel).
    fn to_shards<A, T>(
        &self,
        work: impl Iterator<Item = (usize, A)>,
        request: impl Fn(A, Reply<T>) -> Request,
    ) -> Vec<Call<T>> {
        work.map(|(shard, argument)| {
            let (reply, pending) = promise();
            Call::new(&self.shards[shard], request(argument, reply), pending)
        })
        .collect()
    }

    /// Replays every journal of the data directory into its segments, every shard at once,
    /// before any partition opens (design.md §Durability): each shard its own journal, and the journals of
    /// shards this engine no longer runs (fewer shards than before) shared out among them.
    /// Then each shard starts its journal afresh.
    fn start_journals(&mut self) -> Result<(), EngineError> {
        let shards = self.shards.len();
        let mut orphans: Vec<Vec<std::path::PathBuf>> = vec![Vec::new(); shards];
        if self.config.backend.on_disk() {
            for entry in self.data_dir_entries()? {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(shard) = crate::journal::shard_of(&name).filter(|&s| s >= shards) {
                    orphans[shard % shards].push(entry.path());
                }
            }
        }
        let calls = self.to_shards(orphans.into_iter().enumerate(), |orphans, reply| {
            Request::StartJournal { orphans, reply }
        });
        for call in calls {
            call.wait()?;
        }
        Ok(())
    }

    /// Opens the partition directories found in the data directory, every shard at once.
    fn open_existing(&mut self) -> Result<(), EngineError> {
        if !self.config.backend.on_disk() {
            return Ok(());
        }
        let mut per_shard: Vec<Vec<TopicPartition>> = vec![Vec::new(); self.shards.len()];
        for entry in self.data_dir_entries()? {
            if !entry.path().is_dir() {
                continue;
            }
            if let Some(tp) = TopicPartition::from_dir_name(&entry.file_name().to_string_lossy()) {
                let shard = self.shard_of(&tp);
                per_shard[shard].push(tp);
            }
        }
        let calls: Vec<Call<OpenResults>> = self.to_shards(
            per_shard
                .into_iter()
                .enumerate()
                .filter(|(_, tps)| !tps.is_empty()),
            |partitions, reply| Request::Open { partitions, reply },
        );
        for call in calls {
            for (tp, result) in call.wait()? {
                if let Err(e) = result {
                    self.failed.push((tp, e));
                }
            }
        }
        Ok(())
    }

    /// Partitions that failed at open, with the cause.
    #[must_use]
    pub fn failed_partitions(&self) -> &[(TopicPartition, EngineError)] {
        &self.failed
    }

    /// The engine's settings.
    #[must_use]
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Creates an empty partition on its shard.
    pub fn create_partition(&self, tp: &TopicPartition, config: PartitionConfig) -> Call<()> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::Create {
            tp: tp2,
            config,
            reply,
        })
    }

    /// Cleans (compacts) the partition now, whole, whatever its dirty ratio, if its
    /// `cleanup.policy` has `compact` and it is Local; resolves with the pass's stats, or `None`
    /// when there was nothing to clean. The shard also cleans by itself, in the background.
    pub fn clean(&self, tp: &TopicPartition) -> Call<Option<crate::log::CleanStats>> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::Clean { tp: tp2, reply })
    }

    /// Changes the partition's settings live: validated as at creation, kept in its
    /// `partition.config` (atomically, durably) before they apply. Retention, compaction,
    /// `max.message.bytes`, `segment.ms` and producer expiration act at once; `segment.bytes`,
    /// `index.interval.bytes`, `segment.index.bytes` and the append buffer from the next
    /// segment on (the active one keeps the sizes it was created with).
    pub fn update_config(&self, tp: &TopicPartition, config: PartitionConfig) -> Call<()> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::UpdateConfig {
            tp: tp2,
            config,
            reply,
        })
    }

    /// Deletes a partition and its directory.
    pub fn delete_partition(&self, tp: &TopicPartition) -> Call<()> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::Delete { tp: tp2, reply })
    }

    /// Appends whole batches; resolves once they are durable. Client and Coordinator appends
    /// get offsets; Replication and Mirror appends keep theirs. `batches` is a `Vec<u8>` or
    /// shared `Bytes` (a fetched read's records go on as they came, uncopied).
    pub fn append(
        &self,
        tp: &TopicPartition,
        batches: impl Into<bytes::Bytes>,
        origin: Origin,
    ) -> Call<AppendOutcome> {
        self.append_request(tp, batches.into(), origin, None)
    }

    /// [`Engine::append`], of batches meant to follow appends sent before them (a pipelined
    /// writer's: a mirror sends the next fetch's batches before the last ones are durable):
    /// refused with [`EngineError::AppendOutOfOrder`], nothing appended, when the partition's
    /// log ends before `follows` as the shard takes it, that is when one of those appends was
    /// refused. Without it a refused append followed by an accepted one would leave a hole
    /// where the refused records belong (mirrored batches keep their offsets).
    pub fn append_following(
        &self,
        tp: &TopicPartition,
        batches: impl Into<bytes::Bytes>,
        origin: Origin,
        follows: Offset,
    ) -> Call<AppendOutcome> {
        self.append_request(tp, batches.into(), origin, Some(follows))
    }

    fn append_request(
        &self,
        tp: &TopicPartition,
        batches: bytes::Bytes,
        origin: Origin,
        follows: Option<Offset>,
    ) -> Call<AppendOutcome> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::Append {
            tp: tp2,
            batches,
            origin,
            follows,
            reply: AppendReply::One(reply),
        })
    }

    /// Reads whole batches with the high watermark, LSO, log start and aborted transactions.
    pub fn read(&self, tp: &TopicPartition, request: ReadRequest) -> Call<ReadResult> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::Read {
            tp: tp2,
            request,
            reply: crate::shard::ReadReply::One(reply),
        })
    }

    /// Offsets and counts of a partition.
    pub fn state(&self, tp: &TopicPartition) -> Call<PartitionState> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::State { tp: tp2, reply })
    }

    /// A snapshot of the partition's producer entries.
    pub fn producers(&self, tp: &TopicPartition) -> Call<Vec<ProducerEntry>> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::Producers { tp: tp2, reply })
    }

    /// Removes every record from `offset` on; durable when it resolves.
    pub fn truncate_to(&self, tp: &TopicPartition, offset: Offset) -> Call<Offset> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::TruncateTo {
            tp: tp2,
            offset,
            reply,
        })
    }

    /// Moves the log start to `before`; durable when it resolves.
    pub fn delete_records(&self, tp: &TopicPartition, before: Offset) -> Call<Offset> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::DeleteRecords {
            tp: tp2,
            before,
            reply,
        })
    }

    /// Lets the broker manage the high watermark (replication of its own).
    pub fn set_high_watermark(&self, tp: &TopicPartition, offset: Offset) -> Call<()> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::SetHighWatermark {
            tp: tp2,
            offset,
            reply,
        })
    }

    /// Starts mirroring into `tp` from `source` (initial mirroring or failback): truncates to
    /// `start`, records the mirrored range durably, then accepts Mirror appends at the log end,
    /// which it returns.
    pub fn start_mirroring(&self, tp: &TopicPartition, mirroring: StartMirroring) -> Call<Offset> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::StartMirroring {
            tp: tp2,
            source: mirroring.source,
            start: mirroring.truncate_to,
            reply,
        })
    }

    /// Stops mirroring into `tp` (failover), durable when it resolves: ABORT markers for open
    /// transactions (or truncation to the LSO), the barrier that clears the producer state,
    /// the partition writable again.
    pub fn stop_mirroring(&self, tp: &TopicPartition, stop: StopMirroring) -> Call<StopOutcome> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::StopMirroring {
            tp: tp2,
            leader_epoch: stop.leader_epoch,
            open_transactions: stop.open_transactions,
            reply,
        })
    }

    /// Realigns a mirroring (or paused) `tp` at `at`, past its log end, when the source's
    /// retention moved its log start beyond the destination's end (design.md §Mirroring, log alignment):
    /// every local segment removed, log start and log end at `at`, durably; the mirrored
    /// range goes on from there.
    pub fn realign_mirror(&self, tp: &TopicPartition, at: Offset) -> Call<Offset> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::RealignMirror {
            tp: tp2,
            at,
            reply,
        })
    }

    /// ListOffsets (Kafka's semantics): the log start, the last fetchable offset (high
    /// watermark, or LSO at `ReadCommitted`), the first record with the largest timestamp, or
    /// the first record at or past a timestamp; never an offset at or past the last fetchable
    /// one.
    pub fn offset_for_timestamp(
        &self,
        tp: &TopicPartition,
        spec: OffsetSpec,
        isolation: Isolation,
    ) -> Call<Option<TimestampOffset>> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::OffsetForTimestamp {
            tp: tp2,
            spec,
            isolation,
            reply,
        })
    }

    /// OffsetsForLeaderEpoch (Kafka's `endOffsetFor`): the largest epoch at or below `epoch`
    /// and where it ends.
    pub fn epoch_end_offset(&self, tp: &TopicPartition, epoch: i32) -> Call<EpochEndOffset> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::EpochEndOffset {
            tp: tp2,
            epoch,
            reply,
        })
    }

    /// Sets the leader epoch stamped into `tp`'s client and coordinator appends from now on
    /// (a broker that became leader): a newer epoch starts at the log end in the epoch cache,
    /// durably. Epochs may jump.
    pub fn set_leader_epoch(&self, tp: &TopicPartition, epoch: i32) -> Call<()> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::SetLeaderEpoch {
            tp: tp2,
            epoch,
            reply,
        })
    }

    /// Suspends mirroring into `tp`.
    pub fn pause_mirroring(&self, tp: &TopicPartition) -> Call<()> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::PauseMirroring {
            tp: tp2,
            pause: true,
            reply,
        })
    }

    /// Resumes mirroring into `tp`.
    pub fn resume_mirroring(&self, tp: &TopicPartition) -> Call<()> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::PauseMirroring {
            tp: tp2,
            pause: false,
            reply,
        })
    }

    /// The shards whose thread has ended while the engine is open: a fatal failure (its ring
    /// failed, or it panicked). Their partitions answer every call with
    /// [`EngineError::ShardStopped`]; an embedder that must not serve half its partitions
    /// polls this (the broker's `/health` does) and stops.
    #[must_use]
    pub fn dead_shards(&self) -> Vec<usize> {
        if self.closed {
            return Vec::new();
        }
        self.threads
            .iter()
            .enumerate()
            .filter(|(_, t)| t.is_finished())
            .map(|(i, _)| i)
            .collect()
    }

    /// Test hook: stops shard `index` as a fatal ring failure would (see
    /// [`Engine::dead_shards`]). Not for production use.
    #[doc(hidden)]
    pub fn halt_shard_for_tests(&self, index: usize) {
        if let Some(shard) = self.shards.get(index) {
            let _ = shard.send(Request::Halt);
        }
    }

    /// Every shard's counters and latency histograms.
    ///
    /// # Errors
    /// A stopped shard.
    pub fn stats(&self) -> Result<Vec<ShardStats>, EngineError> {
        let calls: Vec<Call<ShardStats>> = self
            .shards
            .iter()
            .map(|h| {
                let (reply, pending) = promise();
                Call::new(h, Request::Stats { reply }, pending)
            })
            .collect();
        calls.into_iter().map(Call::wait).collect()
    }

    /// Clean shutdown: every shard commits, seals its partitions' tails, writes snapshots and
    /// clean-shutdown markers, and stops.
    ///
    /// # Errors
    /// The first partition that could not close cleanly (the rest are still closed; a
    /// partition that failed recovers at the next open).
    pub fn close(mut self) -> Result<(), EngineError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), EngineError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        if let Some(mut timer) = self.timer.take() {
            timer.stop();
        }
        let span = tracing::info_span!("engine_close", dir = %self.config.data_dir.display());
        let _enter = span.enter();
        let calls: Vec<Call<Vec<(TopicPartition, EngineError)>>> = self
            .shards
            .iter()
            .map(|h| {
                let (reply, pending) = promise();
                Call::new(h, Request::Close { reply }, pending)
            })
            .collect();
        let mut first_error = None;
        for call in calls {
            match call.wait() {
                Ok(failures) => {
                    if let Some((_, e)) = failures.into_iter().next() {
                        first_error.get_or_insert(e);
                    }
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        for t in self.threads.drain(..) {
            match t.join() {
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Ok(Ok(())) => {}
                Err(_) => {
                    first_error.get_or_insert(EngineError::ShardStopped(usize::MAX));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for Engine {
    /// Dropping an engine closes it cleanly (errors are logged; call [`Engine::close`] to see
    /// them).
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "engine close on drop failed");
        }
    }
}
