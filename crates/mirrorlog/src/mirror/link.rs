//! One source partition mirrored into one destination partition: the link's settings, its
//! counters (shared by every clone, so an operator reads lag while the link runs), and the
//! blocking ways to run it. The pipeline itself is `pump.rs`.

use super::destination::PartStatus;
use crate::engine::{Engine, EngineError, TopicPartition};
use crate::format::Offset;
use crate::log::{LogError, Mode};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Default bytes fetched per read.
pub const FETCH_BYTES_DEFAULT: usize = 1 << 20;

/// How a link fetches and appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkConfig {
    /// Bytes asked per fetch (`max_bytes`; at least one batch comes back).
    pub fetch_bytes: usize,
    /// A fetch at the source's end waits this long for data (Kafka's `fetch.max.wait.ms`,
    /// 500 ms); zero answers at once.
    pub max_wait: Duration,
    /// Bytes a waiting fetch wants before it resolves (Kafka's `fetch.min.bytes`, 1).
    pub min_bytes: usize,
    /// Appends in flight (fetched, not yet durable) while the next fetch is out: 1 fetches
    /// only after the previous append committed.
    pub appends_in_flight: usize,
    /// First wait after an error; doubles on every further error, up to `backoff_max`, each
    /// wait jittered by ±20 % (as a broker mirror's partitions back off).
    pub backoff_min: Duration,
    /// Longest wait after errors.
    pub backoff_max: Duration,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            fetch_bytes: FETCH_BYTES_DEFAULT,
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            appends_in_flight: 4,
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_secs(1),
        }
    }
}

/// What a link has done, and how far behind it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Reads answered by the source.
    pub fetches: u64,
    /// Batches appended to the destination, durably.
    pub batches: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Times the destination was realigned at the source's log start (its retention passed
    /// the destination's end).
    pub realigns: u64,
    /// Errors met (each followed by a backoff, or the end of the link).
    pub errors: u64,
    /// The destination's durable end the link has seen (its next fetch offset).
    pub mirrored_end: Offset,
    /// The source's high watermark at its last answer.
    pub source_high_watermark: Offset,
    /// `source_high_watermark - mirrored_end`.
    pub lag_offsets: i64,
    /// The source's durable bytes after the last fetch, plus those fetched and not yet
    /// durable on the destination.
    pub lag_bytes: u64,
    /// The last error, as text.
    pub last_error: Option<String>,
    /// How far behind the source, in time, the destination's durable end is, in ms: the age
    /// of the first source answer whose high watermark covered the first offset not yet
    /// durable here (0 when caught up; `None` before the source's first answer). Computed
    /// when the stats are read, as a broker's mirror computes it
    /// ([`super::destination::PartStatus::lag_ms`]).
    pub lag_ms: Option<u64>,
}

/// One source partition mirrored into one destination partition. Cloning shares the counters.
#[derive(Debug, Clone)]
pub struct MirrorLink {
    pub(super) source: Arc<Engine>,
    pub(super) source_tp: TopicPartition,
    pub(super) destination: Arc<Engine>,
    pub(super) destination_tp: TopicPartition,
    pub(super) config: LinkConfig,
    pub(super) stats: Arc<Mutex<LinkStats>>,
    /// The source's high watermarks as its answers showed them, for the lag in time.
    pub(super) sightings: Arc<Mutex<PartStatus>>,
}

impl MirrorLink {
    /// A link from `source_tp` on `source` to `destination_tp` on `destination` (which must be
    /// Mirroring: see `Engine::start_mirroring`), with the default [`LinkConfig`].
    #[must_use]
    pub fn new(
        source: Arc<Engine>,
        source_tp: TopicPartition,
        destination: Arc<Engine>,
        destination_tp: TopicPartition,
    ) -> Self {
        MirrorLink {
            source,
            source_tp,
            destination,
            config: LinkConfig::default(),
            stats: Arc::new(Mutex::new(LinkStats::default())),
            sightings: Arc::new(Mutex::new(PartStatus::new(destination_tp.clone()))),
            destination_tp,
        }
    }

    /// The same link with other settings (the counters stay shared).
    #[must_use]
    pub fn with_config(mut self, config: LinkConfig) -> Self {
        self.config = config;
        self
    }

    /// The link's settings.
    #[must_use]
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// A snapshot of the counters, with the lag in time as of now.
    #[must_use]
    pub fn stats(&self) -> LinkStats {
        let mut stats = self.stats.lock().map(|s| s.clone()).unwrap_or_default();
        if let Ok(s) = self.sightings.lock() {
            stats.lag_ms = s.lag_ms(stats.mirrored_end.0, Instant::now());
        }
        stats
    }

    /// Source high watermark minus destination log end, asked of both sides now.
    ///
    /// # Errors
    /// Either side's error.
    pub fn lag(&self) -> Result<i64, EngineError> {
        let source = self.source.state(&self.source_tp).wait()?;
        let destination = self.destination.state(&self.destination_tp).wait()?;
        Ok(source.high_watermark.0 - destination.log_end.0)
    }
}

/// Whether an error ends mirroring rather than being retried.
pub(super) fn ends_mirroring(e: &EngineError) -> bool {
    match e {
        // A paused destination is waited for (backoff); a failed or stopped one ends it.
        EngineError::Log { source, .. } => {
            source.fails_a_mirror()
                || matches!(
                    source,
                    LogError::NotMirroring { mode } if !matches!(mode, Mode::Paused { .. })
                )
                || matches!(source, LogError::ModeTransition { .. })
        }
        EngineError::UnknownPartition(_)
        | EngineError::InvalidPartition(_)
        | EngineError::Failed { .. }
        | EngineError::ShardStopped(_) => true,
        _ => false,
    }
}
