//! The fetch path's workloads: `tail-read`, long-polling consumers at the tail
//! against the page cache's, measured as consumer latency from the producer's send to the
//! consumer holding the batch; `catch-up`, a consumer far behind reading to the end while
//! producers append, against the raw O_DIRECT reader; and the `mirrorlog-link` side of
//! mirror-ingest, a `MirrorLink` from a source engine (in memory, so that only the
//! destination's writes reach the device) into the destination, against the raw writer.

use crate::args::{Args, FETCH_BYTES};
use crate::baselines::{raw_read, ring};
use crate::measure::{histogram, order, progress, Errors, Figure, Outcome, Side};
use crate::setup::{
    client_batch, create_partitions, engine_for, fetch_template, mirrored_partitions,
    produce_config, stamp_fetch,
};
use mirrorlog::api::Origin;
use mirrorlog::engine::{Engine, EngineConfig, IoBackend, ReadRequest};
use mirrorlog::engine::{SimConfig, TopicPartition};
use mirrorlog::format::{BatchIter, Offset};
use mirrorlog::internals::log::Isolation;
use mirrorlog::mirror::{LinkConfig, MirrorLink};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Sequences whose send time is kept per partition (a ring: a consumer is never this far
/// behind its producer at the tail).
const SENT_RING: usize = 1 << 16;

/// Send times of one side's producers, as nanoseconds since `epoch`.
struct Sent {
    epoch: Instant,
    at: Vec<Vec<AtomicU64>>,
}

impl Sent {
    fn new(partitions: usize) -> Self {
        Sent {
            epoch: Instant::now(),
            at: (0..partitions)
                .map(|_| (0..SENT_RING).map(|_| AtomicU64::new(0)).collect())
                .collect(),
        }
    }
    fn mark(&self, p: usize, seq: i32) {
        let ns = self.epoch.elapsed().as_nanos() as u64;
        self.at[p][seq as usize % SENT_RING].store(ns, Ordering::Release);
    }
    /// Microseconds since batch `seq` of partition `p` was sent, if it was sent at or after
    /// `from` (a batch sent before a side's slice began waited through the other side's: it
    /// is not this slice's latency).
    fn since(&self, p: usize, seq: i32, from: Instant) -> Option<u64> {
        let sent = self.at[p][seq as usize % SENT_RING].load(Ordering::Acquire);
        let floor = from.saturating_duration_since(self.epoch).as_nanos() as u64;
        let now = self.epoch.elapsed().as_nanos() as u64;
        (sent >= floor).then(|| (now.saturating_sub(sent) / 1000).max(1))
    }
}

/// What one consumer thread measured.
struct Consumed {
    batches: u64,
    bytes: u64,
    latency_us: hdrhistogram::Histogram<u64>,
}

impl Consumed {
    fn new() -> Self {
        Consumed {
            batches: 0,
            bytes: 0,
            latency_us: histogram(),
        }
    }
    /// Notes the batches in `records` of partition `p`: each one's send-to-here latency (of
    /// those sent since `from`).
    fn take(&mut self, records: &[u8], p: usize, sent: &Sent, from: Instant) {
        for b in BatchIter::new(records, 0) {
            if let Some(us) = sent.since(p, b.header().producer.base_sequence, from) {
                let _ = self.latency_us.record(us);
            }
            self.batches += 1;
            self.bytes += b.bytes().len() as u64;
        }
    }
    fn into_side(consumed: Vec<Consumed>, side: &mut Side, secs: f64) {
        side.secs += secs;
        for c in consumed {
            side.ops += c.batches;
            side.bytes += c.bytes;
            let _ = side.latency_us.add(c.latency_us);
        }
    }
}

/// A page-cache partition of the baseline: a file, how far it is written, and a condition the
/// writer signals after each fdatasync (the best an in-process consumer can do without polling).
struct PageCacheLog {
    file: std::fs::File,
    written: Mutex<u64>,
    grew: Condvar,
}

/// Producers append 1 KiB batches durably on 4 partitions, one consumer per partition
/// long-polls at the tail (`min_bytes` 1, `max_wait` 500 ms); the baseline writes the same
/// batches to files with fdatasync and wakes its readers with a condition variable, which read
/// them from the page cache. Latency is from the producer's send to the consumer holding the
/// batch; the engine's device reads over its slices are counted (the goal: none).
pub(crate) fn tail_read(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let partitions = 4usize;
    let slice = a.seconds / 2.0;
    let engine = engine_for(&dir.join("tail"), a)?;
    let tps = create_partitions(&engine, "tail", partitions, produce_config(16 << 20))?;
    let logs: Vec<PageCacheLog> = (0..partitions)
        .map(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .read(true)
                .write(true)
                .open(dir.join(format!("tail-{p}")))
                .map(|file| PageCacheLog {
                    file,
                    written: Mutex::new(0),
                    grew: Condvar::new(),
                })
                .map_err(|e| format!("tail-{p}: {e}"))
        })
        .collect::<Result<_, _>>()?;
    // Each side's producer sequences carry over between rounds (the engine checks ours).
    let seqs: Vec<AtomicU64> = (0..partitions).map(|_| AtomicU64::new(0)).collect();
    let base_seqs: Vec<AtomicU64> = (0..partitions).map(|_| AtomicU64::new(0)).collect();
    let positions: Vec<AtomicU64> = (0..partitions).map(|_| AtomicU64::new(0)).collect();
    let read_to: Vec<AtomicU64> = (0..partitions).map(|_| AtomicU64::new(0)).collect();
    let (sent, base_sent) = (Sent::new(partitions), Sent::new(partitions));
    let (mut ours, mut buffered) = (Side::new("mirrorlog"), Side::new("page-cache"));
    let device_reads = |e: &Engine| -> Result<u64, String> {
        Ok(e.stats()
            .map_err(|e| e.to_string())?
            .iter()
            .map(|s| s.device_reads)
            .sum())
    };
    let mut tail_device_reads = 0u64;
    for round in 0..2 {
        progress(&format!("tail-read: round {} of 2", round + 1));
        for side in order(round, 2) {
            let stop = AtomicBool::new(false);
            let errors = Errors::default();
            let began = Instant::now();
            let deadline = began + Duration::from_secs_f64(slice);
            if side == 0 {
                let before = device_reads(&engine)?;
                let consumed = std::thread::scope(|s| {
                    for (p, tp) in tps.iter().enumerate() {
                        let (engine, stop, seqs, errors, sent) =
                            (&engine, &stop, &seqs, &errors, &sent);
                        s.spawn(move || {
                            while !stop.load(Ordering::Relaxed) {
                                let seq = seqs[p].load(Ordering::Relaxed) as i32;
                                sent.mark(p, seq);
                                let b = client_batch(p as i64, seq);
                                if let Err(e) = engine.append(tp, b, Origin::Client).wait() {
                                    errors.record(format!("tail-read producer: {e}"));
                                    break;
                                }
                                seqs[p].store(seq as u64 + 1, Ordering::Relaxed);
                            }
                        });
                    }
                    let consumers: Vec<_> = (0..partitions)
                        .map(|p| {
                            let (engine, tps, positions, errors, sent) =
                                (&engine, &tps, &positions, &errors, &sent);
                            s.spawn(move || {
                                let mut c = Consumed::new();
                                while Instant::now() < deadline {
                                    let at = Offset(positions[p].load(Ordering::Relaxed) as i64);
                                    let request =
                                        ReadRequest::new(at, 1 << 20, Isolation::ReadUncommitted)
                                            .wait_for(1, Duration::from_millis(500));
                                    match engine.read(&tps[p], request).wait() {
                                        Ok(r) => {
                                            c.take(&r.records, p, sent, began);
                                            if let Some(b) = BatchIter::new(&r.records, 0).last() {
                                                let next = b.header().last_offset().0 + 1;
                                                positions[p].store(next as u64, Ordering::Relaxed);
                                            }
                                        }
                                        Err(e) => {
                                            errors.record(format!("tail-read consumer: {e}"));
                                            break;
                                        }
                                    }
                                }
                                c
                            })
                        })
                        .collect();
                    let consumed: Vec<Consumed> = consumers
                        .into_iter()
                        .filter_map(|h| h.join().ok())
                        .collect();
                    stop.store(true, Ordering::Relaxed);
                    consumed
                });
                tail_device_reads += device_reads(&engine)? - before;
                Consumed::into_side(consumed, &mut ours, slice);
                ours.absorb_errors(&errors);
            } else {
                let consumed = std::thread::scope(|s| {
                    for (p, log) in logs.iter().enumerate() {
                        let (stop, seqs, errors, sent) = (&stop, &base_seqs, &errors, &base_sent);
                        s.spawn(move || {
                            let mut seq = seqs[p].load(Ordering::Relaxed) as i32;
                            while !stop.load(Ordering::Relaxed) {
                                sent.mark(p, seq);
                                let record = client_batch(p as i64, seq);
                                let at = *log.written.lock().unwrap_or_else(|e| e.into_inner());
                                if let Err(e) = log
                                    .file
                                    .write_all_at(&record, at)
                                    .and_then(|()| log.file.sync_data())
                                {
                                    errors.record(format!("tail-read writer: {e}"));
                                    break;
                                }
                                *log.written.lock().unwrap_or_else(|e| e.into_inner()) =
                                    at + record.len() as u64;
                                log.grew.notify_all();
                                seq += 1;
                                seqs[p].store(seq as u64, Ordering::Relaxed);
                            }
                        });
                    }
                    let readers: Vec<_> = (0..partitions)
                        .map(|p| {
                            let (logs, read_to, errors, sent) =
                                (&logs, &read_to, &errors, &base_sent);
                            s.spawn(move || {
                                let log = &logs[p];
                                let mut c = Consumed::new();
                                let mut buf = vec![0u8; 1 << 20];
                                while Instant::now() < deadline {
                                    let from = read_to[p].load(Ordering::Relaxed);
                                    let guard =
                                        log.written.lock().unwrap_or_else(|e| e.into_inner());
                                    let (guard, _) = log
                                        .grew
                                        .wait_timeout_while(
                                            guard,
                                            Duration::from_millis(500),
                                            |w| *w <= from,
                                        )
                                        .unwrap_or_else(|e| e.into_inner());
                                    let to = (*guard).min(from + buf.len() as u64);
                                    drop(guard);
                                    if to <= from {
                                        continue;
                                    }
                                    let n = (to - from) as usize;
                                    if let Err(e) = log.file.read_exact_at(&mut buf[..n], from) {
                                        errors.record(format!("tail-read reader: {e}"));
                                        break;
                                    }
                                    c.take(&buf[..n], p, sent, began);
                                    read_to[p].store(to, Ordering::Relaxed);
                                }
                                c
                            })
                        })
                        .collect();
                    let consumed: Vec<Consumed> =
                        readers.into_iter().filter_map(|h| h.join().ok()).collect();
                    stop.store(true, Ordering::Relaxed);
                    for log in &logs {
                        log.grew.notify_all();
                    }
                    consumed
                });
                Consumed::into_side(consumed, &mut buffered, slice);
                buffered.absorb_errors(&errors);
            }
        }
    }
    engine.close().map_err(|e| e.to_string())?;
    Ok(Outcome {
        workload: "tail-read",
        unit: "MB/s",
        notes: vec![format!(
            "{partitions} partitions, a producer each appending 1 KiB durably, a consumer each long-polling at the tail (min 1 byte, max wait 500 ms; the page cache's readers wait on a condition the writer signals after fdatasync); latency = producer's send to consumer holding the batch; sides alternate in 2 rounds; goal p99 <= 2x the page cache's and no device read at the tail"
        )],
        sides: vec![ours, buffered],
        steps: Vec::new(),
        figures: vec![Figure::new(
            "device reads at the tail",
            tail_device_reads as f64,
            "reads",
        )],
    })
}

