//! `mirrorlog-bench`: the benchmark binary. With no arguments it runs the default suite on a
//! fresh data directory under `target/mirrorlog-bench/` (removed afterwards unless `--keep`)
//! and prints a table whose headline figures are ratios against baselines run in the same
//! process, interleaved, on the same device:
//!
//! - `mirror-ingest`: P partitions, 1 MiB fetches of 16 KiB batches (idempotent and
//!   transactional producers, markers, an occasional barrier) appended as Mirror, one durable
//!   commit per fetch, one fetcher thread per partition. Baselines: `raw-odirect` (the same
//!   writes, aligned O_DIRECT through io_uring, fdatasync per MiB, one file per partition) and
//!   `buffered` (write(2) + fdatasync per MiB: Kafka's I/O model).
//! - `produce`: 1 KiB client batches from N caller threads, durable acks. Baselines:
//!   `raw-odirect` (one aligned page write + fdatasync per append) and `buffered`.
//! - `recovery`: G MiB written through a partition log, stopped uncleanly, recovered; MB/s next
//!   to a raw O_DIRECT reader over the same files, and the time to the first durable append.
//! - `failover`: start/stop mirroring cycles with 0, 10 and 1000 open transactions.
//! - `tail-read`: producers append durably while consumers read at the tail; read latency and
//!   bytes/s. Baseline `buffered`: writers append + fdatasync to files, readers `pread` the
//!   new bytes from the page cache (how a Kafka consumer reads the tail).
//!
//! `--json FILE` writes every figure (schema in `docs/bench-json.md`), `--svg FILE` a latency
//! CDF of `produce` (ours against the baselines).

use hdrhistogram::Histogram;
use mirrorlog::engine::{
    Engine, EngineConfig, MirrorStart, OpenTransactions, PartitionConfig, StartMirroring,
    StopMirroring, TopicPartition,
};
use mirrorlog::format::{
    self, BarrierSpec, BatchBuilder, BatchOptions, MarkerSpec, Offset, ProducerFields, RecordSpec,
};
use mirrorlog::io::{self, AlignedBuf, FallocateMode, Io, Op, OpenOptions, UringIo};
use mirrorlog::log::{LogConfig, PartitionLog};
use mirrorlog::producer_state::Origin;
use mirrorlog::recovery;
use mirrorlog::segment::{self, SegmentConfig};
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

const WORKLOADS: [&str; 5] = [
    "mirror-ingest",
    "produce",
    "recovery",
    "failover",
    "tail-read",
];
const FETCH_BYTES: usize = 1 << 20;
const MIRROR_BATCH_BYTES: usize = 16 << 10;

struct Args {
    workloads: Vec<String>,
    dir: Option<PathBuf>,
    keep: bool,
    json: Option<PathBuf>,
    svg: Option<PathBuf>,
    seconds: f64,
    partitions: usize,
    callers: usize,
    recovery_mib: u64,
}

fn usage() -> String {
    format!(
        "usage: mirrorlog-bench [WORKLOAD...] [--dir DIR] [--keep] [--json FILE] [--svg FILE]\n\
         \x20                      [--seconds S] [--partitions P] [--callers N] [--recovery-mib M]\n\
         workloads: {} (default: all)",
        WORKLOADS.join(", ")
    )
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        workloads: Vec::new(),
        dir: None,
        keep: false,
        json: None,
        svg: None,
        seconds: 3.0,
        partitions: 16,
        callers: 32,
        recovery_mib: 1024,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--dir" => a.dir = Some(value("--dir")?.into()),
            "--keep" => a.keep = true,
            "--json" => a.json = Some(value("--json")?.into()),
            "--svg" => a.svg = Some(value("--svg")?.into()),
            "--seconds" => {
                a.seconds = value("--seconds")?
                    .parse()
                    .ok()
                    .filter(|&s: &f64| s > 0.0 && s <= 3600.0)
                    .ok_or("--seconds takes a number in (0, 3600]")?;
            }
            "--partitions" => {
                a.partitions = value("--partitions")?
                    .parse()
                    .ok()
                    .filter(|&p: &usize| (1..=4096).contains(&p))
                    .ok_or("--partitions takes 1..=4096")?;
            }
            "--callers" => {
                a.callers = value("--callers")?
                    .parse()
                    .ok()
                    .filter(|&n: &usize| (1..=1024).contains(&n))
                    .ok_or("--callers takes 1..=1024")?;
            }
            "--recovery-mib" => {
                a.recovery_mib = value("--recovery-mib")?
                    .parse()
                    .ok()
                    .filter(|&m: &u64| (16..=1 << 20).contains(&m))
                    .ok_or("--recovery-mib takes 16..=1048576")?;
            }
            "-h" | "--help" => return Err(usage()),
            w if WORKLOADS.contains(&w) => a.workloads.push(w.to_string()),
            other => return Err(format!("unknown argument {other:?}\n{}", usage())),
        }
    }
    if a.workloads.is_empty() {
        a.workloads = WORKLOADS.iter().map(|s| s.to_string()).collect();
    }
    Ok(a)
}

