//! `mirror-wide`: a real mirror destination's pattern. 2,000 mirrored partitions;
//! each of 2 fetchers owns 1,000 of them, and each of its fetches carries one batch of 1–16 KiB
//! for every one of its partitions (a fetch answer of a source cluster), appended as Mirror in
//! one `Engine::append_many` call and durable per fetch (all 1,000 appends acknowledged). Baseline `raw-sequential`: the physical
//! limit of a durable fetch — each fetcher writes the same bytes as one sequential O_DIRECT
//! write into its own file (written with zeroes beforehand and reused in a ring, as the
//! journal is), with one fdatasync linked, through io_uring.
//!
//! Besides MB/s and per-fetch latency it reports the engine's write amplification (bytes it
//! wrote ÷ bytes appended) and its fdatasyncs per fetch.

use crate::args::Args;
use crate::measure::{order, progress, timed, Figure, Outcome, Side};
use crate::setup::{engine_for, mirrored_partitions, write_figures};
use mirrorlog::api::Origin;
use mirrorlog::engine::{Engine, PartitionAppend, PartitionConfig};
use mirrorlog::format::{self, BatchBuilder, BatchOptions, Offset, RecordSpec};
use mirrorlog::internals::io::{
    self, AlignedBuf, Completion, FallocateMode, FileCaching, FileId, Io, Op, OpenOptions, UringIo,
    PAGE_SIZE_BYTES,
};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

const PARTITIONS: usize = 2_000;
const FETCHERS: usize = 2;
const PER_FETCH: usize = PARTITIONS / FETCHERS;
/// Each raw fetcher's file, reused in a ring.
const RAW_FILE_BYTES: u64 = 256 << 20;
const PAGE: u64 = PAGE_SIZE_BYTES as u64;

