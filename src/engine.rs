//! The public handle a broker embeds: [`Engine`] starts the shards (one pinned thread each,
//! its own io_uring), opens every partition found in the data directory on its shard (all
//! shards in parallel; recovery where a partition was not closed cleanly), and routes each
//! call to the partition's shard. Every call returns a [`Call`]: a future for any async
//! runtime, or `.wait()` for blocking callers.
//!
//! ```no_run
//! use mirrorlog::engine::{Engine, EngineConfig, PartitionConfig, TopicPartition};
//! use mirrorlog::producer_state::Origin;
//! # fn batches() -> Vec<u8> { Vec::new() }
//! let engine = Engine::open(EngineConfig::new("/var/lib/mirrorlog").cluster_id("east").shards(2))?;
//! let tp = TopicPartition::new("orders", 0);
//! engine.create_partition(&tp, PartitionConfig::default()).wait()?;
//! let out = engine.append(&tp, batches(), Origin::Client).wait()?; // durable when it returns
//! engine.close()?;
//! # Ok::<(), mirrorlog::engine::EngineError>(())
//! ```

use crate::format::Offset;
use crate::io::{self, Io, SimConfig, SimIo, UringIo};
use crate::log::{AppendOutcome, ReadResult};
pub use crate::log::{MirrorStart, Mode, OpenTransactions, StopOutcome};
use crate::producer_state::{Origin, ProducerEntry};
use crate::shard::{
    promise, OpenResults, Pending, PushError, Reply, Request, Shard, ShardConfig, ShardHandle,
};
pub use crate::shard::{
    EngineError, PartitionConfig, PartitionState, ReadRequest, ShardStats, TopicPartition,
};
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::thread::JoinHandle;

/// `start_mirroring`'s arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartMirroring {
    /// The source (recorded in the mode history), e.g. `"east/orders-0"`.
    pub source: String,
    /// Where the destination truncates before mirroring.
    pub truncate_to: MirrorStart,
}

/// `stop_mirroring`'s arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopMirroring {
    /// The leader epoch the destination writes from now on (bumped by the caller).
    pub leader_epoch: i32,
    /// What happens to transactions left open by the source.
    pub open_transactions: OpenTransactions,
}

/// Which `Io` the shards run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IoBackend {
    /// io_uring with O_DIRECT files (production).
    Uring,
    /// io_uring with files through the page cache, for filesystems that refuse O_DIRECT
    /// (tmpfs, some network and overlay filesystems). Durability is the same (`fdatasync`);
    /// speed is not comparable with [`IoBackend::Uring`].
    UringPageCache,
    /// The simulated disk, in memory, one per shard (tests and the scaling benchmark).
    Simulated(SimConfig),
}

impl IoBackend {
    /// Whether partitions live in the data directory on disk (not in memory).
    #[must_use]
    pub fn on_disk(&self) -> bool {
        matches!(self, IoBackend::Uring | IoBackend::UringPageCache)
    }
}

/// Engine settings. Kafka's names apply per partition ([`PartitionConfig`]); these are the
/// engine's own.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The data directory (`log.dirs`).
    pub data_dir: PathBuf,
    /// The cluster this engine's broker belongs to.
    pub cluster_id: String,
    /// Shards (default: one per available core).
    pub shards: usize,
    /// Requests a shard's queue holds before callers wait.
    pub queue_depth: usize,
    /// Operations each shard's ring holds in flight.
    pub io_depth: u32,
    /// Commit linger in microseconds (0: a round starts as soon as the previous one ends).
    pub commit_linger_us: u64,
    /// Pin shard `i` to core `i % cores` (`sched_setaffinity`).
    pub pin_threads: bool,
    /// Placement overrides: partition → shard.
    pub placement: HashMap<TopicPartition, usize>,
    /// The `Io` backend.
    pub backend: IoBackend,
}

/// Most shards an engine runs.
pub const SHARDS_MAX: usize = 1024;
/// Default request-queue depth per shard.
pub const QUEUE_DEPTH_DEFAULT: usize = 4096;
/// Default ring size per shard.
pub const IO_DEPTH_DEFAULT: u32 = 512;