/// One measured side of a comparison.
struct Side {
    name: String,
    ops: u64,
    bytes: u64,
    secs: f64,
    latency_us: Histogram<u64>,
}

impl Side {
    fn new(name: &str) -> Self {
        Side {
            name: name.to_string(),
            ops: 0,
            bytes: 0,
            secs: 0.0,
            latency_us: Histogram::new_with_bounds(1, 600_000_000, 3)
                .unwrap_or_else(|_| unreachable!()),
        }
    }
    fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }
    fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.secs.max(1e-9) / 1e6
    }
    fn q(&self, q: f64) -> u64 {
        self.latency_us.value_at_quantile(q)
    }
}

/// A workload's result: our side and the baselines.
struct Outcome {
    workload: &'static str,
    unit: &'static str,
    sides: Vec<Side>,
    notes: Vec<String>,
}

fn progress(what: &str) {
    eprint!("\r\x1b[K{what}");
    let _ = std::io::stderr().flush();
}

/// Runs `one(thread, iteration) -> bytes` on `threads` threads for `secs`, timing each call.
fn timed(side: &mut Side, threads: usize, secs: f64, one: &(dyn Fn(usize, u64) -> u64 + Sync)) {
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

/// `count` files of `len` bytes each, preallocated, for the O_DIRECT baseline.
struct RawFiles {
    paths: Vec<PathBuf>,
    positions: Vec<AtomicU64>,
    len: u64,
}

impl RawFiles {
    fn new(dir: &Path, count: usize, len: u64) -> Result<Self, String> {
        let mut io = UringIo::new(8).map_err(|e| e.to_string())?;
        let mut paths = Vec::new();
        for i in 0..count {
            let path = dir.join(format!("raw-{i}"));
            let file = io::open(
                &mut io,
                &path,
                OpenOptions {
                    create: true,
                    write: true,
                    direct: true,
                    ..OpenOptions::default()
                },
            )
            .map_err(|e| format!("{}: {e} (O_DIRECT unsupported?)", path.display()))?;
            let mut others = Vec::new();
            for op in [
                Op::Fallocate {
                    file,
                    offset: 0,
                    len,
                    mode: FallocateMode::Extend,
                },
                Op::Fsync { file },
                Op::Close { file },
            ] {
                io::run(&mut io, op, &mut others)
                    .and_then(|c| c.result)
                    .map_err(|e| e.to_string())?;
            }
            paths.push(path);
        }
        Ok(RawFiles {
            positions: (0..count).map(|_| AtomicU64::new(0)).collect(),
            paths,
            len,
        })
    }

    /// Writes `bytes` (page-rounded) at the file's next position with O_DIRECT, then
    /// fdatasync, through a ring of the calling thread.
    fn write_sync(&self, io: &mut UringIo, file: io::FileId, i: usize, bytes: usize) -> u64 {
        let span = bytes.div_ceil(4096) * 4096;
        let mut at = self.positions[i].fetch_add(span as u64, Ordering::Relaxed);
        if at + span as u64 > self.len {
            self.positions[i].store(span as u64, Ordering::Relaxed);
            at = 0;
        }
        let mut buf = AlignedBuf::new(span);
        buf.as_mut_slice().fill(0x5a);
        let mut others = Vec::new();
        let ok = io::run(
            io,
            Op::Write {
                file,
                offset: at,
                buf,
                range: 0..span,
            },
            &mut others,
        )
        .and_then(|c| c.result)
        .and_then(|_| io::run(io, Op::Fdatasync { file }, &mut others).and_then(|c| c.result));
        if ok.is_ok() {
            bytes as u64
        } else {
            0
        }
    }
}

/// A baseline thread's ring and its open files.
type ThreadRing = (UringIo, Vec<io::FileId>);

/// A raw-odirect side: each thread opens its own ring and its files.
fn raw_side(
    side: &mut Side,
    raw: &RawFiles,
    threads: usize,
    secs: f64,
    bytes: usize,
    files_per_thread: usize,
) {
    let rings: Vec<std::sync::Mutex<Option<ThreadRing>>> =
        (0..threads).map(|_| std::sync::Mutex::new(None)).collect();
    timed(side, threads, secs, &|t, n| {
        let mut slot = rings[t]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            let Ok(mut io) = UringIo::new(8) else {
                return 0;
            };
            let files = (0..files_per_thread)
                .filter_map(|k| {
                    io::open(
                        &mut io,
                        &raw.paths[(t * files_per_thread + k) % raw.paths.len()],
                        OpenOptions {
                            write: true,
                            direct: true,
                            ..OpenOptions::default()
                        },
                    )
                    .ok()
                })
                .collect();
            *slot = Some((io, files));
        }
        let Some((io, files)) = slot.as_mut() else {
            return 0;
        };
        let k = (n as usize) % files.len().max(1);
        let Some(&file) = files.get(k) else { return 0 };
        raw.write_sync(
            io,
            file,
            (t * files_per_thread + k) % raw.paths.len(),
            bytes,
        )
    });
}

