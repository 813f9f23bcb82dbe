//! The ways to run a [`MirrorLink`]: its pipeline ([`MirrorLink::pump`], for a runtime to
//! drive), and the blocking ones on the calling thread or a thread of its own (`catch_up`,
//! `run_until`, `spawn`). Above both the link (its settings and counters) and the pump (the
//! pipeline over them).

use super::link::{ends_mirroring, LinkConfig, MirrorLink};
use super::pump::Pump;
use crate::api::EngineError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

impl MirrorLink {
    /// The link's pipeline, to drive from a runtime ([`Pump::poll_step`]) or step by step.
    #[must_use]
    pub fn pump(&self) -> Pump {
        Pump::new(self.clone())
    }

    /// Mirrors until the destination holds everything the source's high watermark covered
    /// when the link last looked (fetches answer at once, no long-poll), durably.
    ///
    /// # Errors
    /// An error that ends mirroring (see [`MirrorLink::run_until`]); transient ones are
    /// retried after a backoff.
    pub fn catch_up(&self) -> Result<(), EngineError> {
        let link = self.clone().with_config(LinkConfig {
            max_wait: Duration::ZERO,
            ..self.config
        });
        let mut pump = link.pump();
        drive(&mut pump, Pump::caught_up)
    }

    /// Runs the link on the calling thread until `stop` is set (noticed within the fetch's
    /// `max_wait`), then lets the appends in flight finish.
    ///
    /// # Errors
    /// An error that ends mirroring: the destination is no longer mirroring (it failed a
    /// batch, or was stopped), a partition is unknown, or a shard stopped. Other errors (disk
    /// full, a paused destination, a source that answers out of range above its end) are
    /// counted and retried after a backoff.
    pub fn run_until(&self, stop: &AtomicBool) -> Result<(), EngineError> {
        let mut pump = self.pump();
        drive(&mut pump, |_| stop.load(Ordering::Relaxed))
    }

    /// [`MirrorLink::run_until`] on a thread of its own.
    #[must_use]
    pub fn spawn(self, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Result<(), EngineError>> {
        std::thread::spawn(move || self.run_until(&stop))
    }
}

/// Wakes the thread that drives a pump (or awaits a future in [`block_on`]).
struct ThreadWaker(std::thread::Thread);

/// Runs `future` to its end on the calling thread, parked while it waits: the engine's calls
/// are futures that need no runtime, and neither does what is built of them alone (the
/// destination side's tests).
#[cfg(test)]
pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
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

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Steps `pump` on this thread until `done(pump)` (checked after every step), then lets its
/// appends in flight finish, fetching no more; or until an error that ends mirroring. Sleeps
/// through backoffs, parks while the engines work.
fn drive(pump: &mut Pump, mut done: impl FnMut(&Pump) -> bool) -> Result<(), EngineError> {
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if !pump.draining() && done(pump) {
            pump.drain();
        }
        if pump.draining() && pump.appends_in_flight() == 0 {
            return Ok(());
        }
        match pump.poll_step(&mut cx) {
            Poll::Ready(Ok(step)) => {
                if let Some(at) = step.wake_at {
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                }
            }
            Poll::Ready(Err(e)) if ends_mirroring(&e) => return Err(e),
            Poll::Ready(Err(_)) => {}
            // A stop is noticed within this (or the fetch's long-poll ends sooner).
            Poll::Pending => std::thread::park_timeout(Duration::from_millis(100)),
        }
    }
}