impl EngineConfig {
    /// Defaults over `data_dir`.
    #[must_use]
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        EngineConfig {
            data_dir: data_dir.into(),
            cluster_id: String::new(),
            shards: io::available_cores(),
            queue_depth: QUEUE_DEPTH_DEFAULT,
            io_depth: IO_DEPTH_DEFAULT,
            commit_linger_us: 0,
            pin_threads: true,
            placement: HashMap::new(),
            backend: IoBackend::Uring,
        }
    }

    /// Sets the cluster id.
    #[must_use]
    pub fn cluster_id(mut self, id: &str) -> Self {
        self.cluster_id = id.to_string();
        self
    }

    /// Sets the shard count.
    #[must_use]
    pub fn shards(mut self, n: usize) -> Self {
        self.shards = n;
        self
    }

    /// Sets the queue depth.
    #[must_use]
    pub fn queue_depth(mut self, n: usize) -> Self {
        self.queue_depth = n;
        self
    }

    /// Sets the commit linger.
    #[must_use]
    pub fn commit_linger_us(mut self, us: u64) -> Self {
        self.commit_linger_us = us;
        self
    }

    /// Places `tp` on shard `shard`.
    #[must_use]
    pub fn place(mut self, tp: TopicPartition, shard: usize) -> Self {
        self.placement.insert(tp, shard);
        self
    }

    /// Chooses the backend.
    #[must_use]
    pub fn backend(mut self, backend: IoBackend) -> Self {
        self.backend = backend;
        self
    }

    /// Pins shard threads or not.
    #[must_use]
    pub fn pin_threads(mut self, pin: bool) -> Self {
        self.pin_threads = pin;
        self
    }

    /// Checks every setting.
    ///
    /// # Errors
    /// [`EngineError::Config`] naming the setting.
    pub fn validate(&self) -> Result<(), EngineError> {
        let bad = |name: &'static str, reason: String| Err(EngineError::Config { name, reason });
        if self.shards == 0 || self.shards > SHARDS_MAX {
            return bad(
                "shards",
                format!("{} is outside [1, {SHARDS_MAX}]", self.shards),
            );
        }
        if self.queue_depth == 0 {
            return bad("queue_depth", "must be positive".into());
        }
        if !(8..=32_768).contains(&self.io_depth) {
            return bad(
                "io_depth",
                format!("{} is outside [8, 32768]", self.io_depth),
            );
        }
        if self.commit_linger_us > 1_000_000 {
            return bad("commit_linger_us", "at most one second".into());
        }
        if self.data_dir.as_os_str().is_empty() {
            return bad("log.dirs", "empty path".into());
        }
        for (tp, &shard) in &self.placement {
            tp.validate()?;
            if shard >= self.shards {
                return bad(
                    "placement",
                    format!("{tp} on shard {shard} of {}", self.shards),
                );
            }
        }
        Ok(())
    }
}

/// A request's result: `.await` it on any runtime, or `.wait()`. When the shard's queue was
/// full at the call, the request waits here (backpressure) until there is room.
#[must_use = "the result of the call arrives through it"]
pub struct Call<T> {
    unsent: Option<(Request, ShardHandle)>,
    pending: Option<Pending<Result<T, EngineError>>>,
    shard: usize,
}

impl<T> std::fmt::Debug for Call<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call").field("shard", &self.shard).finish()
    }
}

impl<T> Call<T> {
    fn failed(e: EngineError) -> Self {
        Call {
            unsent: None,
            pending: Some(Pending::ready(Err(e))),
            shard: 0,
        }
    }

    fn new(
        handle: &ShardHandle,
        request: Request,
        pending: Pending<Result<T, EngineError>>,
    ) -> Self {
        let shard = handle.index();
        let unsent = match handle.try_send(request) {
            Ok(()) => None,
            Err(PushError::Full(r)) => Some((r, handle.clone())),
            // The request (and its promise) is dropped: the pending resolves as broken.
            Err(PushError::Closed(_)) => None,
        };
        Call {
            unsent,
            pending: Some(pending),
            shard,
        }
    }