/// A buffered side: write(2) + fdatasync per operation on per-thread files.
fn buffered_side(side: &mut Side, dir: &Path, threads: usize, secs: f64, bytes: usize, tag: &str) {
    let files: Vec<std::fs::File> = (0..threads)
        .filter_map(|t| {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .read(true)
                .write(true)
                .open(dir.join(format!("buffered-{tag}-{t}")))
                .ok()
        })
        .collect();
    let positions: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    let data = vec![0x5au8; bytes];
    timed(side, threads, secs, &|t, _| {
        let Some(f) = files.get(t) else { return 0 };
        let at = positions[t].fetch_add(bytes as u64, Ordering::Relaxed);
        if f.write_all_at(&data, at)
            .and_then(|()| f.sync_data())
            .is_ok()
        {
            bytes as u64
        } else {
            0
        }
    });
}

/// The 1 MiB mirrored fetch of one partition: 16 KiB batches of 4 idempotent producers, a
/// transaction with its COMMIT marker, and every fourth fetch a barrier (the source failed
/// over once), with base offsets from `base`.
fn fetch_template(partition: usize) -> Vec<Vec<u8>> {
    let mut batches = Vec::new();
    let mut size = 0;
    let mut seq = [0i32; 6];
    let value = vec![0x61u8; 1000];
    let mut i = 0usize;
    while size + MIRROR_BATCH_BYTES <= FETCH_BYTES - 256 {
        let p = i % 5;
        let pid = (partition * 10 + p) as i64;
        let mut b = BatchBuilder::new(BatchOptions {
            producer: ProducerFields {
                producer_id: pid,
                producer_epoch: 0,
                base_sequence: seq[p],
            },
            transactional: p == 4,
            partition_leader_epoch: 3,
            ..BatchOptions::default()
        });
        while b.size_bytes() + 1020 <= MIRROR_BATCH_BYTES {
            b.push(RecordSpec {
                timestamp: 1_764_403_200_000,
                key: None,
                value: Some(&value),
                headers: &[],
            });
            seq[p] += 1;
        }
        let built = b.build();
        size += built.len();
        batches.push(built);
        if p == 4 {
            let m = format::build_marker(&MarkerSpec {
                base_offset: Offset(0),
                partition_leader_epoch: 3,
                producer_id: pid,
                producer_epoch: 0,
                commit: true,
                coordinator_epoch: 0,
                timestamp: 1_764_403_200_000,
            });
            size += m.len();
            batches.push(m);
        }
        i += 1;
    }
    batches
}

/// Stamps `template` at `next` into `out`; returns the offset after it.
fn stamp_fetch(template: &[Vec<u8>], next: i64, barrier: bool, out: &mut Vec<u8>) -> i64 {
    out.clear();
    let mut next = next;
    for b in template {
        let at = out.len();
        out.extend_from_slice(b);
        if format::stamp_base_offset(&mut out[at..], Offset(next)).is_err() {
            break;
        }
        next += format::inspect(b, 0).map_or(1, |v| i64::from(v.header().last_offset_delta) + 1);
    }
    if barrier {
        let at = out.len();
        out.extend_from_slice(&format::build_barrier(&BarrierSpec {
            base_offset: Offset(next),
            partition_leader_epoch: 3,
            timestamp: 1_764_403_200_000,
        }));
        let _ = at;
        next += 1;
    }
    next
}

