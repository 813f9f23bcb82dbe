//! What every workload measures: a side (ops, bytes, seconds, errors, a latency histogram), a
//! workload's outcome, the timed loop that drives caller threads, the order sides run in, and
//! the progress line.

use hdrhistogram::Histogram;
use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// `--keep-going`: a failed call is counted and reported, and the run goes on (it still exits
/// non-zero unless this is set).
pub(crate) static KEEP_GOING: AtomicBool = AtomicBool::new(false);

/// A latency histogram from 1 µs to 10 minutes, 3 significant digits.
pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).unwrap_or_else(|_| unreachable!())
}

/// One measured side of a comparison. Only successful calls are ops (with bytes and latency);
/// a failed call is an error.
pub(crate) struct Side {
    pub(crate) name: String,
    pub(crate) ops: u64,
    pub(crate) bytes: u64,
    pub(crate) secs: f64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
    /// fdatasyncs the side issued, where it counts them (`None`: not counted).
    pub(crate) fdatasyncs: Option<u64>,
    pub(crate) latency_us: Histogram<u64>,
}

impl Side {
    pub(crate) fn new(name: &str) -> Self {
        Side {
            name: name.to_string(),
            ops: 0,
            bytes: 0,
            secs: 0.0,
            errors: 0,
            first_error: None,
            fdatasyncs: None,
            latency_us: histogram(),
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
    /// Adds `other`'s errors (a helper thread's, say) to this side's.
    pub(crate) fn absorb_errors(&mut self, errors: &Errors) {
        let (n, first) = errors.take();
        self.errors += n;
        if self.first_error.is_none() {
            self.first_error = first;
        }
    }
}

/// Errors counted by threads that are not timed (a tail-read producer, say).
#[derive(Default)]
pub(crate) struct Errors(Mutex<(u64, Option<String>)>);

impl Errors {
    pub(crate) fn record(&self, e: impl std::fmt::Display) {
        let mut g = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        g.0 += 1;
        g.1.get_or_insert_with(|| e.to_string());
    }
    fn take(&self) -> (u64, Option<String>) {
        let mut g = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (std::mem::take(&mut g.0), g.1.take())
    }
}

/// A workload's result: our side and the baselines.
pub(crate) struct Outcome {
    pub(crate) workload: &'static str,
    pub(crate) unit: &'static str,
    pub(crate) sides: Vec<Side>,
    pub(crate) notes: Vec<String>,
    /// Extra series for the report (hot-partitions' open-loop steps), by side name.
    pub(crate) steps: Vec<Step>,
    /// Figures that are not a side's rate (memory and disk per partition, open times).
    pub(crate) figures: Vec<Figure>,
}

/// One measured figure of a workload, with its unit.
pub(crate) struct Figure {
    pub(crate) name: &'static str,
    pub(crate) value: f64,
    pub(crate) unit: &'static str,
}

impl Figure {
    pub(crate) fn new(name: &'static str, value: f64, unit: &'static str) -> Self {
        Figure { name, value, unit }
    }
}

/// One open-loop step of one side: the offered rate and the latency measured from each
/// append's scheduled send time.
pub(crate) struct Step {
    pub(crate) side: String,
    pub(crate) offered_per_sec: f64,
    pub(crate) achieved_per_sec: f64,
    pub(crate) errors: u64,
    pub(crate) latency_us: Histogram<u64>,
}

/// The order in which `n` sides run in round `round`: forward in even rounds, backward in odd
/// ones (ABC CBA: every side runs first and last equally often, and each pair of sides has each
/// order once per two rounds).
pub(crate) fn order(round: usize, n: usize) -> Vec<usize> {
    if round.is_multiple_of(2) {
        (0..n).collect()
    } else {
        (0..n).rev().collect()
    }
}

/// The progress line, on stderr, only when stderr is a terminal (a redirected run's output
/// stays free of escape sequences).
pub(crate) fn progress(what: &str) {
    let mut err = std::io::stderr();
    if err.is_terminal() {
        let _ = write!(err, "\r\x1b[K{what}");
        let _ = err.flush();
    }
}

/// Runs `one(thread, iteration) -> Ok(bytes) | Err(why)` on `threads` threads for `secs`,
/// timing each successful call. A failed call is an error, not an op; without `--keep-going`
/// its thread stops there (the run fails anyway).
pub(crate) fn timed(
    side: &mut Side,
    threads: usize,
    secs: f64,
    one: &(dyn Fn(usize, u64) -> Result<u64, String> + Sync),
) {
    let barrier = Barrier::new(threads);
    let keep_going = KEEP_GOING.load(Ordering::Relaxed);
    type ThreadResult = (u64, u64, Histogram<u64>, u64, Option<String>);
    let results: Vec<ThreadResult> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut h = histogram();
                    barrier.wait();
                    let deadline = Instant::now() + Duration::from_secs_f64(secs);
                    let (mut n, mut bytes, mut errors) = (0u64, 0u64, 0u64);
                    let mut first = None;
                    let mut i = 0u64;
                    while Instant::now() < deadline {
                        let t0 = Instant::now();
                        match one(t, i) {
                            Ok(b) => {
                                let _ = h.record((t0.elapsed().as_micros() as u64).max(1));
                                bytes += b;
                                n += 1;
                            }
                            Err(e) => {
                                errors += 1;
                                first.get_or_insert(e);
                                if !keep_going {
                                    break;
                                }
                            }
                        }
                        i += 1;
                    }
                    (n, bytes, h, errors, first)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    side.secs += secs;
    for (n, bytes, h, errors, first) in results {
        side.ops += n;
        side.bytes += bytes;
        side.errors += errors;
        if side.first_error.is_none() {
            side.first_error = first;
        }
        let _ = side.latency_us.add(h);
    }
}