/// Producers on `tps` appending 1 KiB durably until `stop`: their append latency.
fn producers(
    engine: &Engine,
    tps: &[TopicPartition],
    stop: &AtomicBool,
    seqs: &[AtomicU64],
    errors: &Errors,
) -> hdrhistogram::Histogram<u64> {
    std::thread::scope(|s| {
        let handles: Vec<_> = tps
            .iter()
            .enumerate()
            .map(|(p, tp)| {
                s.spawn(move || {
                    let mut h = histogram();
                    while !stop.load(Ordering::Relaxed) {
                        let seq = seqs[p].load(Ordering::Relaxed) as i32;
                        let t0 = Instant::now();
                        let b = client_batch(100 + p as i64, seq);
                        if let Err(e) = engine.append(tp, b, Origin::Client).wait() {
                            errors.record(format!("catch-up producer: {e}"));
                            break;
                        }
                        let _ = h.record((t0.elapsed().as_micros() as u64).max(1));
                        seqs[p].store(seq as u64 + 1, Ordering::Relaxed);
                    }
                    h
                })
            })
            .collect();
        let mut all = histogram();
        for h in handles.into_iter().filter_map(|h| h.join().ok()) {
            let _ = all.add(h);
        }
        all
    })
}

/// Rounds of the catch-up workload (sides alternate order between rounds).
const CATCH_UP_ROUNDS: usize = 3;
/// Where the catch-up link's destination keeps its files: memory.
const COPIES_TMPFS: &str = "/dev/shm";

