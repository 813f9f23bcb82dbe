//! The thread-per-core runtime (design.md §Runtime). A [`Shard`] owns one `Io` (its io_uring), the
//! partitions placed on it and a bounded request queue with a doorbell on its ring. Only the
//! shard touches its partitions: no locks on the data path.
//!
//! One turn of the loop ([`Shard::run_once`]):
//! 1. take every queued request (waking callers blocked on a full queue);
//! 2. handle them in order: appends are validated and staged into their partition's append
//!    buffer (acknowledged later), reads and admin requests are answered at once;
//! 3. group commit: every dirty partition without a round in flight starts one (its pages, its
//!    commit record and one fdatasync, chained), after `commit_linger_us` if set, in the order
//!    they became dirty and only while the ring has room (the rest wait for completions);
//! 4. reap completions (waiting for one only when there is nothing else to do: the doorbell
//!    watch is armed then, so a request wakes the same wait), finish rounds, and resolve every
//!    append the new durable end covers.
//!
//! A broker with its own thread-per-core loop owns a `Shard` and drives it on its thread:
//! call [`Shard::submit`] (or the queue through [`Shard::handle`] from other threads) and
//! [`Shard::run_once`] from its loop; nothing crosses threads then.
//!
//! Files: `request.rs`, `handle.rs`, `queue.rs`, `call.rs` (the `Call` future), `serve.rs`
//! (serving requests), `group_commit.rs` (starting rounds, their completions), `journal.rs`
//! (the shard journal: rounds into it, flushes, checkpoints, release), `replay.rs` (the
//! journals replayed at open), `ack.rs` (acknowledging waiters), `mux.rs` (the `Io` shared by
//! the partitions, completions routed by owner), `buffers.rs` (the bounded pool of append
//! buffers), `lifecycle.rs` (create, open, delete, close, live settings), `timers.rs`
//! (expiration, retention), `cleaner.rs` (the log cleaner's steps),
//! `stats.rs`, and the fetch path: `tail_cache.rs`, `long_poll.rs`, `alarm.rs`,
//! `read_ahead.rs`.

mod ack;
mod alarm;
mod buffers;
mod call;
mod cleaner;
mod gather;
mod group_commit;
mod handle;
mod journal;
mod lifecycle;
mod long_poll;
mod mux;
mod queue;
mod read_ahead;
mod replay;
mod request;
mod serve;
mod stats;
mod tail_cache;
mod timers;

pub use buffers::APPEND_BUFFERS_MAX_DEFAULT;
pub use call::{promise, Broken, Call, Pending, Promise};
pub use cleaner::{
    CleanerConfig, CleanerCounters, CLEANER_BACKOFF_MS_DEFAULT, CLEAN_STEP_BYTES_DEFAULT,
    CLEAN_STEP_INTERVAL_MS_MAX,
};
pub use gather::{AnyPart, AppendReply, Gather, GatherPart, PartResult, ReadReply};
pub use handle::ShardHandle;
pub use queue::{PushError, RequestQueue};
pub use read_ahead::{
    READ_AHEAD_CHUNK_BYTES, READ_AHEAD_DEPTH_MAX, READ_AHEAD_DEPTH_MIN, READ_AHEAD_IDLE_MS,
    READ_AHEAD_SHARD_BYTES,
};
pub use replay::JournalReplay;
pub use request::{OpenResults, Reply, Request};
use stats::{histogram, partition_histogram};
pub use stats::{PartitionStats, ShardStats};
pub use tail_cache::TAIL_CACHE_BYTES_DEFAULT;
pub use timers::{
    LOOKAHEAD_MIN_PRODUCERS, PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS_DEFAULT, QUEUE_DEPTH_DEFAULT,
    RETENTION_CHECK_INTERVAL_MS_DEFAULT,
};

use crate::api::{EngineError, PartitionConfig, TopicPartition};
use crate::clock::Clock;
use crate::format::Offset;
use crate::io::{Completion, Doorbell, Io, Op};
use crate::log::{AppendOutcome, LogError, PartitionLog};
use mux::{Owner, ShardIo};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

struct Waiter {
    needed: Offset,
    outcome: AppendOutcome,
    bytes: usize,
    since: Instant,
    reply: AppendReply,
}