/// Segments are preallocated: keep the footprint of many partitions modest.
fn ingest_config() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 128 << 20,
        retention_bytes: Some(256 << 20),
        ..PartitionConfig::default()
    }
}

fn produce_config() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 16 << 20,
        ..PartitionConfig::default()
    }
}

fn engine_for(dir: &Path) -> Result<Engine, String> {
    Engine::open(EngineConfig::new(dir).cluster_id("bench")).map_err(|e| e.to_string())
}

fn mirror_ingest(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let p = a.partitions;
    let slice = a.seconds / 2.0;
    let raw = RawFiles::new(dir, p, 128 << 20)?;
    let engine = engine_for(&dir.join("engine"))?;
    let tps: Vec<TopicPartition> = (0..p as i32)
        .map(|i| TopicPartition::new("ingest", i))
        .collect();
    for tp in &tps {
        engine
            .create_partition(tp, ingest_config())
            .wait()
            .map_err(|e| e.to_string())?;
        engine
            .start_mirroring(
                tp,
                StartMirroring {
                    source: "source".into(),
                    truncate_to: MirrorStart::LastStableOffset,
                },
            )
            .wait()
            .map_err(|e| e.to_string())?;
    }
    let templates: Vec<Vec<Vec<u8>>> = (0..p).map(fetch_template).collect();
    let next: Vec<AtomicU64> = (0..p).map(|_| AtomicU64::new(0)).collect();
    let batches_per_fetch = templates[0].len() as u64;
    let (mut ours, mut rawside, mut buffered) = (
        Side::new("mirrorlog"),
        Side::new("raw-odirect"),
        Side::new("buffered"),
    );
    for round in 0..2 {
        progress(&format!("mirror-ingest: round {} of 2", round + 1));
        raw_side(&mut rawside, &raw, p, slice, FETCH_BYTES, 1);
        buffered_side(&mut buffered, dir, p, slice, FETCH_BYTES, "ingest");
        timed(&mut ours, p, slice, &|t, n| {
            let mut chunk = Vec::with_capacity(FETCH_BYTES);
            let start = next[t].load(Ordering::Relaxed) as i64;
            let end = stamp_fetch(&templates[t], start, n % 4 == 3, &mut chunk);
            next[t].store(end as u64, Ordering::Relaxed);
            let len = chunk.len() as u64;
            match engine.append(&tps[t], chunk, Origin::Mirror).wait() {
                Ok(_) => len,
                Err(_) => 0,
            }
        });
    }
    engine.close().map_err(|e| e.to_string())?;
    Ok(Outcome {
        workload: "mirror-ingest",
        unit: "MB/s",
        notes: vec![format!(
            "{p} partitions, 1 MiB fetches of {batches_per_fetch} batches (16 KiB data, markers, a barrier every 4th), durable per fetch; goal >= 0.90 of raw-odirect and >= 1.5x buffered"
        )],
        sides: vec![ours, rawside, buffered],
    })
}

fn client_batch(producer: i64, seq: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        producer: ProducerFields {
            producer_id: producer,
            producer_epoch: 0,
            base_sequence: seq,
        },
        ..BatchOptions::default()
    });
    b.push(RecordSpec {
        timestamp: 1_764_403_200_000,
        key: None,
        value: Some(&[0x42; 950]),
        headers: &[],
    });
    b.build()
}

fn produce(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let n = a.callers;
    let partitions = (n * 2).max(2);
    let slice = a.seconds / 2.0;
    let raw = RawFiles::new(dir, n, 32 << 20)?;
    let engine = engine_for(&dir.join("produce"))?;
    let tps: Vec<TopicPartition> = (0..partitions as i32)
        .map(|i| TopicPartition::new("produce", i))
        .collect();
    for tp in &tps {
        engine
            .create_partition(tp, produce_config())
            .wait()
            .map_err(|e| e.to_string())?;
    }
    let seqs: Vec<AtomicI32> = (0..partitions).map(|_| AtomicI32::new(0)).collect();
    let (mut ours, mut rawside, mut buffered) = (
        Side::new("mirrorlog"),
        Side::new("raw-odirect"),
        Side::new("buffered"),
    );
    for round in 0..2 {
        progress(&format!("produce: round {} of 2", round + 1));
        raw_side(&mut rawside, &raw, n, slice, 1020, 1);
        buffered_side(&mut buffered, dir, n, slice, 1020, "produce");
        timed(&mut ours, n, slice, &|t, i| {
            let p = (t * 2 + (i % 2) as usize) % partitions;
            let seq = seqs[p].fetch_add(1, Ordering::Relaxed);
            let b = client_batch(p as i64, seq);
            let len = b.len() as u64;
            match engine.append(&tps[p], b, Origin::Client).wait() {
                Ok(_) => len,
                Err(_) => 0,
            }
        });
    }
    engine.close().map_err(|e| e.to_string())?;
    Ok(Outcome {
        workload: "produce",
        unit: "appends/s",
        notes: vec![format!(
            "{n} caller threads, {partitions} partitions, 1 KiB client batches, durable acks; goal p99 <= 2x raw-odirect's at >= 10x its appends/s"
        )],
        sides: vec![ours, rawside, buffered],
    })
}