    /// Blocks until the result arrives.
    ///
    /// # Errors
    /// The call's error, or [`EngineError::ShardStopped`].
    pub fn wait(mut self) -> Result<T, EngineError> {
        if let Some((request, handle)) = self.unsent.take() {
            handle.send(request)?;
        }
        match self.pending.take() {
            Some(p) => p
                .wait()
                .unwrap_or(Err(EngineError::ShardStopped(self.shard))),
            None => Err(EngineError::ShardStopped(self.shard)),
        }
    }
}

impl<T> Unpin for Call<T> {}

impl<T> Future for Call<T> {
    type Output = Result<T, EngineError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some((request, handle)) = self.unsent.take() {
            match handle.try_send(request) {
                Ok(()) => {}
                Err(PushError::Full(r)) => {
                    handle.queue().wait_for_room(cx.waker());
                    self.unsent = Some((r, handle));
                    return Poll::Pending;
                }
                Err(PushError::Closed(_)) => {
                    return Poll::Ready(Err(EngineError::ShardStopped(self.shard)))
                }
            }
        }
        let shard = self.shard;
        match self.pending.as_mut() {
            Some(p) => match Pin::new(p).poll(cx) {
                Poll::Ready(r) => {
                    self.pending = None;
                    Poll::Ready(r.unwrap_or(Err(EngineError::ShardStopped(shard))))
                }
                Poll::Pending => Poll::Pending,
            },
            None => Poll::Ready(Err(EngineError::ShardStopped(shard))),
        }
    }
}

/// The engine: shards and the routing of calls to them.
pub struct Engine {
    config: EngineConfig,
    shards: Vec<ShardHandle>,
    threads: Vec<JoinHandle<Result<(), EngineError>>>,
    /// Partitions that failed at open, with the cause (they answer every call with it).
    failed: Vec<(TopicPartition, EngineError)>,
    closed: bool,
    /// The data directory's `.lock`, held exclusively (`flock`) while the engine is open, so a
    /// second engine (another process or this one) cannot open the same partitions.
    _lock: Option<std::fs::File>,
}

/// The lock file in the data directory (Kafka names its own the same).
pub const LOCK_FILE: &str = ".lock";

/// Takes the data directory's lock, or says who cannot have it.
fn lock_data_dir(dir: &std::path::Path) -> Result<std::fs::File, EngineError> {
    let os = |e: std::io::Error| {
        EngineError::Io(io::IoError::from_errno(
            io::OpKind::Directory,
            e.raw_os_error().unwrap_or(libc::EIO),
        ))
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))
        .map_err(os)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(EngineError::DataDirLocked(dir.to_path_buf()))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(os(e)),
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("data_dir", &self.config.data_dir)
            .field("shards", &self.shards.len())
            .finish()
    }
}

fn make_io(backend: &IoBackend, depth: u32, shard: usize) -> Result<Box<dyn Io>, EngineError> {
    Ok(match backend {
        IoBackend::Uring => Box::new(UringIo::new(depth)?),
        IoBackend::UringPageCache => {
            Box::new(UringIo::new(depth)?.with_caching(io::FileCaching::PageCache))
        }
        IoBackend::Simulated(config) => Box::new(SimIo::new(SimConfig {
            seed: config.seed.wrapping_add(shard as u64),
            capacity: depth as usize,
            ..config.clone()
        })),
    })
}