struct Part {
    tp: TopicPartition,
    log: PartitionLog,
    config: PartitionConfig,
    waiters: VecDeque<Waiter>,
    dirty_since: Option<Instant>,
    /// In the shard's queue of ready rounds.
    queued: bool,
    /// Appended to since the last tick (an idle partition hands its buffers back).
    appended_since_tick: bool,
    /// Holds an append buffer (counted in the shard's `attached`).
    holds_buffer: bool,
    /// Requests waiting, in order, behind an append that waits for a buffer (`buffers.rs`).
    blocked: VecDeque<Request>,
    /// In the shard's queue of partitions waiting for a buffer.
    waiting_for_buffer: bool,
    /// Writing its deferred pages to hand its buffer back: the write's completion does
    /// (`buffers.rs`).
    handing_back: bool,
    /// Long-poll reads waiting for bytes (`long_poll.rs`).
    parked: Vec<long_poll::ParkedRead>,
    /// The batches of its latest appends in the shard's tail cache, oldest first.
    tail: VecDeque<tail_cache::Cached>,
    /// Its read-ahead over a sealed segment, and the reads waiting for it.
    window: Option<read_ahead::Window>,
    device_reads: VecDeque<read_ahead::DeviceRead>,
    stats: PartitionStats,
    /// Its name in the shard's journal (the directory's name).
    key: String,
    /// Asked to checkpoint by the journal's current wave (`journal.rs`).
    checkpoint_wanted: bool,
}

impl Part {
    /// Notes that the partition has appends not yet in a round, since `since`, and queues its
    /// round unless one is in flight (it is queued again when that one completes).
    fn mark_dirty(&mut self, slot: usize, since: Instant, ready: &mut VecDeque<usize>) {
        self.dirty_since.get_or_insert(since);
        if !self.queued && !self.log.round_in_flight() {
            self.queued = true;
            ready.push_back(slot);
        }
    }
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
    /// The time producer expiration and retention act on.
    pub clock: Arc<dyn Clock>,
    /// `producer.id.expiration.check.interval.ms`.
    pub producer_id_expiration_check_interval_ms: u64,
    /// `log.retention.check.interval.ms`.
    pub retention_check_interval_ms: u64,
    /// Most partitions holding an append buffer at once (see `buffers.rs`).
    pub append_buffers_max: usize,
    /// Bytes of recently appended batches the shard keeps for tail reads (0: none).
    pub tail_cache_bytes: usize,
    /// The size of the shard's journal (`journal.bytes`; 0: no journal, every round syncs
    /// its own file).
    pub journal_bytes: u64,
    /// How long the journal's flush waits for more rounds once one is waiting
    /// (`journal.group.window.us`; 0: at once).
    pub journal_group_window_us: u64,
    /// The log cleaner's settings for this shard (its share of the engine's buffer and rate).
    pub cleaner: CleanerConfig,
}