fn recovery_workload(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let dir = dir.join("recovery");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let config = LogConfig {
        segment: SegmentConfig {
            segment_bytes: 256 << 20,
            index_interval_bytes: 4096,
            commit_buffer_bytes: 2 << 20,
        },
        ..LogConfig::default()
    };
    let total = a.recovery_mib << 20;
    let mut io = UringIo::new(64).map_err(|e| e.to_string())?;
    let mut log = PartitionLog::create(&mut io, &dir, config).map_err(|e| e.to_string())?;
    log.start_mirroring(&mut io, "source", MirrorStart::Offset(Offset(0)))
        .map_err(|e| e.to_string())?;
    let template = fetch_template(0);
    let mut chunk = Vec::new();
    let (mut next, mut written) = (0i64, 0u64);
    while written < total {
        next = stamp_fetch(&template, next, false, &mut chunk);
        log.append(&mut io, &chunk, Origin::Mirror)
            .map_err(|e| e.to_string())?;
        log.commit(&mut io).map_err(|e| e.to_string())?;
        written += chunk.len() as u64;
        progress(&format!(
            "recovery: wrote {} of {} MiB",
            written >> 20,
            total >> 20
        ));
    }
    drop(log);
    let mut ours = Side::new("mirrorlog");
    let mut raw = Side::new("raw reader");
    let mut first_append = Side::new("time to first append");
    for round in 0..2 {
        progress(&format!("recovery: round {} of 2", round + 1));
        let t = Instant::now();
        raw.bytes += raw_read(&mut io, &dir)?;
        raw.secs += t.elapsed().as_secs_f64();
        raw.ops += 1;
        let t = Instant::now();
        let mut log = recovery::recover(&mut io, &dir, config).map_err(|e| e.to_string())?;
        ours.secs += t.elapsed().as_secs_f64();
        ours.bytes += written;
        ours.ops += 1;
        // The first durable append after the start: one more mirrored fetch.
        let mut fetch = Vec::new();
        stamp_fetch(&template, log.log_end().0, false, &mut fetch);
        log.append(&mut io, &fetch, Origin::Mirror)
            .map_err(|e| e.to_string())?;
        log.commit(&mut io).map_err(|e| e.to_string())?;
        let _ = first_append
            .latency_us
            .record(t.elapsed().as_micros() as u64);
        first_append.ops += 1;
        first_append.secs += t.elapsed().as_secs_f64();
    }
    Ok(Outcome {
        workload: "recovery",
        unit: "MB/s",
        notes: vec![format!(
            "{} MiB after an unclean stop, 2 alternating rounds; time to first durable append p50 {:.3} s; goal >= 0.80 of the raw reader",
            written >> 20,
            first_append.q(0.5) as f64 / 1e6
        )],
        sides: vec![ours, raw],
    })
}

/// Reads every segment file up to its preallocated space with recovery's read size and depth.
fn raw_read(io: &mut UringIo, dir: &Path) -> Result<u64, String> {
    let names = io.list_dir(dir).map_err(|e| e.to_string())?;
    let mut bytes = 0u64;
    for b in segment::offsets_named(&names, "log") {
        let file = io::open(
            io,
            &segment::log_path(dir, b),
            OpenOptions {
                direct: true,
                ..OpenOptions::default()
            },
        )
        .map_err(|e| e.to_string())?;
        let len = io.file_len(file).map_err(|e| e.to_string())?;
        let mut reader = io::SequentialReader::new(
            file,
            0,
            len,
            recovery::READ_BYTES,
            recovery::READS_IN_FLIGHT,
        );
        while let Some(chunk) = reader.next(io).map_err(|e| e.to_string())? {
            let zeroes = chunk.data().iter().all(|&x| x == 0);
            if !zeroes {
                bytes += chunk.bytes as u64;
            }
            io.recycle(chunk.buf);
            if zeroes {
                break;
            }
        }
        reader.stop(io).map_err(|e| e.to_string())?;
        let mut others = Vec::new();
        io::run(io, Op::Close { file }, &mut others)
            .and_then(|c| c.result)
            .map_err(|e| e.to_string())?;
    }
    Ok(bytes)
}

