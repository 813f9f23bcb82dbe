//! The thread-per-core runtime (SPEC §6). A [`Shard`] owns one `Io` (its io_uring), the
//! partitions placed on it and a bounded request queue with a doorbell on its ring. Only the
//! shard touches its partitions: no locks on the data path.
//!
//! One turn of the loop ([`Shard::run_once`]):
//! 1. take every queued request (waking callers blocked on a full queue);
//! 2. handle them in order: appends are validated and staged into their partition's append
//!    buffer (acknowledged later), reads and admin requests are answered at once;
//! 3. group commit: every dirty partition without a round in flight starts one (its pages, its
//!    commit record and one fdatasync, chained), after `commit_linger_us` if set;
//! 4. reap completions (waiting for one only when there is nothing else to do: the doorbell
//!    watch is armed then, so a request wakes the same wait), finish rounds, and resolve every
//!    append the new durable end covers.
//!
//! A broker with its own thread-per-core loop owns a `Shard` and drives it on its thread:
//! call [`Shard::submit`] (or the queue through [`Shard::handle`] from other threads) and
//! [`Shard::run_once`] from its loop; nothing crosses threads then.

mod future;
mod mux;
mod queue;
mod types;

pub use future::{promise, Broken, Pending, Promise};
pub use queue::{PushError, RequestQueue};
pub use types::{
    EngineError, PartitionConfig, PartitionState, ReadRequest, TopicPartition,
    MAX_MESSAGE_BYTES_DEFAULT,
};

use crate::format::Offset;
use crate::io::{self, Completion, Doorbell, Io, Op};
use crate::log::{
    AppendOutcome, LogError, MirrorStart, OpenTransactions, PartitionLog, ReadResult, StopOutcome,
};
use crate::producer_state::{Origin, ProducerEntry};
use hdrhistogram::Histogram;
use mux::{Owner, ShardIo};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The partition's settings file in its directory.
pub const PARTITION_CONFIG_FILE: &str = "partition.config";

/// A result on its way back to a caller.
pub type Reply<T> = Promise<Result<T, EngineError>>;

/// Per partition of an `Open` request: opened, or why not.
pub type OpenResults = Vec<(TopicPartition, Result<(), EngineError>)>;

/// A request to a shard.
#[derive(Debug)]
#[non_exhaustive]
pub enum Request {
    /// Open (recover if needed) the partitions in these directories.
    Open {
        /// The partitions.
        partitions: Vec<TopicPartition>,
        /// Per partition: opened, or why not (it is then served as Failed).
        reply: Reply<OpenResults>,
    },
    /// Create an empty partition.
    Create {
        /// The partition.
        tp: TopicPartition,
        /// Its settings.
        config: PartitionConfig,
        /// Done.
        reply: Reply<()>,
    },
    /// Close and delete a partition with its directory.
    Delete {
        /// The partition.
        tp: TopicPartition,
        /// Done.
        reply: Reply<()>,
    },
    /// Append batches; answered when durable.
    Append {
        /// The partition.
        tp: TopicPartition,
        /// Whole batches.
        batches: Vec<u8>,
        /// Who sends them.
        origin: Origin,
        /// Offsets once durable.
        reply: Reply<AppendOutcome>,
    },
    /// Read whole batches.
    Read {
        /// The partition.
        tp: TopicPartition,
        /// What.
        request: ReadRequest,
        /// The batches with the read's offsets.
        reply: Reply<ReadResult>,
    },
    /// Offsets and counts.
    State {
        /// The partition.
        tp: TopicPartition,
        /// The state.
        reply: Reply<PartitionState>,
    },
    /// The producer entries.
    Producers {
        /// The partition.
        tp: TopicPartition,
        /// A snapshot of the entries.
        reply: Reply<Vec<ProducerEntry>>,
    },
    /// Remove everything from `offset` on (durable when answered).
    TruncateTo {
        /// The partition.
        tp: TopicPartition,
        /// First offset removed.
        offset: Offset,
        /// The new log end.
        reply: Reply<Offset>,
    },
    /// Move the log start to `before` (durable when answered).
    DeleteRecords {
        /// The partition.
        tp: TopicPartition,
        /// The new log start.
        before: Offset,
        /// The log start.
        reply: Reply<Offset>,
    },
    /// Let the broker manage the high watermark.
    SetHighWatermark {
        /// The partition.
        tp: TopicPartition,
        /// The high watermark.
        offset: Offset,
        /// Done.
        reply: Reply<()>,
    },
    /// Start mirroring from `source` after truncating to `start`.
    StartMirroring {
        /// The partition.
        tp: TopicPartition,
        /// The source (cluster / partition name, recorded in the mode history).
        source: String,
        /// Where to truncate first.
        start: MirrorStart,
        /// The log end mirroring continues from.
        reply: Reply<Offset>,
    },
    /// Stop mirroring (failover); durable when answered.
    StopMirroring {
        /// The partition.
        tp: TopicPartition,
        /// The leader epoch this cluster writes from now on.
        leader_epoch: i32,
        /// Open transactions: ABORT markers or truncation to the LSO.
        open_transactions: OpenTransactions,
        /// What was done.
        reply: Reply<StopOutcome>,
    },
    /// Suspend (`pause: true`) or resume mirroring.
    PauseMirroring {
        /// The partition.
        tp: TopicPartition,
        /// Pause or resume.
        pause: bool,
        /// Done.
        reply: Reply<()>,
    },
    /// Counters and latency histograms.
    Stats {
        /// The snapshot.
        reply: Reply<ShardStats>,
    },
    /// Clean shutdown of every partition; the shard stops after answering.
    Close {
        /// Per partition failures, if any.
        reply: Reply<Vec<(TopicPartition, EngineError)>>,
    },
}

