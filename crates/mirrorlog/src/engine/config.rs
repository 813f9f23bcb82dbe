//! The engine's own settings (Kafka's per-partition ones are `PartitionConfig`), their bounds,
//! and the `Io` backend each shard runs on.

use crate::api::{EngineError, TopicPartition};
use crate::clock::{Clock, WallClock};
use crate::io::{self, Io, SimConfig, SimIo, UringIo};
pub use crate::shard::{
    CleanerConfig, PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS_DEFAULT, QUEUE_DEPTH_DEFAULT,
    RETENTION_CHECK_INTERVAL_MS_DEFAULT,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

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

/// Engine settings. Kafka's names apply per partition ([`PartitionConfig`](crate::api::PartitionConfig)); these are the
/// engine's own.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The data directory (`log.dirs`).
    pub data_dir: PathBuf,
    /// The cluster this engine's broker belongs to: stored in the data directory's
    /// `meta.properties` at the first open, and an engine of another cluster is refused there
    /// ([`EngineError::ClusterIdMismatch`]). Empty: whatever the directory says.
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
    /// The time producer expiration and retention act on (the wall clock by default; a
    /// [`ManualClock`](crate::api::ManualClock) in tests and simulated runs).
    pub clock: Arc<dyn Clock>,
    /// `producer.id.expiration.check.interval.ms`: how often every partition, idle or not,
    /// drops producers idle for `producer.id.expiration.ms` (Kafka's default 600,000).
    pub producer_id_expiration_check_interval_ms: u64,
    /// `log.retention.check.interval.ms`: how often every partition, idle or not, applies
    /// `retention.ms` and `retention.bytes` (Kafka's default 300,000).
    pub retention_check_interval_ms: u64,
    /// Most partitions of one shard holding an append buffer at once; an append beyond it
    /// waits for one to be handed back (default
    /// [`crate::shard::APPEND_BUFFERS_MAX_DEFAULT`]). Buffer memory is then at most about this
    /// × 3 × `append.buffer.bytes` per shard.
    pub append_buffers_max: usize,
    /// Bytes of recently appended batches each shard keeps in memory for reads at the tail
    /// (default [`crate::shard::TAIL_CACHE_BYTES_DEFAULT`], 64 MiB; 0 turns the cache off).
    pub tail_cache_bytes: usize,
    /// `journal.bytes`: the size of each shard's journal (`journal-<shard>.mlj` in the data
    /// directory), which makes a commit round of any number of partitions durable with one
    /// flush. A multiple of 4096 in [`JOURNAL_BYTES_MIN`](crate::journal::JOURNAL_BYTES_MIN)
    /// (1 MiB) ..= [`JOURNAL_BYTES_MAX`](crate::journal::JOURNAL_BYTES_MAX) (64 GiB), default
    /// [`JOURNAL_BYTES_DEFAULT`](crate::journal::JOURNAL_BYTES_DEFAULT) (128 MiB); 0 turns the
    /// journal off (every round syncs its partition's own file, one fdatasync per dirty
    /// partition). A larger journal checkpoints partitions less often.
    pub journal_bytes: u64,
    /// `journal.group.window.us`: how long a journal flush waits for more rounds to join it
    /// once one waits, like BookKeeper's `journalMaxGroupWaitMSec` (default 0: no added wait;
    /// at most [`JOURNAL_GROUP_WINDOW_US_MAX`]). Rounds that arrive while a flush is in flight
    /// join the next one anyway.
    pub journal_group_window_us: u64,
    /// The log cleaner (Kafka's `log.cleaner.*`): `dedupe_buffer_bytes` and
    /// `io_max_bytes_per_second` are the engine's totals, split evenly over its shards as
    /// Kafka splits them over its cleaner threads.
    pub cleaner: CleanerConfig,
}

/// Smallest `log.cleaner.dedupe.buffer.size` per shard accepted: 64 KiB (about 2,700 keys).
pub const DEDUPE_BUFFER_BYTES_PER_SHARD_MIN: usize = 64 << 10;
/// Largest `log.cleaner.dedupe.buffer.size` accepted (Kafka's bound is 2 GiB per thread).
pub const DEDUPE_BUFFER_BYTES_MAX: usize = 64 << 30;

/// Longest `journal.group.window.us` accepted (100 ms).
pub const JOURNAL_GROUP_WINDOW_US_MAX: u64 = 100_000;

