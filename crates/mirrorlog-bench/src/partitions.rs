//! `partitions`: broker scale. N partitions (`--wide-partitions`, 10,000 by default)
//! on one engine, `--callers` threads appending 1 KiB durable client batches spread over all of
//! them, against the same workload on 16 partitions in the same run (sides alternating in
//! rounds). Besides appends/s and latency it reports, as figures: resident memory per partition
//! (`VmRSS` of `/proc/self/status`) right after creation, under load and once idle; disk
//! allocated per partition (`st_blocks`, not file lengths); creation time per partition; and the
//! clean and unclean open times of the N partitions (unclean: a writer child process appending
//! to all of them is killed with SIGKILL, so the open replays the journal and recovers every
//! partition from its recovery point); fdatasyncs per second on each side. `restart`: clean open time of
//! 16 partitions holding G/8 GiB and then G GiB (`--restart-gib`, 8 by default).

use crate::args::Args;
use crate::measure::{order, progress, timed, Figure, Outcome, Side};
use crate::setup::{client_batch, engine_for, fetch_template, mirrored_partitions, stamp_fetch};
use mirrorlog::api::Origin;
use mirrorlog::engine::{Engine, PartitionConfig, ShardStats, TopicPartition};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The comparison's small side, as the issue sets it.
const NARROW_PARTITIONS: usize = 16;

/// Resident memory of this process, bytes (`VmRSS`).
pub(crate) fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib << 10)
}

/// Bytes allocated on disk under `dir` (`st_blocks` × 512, every file).
pub(crate) fn allocated_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => allocated_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

fn wide_config() -> PartitionConfig {
    // Kafka's defaults (1 GiB segments, reserved in steps), a 64 KiB append buffer: a 1 KiB
    // client batch per round needs no more, and the buffer is what an active partition holds.
    PartitionConfig {
        append_buffer_bytes: 64 << 10,
        max_message_bytes: 64 << 10,
        ..PartitionConfig::default()
    }
}

fn create(engine: &Engine, topic: &str, n: usize) -> Result<Vec<TopicPartition>, String> {
    let tps: Vec<TopicPartition> = (0..n as i32)
        .map(|i| TopicPartition::new(topic, i))
        .collect();
    // Pipelined: every creation is queued before any is waited for (shards work in parallel).
    let calls: Vec<_> = tps
        .iter()
        .map(|tp| engine.create_partition(tp, wide_config()))
        .collect();
    for (tp, c) in tps.iter().zip(calls) {
        c.wait().map_err(|e| format!("create {tp}: {e}"))?;
    }
    Ok(tps)
}

/// The flag that makes this binary the writer child of [`kill_a_writer`].
pub(crate) use crate::args::WRITER_CHILD_FLAG;

/// Runs this binary as a writer child over the `n` partitions in `dir` and kills it with
/// SIGKILL once it has appended to every partition and gone on for a second.
fn kill_a_writer(dir: &Path, n: usize, a: &Args) -> Result<(), String> {
    use std::io::BufRead as _;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(exe)
        .arg(WRITER_CHILD_FLAG)
        .arg(dir)
        .arg(n.to_string())
        .arg((a.journal_bytes >> 20).to_string())
        .args(
            matches!(a.caching, mirrorlog::internals::io::FileCaching::PageCache)
                .then_some("--page-cache"),
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("writer child: {e}"))?;
    let stdout = child.stdout.take().ok_or("writer child: no stdout")?;
    let mut line = String::new();
    let _ = std::io::BufReader::new(stdout).read_line(&mut line);
    if line.trim() != "ready" {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("writer child: {line:?} instead of ready"));
    }
    std::thread::sleep(Duration::from_secs(1));
    // SIGKILL: nothing of the child's shutdown runs.
    child.kill().map_err(|e| e.to_string())?;
    let status = child.wait().map_err(|e| e.to_string())?;
    if status.code().is_some() {
        return Err(format!("writer child exited by itself: {status}"));
    }
    Ok(())
}