fn failover(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let engine = engine_for(&dir.join("failover"))?;
    let tp = TopicPartition::new("failover", 0);
    engine
        .create_partition(&tp, PartitionConfig::default())
        .wait()
        .map_err(|e| e.to_string())?;
    let cycles = ((a.seconds * 5.0) as usize).clamp(5, 200);
    let mut sides = Vec::new();
    let mut epoch = 0;
    for open in [0usize, 10, 1000] {
        progress(&format!("failover: {open} open transactions"));
        let mut side = Side::new(&format!("{open} open txns"));
        for _ in 0..cycles {
            let mut at = engine
                .start_mirroring(
                    &tp,
                    StartMirroring {
                        source: "src".into(),
                        truncate_to: MirrorStart::LastStableOffset,
                    },
                )
                .wait()
                .map_err(|e| e.to_string())?;
            let mut fetched = Vec::new();
            for p in 0..=open {
                let mut b = BatchBuilder::new(BatchOptions {
                    base_offset: at,
                    producer: ProducerFields {
                        producer_id: p as i64,
                        producer_epoch: 0,
                        base_sequence: 0,
                    },
                    transactional: p > 0,
                    ..BatchOptions::default()
                });
                b.push(RecordSpec {
                    timestamp: 1_764_403_200_000,
                    key: None,
                    value: Some(&[7; 100]),
                    headers: &[],
                });
                fetched.extend(b.build());
                at = Offset(at.0 + 1);
            }
            engine
                .append(&tp, fetched, Origin::Mirror)
                .wait()
                .map_err(|e| e.to_string())?;
            epoch += 1;
            let t = Instant::now();
            engine
                .stop_mirroring(
                    &tp,
                    StopMirroring {
                        leader_epoch: epoch,
                        open_transactions: OpenTransactions::Abort,
                    },
                )
                .wait()
                .map_err(|e| e.to_string())?;
            let _ = side
                .latency_us
                .record((t.elapsed().as_micros() as u64).max(1));
            side.ops += 1;
            side.secs += t.elapsed().as_secs_f64();
        }
        sides.push(side);
    }
    engine.close().map_err(|e| e.to_string())?;
    Ok(Outcome {
        workload: "failover",
        unit: "stops/s",
        notes: vec![format!(
            "{cycles} start/stop cycles per row; stop = ABORT markers + barrier, durable"
        )],
        sides,
    })
}

fn machine_facts(dir: &Path) -> Vec<(String, String)> {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let fs = std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(dir)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    vec![
        ("cores".into(), io::available_cores().to_string()),
        ("shards".into(), io::available_cores().to_string()),
        ("kernel".into(), kernel.trim().to_string()),
        ("filesystem".into(), fs),
        ("o_direct".into(), "on".into()),
    ]
}

fn table(outcomes: &[Outcome], facts: &[(String, String)]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "machine: {}",
        facts
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    for o in outcomes {
        let _ = writeln!(out, "\n{} ({})", o.workload, o.notes.join("; "));
        let _ = writeln!(
            out,
            "  {:<22} {:>12} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
            "side", o.unit, "MB/s", "p50 us", "p90 us", "p99 us", "p99.9 us", "max us", "ratio"
        );
        let ours = &o.sides[0];
        for s in &o.sides {
            let figure = if o.unit == "MB/s" {
                s.mb_per_sec()
            } else {
                s.ops_per_sec()
            };
            let base = if o.unit == "MB/s" {
                ours.mb_per_sec()
            } else {
                ours.ops_per_sec()
            };
            let _ = writeln!(
                out,
                "  {:<22} {:>12.1} {:>10.1} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
                s.name,
                figure,
                s.mb_per_sec(),
                s.q(0.5),
                s.q(0.9),
                s.q(0.99),
                s.q(0.999),
                s.latency_us.max(),
                if std::ptr::eq(s, ours) || o.workload == "failover" {
                    String::from("-")
                } else {
                    format!("{:.2}", base / figure.max(1e-9))
                }
            );
        }
    }
    out.push_str(
        "\nratio = mirrorlog's figure / the side's figure (same run, interleaved rounds)\n",
    );
    out
}