/// Counters of one partition.
#[derive(Debug, Clone)]
pub struct PartitionStats {
    /// The partition.
    pub partition: TopicPartition,
    /// Appends acknowledged.
    pub appends: u64,
    /// Bytes of those appends.
    pub append_bytes: u64,
    /// Commit rounds completed (one fdatasync each).
    pub commit_rounds: u64,
    /// Appends waiting for durability.
    pub appends_waiting: usize,
    /// Request-to-acknowledgement latency of appends, in microseconds.
    pub append_latency_us: Histogram<u64>,
}

/// A snapshot of one shard's counters.
#[derive(Debug, Clone)]
pub struct ShardStats {
    /// Which shard.
    pub shard: usize,
    /// Appends acknowledged.
    pub appends: u64,
    /// Bytes appended.
    pub append_bytes: u64,
    /// Commit rounds completed.
    pub commit_rounds: u64,
    /// fdatasyncs issued (one per dirty partition per round).
    pub fdatasyncs: u64,
    /// Turns of the loop.
    pub loop_turns: u64,
    /// Requests waiting in the queue when the snapshot was taken.
    pub queue_depth: usize,
    /// Append latency over the shard, microseconds.
    pub append_latency_us: Histogram<u64>,
    /// Per partition.
    pub partitions: Vec<PartitionStats>,
}