/// The writer child: opens the engine over `dir`, appends one 1 KiB batch (no producer id) to
/// each of its `n` partitions in turn, all in flight at once, says `ready` after the first
/// pass, and goes on until it is killed.
pub(crate) fn writer_child(dir: &Path, n: usize, a: &Args) -> Result<(), String> {
    use std::io::Write as _;
    let engine = engine_for(dir, a)?;
    let tps: Vec<TopicPartition> = (0..n as i32)
        .map(|i| TopicPartition::new("wide", i))
        .collect();
    let batch = crate::setup::client_batch_of(-1, -1, 1, &[0x42; 950]);
    for pass in 0u64.. {
        let calls: Vec<_> = tps
            .iter()
            .map(|tp| engine.append(tp, batch.clone(), Origin::Client))
            .collect();
        for c in calls {
            c.wait().map_err(|e| e.to_string())?;
        }
        if pass == 0 {
            let mut out = std::io::stdout();
            writeln!(out, "ready").map_err(|e| e.to_string())?;
            out.flush().map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

fn timed_open(dir: &Path, a: &Args) -> Result<(Engine, f64), String> {
    let t = Instant::now();
    let engine = engine_for(dir, a)?;
    let secs = t.elapsed().as_secs_f64();
    if !engine.failed_partitions().is_empty() {
        return Err(format!(
            "{} partitions failed to open",
            engine.failed_partitions().len()
        ));
    }
    Ok((engine, secs))
}

pub(crate) fn partitions(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let n = a.wide_partitions;
    let callers = a.callers.min(n);
    let slice = a.seconds / 2.0;
    let wide_dir = dir.join("partitions-wide");
    let narrow_dir = dir.join("partitions-narrow");
    let mut figures = Vec::new();

    // What earlier workloads freed and the allocator kept would come back under this one and
    // hide its growth: the baseline is taken with it handed back.
    mirrorlog::internals::mem::release_free_heap();
    let rss_before = resident_bytes();
    let wide = engine_for(&wide_dir, a)?;
    let t = Instant::now();
    progress(&format!("partitions: creating {n}"));
    let wide_tps = create(&wide, "wide", n)?;
    let create_secs = t.elapsed().as_secs_f64();
    let rss_created = resident_bytes();
    let per = |bytes: u64| bytes as f64 / n as f64;
    figures.push(Figure::new(
        "creation per partition",
        create_secs * 1e6 / n as f64,
        "us",
    ));
    figures.push(Figure::new(
        "resident memory per partition, created",
        per(rss_created.saturating_sub(rss_before)) / 1024.0,
        "KiB",
    ));
    figures.push(Figure::new(
        "disk allocated per partition, empty",
        per(allocated_bytes(&wide_dir)) / 1024.0,
        "KiB",
    ));
    let narrow = engine_for(&narrow_dir, a)?;
    let narrow_tps = create(&narrow, "narrow", NARROW_PARTITIONS)?;

    // One idempotent producer per (partition, caller), with its own sequence: callers that
    // share a partition (the 16-partition side) never interleave one producer's sequences.
    let wide_seqs: Vec<AtomicI32> = (0..n * callers).map(|_| AtomicI32::new(0)).collect();
    let narrow_seqs: Vec<AtomicI32> = (0..NARROW_PARTITIONS * callers)
        .map(|_| AtomicI32::new(0))
        .collect();
    // Caller t appends to partitions t, t + callers, t + 2·callers, … in turn.
    let append = |engine: &Engine, tps: &[TopicPartition], seqs: &[AtomicI32], t: usize, i: u64| {
        let count = tps.len();
        let per_caller = count.div_ceil(callers);
        let k = (i as usize) % per_caller;
        let p = (t + k * callers) % count;
        let producer = p * callers + t;
        let seq = seqs[producer].fetch_add(1, Ordering::Relaxed);
        let b = client_batch(producer as i64, seq);
        let len = b.len() as u64;
        match engine.append(&tps[p], b, Origin::Client).wait() {
            Ok(_) => Ok(len),
            Err(e) => {
                seqs[producer].fetch_sub(1, Ordering::Relaxed);
                Err(e.to_string())
            }
        }
    };
    let acknowledged = |seqs: &[AtomicI32], p: usize| -> i64 {
        (0..callers)
            .map(|t| i64::from(seqs[p * callers + t].load(Ordering::Relaxed)))
            .sum()
    };
    let (mut ours, mut base) = (
        Side::new(&format!("mirrorlog {n} partitions")),
        Side::new(&format!("mirrorlog {NARROW_PARTITIONS} partitions")),
    );
    // Warm-up, untimed, on both sides alike: one append to every partition, so that what the
    // rounds measure is the steady state (a partition's first append also writes its first
    // leader-epoch checkpoint: a file created and synced once, not durability's cost).
    progress("partitions: one append to each partition first");
    for (engine, tps, seqs) in [
        (&wide, &wide_tps, &wide_seqs),
        (&narrow, &narrow_tps, &narrow_seqs),
    ] {
        let per_caller = tps.len().div_ceil(callers) as u64;
        let failed: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..callers)
                .map(|t| {
                    s.spawn(move || {
                        (0..per_caller)
                            .filter_map(|k| append(engine, tps, seqs, t, k).err())
                            .collect::<Vec<String>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| {
                    h.join()
                        .unwrap_or_else(|_| vec!["a caller panicked".into()])
                })
                .collect()
        });
        if let Some(e) = failed.first() {
            return Err(format!("warm-up: {e}"));
        }
    }
    let mut rss_load = 0u64;
    let stats = |e: &Engine| e.stats().map_err(|e| e.to_string());
    let (wide_before, narrow_before) = (stats(&wide)?, stats(&narrow)?);
    for round in 0..2 {
        progress(&format!("partitions: round {} of 2", round + 1));
        for side in order(round, 2) {
            if side == 0 {
                timed(&mut ours, callers, slice, &|t, i| {
                    append(&wide, &wide_tps, &wide_seqs, t, i)
                });
                rss_load = rss_load.max(resident_bytes());
            } else {
                timed(&mut base, callers, slice, &|t, i| {
                    append(&narrow, &narrow_tps, &narrow_seqs, t, i)
                });
            }
        }
    }
    // Flushes per second on each side: they should not fall as the partition count grows.
    let syncs = |before: &[ShardStats], after: &[ShardStats]| {
        let sum = |s: &[ShardStats]| s.iter().map(|x| x.fdatasyncs).sum::<u64>();
        (sum(after) - sum(before)) as f64
    };
    let (wide_after, narrow_after) = (stats(&wide)?, stats(&narrow)?);
    figures.push(Figure::new(
        "fdatasyncs/s, wide",
        syncs(&wide_before, &wide_after) / ours.secs.max(1e-9),
        "/s",
    ));
    figures.push(Figure::new(
        "fdatasyncs/s, 16 partitions",
        syncs(&narrow_before, &narrow_after) / base.secs.max(1e-9),
        "/s",
    ));
    crate::setup::write_figures(&wide_before, &wide_after, "", 0, &mut figures);
    let touched = (0..n).filter(|&p| acknowledged(&wide_seqs, p) > 0).count();
    figures.push(Figure::new("partitions written", touched as f64, ""));
    figures.push(Figure::new(
        "resident memory per partition, under load",
        per(rss_load.saturating_sub(rss_before)) / 1024.0,
        "KiB",
    ));
    // Two ticks (one a second) without appends: idle partitions hand their buffers back.
    progress("partitions: idle");
    std::thread::sleep(Duration::from_millis(2500));
    figures.push(Figure::new(
        "resident memory per partition, idle after load",
        per(resident_bytes().saturating_sub(rss_before)) / 1024.0,
        "KiB",
    ));
    figures.push(Figure::new(
        "disk allocated per partition, written",
        per(allocated_bytes(&wide_dir)) / 1024.0,
        "KiB",
    ));
    narrow.close().map_err(|e| e.to_string())?;
    let t = Instant::now();
    wide.close().map_err(|e| e.to_string())?;
    figures.push(Figure::new(
        "close (clean) of all partitions",
        t.elapsed().as_secs_f64(),
        "s",
    ));
    progress("partitions: clean open");
    let (engine, clean_secs) = timed_open(&wide_dir, a)?;
    figures.push(Figure::new("clean open of all partitions", clean_secs, "s"));
    engine.close().map_err(|e| e.to_string())?;
    // Unclean: a writer child appends to every partition and is killed with SIGKILL
    // mid-stream, so its rounds, journal flushes and checkpoints are cut wherever they were.
    progress("partitions: a writer child, killed");
    kill_a_writer(&wide_dir, n, a)?;
    progress("partitions: unclean open");
    let (engine, unclean_secs) = timed_open(&wide_dir, a)?;
    figures.push(Figure::new(
        "unclean open of all partitions",
        unclean_secs,
        "s",
    ));
    figures.push(Figure::new(
        "unclean open / clean open",
        unclean_secs / clean_secs.max(1e-9),
        "x",
    ));
    for (p, tp) in wide_tps.iter().enumerate() {
        // One record per batch: the log end is at least the appends this process had
        // acknowledged (the killed child appended more).
        let end = engine
            .state(tp)
            .wait()
            .map_err(|e| e.to_string())?
            .log_end
            .0;
        if end < acknowledged(&wide_seqs, p) {
            return Err(format!(
                "partition {p} reopened at {end}, {} were acknowledged",
                acknowledged(&wide_seqs, p)
            ));
        }
    }
    engine.close().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&wide_dir);
    let _ = std::fs::remove_dir_all(&narrow_dir);
    Ok(Outcome {
        workload: "partitions",
        unit: "appends/s",
        notes: vec![format!(
            "{n} partitions against {NARROW_PARTITIONS}, {callers} callers spread over them, 1 KiB durable client batches (after one untimed append to every partition on both sides), 1 GiB segments reserved in steps, 64 KiB append buffers; goal >= 0.8x the {NARROW_PARTITIONS}-partition appends/s with p99 <= 2x (the issue sets it at 1,000 partitions), idle memory <= 64 KiB and empty disk <= one step per partition, unclean open <= 2x clean"
        )],
        sides: vec![ours, base],
        steps: Vec::new(),
        figures,
    })
}

/// Writes `bytes` more to each of `tps` (mirrored 1 MiB fetches, durable per fetch).
fn fill_mirrored(
    engine: &Engine,
    tps: &[TopicPartition],
    ends: &mut [i64],
    bytes: u64,
) -> Result<(), String> {
    std::thread::scope(|s| {
        let handles: Vec<_> = tps
            .iter()
            .zip(ends.iter_mut())
            .enumerate()
            .map(|(p, (tp, end))| {
                s.spawn(move || -> Result<(), String> {
                    let template = fetch_template(p);
                    let mut chunk = Vec::new();
                    let mut written = 0u64;
                    while written < bytes {
                        *end = stamp_fetch(&template, *end, false, &mut chunk);
                        written += chunk.len() as u64;
                        engine
                            .append(tp, chunk.clone(), Origin::Mirror)
                            .wait()
                            .map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().map_err(|_| "a writer panicked".to_string())?)
    })
}

pub(crate) fn restart(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let dir = dir.join("restart");
    let total = a.restart_gib << 30;
    let small = total / 8;
    let p = NARROW_PARTITIONS;
    let engine = engine_for(&dir, a)?;
    let tps = mirrored_partitions(&engine, "restart", p, PartitionConfig::default())?;
    let mut ends = vec![0i64; p];
    progress(&format!("restart: writing {} MiB", small >> 20));
    fill_mirrored(&engine, &tps, &mut ends, small / p as u64)?;
    engine.close().map_err(|e| e.to_string())?;
    let mut small_side = Side::new(&format!("clean open, {} MiB", small >> 20));
    let mut large_side = Side::new(&format!("clean open, {} MiB", total >> 20));
    let mut engine = None;
    for round in 0..3 {
        let (e, secs) = timed_open(&dir, a)?;
        small_side.ops += 1;
        small_side.secs += secs;
        let _ = small_side.latency_us.record((secs * 1e6) as u64);
        if round < 2 {
            e.close().map_err(|e| e.to_string())?;
        } else {
            engine = Some(e);
        }
    }
    let engine = engine.ok_or("no engine")?;
    progress(&format!("restart: writing {} MiB", (total - small) >> 20));
    fill_mirrored(&engine, &tps, &mut ends, (total - small) / p as u64)?;
    engine.close().map_err(|e| e.to_string())?;
    for _ in 0..3 {
        let (e, secs) = timed_open(&dir, a)?;
        large_side.ops += 1;
        large_side.secs += secs;
        let _ = large_side.latency_us.record((secs * 1e6) as u64);
        e.close().map_err(|e| e.to_string())?;
    }
    let ratio = large_side.secs / small_side.secs.max(1e-9);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Outcome {
        workload: "restart",
        unit: "opens/s",
        notes: vec![format!(
            "clean open of {p} partitions holding {} MiB and then {} MiB (1 GiB segments, mirrored 1 MiB fetches), 3 opens each; goal: the larger open <= 1.5x the smaller",
            small >> 20,
            total >> 20
        )],
        sides: vec![large_side, small_side],
        steps: Vec::new(),
        figures: vec![Figure::new("larger / smaller open time", ratio, "x")],
    })
}
