//! What every workload measures: a side (ops, bytes, seconds, a latency histogram), a
//! workload's outcome, the timed loop that drives caller threads, and the progress line.

use hdrhistogram::Histogram;
use std::io::Write as _;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// One measured side of a comparison.
pub(crate) struct Side {
    pub(crate) name: String,
    pub(crate) ops: u64,
    pub(crate) bytes: u64,
    pub(crate) secs: f64,
    pub(crate) latency_us: Histogram<u64>,
}

impl Side {
    pub(crate) fn new(name: &str) -> Self {
        Side {
            name: name.to_string(),
            ops: 0,
            bytes: 0,
            secs: 0.0,
            latency_us: Histogram::new_with_bounds(1, 600_000_000, 3)
                .unwrap_or_else(|_| unreachable!()),
        }
    }
    pub(crate) fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }
    pub(crate) fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.secs.max(1e-9) / 1e6
    }
    pub(crate) fn q(&self, q: f64) -> u64 {
        self.latency_us.value_at_quantile(q)
    }
}

/// A workload's result: our side and the baselines.
pub(crate) struct Outcome {
    pub(crate) workload: &'static str,
    pub(crate) unit: &'static str,
    pub(crate) sides: Vec<Side>,
    pub(crate) notes: Vec<String>,
}

pub(crate) fn progress(what: &str) {
    eprint!("\r\x1b[K{what}");
    let _ = std::io::stderr().flush();
}

/// Runs `one(thread, iteration) -> bytes` on `threads` threads for `secs`, timing each call.
pub(crate) fn timed(
    side: &mut Side,
    threads: usize,
    secs: f64,
    one: &(dyn Fn(usize, u64) -> u64 + Sync),
) {
    let barrier = Barrier::new(threads);
    let results: Vec<(u64, u64, Histogram<u64>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut h = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)
                        .unwrap_or_else(|_| unreachable!());
                    barrier.wait();
                    let deadline = Instant::now() + Duration::from_secs_f64(secs);
                    let (mut n, mut bytes) = (0u64, 0u64);
                    while Instant::now() < deadline {
                        let t0 = Instant::now();
                        bytes += one(t, n);
                        let _ = h.record((t0.elapsed().as_micros() as u64).max(1));
                        n += 1;
                    }
                    (n, bytes, h)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    side.secs += secs;
    for (n, bytes, h) in results {
        side.ops += n;
        side.bytes += bytes;
        let _ = side.latency_us.add(h);
    }
}