/// A directory removed with everything in it when dropped.
struct RemovedDir(std::path::PathBuf);

impl Drop for RemovedDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `read` while the producers append on `live`; returns what it gave and the producers'
/// latencies meanwhile.
fn beside_producers<T: Send>(
    engine: &Engine,
    live: &[TopicPartition],
    seqs: &[AtomicU64],
    errors: &Errors,
    read: impl FnOnce() -> Result<T, String> + Send,
) -> Result<(T, hdrhistogram::Histogram<u64>), String> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let r = read();
            stop.store(true, Ordering::Relaxed);
            r
        });
        let latencies = producers(engine, live, &stop, seqs, errors);
        let r = reader
            .join()
            .unwrap_or_else(|_| Err("catch-up reader panicked".to_string()));
        r.map(|r| (r, latencies))
    })
}

/// A consumer `--recovery-mib` behind (1 GiB by default) reads its partition to the end with
/// 1 MiB reads while producers append 1 KiB durably on 4 other partitions; a `MirrorLink`
/// catches up the same partition into a destination whose files are in memory (tmpfs, page
/// cache: only the source's reads reach the device), with 1 MiB fetches; the raw reader reads the same segment files
/// with recovery's large O_DIRECT reads while the producers append too. Three rounds, the
/// sides alternating; then the producers run alone, for their p99 without a reader.
pub(crate) fn catch_up(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let data_dir = dir.join("catch-up");
    let fetches = (a.recovery_mib as usize * (1 << 20)).div_ceil(FETCH_BYTES);
    let template = fetch_template(0);
    {
        progress("catch-up: writing the backlog");
        let engine = engine_for(&data_dir, a)?;
        // The whole backlog stays (no retention).
        let config = produce_config(128 << 20);
        let tps = mirrored_partitions(&engine, "backlog", 1, config)?;
        create_partitions(&engine, "live", 4, produce_config(16 << 20))?;
        let mut next = 0i64;
        for i in 0..fetches {
            let mut chunk = Vec::with_capacity(FETCH_BYTES);
            next = stamp_fetch(&template, next, i % 4 == 3, &mut chunk);
            engine
                .append(&tps[0], chunk, Origin::Mirror)
                .wait()
                .map_err(|e| e.to_string())?;
        }
        // Closed and opened again: nothing of the backlog is in memory.
        engine.close().map_err(|e| e.to_string())?;
    }
    let engine = Arc::new(engine_for(&data_dir, a)?);
    // The link's destination: page-cache files in memory (tmpfs), so that its appends cost a
    // copy and no device time (the simulated disk's crash model costs several copies).
    let copies_dir = RemovedDir(
        Path::new(COPIES_TMPFS).join(format!("mirrorlog-bench-copies-{}", std::process::id())),
    );
    let copies = Arc::new(
        Engine::open(
            EngineConfig::new(&copies_dir.0)
                .shards(1)
                .pin_threads(false)
                .tail_cache_bytes(0)
                .journal_bytes(0)
                .backend(IoBackend::UringPageCache),
        )
        .map_err(|e| format!("the link's destination engine: {e}"))?,
    );
    let backlog = TopicPartition::new("backlog", 0);
    let live: Vec<TopicPartition> = (0..4).map(|p| TopicPartition::new("live", p)).collect();
    let seqs: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
    let end = engine
        .state(&backlog)
        .wait()
        .map_err(|e| e.to_string())?
        .high_watermark;
    let mut sides = [
        Side::new("mirrorlog"),
        Side::new("mirrorlog-link"),
        Side::new("raw reader"),
    ];
    let mut beside: Vec<hdrhistogram::Histogram<u64>> = (0..3).map(|_| histogram()).collect();
    let errors = Errors::default();
    for round in 0..CATCH_UP_ROUNDS {
        for side in order(round, 3) {
            progress(&format!(
                "catch-up: round {} of {CATCH_UP_ROUNDS}, {}",
                round + 1,
                sides[side].name
            ));
            let (latencies, with) = match side {
                0 => {
                    let ((bytes, secs, reads), with) =
                        beside_producers(&engine, &live, &seqs, &errors, || {
                            consume_to(&engine, &backlog, end)
                        })?;
                    sides[0].bytes += bytes;
                    sides[0].secs += secs;
                    sides[0].ops += reads.len();
                    (Some(reads), with)
                }
                1 => {
                    let copy = mirrored_partitions(
                        &copies,
                        &format!("copy-{round}"),
                        1,
                        produce_config(128 << 20),
                    )?;
                    let link = MirrorLink::new(
                        engine.clone(),
                        backlog.clone(),
                        copies.clone(),
                        copy[0].clone(),
                    )
                    .with_config(LinkConfig {
                        fetch_bytes: 1 << 20,
                        // The destination commits a partition's rounds one at a time: more
                        // appends waiting make each round larger (measured: 8 against 2, 0.52
                        // and 0.56 of the raw reader against 0.34 and 0.45).
                        appends_in_flight: 8,
                        ..LinkConfig::default()
                    });
                    let ((), with) = beside_producers(&engine, &live, &seqs, &errors, || {
                        let started = Instant::now();
                        link.catch_up().map_err(|e| e.to_string())?;
                        sides[1].secs += started.elapsed().as_secs_f64();
                        Ok(())
                    })?;
                    let stats = link.stats();
                    sides[1].bytes += stats.bytes;
                    sides[1].ops += stats.fetches;
                    // Its memory back.
                    copies
                        .delete_partition(&copy[0])
                        .wait()
                        .map_err(|e| e.to_string())?;
                    (None, with)
                }
                _ => {
                    let ((bytes, secs), with) =
                        beside_producers(&engine, &live, &seqs, &errors, || {
                            let started = Instant::now();
                            let bytes = ring(64, a.caching).and_then(|mut io| {
                                raw_read(&mut io, &data_dir.join(backlog.dir_name()))
                            })?;
                            Ok((bytes, started.elapsed().as_secs_f64()))
                        })?;
                    sides[2].bytes += bytes;
                    sides[2].secs += secs;
                    sides[2].ops += 1;
                    (None, with)
                }
            };
            if let Some(l) = latencies {
                let _ = sides[side].latency_us.add(l);
            }
            let _ = beside[side].add(with);
        }
    }
    // The producers alone, as long as the engine's reader took.
    progress("catch-up: producers alone");
    let stop = AtomicBool::new(false);
    let alone = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_secs_f64(sides[0].secs.max(0.2)));
            stop.store(true, Ordering::Relaxed);
        });
        producers(&engine, &live, &stop, &seqs, &errors)
    });
    sides[0].absorb_errors(&errors);
    drop(copies);
    Arc::try_unwrap(engine)
        .map_err(|_| "catch-up: the engine is still shared".to_string())?
        .close()
        .map_err(|e| e.to_string())?;
    let p99 = |h: &hdrhistogram::Histogram<u64>| h.value_at_quantile(0.99) as f64;
    let [ours, link, raw] = sides;
    Ok(Outcome {
        workload: "catch-up",
        unit: "MB/s",
        notes: vec![format!(
            "a consumer {} MiB behind reads to the end with 1 MiB reads, and a MirrorLink catches the same partition up into a destination in memory (page-cache files on tmpfs) with 1 MiB fetches, 8 appends in flight, while 4 producers append 1 KiB durably; the raw reader reads the same files with 8 MiB O_DIRECT reads, 4 in flight, the producers appending too; {CATCH_UP_ROUNDS} rounds, sides alternating; goal >= 0.90 of the raw reader for both, producer p99 beside the consumer <= 1.5x without",
            a.recovery_mib
        )],
        sides: vec![ours, link, raw],
        steps: Vec::new(),
        figures: vec![
            Figure::new("producer p99 with the reader", p99(&beside[0]), "us"),
            Figure::new("producer p99 with the link", p99(&beside[1]), "us"),
            Figure::new("producer p99 with the raw reader", p99(&beside[2]), "us"),
            Figure::new("producer p99 without a reader", p99(&alone), "us"),
            Figure::new(
                "producer p99 with / without the reader",
                p99(&beside[0]) / p99(&alone).max(1.0),
                "x",
            ),
        ],
    })
}

