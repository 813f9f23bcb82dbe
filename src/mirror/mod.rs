//! The fetching side of mirroring. The modes, the mode history, the barrier rule and the
//! start/stop sequences live with the partition log (`log::PartitionLog::start_mirroring`,
//! `stop_mirroring`) because recovery replays them; this module is what a destination broker
//! runs on top of the engine: a [`MirrorLink`] pumps one source partition (on one engine, the
//! source cluster) into one destination partition (on another engine) by reading at the
//! destination's log end and appending what it gets as `Origin::Mirror`, bytes untouched.

use crate::engine::{Engine, EngineError, ReadRequest, TopicPartition};
use crate::format::{BatchIter, Offset};
use crate::log::Isolation;
use crate::producer_state::Origin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Default bytes fetched per pump.
pub const FETCH_BYTES_DEFAULT: usize = 1 << 20;

/// One source partition mirrored into one destination partition.
#[derive(Debug, Clone)]
pub struct MirrorLink {
    source: Arc<Engine>,
    source_tp: TopicPartition,
    destination: Arc<Engine>,
    destination_tp: TopicPartition,
    fetch_bytes: usize,
}

/// What one pump did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pumped {
    /// Batches appended to the destination.
    pub batches: usize,
    /// Source high watermark minus destination log end after the pump.
    pub lag: i64,
}

impl MirrorLink {
    /// A link from `source_tp` on `source` to `destination_tp` on `destination` (which must be
    /// Mirroring: see `Engine::start_mirroring`).
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
            destination_tp,
            fetch_bytes: FETCH_BYTES_DEFAULT,
        }
    }

    /// Source high watermark minus destination log end.
    ///
    /// # Errors
    /// Either side's error.
    pub fn lag(&self) -> Result<i64, EngineError> {
        let source = self.source.state(&self.source_tp).wait()?;
        let destination = self.destination.state(&self.destination_tp).wait()?;
        Ok(source.high_watermark.0 - destination.log_end.0)
    }

    /// Fetches once at the destination's log end (up to the source's high watermark) and
    /// appends what came, durably. Returns what it did.
    ///
    /// # Errors
    /// Either side's error; a rejected mirrored batch leaves the destination Failed.
    pub fn pump_once(&self) -> Result<Pumped, EngineError> {
        let end = self.destination.state(&self.destination_tp).wait()?.log_end;
        let source = self.source.state(&self.source_tp).wait()?;
        if end >= source.high_watermark {
            return Ok(Pumped {
                batches: 0,
                lag: source.high_watermark.0 - end.0,
            });
        }
        let fetched = self
            .source
            .read(
                &self.source_tp,
                ReadRequest::new(end, self.fetch_bytes, Isolation::ReadUncommitted),
            )
            .wait()?;
        // Whole batches from the one holding `end`: the destination ends on a batch boundary
        // of the source, so the first batch starts exactly there.
        let batches = BatchIter::new(&fetched.records, 0).count();
        let mut last = end;
        if batches > 0 {
            let outcome = self
                .destination
                .append(&self.destination_tp, fetched.records, Origin::Mirror)
                .wait()?;
            last = Offset(outcome.last_offset.0 + 1);
        }
        Ok(Pumped {
            batches,
            lag: fetched.high_watermark.0 - last.0,
        })
    }

    /// Pumps until the destination has caught up with the source's high watermark.
    ///
    /// # Errors
    /// As [`MirrorLink::pump_once`].
    pub fn catch_up(&self) -> Result<(), EngineError> {
        while self.pump_once()?.lag > 0 {}
        Ok(())
    }

    /// Runs the link on a background thread until `stop` is set (idle pumps back off for
    /// `idle`); returns the thread, which yields the first error if one ends it.
    #[must_use]
    pub fn spawn(
        self,
        stop: Arc<AtomicBool>,
        idle: Duration,
    ) -> std::thread::JoinHandle<Result<(), EngineError>> {
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if self.pump_once()?.batches == 0 {
                    std::thread::sleep(idle);
                }
            }
            Ok(())
        })
    }
}
