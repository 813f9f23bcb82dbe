//! The engine's timer thread: sends every shard a `Tick` at least once a second (sooner when a
//! check interval is shorter), so that periodic work — producer expiration, retention — reaches
//! idle partitions too. What is due is decided on the shard, by its clock; a tick that finds a
//! queue full is skipped (the next one comes soon). It stops when the engine closes.

use crate::shard::{Request, ShardHandle};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest time between two ticks.
const TICK_INTERVAL_MS_MAX: u64 = 1_000;

/// The running timer; dropping the stop sender ends it.
#[derive(Debug)]
pub(super) struct Timer {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Timer {
    /// Starts ticking `shards` every `min(interval_ms, 1 s)`.
    pub(super) fn start(shards: Vec<ShardHandle>, interval_ms: u64) -> std::io::Result<Self> {
        let period = Duration::from_millis(interval_ms.clamp(1, TICK_INTERVAL_MS_MAX));
        let (stop, stopped) = channel::<()>();
        let thread = std::thread::Builder::new()
            .name("mirrorlog-timer".into())
            .spawn(move || loop {
                match stopped.recv_timeout(period) {
                    Err(RecvTimeoutError::Timeout) => {
                        for shard in &shards {
                            // Full or stopped: skip this tick.
                            let _ = shard.try_send(Request::Tick);
                        }
                    }
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
            })?;
        Ok(Timer {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops the thread and waits for it.
    pub(super) fn stop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.stop();
    }
}