/// Reads `tp` from offset 0 to `end` with 1 MiB reads, one at a time: the bytes, the seconds
/// and each read's latency.
fn consume_to(
    engine: &Engine,
    tp: &TopicPartition,
    end: Offset,
) -> Result<(u64, f64, hdrhistogram::Histogram<u64>), String> {
    let started = Instant::now();
    let (mut at, mut bytes, mut h) = (Offset(0), 0u64, histogram());
    while at < end {
        let t0 = Instant::now();
        let request = ReadRequest::new(at, 1 << 20, Isolation::ReadUncommitted);
        let r = engine.read(tp, request).wait().map_err(|e| e.to_string())?;
        let _ = h.record((t0.elapsed().as_micros() as u64).max(1));
        let Some(last) = BatchIter::new(&r.records, 0).last() else {
            break;
        };
        at = Offset(last.header().last_offset().0 + 1);
        bytes += r.records.len() as u64;
    }
    Ok((bytes, started.elapsed().as_secs_f64(), h))
}

/// Most bytes waiting at the link side's source (it is held in memory, twice: its simulated
/// files and its tail cache, which serves the fetches).
const LINK_SOURCE_BYTES_MAX: usize = 1 << 30;

/// The `mirrorlog-link` side of mirror-ingest: `p` links from a source engine held in memory
/// (its fetches cost no device time, so that only the destination's writes compete with the
/// raw writer's; they are answered from its tail cache) into mirroring partitions of
/// `engine`, until they have mirrored what waits at the source or `slice` seconds passed (the
/// time counted is theirs). The source is filled before with what the raw writer's rate would
/// take a slice to write, and emptied after.
pub(crate) struct LinkSide {
    source: Arc<Engine>,
    destination: Arc<Engine>,
    sources: Vec<TopicPartition>,
    destinations: Vec<TopicPartition>,
    templates: Vec<Vec<Vec<u8>>>,
    next: Vec<i64>,
    fetches: u64,
    /// Bytes at the source not yet mirrored.
    waiting_bytes: u64,
}

