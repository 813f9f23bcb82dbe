//! The partition log's write path against the device limit, measured in the same run.
//!
//! Workload (issue "Partition log"): 16 KiB batches appended as Mirror in 1 MiB chunks, one
//! durable commit per chunk, `MIRRORLOG_BENCH_BYTES` in total (default 1 GiB) per side.
//! Baseline: a raw io_uring O_DIRECT sequential writer with the same write size (1 MiB) and
//! fdatasync cadence (one per MiB) into a preallocated file. The two alternate in slices of
//! 256 MiB so drift on this shared machine hits both; the headline is the throughput ratio.
//! Latency per commit (append to durable) is recorded with hdrhistogram.
//! `MIRRORLOG_TASKRUN=deferred|cooperative|interrupt` picks the ring's task-work mode.
//!
//! The log side runs as a shard would: the next chunk is validated and copied into the append
//! buffer while the current chunk's round (pages + commit record, then fdatasync) is in flight,
//! and rounds stay one per chunk, so the device sees the same write size and sync cadence as
//! the raw writer.

use hdrhistogram::Histogram;
use mirrorlog::api::Origin;
use mirrorlog::format::{self, BatchBuilder, BatchOptions, Offset, ProducerFields, RecordSpec};
use mirrorlog::internals::io::{
    self, AlignedBuf, FallocateMode, Io, Op, OpenOptions, TaskRun, UringIo,
};
use mirrorlog::internals::log::{LogConfig, MirrorStart, PartitionLog};
use mirrorlog::internals::segment::SegmentConfig;
use std::time::Instant;

const CHUNK_BYTES: usize = 1 << 20;
const BATCH_BYTES: usize = 16 << 10;
const SLICE_BYTES: u64 = 256 << 20;

thread_local! {
    static ROUND_START: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
    static ROUND_US: std::cell::RefCell<Histogram<u64>> = std::cell::RefCell::new(Histogram::new(3).unwrap());
    /// Time spent in `append` (validation, staging, copy), to split commit latency.
    static APPEND_US: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn template_batch() -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        producer: ProducerFields {
            producer_id: 1,
            producer_epoch: 0,
            base_sequence: 0,
        },
        ..BatchOptions::default()
    });
    let value = [0x61u8; 1000];
    while b.size_bytes() + 1020 <= BATCH_BYTES {
        b.push(RecordSpec {
            timestamp: 1_764_403_200_000,
            key: None,
            value: Some(&value),
            headers: &[],
        });
    }
    b.build()
}