impl ShardConfig {
    /// Shard `index` over `data_dir` with the engine's defaults (a queue of
    /// `QUEUE_DEPTH_DEFAULT`, no linger, the wall clock, Kafka's check intervals).
    #[must_use]
    pub fn new(index: usize, data_dir: PathBuf) -> Self {
        ShardConfig {
            index,
            data_dir,
            queue_depth: QUEUE_DEPTH_DEFAULT,
            commit_linger_us: 0,
            clock: Arc::new(crate::clock::WallClock),
            producer_id_expiration_check_interval_ms:
                PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS_DEFAULT,
            retention_check_interval_ms: RETENTION_CHECK_INTERVAL_MS_DEFAULT,
            append_buffers_max: APPEND_BUFFERS_MAX_DEFAULT,
            tail_cache_bytes: TAIL_CACHE_BYTES_DEFAULT,
            journal_bytes: crate::journal::JOURNAL_BYTES_DEFAULT,
            journal_group_window_us: 0,
            cleaner: CleanerConfig::default(),
        }
    }
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
    /// Partitions whose commit round is ready to start, oldest first; a round starts only
    /// when the ring has room for it (`group_commit`).
    ready: VecDeque<usize>,
    /// Whether a turn looks ahead (`prefetch_turn`): some partition's producer table is large
    /// enough to miss the cache (`LOOKAHEAD_MIN_PRODUCERS`); re-checked on every tick.
    lookahead: bool,
    counters: ShardStats,
    closed: bool,
    /// A `Halt` was served: the loop ends as on a fatal ring failure.
    halted: bool,
    /// Serving a `Close`: appends waiting for a buffer are admitted regardless of the bound.
    closing: bool,
    /// Partitions holding an append buffer.
    attached: usize,
    /// Partitions waiting for an append buffer, oldest first.
    buffer_waiters: VecDeque<usize>,
    /// When (clock milliseconds) producer expiration and retention are next due.
    next_expiration_ms: i64,
    next_retention_ms: i64,
    next_cache_release_ms: i64,
    /// Long-poll reads parked on the shard's partitions, their earliest deadline, and the
    /// wake-up asked of the alarm.
    parked_reads: usize,
    next_deadline: Option<Instant>,
    alarm_at: Option<Instant>,
    tail: tail_cache::TailCache,
    journal: journal::ShardJournal,
    read_ahead: read_ahead::ReadAheadPool,
    cleaner: cleaner::ShardCleaner,
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
        let now_ms = config.clock.now_ms();
        Ok(Shard {
            tail: tail_cache::TailCache::new(config.tail_cache_bytes),
            next_expiration_ms: now_ms
                .saturating_add_unsigned(config.producer_id_expiration_check_interval_ms),
            next_retention_ms: now_ms.saturating_add_unsigned(config.retention_check_interval_ms),
            next_cache_release_ms: now_ms.saturating_add(timers::IDLE_CACHE_RELEASE_INTERVAL_MS),
            counters: ShardStats {
                shard: config.index,
                appends: 0,
                append_bytes: 0,
                commit_rounds: 0,
                fdatasyncs: 0,
                journal_rounds: 0,
                page_writes: 0,
                journal_flushes: 0,
                journal_checkpoint_waves: 0,
                journal_syncs: 0,
                journal_bytes_written: 0,
                device_bytes_written: 0,
                loop_turns: 0,
                lookahead_turns: 0,
                rounds_waiting_for_room: 0,
                idle_buffer_bytes: 0,
                appends_waiting_for_buffer: 0,
                partitions_holding_buffers: 0,
                queue_depth: 0,
                reads_parked: 0,
                reads_cancelled: 0,
                parked_reads: 0,
                device_reads: 0,
                tail_cache_hits: 0,
                tail_cache_bytes: 0,
                read_ahead_bytes: 0,
                read_ahead_seam_copies: 0,
                cleaner: CleanerCounters::default(),
                append_latency_us: histogram(),
                journal_flush_latency_us: histogram(),
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
            ready: VecDeque::new(),
            lookahead: false,
            closed: false,
            halted: false,
            closing: false,
            attached: 0,
            buffer_waiters: VecDeque::new(),
            parked_reads: 0,
            next_deadline: None,
            alarm_at: None,
            journal: journal::ShardJournal::default(),
            read_ahead: read_ahead::ReadAheadPool::new(),
            cleaner: cleaner::ShardCleaner::default(),
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
        if self.lookahead && self.incoming.len() > 1 {
            self.counters.lookahead_turns += 1;
            self.prefetch_turn();
        }
        while let Some(r) = self.incoming.pop_front() {
            self.handle_request(r);
        }
        if self.halted {
            return Err(EngineError::ShardStopped(self.config.index));
        }
        self.expire_parked();
        if self.closed {
            return Ok(());
        }
        let lingering = self.start_rounds()?;
        let busy = !self.queue.is_empty();
        self.clean_turn(busy || !self.incoming.is_empty() || lingering.is_some());
        let clean_next = self.cleaner_next_step();
        let clean_now = clean_next.is_some_and(|at| at <= Instant::now());
        let wait = block && !busy && lingering.is_none() && !clean_now;
        if let Some(at) = clean_next.filter(|_| wait) {
            self.arm_alarm(at);
        }
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
    ///
    /// They are handled one at a time from the `Io`'s stash: handling one can wait in place
    /// for a partition's own operations (an admitted append that rolls), and those may be
    /// among the completions not handled yet (found by `many_partitions`: a roll inside a
    /// journal flush's acknowledgements waited forever for a page write reaped with it).
    fn dispatch(&mut self, completions: Vec<(Owner, Completion)>) {
        self.io.restash(completions);
        while let Some((owner, c)) = self.io.next_stashed() {
            match owner {
                Owner::Doorbell => {
                    self.watching = false;
                    self.doorbell.drain();
                }
                Owner::Partition(slot) => self.on_round_completion(slot, c),
                Owner::Journal => self.on_journal_completion(c),
                Owner::ReadAhead(slot) => self.on_read_ahead(slot, c),
            }
        }
        // Checkpoints whose writes just completed may be all the wave's sync waits for.
        self.sync_checkpoints();
    }

    /// A snapshot of the counters.
    #[must_use]
    pub fn stats(&self) -> ShardStats {
        let mut s = self.counters.clone();
        s.queue_depth = self.queue.len();
        s.parked_reads = self.parked_reads;
        s.idle_buffer_bytes = self.io.idle_buffer_bytes();
        s.device_reads = self.io.device_reads();
        s.device_bytes_written = self.io.bytes_written();
        s.tail_cache_hits = self.tail.hits;
        s.tail_cache_bytes = self.tail.bytes();
        s.read_ahead_bytes = self.read_ahead.held_bytes();
        s.read_ahead_seam_copies = self.read_ahead.seam_copies;
        s.cleaner = self.cleaner.counters;
        s.partitions_holding_buffers = self.attached;
        s.journal_bytes_written = self
            .journal
            .writer
            .as_ref()
            .map_or(0, |w| w.counters().bytes_written);
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
