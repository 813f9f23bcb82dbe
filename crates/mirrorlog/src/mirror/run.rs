//! The ways to run a [`MirrorLink`]: the blocking `catch_up`, `run_until` and `spawn`, each
//! the one mirror pipeline ([`Pipeline`]) over an [`EngineSource`], driven on the calling
//! thread by [`drive`], which any embedder may use for a pipeline of its own.

use super::destination::lock;
use super::engine_source::{EngineFetch, EngineSource};
use super::link::{LinkConfig, MirrorLink};
use super::pipeline::Pipeline;
use super::source::Source;
use crate::api::EngineError;
use crate::engine::Mode;
use crate::log::LogError;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

impl MirrorLink {
    /// The link's pipeline over its source engine, with `config`'s settings, named after the
    /// destination's mirror (its mode's `source`).
    ///
    /// # Errors
    /// The destination's state could not be read, or it is neither mirroring nor paused.
    pub fn pipeline(&self, config: &LinkConfig) -> Result<(Pipeline, EngineSource), EngineError> {
        let state = self.destination.state(&self.destination_tp).wait()?;
        let name = match state.mode {
            Mode::Mirroring { source } | Mode::Paused { source } => source,
            mode => {
                return Err(EngineError::Log {
                    partition: self.destination_tp.clone(),
                    source: LogError::NotMirroring { mode },
                })
            }
        };
        let source = EngineSource::new(
            self.source.clone(),
            [(self.source_tp.clone(), self.destination_tp.clone())],
            EngineFetch {
                max_bytes: config.fetch_bytes,
                max_wait: config.max_wait,
                min_bytes: config.min_bytes,
            },
        );
        let pipeline = Pipeline::new(
            self.destination.clone(),
            name,
            self.status.clone(),
            self.landed.clone(),
        )
        .with_appends_in_flight(config.appends_in_flight)
        .with_backoff(config.backoff_min, config.backoff_max);
        Ok((pipeline, source))
    }

    /// Mirrors until the destination holds everything the source's high watermark covered
    /// when the link last looked (fetches answer at once, no long-poll), durably.
    ///
    /// # Errors
    /// As [`MirrorLink::run_until`].
    pub fn catch_up(&self) -> Result<(), EngineError> {
        let config = LinkConfig {
            max_wait: Duration::ZERO,
            ..self.config
        };
        let (mut pipeline, mut source) = self.pipeline(&config)?;
        drive(&mut pipeline, &mut source, Pipeline::caught_up)
    }

    /// Runs the link on the calling thread until `stop` is set (noticed within the fetch's
    /// `max_wait`), then lets the appends in flight finish.
    ///
    /// # Errors
    /// An error that ends mirroring: the destination is no longer mirroring (it failed, or was
    /// stopped), or its mirror stalled ([`EngineError::MirrorStalled`]: the source sent a
    /// batch no source can have). A paused destination is waited for; other errors (disk
    /// full, a source answering out of range) are counted and retried after a backoff.
    pub fn run_until(&self, stop: &AtomicBool) -> Result<(), EngineError> {
        let (mut pipeline, mut source) = self.pipeline(&self.config)?;
        drive(&mut pipeline, &mut source, |_| stop.load(Ordering::Relaxed))
    }

    /// [`MirrorLink::run_until`] on a thread of its own.
    #[must_use]
    pub fn spawn(self, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Result<(), EngineError>> {
        std::thread::spawn(move || self.run_until(&stop))
    }
}

/// Wakes the thread that drives a pipeline (or awaits a future in [`block_on`]).
struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to its end on the calling thread, parked while it waits: the engine's calls
/// are futures that need no runtime, and neither does what is built of them alone.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

/// Why a pipeline's partitions stopped for good, if every one did: none is fetched, and each
/// either left mirroring (stopped or failed: the engine's mode says) or stalled. A paused
/// partition, or one whose mode is not read yet, is waited for.
fn ended(pipeline: &Pipeline) -> Option<EngineError> {
    if pipeline.any_active() {
        return None;
    }
    let status = lock(pipeline.status());
    let mut first = None;
    for (i, part) in pipeline.parts().iter().enumerate() {
        let stalled = status.get(i).and_then(|s| s.stalled.clone());
        let error = match (&part.mode, stalled) {
            (Some(Mode::Mirroring { source }), Some(reason)) if source == pipeline.name() => {
                EngineError::MirrorStalled {
                    partition: part.tp.clone(),
                    reason,
                }
            }
            (Some(Mode::Paused { .. }) | None, _) => return None,
            (Some(Mode::Mirroring { source }), None) if source == pipeline.name() => return None,
            (Some(mode), _) => EngineError::Log {
                partition: part.tp.clone(),
                source: LogError::NotMirroring { mode: mode.clone() },
            },
        };
        first.get_or_insert(error);
    }
    first
}

/// Runs `pipeline` over `source` on the calling thread until `done(pipeline)` (checked after
/// every turn), then lets its appends in flight finish, sending nothing more; or until every
/// partition stopped for good (the destination left mirroring, or its mirror stalled). Parks
/// while the source and the engine work, wakes for backoffs and to re-read idle partitions.
///
/// # Errors
/// Why every partition stopped for good.
pub fn drive(
    pipeline: &mut Pipeline,
    source: &mut impl Source,
    mut done: impl FnMut(&Pipeline) -> bool,
) -> Result<(), EngineError> {
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    block_on(pipeline.reread_idle());
    loop {
        let now = Instant::now();
        block_on(pipeline.turn(source, now));
        if let Some(e) = ended(pipeline) {
            block_on(pipeline.finish());
            return Err(e);
        }
        if !pipeline.draining() && done(pipeline) {
            pipeline.drain();
        }
        if pipeline.draining() && pipeline.appends_in_flight() == 0 {
            block_on(pipeline.finish());
            return Ok(());
        }
        if pipeline.poll_answers(&mut cx).is_ready() {
            continue;
        }
        let wake = pipeline.next_wake(source, now);
        std::thread::park_timeout(wake.saturating_duration_since(Instant::now()));
        if !pipeline.any_active() && Instant::now() >= wake {
            block_on(pipeline.reread_idle());
        }
    }
}
