//! `mirrorlog-bench`: the benchmark binary. With no arguments it runs the default suite on a
//! fresh data directory under `target/mirrorlog-bench/` (removed afterwards unless `--keep`)
//! and prints a table whose headline figures are ratios against baselines run in the same
//! process, on the same device, in rounds whose side order alternates (what each baseline
//! models: `docs/benchmark.md`):
//!
//! - `mirror-ingest`: P partitions, 1 MiB fetches of 16 KiB batches (idempotent and
//!   transactional producers, markers, an occasional barrier) appended as Mirror, one durable
//!   commit per fetch, one fetcher thread per partition. Baselines: `raw-odirect` (the same
//!   bytes, O_DIRECT through io_uring, write and fdatasync linked, one preallocated segment
//!   file per partition) and `buffered` (`pwrite` + fdatasync: Kafka's I/O model).
//! - `mirror-wide`: a mirror destination's pattern — 2,000 partitions, each fetch one 1–16 KiB
//!   batch for each of 1,000 partitions, durable per fetch. Baseline `raw-sequential`: the same
//!   bytes as one sequential O_DIRECT write and one fdatasync per fetch.
//! - `produce`: 1 KiB client batches from N caller threads, one in flight each, durable acks.
//!   Baselines: `raw-odirect` and `buffered`, one append in flight per caller too.
//! - `hot-partitions`: group commit — 64 idempotent producers with 5 appends in flight each on
//!   4 partitions; baselines `kafka-style` and `batcher-style`; then open-loop steps.
//! - `partitions`: broker scale — 10,000 partitions against 16, callers spread over them, 1 KiB
//!   durable appends; memory and disk per partition, clean and unclean open times.
//! - `restart`: clean open of 16 partitions holding 1 GiB, then 8 GiB.
//! - `recovery`: G MiB written through a partition log, stopped uncleanly, recovered; MB/s next
//!   to a raw O_DIRECT reader over the same files, and the time to the first durable append.
//! - `failover`: start/stop mirroring cycles with 0, 10 and 1000 open transactions.
//! - `tail-read`: producers append durably while consumers read at the tail; read latency and
//!   bytes/s. Baseline `buffered`: writers append + fdatasync to files, readers `pread` the
//!   new bytes from the page cache (how a Kafka consumer reads the tail).
//! - `compaction`: the log cleaner on a 1 GiB keyed log with 10 % live keys, against a raw
//!   two-pass cleaner's I/O (every segment read twice, the survivors written once, 1 MiB
//!   O_DIRECT); producers' p99 on the cleaner's shard beside it and alone; dedupe bytes per key.
//! - `producer-state`: the producer-state work alone, against a `HashMap` PSM.
//! - `broker-mirror`: two brokers over loopback, the destination mirroring the source through
//!   `POST /mirrors`, at 1,000 partitions and at 16: the destination's durable MB/s catching
//!   up, the RPO per record (source ack -> destination consumer) at half that speed, the
//!   destination's fetch-to-durable time, and every partition compared byte for byte.
//! - `broker`: 1 KiB records in 16 KiB batches produced through `mirrorlog-broker` by librdkafka
//!   (the `rdkafka` crate), against the same workload through the engine API; end-to-end
//!   latency from the ack to a long-polling consumer.
//!
//! A failed call is an error: counted per side and reported, and any error fails the run
//! (exit 1, the first error's message) unless `--keep-going`. `--json FILE` writes every figure
//! (schema in `docs/bench-json.md`), `--svg FILE` a report: per workload, throughput bars with
//! the goal line and latency percentiles per side, and hot-partitions' latency against load.

mod args;
mod baselines;
mod broker;
mod broker_mirror;
mod compaction;
mod fetch;
mod groups;
mod hot;
mod measure;
mod metrics_cost;
mod partitions;
mod report;
mod setup;
mod svg;
mod wide;
mod workloads;

use args::{parse_args, Args};
use measure::{progress, KEEP_GOING};
use mirrorlog::internals::io::FileCaching;
use report::{json, machine_facts, table};
use std::path::PathBuf;
use std::time::Instant;
use svg::svg;
use workloads::{failover, mirror_ingest, produce, producer_state, recovery_workload};

/// The first failed call of a run, for the exit message.
fn first_error(outcomes: &[measure::Outcome]) -> Option<String> {
    outcomes.iter().find_map(|o| {
        o.sides.iter().find(|s| s.errors > 0).map(|s| {
            format!(
                "{}: {} failed call(s) on {}; first: {}",
                o.workload,
                s.errors,
                s.name,
                s.first_error.as_deref().unwrap_or("?")
            )
        })
    })
}

