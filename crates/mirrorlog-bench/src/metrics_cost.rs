//! What the broker's metrics cost, measured beside the `broker` workload: its metrics-on and
//! metrics-off sides run as short alternating pairs (each pair meets the disk in one mood),
//! with the process's CPU time per MB of each; the counting a request costs, timed alone; and a
//! scraper of `GET /metrics` that times its scrapes.

use crate::measure::Side;
use kafka_protocol::protocol::StrBytes;
use std::time::{Duration, Instant};

/// How often the metrics-counting broker is scraped while its side runs (Prometheus' default
/// interval is 15 s: this is 15 times harsher).
pub(crate) const SCRAPE_EVERY: Duration = Duration::from_secs(1);
/// The metrics sides run as this many short pairs per round (metrics on, then off, the order
/// swapped each pair), so that each pair meets the disk in one mood; the figures are the
/// medians of the pairs' ratios.
pub(crate) const METRICS_PAIRS_PER_ROUND: usize = 4;

/// One pair of the metrics sides: each side's MB/s and process CPU seconds per MB.
#[derive(Clone, Copy)]
pub(crate) struct MetricsPair {
    pub(crate) on_mb_per_sec: f64,
    pub(crate) on_cpu_per_mb: f64,
    pub(crate) off_mb_per_sec: f64,
    pub(crate) off_cpu_per_mb: f64,
}

/// What one run of `f` added to `side`: (MB/s, process CPU seconds per MB).
pub(crate) fn measured<E>(
    side: &mut Side,
    f: impl FnOnce(&mut Side) -> Result<(), E>,
) -> Result<(f64, f64), E> {
    let (bytes, secs, cpu) = (side.bytes, side.secs, process_cpu_seconds());
    f(side)?;
    let mb = (side.bytes - bytes) as f64 / 1e6;
    let cpu = process_cpu_seconds() - cpu;
    Ok((mb / (side.secs - secs).max(1e-9), cpu / mb.max(1e-9)))
}

/// What the broker counts per Produce request of this workload (the request, its latency,
/// the topic's bytes in), done alone in this process: nanoseconds per request, the best of
/// three passes. Beside the process's CPU per request it bounds what counting costs, with none
/// of the disk's noise.
pub(crate) fn metrics_ns_per_request(topic: &'static str, bytes: u64) -> f64 {
    use mirrorlog_broker::metrics::{observe_latency, Metrics, RequestHandles};
    const N: u32 = 200_000;
    let m = Metrics::new(true);
    let mut handles = RequestHandles::default();
    let topic = StrBytes::from_static_str(topic);
    (0..3)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..N {
                let arrived = Instant::now();
                let h = m.request(&mut handles, 0, 9);
                m.bytes_in(&topic, bytes);
                observe_latency(h.as_ref(), arrived);
            }
            t.elapsed().as_nanos() as f64 / f64::from(N)
        })
        .fold(f64::INFINITY, f64::min)
}

/// The median of `v` (0 when empty).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The CPU time this process has used, user and system, all threads (`/proc/self/stat`'s
/// utime and stime, in the kernel's 100 Hz ticks); 0 where it cannot be read.
pub(crate) fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces), from the 3rd on.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are the 14th and 15th fields: the 12th and 13th after the name.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// Scrapes a side's run saw: how many answered 200, and the seconds they took in all.
#[derive(Clone, Copy, Default)]
pub(crate) struct Scrapes {
    pub(crate) answered: u64,
    pub(crate) secs: f64,
}

/// Runs `f` while a thread scrapes `GET /metrics` at `admin` every [`SCRAPE_EVERY`]; `f`'s
/// result and the scrapes.
pub(crate) fn with_scraper<T>(admin: std::net::SocketAddr, f: impl FnOnce() -> T) -> (T, Scrapes) {
    use std::io::{Read, Write};
    use std::sync::mpsc::RecvTimeoutError;
    // Dropping `stop` ends the scraper at once, not after its next sleep.
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let scraper = {
        std::thread::spawn(move || {
            let mut done = Scrapes::default();
            loop {
                let asked_at = Instant::now();
                if let Ok(mut c) = std::net::TcpStream::connect(admin) {
                    let asked = write!(
                        c,
                        "GET /metrics HTTP/1.1\r\nhost: {admin}\r\ncontent-length: 0\r\n\r\n"
                    );
                    let mut answer = String::new();
                    if asked.is_ok()
                        && c.read_to_string(&mut answer).is_ok()
                        && answer.starts_with("HTTP/1.1 200")
                    {
                        done.answered += 1;
                        done.secs += asked_at.elapsed().as_secs_f64();
                    }
                }
                if stopped.recv_timeout(SCRAPE_EVERY) != Err(RecvTimeoutError::Timeout) {
                    break;
                }
            }
            done
        })
    };
    let out = f();
    drop(stop);
    (out, scraper.join().unwrap_or_default())
}