fn json(outcomes: &[Outcome], facts: &[(String, String)], a: &Args) -> String {
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let mut out = String::from("{\n  \"schema\": \"mirrorlog-bench/1\",\n  \"machine\": {");
    out.push_str(
        &facts
            .iter()
            .map(|(k, v)| format!("\"{}\": \"{}\"", esc(k), esc(v)))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let _ = write!(
        out,
        "}},\n  \"config\": {{\"seconds\": {}, \"partitions\": {}, \"callers\": {}, \"recovery_mib\": {}}},\n  \"workloads\": [",
        a.seconds, a.partitions, a.callers, a.recovery_mib
    );
    let ws: Vec<String> = outcomes
        .iter()
        .map(|o| {
            let sides: Vec<String> = o
                .sides
                .iter()
                .map(|s| {
                    format!(
                        "{{\"name\": \"{}\", \"ops\": {}, \"bytes\": {}, \"seconds\": {:.6}, \"ops_per_sec\": {:.3}, \"mb_per_sec\": {:.3}, \"latency_us\": {{\"p50\": {}, \"p90\": {}, \"p99\": {}, \"p999\": {}, \"max\": {}}}}}",
                        esc(&s.name), s.ops, s.bytes, s.secs, s.ops_per_sec(), s.mb_per_sec(),
                        s.q(0.5), s.q(0.9), s.q(0.99), s.q(0.999), s.latency_us.max()
                    )
                })
                .collect();
            format!(
                "\n    {{\"workload\": \"{}\", \"unit\": \"{}\", \"notes\": [{}], \"sides\": [{}]}}",
                o.workload,
                o.unit,
                o.notes.iter().map(|n| format!("\"{}\"", esc(n))).collect::<Vec<_>>().join(", "),
                sides.join(", ")
            )
        })
        .collect();
    out.push_str(&ws.join(","));
    out.push_str("\n  ]\n}\n");
    out
}

/// A latency CDF (log-scaled x) of one workload's sides, as a standalone SVG.
fn svg(o: &Outcome) -> String {
    let (w, h, left, bottom) = (720.0, 420.0, 60.0, 40.0);
    let max_us = o
        .sides
        .iter()
        .map(|s| s.latency_us.max())
        .max()
        .unwrap_or(1)
        .max(10) as f64;
    let x = |us: f64| left + (us.max(1.0).log10() / max_us.log10()) * (w - left - 20.0);
    let y = |q: f64| (h - bottom) - q * (h - bottom - 20.0);
    let colors = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd"];
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{left}\" y=\"14\">{} latency CDF (x: microseconds, log scale)</text>\n",
        o.workload
    );
    let _ = writeln!(
        out,
        "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>",
        h - bottom,
        w - 20.0,
        h - bottom
    );
    let _ = writeln!(
        out,
        "<line x1=\"{left}\" y1=\"20\" x2=\"{left}\" y2=\"{}\" stroke=\"black\"/>",
        h - bottom
    );
    let mut tick = 1.0;
    while tick <= max_us {
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x(tick),
            h - bottom + 16.0,
            tick as u64
        );
        tick *= 10.0;
    }
    for (i, s) in o.sides.iter().enumerate() {
        let points: Vec<String> = (0..=200)
            .map(|k| {
                let q = f64::from(k) / 200.0;
                format!(
                    "{:.1},{:.1}",
                    x(s.latency_us.value_at_quantile(q) as f64),
                    y(q)
                )
            })
            .collect();
        let c = colors[i % colors.len()];
        let _ = writeln!(
            out,
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>",
            points.join(" ")
        );
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" fill=\"{c}\">{}</text>",
            left + 10.0,
            40.0 + 16.0 * i as f64,
            s.name
        );
    }
    out.push_str("</svg>\n");
    out
}