/// Most shards an engine runs.
pub const SHARDS_MAX: usize = 1024;
/// Longest check interval accepted (a year).
pub const CHECK_INTERVAL_MS_MAX: u64 = 365 * 86_400_000;
/// Most requests a shard's queue may hold (its slots are allocated up front).
pub const QUEUE_DEPTH_MAX: usize = 1 << 20;
/// Longest cluster id (Kafka's are 22-character base64 UUIDs).
pub const CLUSTER_ID_BYTES_MAX: usize = 255;
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
            clock: Arc::new(WallClock),
            producer_id_expiration_check_interval_ms:
                PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS_DEFAULT,
            retention_check_interval_ms: RETENTION_CHECK_INTERVAL_MS_DEFAULT,
            append_buffers_max: crate::shard::APPEND_BUFFERS_MAX_DEFAULT,
            tail_cache_bytes: crate::shard::TAIL_CACHE_BYTES_DEFAULT,
            journal_bytes: crate::journal::JOURNAL_BYTES_DEFAULT,
            journal_group_window_us: 0,
            cleaner: CleanerConfig::default(),
        }
    }

    /// Sets the log cleaner's settings (engine totals).
    #[must_use]
    pub fn cleaner(mut self, cleaner: CleanerConfig) -> Self {
        self.cleaner = cleaner;
        self
    }

    /// The cleaner settings of one shard: its share of the buffer and the rate.
    #[must_use]
    pub fn shard_cleaner(&self) -> CleanerConfig {
        let shards = self.shards.max(1);
        CleanerConfig {
            dedupe_buffer_bytes: self.cleaner.dedupe_buffer_bytes / shards,
            io_max_bytes_per_second: self
                .cleaner
                .io_max_bytes_per_second
                .map(|rate| (rate / shards as u64).max(1)),
            ..self.cleaner
        }
    }

    /// Sets `journal.bytes` (0: no journal).
    #[must_use]
    pub fn journal_bytes(mut self, bytes: u64) -> Self {
        self.journal_bytes = bytes;
        self
    }

    /// Sets the clock.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sets `producer.id.expiration.check.interval.ms`.
    #[must_use]
    pub fn producer_id_expiration_check_interval_ms(mut self, ms: u64) -> Self {
        self.producer_id_expiration_check_interval_ms = ms;
        self
    }

    /// Sets `log.retention.check.interval.ms`.
    #[must_use]
    pub fn retention_check_interval_ms(mut self, ms: u64) -> Self {
        self.retention_check_interval_ms = ms;
        self
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

    /// Most partitions of a shard holding an append buffer at once.
    #[must_use]
    pub fn append_buffers_max(mut self, n: usize) -> Self {
        self.append_buffers_max = n;
        self
    }

    /// Bytes of each shard's tail cache (0: off).
    #[must_use]
    pub fn tail_cache_bytes(mut self, bytes: usize) -> Self {
        self.tail_cache_bytes = bytes;
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
        let per_shard = self.cleaner.dedupe_buffer_bytes / self.shards;
        if per_shard < DEDUPE_BUFFER_BYTES_PER_SHARD_MIN
            || self.cleaner.dedupe_buffer_bytes > DEDUPE_BUFFER_BYTES_MAX
        {
            return bad(
                "log.cleaner.dedupe.buffer.size",
                format!(
                    "{} is outside [{DEDUPE_BUFFER_BYTES_PER_SHARD_MIN} per shard, {DEDUPE_BUFFER_BYTES_MAX}]",
                    self.cleaner.dedupe_buffer_bytes
                ),
            );
        }
        if self.cleaner.io_max_bytes_per_second == Some(0) {
            return bad(
                "log.cleaner.io.max.bytes.per.second",
                "must be positive".into(),
            );
        }
        if self.cleaner.backoff_ms == 0 || self.cleaner.backoff_ms > CHECK_INTERVAL_MS_MAX {
            return bad(
                "log.cleaner.backoff.ms",
                format!(
                    "{} is outside [1, {CHECK_INTERVAL_MS_MAX}]",
                    self.cleaner.backoff_ms
                ),
            );
        }
        if self.cleaner.step_bytes == 0 {
            return bad("cleaner step bytes", "must be positive".into());
        }
        if self.queue_depth == 0 || self.queue_depth > QUEUE_DEPTH_MAX {
            return bad(
                "queue_depth",
                format!("{} is outside [1, {QUEUE_DEPTH_MAX}]", self.queue_depth),
            );
        }
        for (name, ms) in [
            (
                "producer.id.expiration.check.interval.ms",
                self.producer_id_expiration_check_interval_ms,
            ),
            (
                "log.retention.check.interval.ms",
                self.retention_check_interval_ms,
            ),
        ] {
            if ms == 0 || ms > CHECK_INTERVAL_MS_MAX {
                return bad(
                    name,
                    format!("{ms} is outside [1, {CHECK_INTERVAL_MS_MAX}]"),
                );
            }
        }
        if self.cluster_id.len() > CLUSTER_ID_BYTES_MAX
            || self.cluster_id.chars().any(char::is_control)
        {
            return bad(
                "cluster.id",
                format!("at most {CLUSTER_ID_BYTES_MAX} bytes, no control characters"),
            );
        }
        if !(8..=32_768).contains(&self.io_depth) {
            return bad(
                "io_depth",
                format!("{} is outside [8, 32768]", self.io_depth),
            );
        }
        if self.append_buffers_max == 0 || self.append_buffers_max > 1 << 20 {
            return bad(
                "append_buffers_max",
                format!("{} is outside [1, 1048576]", self.append_buffers_max),
            );
        }
        if self.tail_cache_bytes > 1 << 40 {
            return bad("tail_cache_bytes", "at most 1 TiB".into());
        }
        if self.journal_bytes != 0 {
            if let Err(e) = crate::journal::check_size(self.journal_bytes) {
                return bad("journal.bytes", format!("{e}; or 0 for no journal"));
            }
        }
        if self.journal_group_window_us > JOURNAL_GROUP_WINDOW_US_MAX {
            return bad(
                "journal.group.window.us",
                format!(
                    "{} is over {JOURNAL_GROUP_WINDOW_US_MAX}",
                    self.journal_group_window_us
                ),
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

/// The `Io` of shard `shard` on `backend` with `depth` operations in flight.
pub(super) fn make_io(
    backend: &IoBackend,
    depth: u32,
    shard: usize,
) -> Result<Box<dyn Io>, EngineError> {
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