fn histogram() -> Histogram<u64> {
    // 1 µs .. 100 s at 3 significant digits; the bounds are constants, so this cannot fail.
    Histogram::new_with_bounds(1, 100_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

struct Waiter {
    needed: Offset,
    outcome: AppendOutcome,
    bytes: usize,
    since: Instant,
    reply: Reply<AppendOutcome>,
}

struct Part {
    tp: TopicPartition,
    log: PartitionLog,
    config: PartitionConfig,
    waiters: VecDeque<Waiter>,
    dirty_since: Option<Instant>,
    stats: PartitionStats,
}

/// Settings of one shard.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// Position among the engine's shards.
    pub index: usize,
    /// Where partition directories live.
    pub data_dir: PathBuf,
    /// Requests the queue holds before callers wait.
    pub queue_depth: usize,
    /// How long a dirty partition waits before its commit round starts (0: at once).
    pub commit_linger_us: u64,
}

/// One shard: its `Io`, its partitions, its queue. See the module docs.
pub struct Shard {
    config: ShardConfig,
    io: ShardIo,
    slots: Vec<Option<Part>>,
    by_name: HashMap<TopicPartition, usize>,
    failed: HashMap<TopicPartition, LogError>,
    queue: Arc<RequestQueue<Request>>,
    doorbell: Arc<Doorbell>,
    watching: bool,
    incoming: VecDeque<Request>,
    counters: ShardStats,
    closed: bool,
}

/// Submits requests to a shard from any thread.
#[derive(Clone)]
pub struct ShardHandle {
    index: usize,
    queue: Arc<RequestQueue<Request>>,
}

impl ShardHandle {
    /// The shard's position.
    #[must_use]
    pub fn index(&self) -> usize {
        self.index
    }

    /// Queues `request`, waiting while the queue is full.
    ///
    /// # Errors
    /// [`EngineError::ShardStopped`] (the request's reply resolves as broken too).
    pub fn send(&self, request: Request) -> Result<(), EngineError> {
        self.queue
            .push_blocking(request)
            .map_err(|_| EngineError::ShardStopped(self.index))
    }

    /// Queues `request` if there is room.
    ///
    /// # Errors
    /// The request back when the queue is full or closed.
    // The request comes back by value so that a caller can retry it without a copy.
    #[allow(clippy::result_large_err)]
    pub fn try_send(&self, request: Request) -> Result<(), PushError<Request>> {
        self.queue.try_push(request)
    }

    /// The queue (for async callers waiting for room).
    #[must_use]
    pub fn queue(&self) -> &RequestQueue<Request> {
        &self.queue
    }
}

impl Shard {
    /// A shard over `io` (create it on the thread that will drive the shard: an io_uring
    /// set up with `SINGLE_ISSUER` accepts submissions from that thread only).
    ///
    /// # Errors
    /// The doorbell's creation failure.
    pub fn new(io: Box<dyn Io>, config: ShardConfig) -> Result<Self, EngineError> {
        let doorbell = Arc::new(Doorbell::new()?);
        let queue = Arc::new(RequestQueue::new(config.queue_depth, doorbell.clone()));
        Ok(Shard {
            counters: ShardStats {
                shard: config.index,
                appends: 0,
                append_bytes: 0,
                commit_rounds: 0,
                fdatasyncs: 0,
                loop_turns: 0,
                queue_depth: 0,
                append_latency_us: histogram(),
                partitions: Vec::new(),
            },
            config,
            io: ShardIo::new(io),
            slots: Vec::new(),
            by_name: HashMap::new(),
            failed: HashMap::new(),
            queue,
            doorbell,
            watching: false,
            incoming: VecDeque::new(),
            closed: false,
        })
    }

    /// A handle other threads use to send requests.
    #[must_use]
    pub fn handle(&self) -> ShardHandle {
        ShardHandle {
            index: self.config.index,
            queue: self.queue.clone(),
        }
    }

    /// Whether a `Close` request was served (the loop should end).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Handles `request` on the calling thread, as if it came through the queue (the
    /// embedding path: no queue, no doorbell).
    pub fn submit(&mut self, request: Request) {
        self.handle_request(request);
    }

    /// Runs until a `Close` request is served.
    ///
    /// # Errors
    /// The ring's failure (every waiting caller is answered with `ShardStopped` then).
    pub fn run(&mut self) -> Result<(), EngineError> {
        while !self.closed {
            if let Err(e) = self.run_once(true) {
                self.stop();
                return Err(e);
            }
        }
        self.stop();
        Ok(())
    }

    /// One turn of the loop (see the module docs). With `block`, waits for a completion or a
    /// request when there is nothing to do.
    ///
    /// # Errors
    /// The ring's failure.
    pub fn run_once(&mut self, block: bool) -> Result<(), EngineError> {
        self.counters.loop_turns += 1;
        self.queue.take_all(&mut self.incoming);
        while let Some(r) = self.incoming.pop_front() {
            self.handle_request(r);
        }
        if self.closed {
            return Ok(());
        }
        let lingering = self.start_rounds()?;
        let busy = !self.queue.is_empty();
        let wait = block && !busy && lingering.is_none();
        if wait && !self.watching {
            let id = self.io.submit(Op::WaitDoorbell {
                doorbell: self.doorbell.clone(),
            })?;
            self.io.register(&[id], Owner::Doorbell);
            self.watching = true;
        }
        if let Some(delay) = lingering.filter(|_| block && !busy) {
            // Rounds started this turn go out before the sleep, not after it.
            self.io.flush()?;
            std::thread::sleep(delay);
        }
        let completions = self.io.reap(wait)?;
        let rounds_before = self.counters.commit_rounds;
        self.dispatch(completions);
        if self.counters.commit_rounds != rounds_before {
            // A partition whose round just completed may hold appends that arrived during it:
            // their round goes out now, before the next turn's requests are validated and
            // copied, so the device is not idle for that work.
            self.start_rounds()?;
            self.io.flush()?;
        }
        Ok(())
    }

    /// Hands each reaped completion to its owner.
    fn dispatch(&mut self, completions: Vec<(Owner, Completion)>) {
        for (owner, c) in completions {
            match owner {
                Owner::Doorbell => {
                    self.watching = false;
                    self.doorbell.drain();
                }
                Owner::Partition(slot) => self.on_round_completion(slot, c),
            }
        }
    }

    /// Starts a commit round for every dirty partition without one; returns how long until a
    /// lingering partition is due, if one is.
    fn start_rounds(&mut self) -> Result<Option<Duration>, EngineError> {
        let linger = Duration::from_micros(self.config.commit_linger_us);
        let mut due_in: Option<Duration> = None;
        for slot in 0..self.slots.len() {
            let Some(part) = self.slots[slot].as_mut() else {
                continue;
            };
            let Some(since) = part.dirty_since else {
                continue;
            };
            if part.log.round_in_flight() {
                continue;
            }
            let waited = since.elapsed();
            if waited < linger {
                let left = linger - waited;
                due_in = Some(due_in.map_or(left, |d| d.min(left)));
                continue;
            }
            let started = part.log.start_commit(&mut self.io);
            match started {
                Ok(true) => {
                    let ops = part.log.round_ops().to_vec();
                    self.io.register(&ops, Owner::Partition(slot));
                    self.counters.fdatasyncs += 1;
                    part.dirty_since = None;
                }
                Ok(false) => part.dirty_since = None,
                Err(e) => {
                    part.dirty_since = None;
                    Self::fail_waiters(part, &e);
                }
            }
        }
        Ok(due_in)
    }

    fn on_round_completion(&mut self, slot: usize, c: Completion) {
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            if let Some(buf) = c.buf {
                self.io.recycle(buf);
            }
            return;
        };
        match part.log.on_completion(c) {
            Ok(Some(_)) => {
                part.stats.commit_rounds += 1;
                self.counters.commit_rounds += 1;
                if part.config.retention_bytes.is_some() || part.config.retention_ms.is_some() {
                    // retention.bytes / retention.ms: checked as rounds complete (O(1) when
                    // nothing is due); deleting a sealed segment is a few unlinks.
                    let now_ms = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as i64);
                    let r = part.log.enforce_retention(&mut self.io, now_ms);
                    if let Err(e) = r {
                        tracing::warn!(partition = %part.tp, error = %e, "retention failed");
                    }
                }
                if part.log.durable_end() < part.log.log_end() {
                    part.dirty_since.get_or_insert_with(Instant::now);
                }
                self.resolve(slot);
            }
            Ok(None) => {}
            Err(e) => Self::fail_waiters(part, &e),
        }
    }

    fn fail_waiters(part: &mut Part, e: &LogError) {
        for w in part.waiters.drain(..) {
            w.reply.fulfil(Err(EngineError::Log {
                partition: part.tp.clone(),
                source: e.clone(),
            }));
        }
    }

    /// Acknowledges the appends the durable end now covers.
    fn resolve(&mut self, slot: usize) {
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let durable = part.log.durable_end();
        while part.waiters.front().is_some_and(|w| w.needed <= durable) {
            let Some(w) = part.waiters.pop_front() else {
                break;
            };
            let us = w.since.elapsed().as_micros() as u64;
            let _ = part.stats.append_latency_us.record(us.max(1));
            let _ = self.counters.append_latency_us.record(us.max(1));
            part.stats.appends += 1;
            part.stats.append_bytes += w.bytes as u64;
            self.counters.appends += 1;
            self.counters.append_bytes += w.bytes as u64;
            w.reply.fulfil(Ok(w.outcome));
        }
        part.stats.appends_waiting = part.waiters.len();
    }

    fn slot_of(&self, tp: &TopicPartition) -> Result<usize, EngineError> {
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

    fn dir_of(&self, tp: &TopicPartition) -> PathBuf {
        self.config.data_dir.join(tp.dir_name())
    }

    /// Runs `f` on the partition's log with its own completions routed to it, then
    /// acknowledges whatever became durable meanwhile.
    fn with_log<T>(
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
            part.dirty_since.get_or_insert_with(Instant::now);
        }
        self.resolve(slot);
        result.map_err(|source| EngineError::Log {
            partition: tp.clone(),
            source,
        })
    }

    fn handle_request(&mut self, request: Request) {
        match request {
            Request::Append {
                tp,
                batches,
                origin,
                reply,
            } => self.append(tp, &batches, origin, reply),
            Request::Read { tp, request, reply } => {
                let r = self.with_log(&tp, |log, io| {
                    log.read(io, request.offset, request.max_bytes, request.isolation)
                });
                reply.fulfil(r);
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
                self.drop_waiters_past(&tp);
                reply.fulfil(r);
            }
            Request::DeleteRecords { tp, before, reply } => {
                let r = self.with_log(&tp, |log, io| {
                    // Only durable records can be deleted: settle what is in flight first.
                    log.commit(io)?;
                    log.delete_records(io, before)
                });
                reply.fulfil(r);
            }
            Request::SetHighWatermark { tp, offset, reply } => {
                let r = self.with_log(&tp, |log, _| {
                    log.set_high_watermark(offset);
                    Ok(())
                });
                reply.fulfil(r);
            }
            Request::Create { tp, config, reply } => reply.fulfil(self.create(tp, config)),
            Request::Delete { tp, reply } => reply.fulfil(self.delete(&tp)),
            Request::Open { partitions, reply } => {
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
            Request::Stats { reply } => reply.fulfil(Ok(self.stats())),
            Request::Close { reply } => {
                let failures = self.close_all();
                reply.fulfil(Ok(failures));
            }
        }
    }

    /// After a truncation, appends waiting for offsets that no longer exist can never become
    /// durable: answer them with the truncation as the cause.
    fn drop_waiters_past(&mut self, tp: &TopicPartition) {
        let Ok(slot) = self.slot_of(tp) else { return };
        let Some(part) = self.slots[slot].as_mut() else {
            return;
        };
        let end = part.log.log_end();
        let (keep, cut): (VecDeque<Waiter>, VecDeque<Waiter>) =
            part.waiters.drain(..).partition(|w| w.needed <= end);
        part.waiters = keep;
        for w in cut {
            w.reply.fulfil(Err(EngineError::Log {
                partition: tp.clone(),
                source: LogError::OffsetOutOfRange {
                    offset: w.outcome.first_offset,
                    log_start: part.log.log_start(),
                    log_end: end,
                },
            }));
        }
    }

    fn append(
        &mut self,
        tp: TopicPartition,
        batches: &[u8],
        origin: Origin,
        reply: Reply<AppendOutcome>,
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
        // rest; a malformed length is its error to report).
        let limit = part.config.max_message_bytes;
        let mut at = 0usize;
        while let Some(len) = batches
            .get(at + 8..at + 12)
            .and_then(|b| b.try_into().ok())
            .map(i32::from_be_bytes)
        {
            if len < crate::format::BATCH_LENGTH_MIN {
                // A length no batch can have: past it nothing is a length. The log reports
                // the malformed batch (found by the bad-input catalogue: garbage read as the
                // next length came back as MessageTooLarge).
                break;
            }
            let size = 12 + len as usize;
            if size > limit {
                return reply.fulfil(Err(EngineError::MessageTooLarge {
                    partition: tp,
                    bytes: size,
                    limit,
                }));
            }
            at += size;
        }
        let result = part.log.append(&mut self.io, batches, origin);
        match result {
            Ok(outcome) => {
                part.waiters.push_back(Waiter {
                    needed: Offset(outcome.last_offset.0 + 1),
                    outcome,
                    bytes: batches.len(),
                    since,
                    reply,
                });
                if part.log.durable_end() < part.log.log_end() {
                    part.dirty_since.get_or_insert(since);
                }
                self.resolve(slot);
            }
            Err(source) => reply.fulfil(Err(EngineError::Log {
                partition: tp,
                source,
            })),
        }
    }

    fn insert(&mut self, tp: TopicPartition, log: PartitionLog, config: PartitionConfig) {
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
                append_latency_us: histogram(),
            },
            tp: tp.clone(),
            log,
            config,
            waiters: VecDeque::new(),
            dirty_since: None,
        });
        self.by_name.insert(tp, slot);
    }

    fn create(&mut self, tp: TopicPartition, config: PartitionConfig) -> Result<(), EngineError> {
        tp.validate()?;
        config.validate()?;
        if self.by_name.contains_key(&tp) || self.failed.contains_key(&tp) {
            return Err(EngineError::PartitionExists(tp));
        }
        let dir = self.dir_of(&tp);
        let span = tracing::info_span!("create_partition", partition = %tp);
        let _enter = span.enter();
        self.io.create_dir(&dir)?;
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
    fn open_partition(&mut self, tp: &TopicPartition) -> Result<(), EngineError> {
        let dir = self.dir_of(tp);
        let span = tracing::info_span!("open_partition", partition = %tp);
        let _enter = span.enter();
        let config = match io::read_file(&mut self.io, &dir.join(PARTITION_CONFIG_FILE)) {
            Ok(bytes) => PartitionConfig::decode(&String::from_utf8_lossy(&bytes))?,
            Err(_) => PartitionConfig::default(),
        };
        let log_config = config.log_config();
        let opened = match PartitionLog::open(&mut self.io, &dir, log_config) {
            Err(LogError::NeedsRecovery { .. }) => {
                let span = tracing::info_span!("recovery", partition = %tp);
                let _enter = span.enter();
                crate::recovery::recover(&mut self.io, &dir, log_config)
            }
            other => other,
        };
        match opened {
            Ok(log) => {
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
    fn take(&mut self, tp: &TopicPartition) -> Option<Part> {
        let slot = *self.by_name.get(tp)?;
        while self.slots[slot]
            .as_ref()
            .is_some_and(|p| p.log.round_in_flight())
        {
            match self.io.reap(true) {
                Ok(cs) => self.dispatch(cs),
                Err(_) => break,
            }
        }
        self.by_name.remove(tp);
        self.slots[slot].take()
    }

    fn delete(&mut self, tp: &TopicPartition) -> Result<(), EngineError> {
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
        Ok(())
    }

    fn close_all(&mut self) -> Vec<(TopicPartition, EngineError)> {
        let span = tracing::info_span!("shard_close", shard = self.config.index);
        let _enter = span.enter();
        let mut failures = Vec::new();
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
        self.closed = true;
        failures
    }

    /// Answers everything still queued or waiting with `ShardStopped` and reaps the doorbell
    /// watch, so dropping the `Io` does not wait on it.
    fn stop(&mut self) {
        for r in self.queue.close() {
            drop(r);
        }
        for part in self.slots.iter_mut().flatten() {
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

    /// A snapshot of the counters.
    #[must_use]
    pub fn stats(&self) -> ShardStats {
        let mut s = self.counters.clone();
        s.queue_depth = self.queue.len();
        s.partitions = self
            .slots
            .iter()
            .flatten()
            .map(|p| p.stats.clone())
            .collect();
        s
    }

    /// The directory of the engine's data.
    #[must_use]
    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }
}

impl Drop for Shard {
    /// Answers whatever is still waiting and takes back the doorbell watch, so that the `Io`
    /// (which waits for its operations before freeing anything) can be dropped.
    fn drop(&mut self) {
        self.stop();
    }
}