fn run(a: &Args) -> Result<(), String> {
    let default_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("mirrorlog-bench")
        .join(format!("run-{}", std::process::id()));
    let dir = a.dir.clone().unwrap_or(default_dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("data directory {}: {e}", dir.display()))?;
    let probe = dir.join(".probe");
    std::fs::write(&probe, b"x")
        .map_err(|e| format!("data directory {} is not writable: {e}", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    let started = Instant::now();
    let mut outcomes = Vec::new();
    for w in &a.workloads {
        let o = match w.as_str() {
            "mirror-ingest" => mirror_ingest(&dir, a),
            "produce" => produce(&dir, a),
            "recovery" => recovery_workload(&dir, a),
            "failover" => failover(&dir, a),
            _ => tail_read(&dir, a),
        };
        match o {
            Ok(o) => outcomes.push(o),
            Err(e) => {
                if !a.keep {
                    let _ = std::fs::remove_dir_all(&dir);
                }
                return Err(format!("{w}: {e}"));
            }
        }
    }
    progress("");
    eprintln!();
    let facts = machine_facts(&dir);
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
        let o = outcomes
            .iter()
            .find(|o| o.workload == "produce")
            .or(outcomes.first());
        if let Some(o) = o {
            std::fs::write(path, svg(o)).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    if !a.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&args) {
        eprintln!("mirrorlog-bench: {e}");
        std::process::exit(1);
    }
}

/// Producers append 1 KiB batches durably on `partitions` partitions while one consumer per
/// partition reads at the tail; the baseline does the same with files and the page cache.
fn tail_read(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let partitions = 4usize;
    let secs = a.seconds;
    let engine = engine_for(&dir.join("tail"))?;
    let tps: Vec<TopicPartition> = (0..partitions as i32)
        .map(|i| TopicPartition::new("tail", i))
        .collect();
    for tp in &tps {
        engine
            .create_partition(tp, produce_config())
            .wait()
            .map_err(|e| e.to_string())?;
    }
    progress("tail-read: mirrorlog");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut ours = Side::new("mirrorlog");
    std::thread::scope(|s| {
        for (p, tp) in tps.iter().enumerate() {
            let (engine, stop) = (&engine, &stop);
            s.spawn(move || {
                let mut seq = 0;
                while !stop.load(Ordering::Relaxed) {
                    let _ = engine
                        .append(tp, client_batch(p as i64, seq), Origin::Client)
                        .wait();
                    seq += 1;
                }
            });
        }
        timed(&mut ours, partitions, secs, &|t, _| {
            // Read whatever the tail holds past this consumer's position; empty reads count
            // as reads (a consumer's poll) but move no bytes.
            thread_local! {
                static POSITION: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
            }
            let at = POSITION.with(std::cell::Cell::get);
            let r = engine
                .read(
                    &tps[t],
                    mirrorlog::engine::ReadRequest {
                        offset: Offset(at),
                        max_bytes: 1 << 20,
                        isolation: mirrorlog::log::Isolation::ReadUncommitted,
                    },
                )
                .wait();
            match r {
                Ok(r) if !r.records.is_empty() => {
                    let last = format::BatchIter::new(&r.records, 0)
                        .last()
                        .map_or(at, |b| b.header().last_offset().0 + 1);
                    POSITION.with(|c| c.set(last));
                    r.records.len() as u64
                }
                _ => {
                    std::thread::yield_now();
                    0
                }
            }
        });
        stop.store(true, Ordering::Relaxed);
    });
    engine.close().map_err(|e| e.to_string())?;

    progress("tail-read: buffered");
    let files: Vec<std::fs::File> = (0..partitions)
        .filter_map(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .read(true)
                .write(true)
                .open(dir.join(format!("tail-{p}")))
                .ok()
        })
        .collect();
    let written: Vec<AtomicU64> = (0..partitions).map(|_| AtomicU64::new(0)).collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut buffered = Side::new("buffered");
    std::thread::scope(|s| {
        for p in 0..files.len() {
            let (files, written, stop) = (&files, &written, &stop);
            s.spawn(move || {
                let record = client_batch(p as i64, 0);
                while !stop.load(Ordering::Relaxed) {
                    let at = written[p].load(Ordering::Relaxed);
                    if files[p]
                        .write_all_at(&record, at)
                        .and_then(|()| files[p].sync_data())
                        .is_err()
                    {
                        break;
                    }
                    written[p].store(at + record.len() as u64, Ordering::Release);
                }
            });
        }
        timed(&mut buffered, files.len(), secs, &|t, _| {
            thread_local! {
                static READ_TO: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
            }
            let from = READ_TO.with(std::cell::Cell::get);
            let to = written[t].load(Ordering::Acquire).min(from + (1 << 20));
            if to <= from {
                std::thread::yield_now();
                return 0;
            }
            let mut buf = vec![0u8; (to - from) as usize];
            if files[t].read_exact_at(&mut buf, from).is_err() {
                return 0;
            }
            READ_TO.with(|c| c.set(to));
            to - from
        });
        stop.store(true, Ordering::Relaxed);
    });
    Ok(Outcome {
        workload: "tail-read",
        unit: "MB/s",
        notes: vec![format!(
            "{partitions} partitions, a producer each appending 1 KiB durably, a consumer each polling at the tail (empty polls count)"
        )],
        sides: vec![ours, buffered],
    })
}