fn raw_slice(
    io: &mut UringIo,
    dir: &std::path::Path,
    bytes: u64,
    latency: &mut Histogram<u64>,
) -> f64 {
    let path = dir.join("raw.bin");
    let file = io::open(
        io,
        &path,
        OpenOptions {
            create: true,
            write: true,
            direct: true,
            directory: false,
        },
    )
    .unwrap();
    let mut others = Vec::new();
    io::run(
        io,
        Op::Fallocate {
            file,
            offset: 0,
            len: bytes,
            mode: FallocateMode::Extend,
        },
        &mut others,
    )
    .unwrap()
    .result
    .unwrap();
    let mut buf = AlignedBuf::new(CHUNK_BYTES);
    buf.as_mut_slice().fill(0x61);
    let start = Instant::now();
    let mut offset = 0;
    while offset < bytes {
        let t = Instant::now();
        let c = io::run(
            io,
            Op::Write {
                file,
                offset,
                buf,
                range: 0..CHUNK_BYTES,
            },
            &mut others,
        )
        .unwrap();
        c.result.unwrap();
        buf = c.buf.unwrap();
        io::run(io, Op::Fdatasync { file }, &mut others)
            .unwrap()
            .result
            .unwrap();
        latency.record(t.elapsed().as_micros() as u64).unwrap();
        offset += CHUNK_BYTES as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    io::run(io, Op::Close { file }, &mut others)
        .unwrap()
        .result
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    secs
}

fn log_slice(
    io: &mut UringIo,
    dir: &std::path::Path,
    bytes: u64,
    template: &[u8],
    latency: &mut Histogram<u64>,
) -> f64 {
    let part = dir.join("log");
    std::fs::create_dir_all(&part).unwrap();
    let config = LogConfig {
        segment: SegmentConfig {
            segment_bytes: bytes + (1 << 20),
            index_interval_bytes: 4096,
            commit_buffer_bytes: 2 * CHUNK_BYTES,
            preallocate_step_bytes: mirrorlog::internals::segment::PREALLOCATE_STEP_BYTES_DEFAULT,
        },
        ..LogConfig::default()
    };
    let mut log = PartitionLog::create(io, &part, config).unwrap();
    log.start_mirroring(io, "source", MirrorStart::Offset(Offset(0)))
        .unwrap();
    let batches_per_chunk = CHUNK_BYTES / template.len();
    let records = i64::from(
        format::inspect(template, 0)
            .unwrap()
            .header()
            .last_offset_delta,
    ) + 1;
    // The fetched chunk is workload, not engine work: build it once and only re-stamp the base
    // offsets (8 bytes per batch) for each append.
    let mut chunk = Vec::with_capacity(CHUNK_BYTES);
    for _ in 0..batches_per_chunk {
        chunk.extend_from_slice(template);
    }
    let mut next = 0i64;
    let mut written = 0u64;
    let mut completions = Vec::new();
    // When each appended chunk started, for its commit latency (append to durable).
    let mut waiting: Option<Instant> = None;
    let mut in_round: Option<Instant> = None;
    let start = Instant::now();
    while written < bytes || waiting.is_some() || in_round.is_some() {
        if written < bytes && waiting.is_none() {
            for at in (0..chunk.len()).step_by(template.len()) {
                format::stamp_base_offset(&mut chunk[at..], Offset(next)).unwrap();
                next += records;
            }
            let t = Instant::now();
            log.append(io, &chunk, Origin::Mirror).unwrap();
            APPEND_US.with(|a| a.set(a.get() + t.elapsed().as_micros() as u64));
            written += chunk.len() as u64;
            waiting = Some(t);
        }
        // One round per chunk, as the raw writer syncs once per MiB: the next chunk's
        // validation and copy overlap the current round's I/O.
        if in_round.is_none() {
            if let Some(t) = waiting.take() {
                assert!(log.start_commit(io).unwrap());
                // Out now, before the next chunk's validation and copy (as the shard's loop
                // does when it reaps before taking more requests).
                io.flush().unwrap();
                ROUND_START.with(|r| r.set(Some(Instant::now())));
                in_round = Some(t);
            }
        }
        if let Some(t) = in_round {
            if written < bytes && waiting.is_none() {
                continue;
            }
            io.complete(1, &mut completions).unwrap();
            for c in completions.drain(..) {
                if log.on_completion(c).unwrap().is_some() {
                    let started = ROUND_START.with(|r| r.get()).unwrap();
                    ROUND_US.with(|h| {
                        h.borrow_mut()
                            .record(started.elapsed().as_micros() as u64)
                            .unwrap()
                    });
                    latency.record(t.elapsed().as_micros() as u64).unwrap();
                    in_round = None;
                }
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    drop(log);
    std::fs::remove_dir_all(&part).unwrap();
    secs * bytes as f64 / written as f64
}

fn main() {
    // `cargo test --benches` runs bench targets without `--bench`: do a token amount of work.
    let quick = !std::env::args().any(|a| a == "--bench");
    let total: u64 = std::env::var("MIRRORLOG_BENCH_BYTES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 8 << 20 } else { 1 << 30 });
    let slice = SLICE_BYTES.min(total);
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let task_run = match std::env::var("MIRRORLOG_TASKRUN").as_deref() {
        Ok("cooperative") => TaskRun::Cooperative,
        Ok("interrupt") => TaskRun::Interrupt,
        _ => TaskRun::Deferred,
    };
    let mut io = UringIo::with_task_run(64, task_run).unwrap();
    let template = template_batch();
    let (mut raw_hist, mut log_hist) = (
        Histogram::<u64>::new(3).unwrap(),
        Histogram::<u64>::new(3).unwrap(),
    );
    let (mut raw_secs, mut log_secs) = (0.0, 0.0);
    let mut done = 0;
    while done < total {
        raw_secs += raw_slice(&mut io, dir.path(), slice, &mut raw_hist);
        log_secs += log_slice(&mut io, dir.path(), slice, &template, &mut log_hist);
        done += slice;
        eprintln!("log_append: {} of {} MiB per side", done >> 20, total >> 20);
    }
    let mbps = |secs: f64| done as f64 / secs / 1e6;
    println!(
        "log append vs raw O_DIRECT, {} MiB per side, 1 MiB commits of 16 KiB batches ({} B each):",
        done >> 20,
        template.len()
    );
    println!(
        "  raw O_DIRECT write+fdatasync: {:8.1} MB/s  commit latency p50 {} us p99 {} us p99.9 {} us",
        mbps(raw_secs),
        raw_hist.value_at_quantile(0.5),
        raw_hist.value_at_quantile(0.99),
        raw_hist.value_at_quantile(0.999)
    );
    println!(
        "  partition log append+commit:  {:8.1} MB/s  commit latency p50 {} us p99 {} us p99.9 {} us",
        mbps(log_secs),
        log_hist.value_at_quantile(0.5),
        log_hist.value_at_quantile(0.99),
        log_hist.value_at_quantile(0.999)
    );
    println!("  ratio log/raw: {:.3} (goal >= 0.90)", raw_secs / log_secs);
    ROUND_US.with(|h| {
        let h = h.borrow();
        println!(
            "  log round alone (start of round to durable): p50 {} us p99 {} us",
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.99)
        );
    });
    let commits = log_hist.len().max(1);
    println!(
        "  of which append (validate, stage, copy): {} us per 1 MiB commit on average",
        APPEND_US.with(|a| a.get()) / commits
    );
}