/// Partition `p`'s batch: one record, 1–16 KiB in all (the size drawn from `p`).
fn batch_of(p: usize) -> Vec<u8> {
    let mut state = (p as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    state ^= state >> 29;
    let total = 1024 + (state % (15 * 1024)) as usize;
    let value = vec![(p % 251) as u8; total.saturating_sub(80)];
    let mut b = BatchBuilder::new(BatchOptions::default());
    b.push(RecordSpec {
        timestamp: 1_764_403_200_000,
        key: None,
        value: Some(&value),
        headers: &[],
    });
    b.build()
}

fn wide_config() -> PartitionConfig {
    // A mirrored partition of a wide topic: the default segments, a 64 KiB append buffer
    // (one fetch's batch per round), batches up to 16 KiB.
    PartitionConfig {
        append_buffer_bytes: 64 << 10,
        max_message_bytes: 64 << 10,
        ..PartitionConfig::default()
    }
}

/// One fetcher's raw file: written with zeroes once, then each fetch's bytes go sequentially
/// from where the last ended (the partial last page rewritten, as a journal block pads), back
/// to the start at the end, one write and one fdatasync linked.
struct RawSequential {
    io: UringIo,
    file: FileId,
    end: u64,
    buf: Option<AlignedBuf>,
    done: Vec<Completion>,
}

impl RawSequential {
    /// Opens the file made by [`RawSequential::new`] on a ring of the calling thread.
    fn open(path: &Path, caching: FileCaching) -> Result<Self, String> {
        let mut io = crate::baselines::ring(8, caching)?;
        let file = io::open(
            &mut io,
            path,
            OpenOptions {
                write: true,
                direct: true,
                ..OpenOptions::default()
            },
        )
        .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(RawSequential {
            io,
            file,
            end: 0,
            buf: None,
            done: Vec::new(),
        })
    }

    /// Makes the file: allocated, and written with zeroes once.
    fn new(path: &Path, caching: FileCaching) -> Result<Self, String> {
        let mut io = crate::baselines::ring(8, caching)?;
        let file = io::open(
            &mut io,
            path,
            OpenOptions {
                create: true,
                write: true,
                direct: true,
                ..OpenOptions::default()
            },
        )
        .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut w = RawSequential {
            io,
            file,
            end: 0,
            buf: None,
            done: Vec::new(),
        };
        w.run(Op::Fallocate {
            file,
            offset: 0,
            len: RAW_FILE_BYTES,
            mode: FallocateMode::Extend,
        })?;
        let chunk = 4 << 20;
        let mut zeros = w.io.buffer(chunk);
        zeros.as_mut_slice().fill(0);
        let mut at = 0;
        while at < RAW_FILE_BYTES {
            let c = w.run_write(at, zeros, chunk)?;
            zeros = c;
            at += chunk as u64;
        }
        w.io.recycle(zeros);
        w.run(Op::Fdatasync { file })?;
        Ok(w)
    }

    fn run(&mut self, op: Op) -> Result<(), String> {
        io::run(&mut self.io, op, &mut Vec::new())
            .and_then(|c| c.result.map(|_| ()))
            .map_err(|e| e.to_string())
    }

    fn run_write(&mut self, at: u64, buf: AlignedBuf, len: usize) -> Result<AlignedBuf, String> {
        let c = io::run(
            &mut self.io,
            Op::Write {
                file: self.file,
                offset: at,
                buf,
                range: 0..len,
            },
            &mut Vec::new(),
        )
        .map_err(|e| e.to_string())?;
        c.result.map_err(|e| e.to_string())?;
        c.buf
            .ok_or_else(|| "a write gave no buffer back".to_string())
    }

    /// One durable fetch of `bytes` bytes.
    fn fetch(&mut self, bytes: usize) -> Result<u64, String> {
        let mut floor = self.end / PAGE * PAGE;
        let mut span = ((self.end + bytes as u64 - floor).div_ceil(PAGE) * PAGE) as usize;
        if floor + span as u64 > RAW_FILE_BYTES {
            (self.end, floor) = (0, 0);
            span = (bytes as u64).div_ceil(PAGE) as usize * PAGE_SIZE_BYTES;
        }
        let buf = match self.buf.take() {
            Some(b) if b.capacity() >= span => b,
            _ => {
                let mut b = self.io.buffer(span + PAGE_SIZE_BYTES);
                b.as_mut_slice().fill(0x5a);
                b
            }
        };
        let file = self.file;
        self.io
            .submit_chain(vec![
                Op::Write {
                    file,
                    offset: floor,
                    buf,
                    range: 0..span,
                },
                Op::Fdatasync { file },
            ])
            .map_err(|e| e.to_string())?;
        self.done.clear();
        while self.done.len() < 2 {
            self.io
                .complete(2 - self.done.len(), &mut self.done)
                .map_err(|e| e.to_string())?;
        }
        let mut result = Ok(bytes as u64);
        for c in self.done.drain(..) {
            if let Some(b) = c.buf {
                self.buf = Some(b);
            }
            if let Err(e) = c.result {
                result = Err(e.to_string());
            }
        }
        self.end += bytes as u64;
        result
    }
}

pub(crate) fn mirror_wide(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let slice = a.seconds / 2.0;
    let batches: Vec<Vec<u8>> = (0..PARTITIONS).map(batch_of).collect();
    let fetch_bytes: Vec<usize> = (0..FETCHERS)
        .map(|t| {
            batches[t * PER_FETCH..(t + 1) * PER_FETCH]
                .iter()
                .map(Vec::len)
                .sum()
        })
        .collect();
    progress("mirror-wide: creating 2,000 partitions");
    let engine: Engine = engine_for(&dir.join("mirror-wide"), a)?;
    let tps = mirrored_partitions(&engine, "wide", PARTITIONS, wide_config())?;
    let next: Vec<AtomicI64> = (0..PARTITIONS).map(|_| AtomicI64::new(0)).collect();
    // Each file is written with zeroes here; each fetcher opens its own ring on its own thread
    // (a ring accepts submissions from the thread that made it).
    for t in 0..FETCHERS {
        drop(RawSequential::new(
            &dir.join(format!("raw-wide-{t}")),
            a.caching,
        )?);
    }
    let (mut ours, mut rawside) = (Side::new("mirrorlog"), Side::new("raw-sequential"));
    let before = engine.stats().map_err(|e| e.to_string())?;
    for round in 0..2 {
        progress(&format!("mirror-wide: round {} of 2", round + 1));
        for side in order(round, 2) {
            if side == 0 {
                timed(&mut ours, FETCHERS, slice, &|t, _| {
                    let mine = t * PER_FETCH..(t + 1) * PER_FETCH;
                    // The fetch answer: every partition's batch at its next offset, all
                    // appended as one call, the fetch durable when every one is.
                    let appends: Vec<_> = mine
                        .clone()
                        .map(|p| {
                            let mut b = batches[p].clone();
                            let at = next[p].load(Ordering::Relaxed);
                            let _ = format::stamp_base_offset(&mut b, Offset(at));
                            PartitionAppend::new(tps[p].clone(), b)
                        })
                        .collect();
                    let results = engine.append_many(appends, Origin::Mirror).wait();
                    let mut bytes = 0u64;
                    for (p, result) in mine.zip(results) {
                        result.map_err(|e| format!("{}: {e}", tps[p]))?;
                        next[p].fetch_add(1, Ordering::Relaxed);
                        bytes += batches[p].len() as u64;
                    }
                    Ok(bytes)
                });
            } else {
                // Each round's threads open their own rings (a ring takes submissions from the
                // thread that made it).
                let raw: Vec<Mutex<Option<RawSequential>>> =
                    (0..FETCHERS).map(|_| Mutex::new(None)).collect();
                timed(&mut rawside, FETCHERS, slice, &|t, _| {
                    let mut slot = raw[t]
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if slot.is_none() {
                        *slot = Some(RawSequential::open(
                            &dir.join(format!("raw-wide-{t}")),
                            a.caching,
                        )?);
                    }
                    slot.as_mut()
                        .ok_or("raw writer missing")?
                        .fetch(fetch_bytes[t])
                });
            }
        }
    }
    let after = engine.stats().map_err(|e| e.to_string())?;
    let mut figures = Vec::new();
    write_figures(
        &before,
        &after,
        "fdatasyncs per fetch",
        ours.ops,
        &mut figures,
    );
    figures.push(Figure::new(
        "bytes per fetch",
        fetch_bytes.iter().sum::<usize>() as f64 / FETCHERS as f64 / 1e6,
        "MB",
    ));
    engine.close().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(dir.join("mirror-wide"));
    for t in 0..FETCHERS {
        let _ = std::fs::remove_file(dir.join(format!("raw-wide-{t}")));
    }
    Ok(Outcome {
        workload: "mirror-wide",
        unit: "MB/s",
        notes: vec![format!(
            "{PARTITIONS} mirrored partitions, {FETCHERS} fetchers of {PER_FETCH} partitions each; every fetch one 1-16 KiB batch per partition, durable per fetch; raw-sequential writes each fetch's bytes as one O_DIRECT write + fdatasync into a pre-zeroed file; goal >= 0.90 of raw-sequential"
        )],
        sides: vec![ours, rawside],
        steps: Vec::new(),
        figures,
    })
}