fn run(a: &Args) -> Result<(), String> {
    // The workspace's target/ (this package is crates/mirrorlog-bench in the repository).
    let default_dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target"))
        .join("mirrorlog-bench")
        .join(format!("run-{}", std::process::id()));
    let dir = a.dir.clone().unwrap_or(default_dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("data directory {}: {e}", dir.display()))?;
    let probe = dir.join(".probe");
    std::fs::write(&probe, b"x")
        .map_err(|e| format!("data directory {} is not writable: {e}", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    if a.caching == FileCaching::Direct {
        probe_direct(&probe).inspect_err(|_| {
            if !a.keep {
                let _ = std::fs::remove_dir_all(&dir);
            }
        })?;
    }
    KEEP_GOING.store(a.keep_going, std::sync::atomic::Ordering::Relaxed);
    let started = Instant::now();
    let mut outcomes = Vec::new();
    for w in &a.workloads {
        let o = match w.as_str() {
            "mirror-ingest" => mirror_ingest(&dir, a),
            "mirror-wide" => wide::mirror_wide(&dir, a),
            "produce" => produce(&dir, a),
            "hot-partitions" => hot::hot_partitions(&dir, a),
            "partitions" => partitions::partitions(&dir, a),
            "restart" => partitions::restart(&dir, a),
            "recovery" => recovery_workload(&dir, a),
            "failover" => failover(&dir, a),
            "producer-state" => producer_state(a),
            "catch-up" => fetch::catch_up(&dir, a),
            "compaction" => compaction::compaction(&dir, a),
            "broker" => broker::broker(&dir, a),
            "broker-mirror" => broker_mirror::broker_mirror(&dir, a),
            "groups" => groups::groups(&dir, a),
            _ => fetch::tail_read(&dir, a),
        };
        match o {
            Ok(o) => {
                let failed = o.sides.iter().any(|s| s.errors > 0);
                outcomes.push(o);
                if failed && !a.keep_going {
                    // The run fails: report what ran, then the first error.
                    break;
                }
            }
            Err(e) => {
                if !a.keep {
                    let _ = std::fs::remove_dir_all(&dir);
                }
                return Err(format!("{w}: {e}"));
            }
        }
    }
    progress("");
    broker_mirror::against_wide(&mut outcomes);
    let facts = machine_facts(&dir, a.caching);
    print!("{}", table(&outcomes, &facts));
    println!(
        "total {:.1} s, data in {}{}",
        started.elapsed().as_secs_f64(),
        dir.display(),
        if a.keep { " (kept)" } else { " (removed)" }
    );
    if let Some(path) = &a.json {
        std::fs::write(path, json(&outcomes, &facts, a))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &a.svg {
        std::fs::write(path, svg(&outcomes)).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if !a.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    match first_error(&outcomes) {
        Some(e) if !a.keep_going => Err(format!("{e} (--keep-going reports errors and goes on)")),
        Some(e) => {
            eprintln!("mirrorlog-bench: errors (kept going): {e}");
            Ok(())
        }
        None => Ok(()),
    }
}

fn main() {
    // The embedded broker's (and the engine's) logs, when asked for with RUST_LOG.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    if std::env::args()
        .skip(1)
        .any(|a| a == "--version" || a == "-V")
    {
        println!("mirrorlog-bench {}", env!("CARGO_PKG_VERSION"));
        return;
    }
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Some((dir, n)) = &args.writer_child {
        if let Err(e) = partitions::writer_child(dir, *n, &args) {
            eprintln!("mirrorlog-bench writer child: {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(e) = run(&args) {
        eprintln!("mirrorlog-bench: {e}");
        std::process::exit(1);
    }
}

/// Opens `path` with O_DIRECT through io_uring: the filesystem must take it for the figures to
/// mean what they say.
fn probe_direct(path: &std::path::Path) -> Result<(), String> {
    use mirrorlog::internals::io::{self, IoError, Op, OpenOptions, UringIo};
    let mut ring = UringIo::new(4).map_err(|e| e.to_string())?;
    let options = OpenOptions {
        create: true,
        write: true,
        direct: true,
        ..OpenOptions::default()
    };
    let opened = io::open(&mut ring, path, options);
    let _ = std::fs::remove_file(path);
    match opened {
        Ok(file) => {
            let mut others = Vec::new();
            let _ = io::run(&mut ring, Op::Close { file }, &mut others);
            Ok(())
        }
        Err(IoError::DirectUnsupported { .. }) => Err(format!(
            "the filesystem of {} does not support O_DIRECT; rerun with --page-cache to \
             measure every side through the page cache (figures not comparable with O_DIRECT runs)",
            path.parent().unwrap_or(path).display()
        )),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}