impl LinkSide {
    pub(crate) fn new(
        dir: &Path,
        destination: Arc<Engine>,
        p: usize,
        segment: u64,
    ) -> Result<Self, String> {
        let source = Engine::open(
            EngineConfig::new(dir.join("link-source"))
                .shards(1)
                .pin_threads(false)
                .tail_cache_bytes(LINK_SOURCE_BYTES_MAX + (64 << 20))
                .backend(IoBackend::Simulated(SimConfig::default())),
        )
        .map_err(|e| format!("the link's source engine: {e}"))?;
        let config = crate::setup::ingest_config(segment);
        let sources = mirrored_partitions(&source, "link-src", p, config)?;
        let destinations = mirrored_partitions(&destination, "link-dst", p, config)?;
        Ok(LinkSide {
            source: Arc::new(source),
            destination,
            sources,
            destinations,
            templates: (0..p).map(fetch_template).collect(),
            next: vec![0; p],
            fetches: 0,
            waiting_bytes: 0,
        })
    }

    /// Runs the links for `slice` seconds with `mb_per_sec` worth of fetches waiting at the
    /// source (at most 1 GiB in memory).
    pub(crate) fn run(
        &mut self,
        side: &mut Side,
        slice: f64,
        mb_per_sec: f64,
    ) -> Result<(), String> {
        let p = self.sources.len();
        let want = (mb_per_sec * 1e6 * slice * 1.5).min(LINK_SOURCE_BYTES_MAX as f64);
        let per_partition = ((want / FETCH_BYTES as f64) as usize / p).max(2);
        for (t, tp) in self.sources.iter().enumerate() {
            for _ in 0..per_partition {
                let mut chunk = Vec::with_capacity(FETCH_BYTES);
                self.next[t] = stamp_fetch(
                    &self.templates[t],
                    self.next[t],
                    self.fetches % 4 == 3,
                    &mut chunk,
                );
                self.fetches += 1;
                self.waiting_bytes += chunk.len() as u64;
                self.source
                    .append(tp, chunk, Origin::Mirror)
                    .wait()
                    .map_err(|e| e.to_string())?;
            }
        }
        let links: Vec<MirrorLink> = (0..p)
            .map(|t| {
                MirrorLink::new(
                    self.source.clone(),
                    self.sources[t].clone(),
                    self.destination.clone(),
                    self.destinations[t].clone(),
                )
                .with_config(LinkConfig {
                    fetch_bytes: FETCH_BYTES,
                    appends_in_flight: 2,
                    ..LinkConfig::default()
                })
            })
            .collect();
        let mirrored = || links.iter().map(|l| l.stats().bytes).sum::<u64>();
        let stop = AtomicBool::new(false);
        let started = Instant::now();
        // The clock stops when the links have mirrored everything waiting (the rate is theirs,
        // not the fill's), or at the end of the slice.
        let (results, secs) = std::thread::scope(|s| {
            let handles: Vec<_> = links
                .iter()
                .map(|l| s.spawn(|| l.run_until(&stop).map_err(|e| e.to_string())))
                .collect();
            let limit = Duration::from_secs_f64(slice);
            while started.elapsed() < limit && mirrored() < self.waiting_bytes {
                std::thread::sleep(Duration::from_micros(500));
            }
            let secs = started.elapsed().as_secs_f64();
            stop.store(true, Ordering::Relaxed);
            let results: Vec<Result<(), String>> = handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Err("link panicked".into())))
                .collect();
            (results, secs)
        });
        let done = mirrored();
        self.waiting_bytes = self.waiting_bytes.saturating_sub(done);
        side.secs += secs;
        side.bytes += done;
        side.ops += links.iter().map(|l| l.stats().batches).sum::<u64>();
        for r in results {
            if let Err(e) = r {
                side.errors += 1;
                side.first_error.get_or_insert(e);
            }
        }
        // The source's memory back: what the destination holds is deleted there.
        for (src, dst) in self.sources.iter().zip(&self.destinations) {
            let mirrored = self
                .destination
                .state(dst)
                .wait()
                .map_err(|e| e.to_string())?
                .durable_end;
            self.source
                .delete_records(src, mirrored)
                .wait()
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}
