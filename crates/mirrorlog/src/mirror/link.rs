//! One source partition mirrored into one destination partition: the link's settings and its
//! counters (shared by every clone, so an operator reads lag while the link runs). A link is a
//! thin use of the one mirror pipeline ([`super::Pipeline`]) over an [`super::EngineSource`]:
//! the same code a broker's mirror of a Kafka cluster runs. The ways to run it are `run.rs`.

use super::destination::{lock, Landed, PartStatus};
use crate::engine::{Engine, EngineError, TopicPartition};
use crate::format::Offset;
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
    /// `lag_offsets` in bytes, at the bytes per offset the link fetched (an estimate; 0
    /// before anything was fetched).
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
    /// The pipeline's status of the one partition: every run of the link keeps counting in it.
    pub(super) status: Arc<Mutex<Vec<PartStatus>>>,
    /// Its fetch answers' times from arrival to durable.
    pub(super) landed: Arc<Landed>,
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
            status: Arc::new(Mutex::new(vec![PartStatus::new(destination_tp.clone())])),
            landed: Arc::new(Landed::default()),
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
        let st = lock(&self.status);
        let Some(s) = st.first() else {
            return LinkStats::default();
        };
        let mirrored_end = Offset(s.mirrored_end);
        let source_high_watermark = Offset(s.source_high_watermark.max(0));
        let lag_offsets = (source_high_watermark.0 - mirrored_end.0).max(0);
        LinkStats {
            fetches: s.fetches,
            batches: s.batches_appended,
            bytes: s.bytes_written,
            realigns: s.realigns,
            errors: s.errors,
            mirrored_end,
            source_high_watermark,
            lag_offsets,
            lag_bytes: s.lag_bytes(lag_offsets).unwrap_or(0),
            last_error: s.last_error.clone(),
            lag_ms: s.lag_ms(mirrored_end.0, Instant::now()),
        }
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