impl Engine {
    /// Starts the shards and opens every partition in the data directory, each on its shard,
    /// all shards in parallel (recovering those not closed cleanly). A partition that fails
    /// to open (corruption) does not stop the engine: it is served as Failed, and listed by
    /// [`Engine::failed_partitions`].
    ///
    /// # Errors
    /// Invalid configuration, the data directory, or a shard that could not start.
    pub fn open(config: EngineConfig) -> Result<Self, EngineError> {
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
            Some(lock_data_dir(&config.data_dir)?)
        } else {
            None
        };
        let cores = io::available_cores();
        let mut shards = Vec::with_capacity(config.shards);
        let mut threads = Vec::with_capacity(config.shards);
        for index in 0..config.shards {
            let (tx, rx) = std::sync::mpsc::channel();
            let shard_config = ShardConfig {
                index,
                data_dir: config.data_dir.clone(),
                queue_depth: config.queue_depth,
                commit_linger_us: config.commit_linger_us,
            };
            let backend = config.backend.clone();
            let depth = config.io_depth;
            let pin = config.pin_threads;
            let thread = std::thread::Builder::new()
                .name(format!("mirrorlog-shard-{index}"))
                .spawn(move || {
                    if pin {
                        // Best effort: a restricted cpuset still runs, just unpinned.
                        if let Err(e) = io::pin_current_thread(index % cores) {
                            tracing::warn!(shard = index, error = %e, "could not pin shard thread");
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
            _lock: lock,
        };
        engine.open_existing()?;
        Ok(engine)
    }

    /// Opens the partition directories found in the data directory, every shard at once.
    fn open_existing(&mut self) -> Result<(), EngineError> {
        if !self.config.backend.on_disk() {
            return Ok(());
        }
        let mut per_shard: Vec<Vec<TopicPartition>> = vec![Vec::new(); self.shards.len()];
        let entries = std::fs::read_dir(&self.config.data_dir).map_err(|e| {
            EngineError::Io(io::IoError::from_errno(
                io::OpKind::ListDir,
                e.raw_os_error().unwrap_or(libc::EIO),
            ))
        })?;
        for entry in entries.flatten() {
            if !entry.path().is_dir() {
                continue;
            }
            if let Some(tp) = TopicPartition::from_dir_name(&entry.file_name().to_string_lossy()) {
                let shard = self.shard_of(&tp);
                per_shard[shard].push(tp);
            }
        }
        let calls: Vec<Call<OpenResults>> = per_shard
            .into_iter()
            .enumerate()
            .filter(|(_, tps)| !tps.is_empty())
            .map(|(shard, partitions)| {
                let (reply, pending) = promise();
                Call::new(
                    &self.shards[shard],
                    Request::Open { partitions, reply },
                    pending,
                )
            })
            .collect();
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

    /// The shard serving `tp`: the placement override, else a stable hash.
    #[must_use]
    pub fn shard_of(&self, tp: &TopicPartition) -> usize {
        self.config
            .placement
            .get(tp)
            .copied()
            .unwrap_or((tp.placement_hash() % self.shards.len() as u64) as usize)
    }

    /// The engine's settings.
    #[must_use]
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    fn call<T>(&self, tp: &TopicPartition, make: impl FnOnce(Reply<T>) -> Request) -> Call<T> {
        if self.closed {
            return Call::failed(EngineError::ShardStopped(self.shard_of(tp)));
        }
        let (reply, pending) = promise();
        Call::new(&self.shards[self.shard_of(tp)], make(reply), pending)
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

    /// Deletes a partition and its directory.
    pub fn delete_partition(&self, tp: &TopicPartition) -> Call<()> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::Delete { tp: tp2, reply })
    }

    /// Appends whole batches; resolves once they are durable. Client and Coordinator appends
    /// get offsets; Replication and Mirror appends keep theirs.
    pub fn append(
        &self,
        tp: &TopicPartition,
        batches: Vec<u8>,
        origin: Origin,
    ) -> Call<AppendOutcome> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::Append {
            tp: tp2,
            batches,
            origin,
            reply,
        })
    }

    /// Reads whole batches with the high watermark, LSO, log start and aborted transactions.
    pub fn read(&self, tp: &TopicPartition, request: ReadRequest) -> Call<ReadResult> {
        let tp2 = tp.clone();
        self.call(tp, move |reply| Request::Read {
            tp: tp2,
            request,
            reply,
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
