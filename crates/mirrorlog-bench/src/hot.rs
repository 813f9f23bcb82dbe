//! `hot-partitions`: group commit, where many producers write to few partitions. 64
//! idempotent producers (own id, own sequences), each with up to 5 appends in flight (Kafka's
//! default `max.in.flight.requests.per.connection`), over 4 partitions; 16 KiB batches of
//! 1 KiB records; acks after fdatasync. Baselines at the same concurrency (64 × 5 appends
//! outstanding) on the same files:
//! - `kafka-style`: buffered `pwrite` + `fdatasync` per append under a per-partition lock, as
//!   Kafka with `flush.messages=1`;
//! - `batcher-style`: one appender thread per partition drains every queued append into one
//!   buffered write and one fdatasync, as Redpanda's appender does.
//!
//! Closed loop first (sides alternating in rounds), then open-loop steps at fixed offered rates
//! of 25/50/75/100 % of mirrorlog's closed-loop saturation, the same rates for every side, with
//! latency measured from each append's scheduled send time (no coordinated omission).

use crate::args::Args;
use crate::baselines::BufferedFiles;
use crate::measure::{histogram, order, progress, Outcome, Side, Step, KEEP_GOING};
use crate::setup::{create_partitions, engine_for, produce_config, segment_bytes};
use hdrhistogram::Histogram;
use mirrorlog::api::Origin;
use mirrorlog::engine::{AppendOutcome, Call, Engine, EngineError, TopicPartition};
use mirrorlog::format::{BatchBuilder, BatchOptions, ProducerFields, RecordSpec};
use std::collections::VecDeque;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

const PRODUCERS: usize = 64;
const IN_FLIGHT: usize = 5;
const PARTITIONS: usize = 4;
const BATCH_BYTES: usize = 16 << 10;
const RECORD_VALUE_BYTES: usize = 1000;
/// Open-loop steps, as fractions of mirrorlog's closed-loop appends/s.
const STEPS: [f64; 4] = [0.25, 0.5, 0.75, 1.0];

/// A 16 KiB batch of 1 KiB records from producer `producer` at sequence `seq`.
fn batch(producer: usize, seq: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        producer: ProducerFields {
            producer_id: producer as i64 + 1,
            producer_epoch: 0,
            base_sequence: seq,
        },
        ..BatchOptions::default()
    });
    let value = [0x68u8; RECORD_VALUE_BYTES];
    while b.size_bytes() + RECORD_VALUE_BYTES + 20 <= BATCH_BYTES {
        b.push(RecordSpec {
            timestamp: 1_764_403_200_000,
            key: None,
            value: Some(&value),
            headers: &[],
        });
    }
    b.build()
}

fn records_per_batch() -> i32 {
    mirrorlog::format::inspect(&batch(0, 0), 0).map_or(1, |v| v.header().last_offset_delta + 1)
}

/// Wakes a parked thread (an open-loop producer waiting for its oldest append or its next send
/// time, whichever comes first).
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// What one producer thread measured.
struct Measured {
    ops: u64,
    bytes: u64,
    errors: u64,
    first_error: Option<String>,
    latency_us: Histogram<u64>,
    elapsed: f64,
}

impl Measured {
    fn new() -> Self {
        Measured {
            ops: 0,
            bytes: 0,
            errors: 0,
            first_error: None,
            latency_us: histogram(),
            elapsed: 0.0,
        }
    }
    fn done(&mut self, since: Instant, bytes: u64) {
        let _ = self
            .latency_us
            .record((since.elapsed().as_micros() as u64).max(1));
        self.ops += 1;
        self.bytes += bytes;
    }
    fn failed(&mut self, e: impl std::fmt::Display) {
        self.errors += 1;
        self.first_error.get_or_insert_with(|| e.to_string());
    }
}

fn merge_into(side: &mut Side, measured: Vec<Measured>, secs: f64) {
    side.secs += secs.max(measured.iter().map(|m| m.elapsed).fold(0.0, f64::max));
    for m in measured {
        side.ops += m.ops;
        side.bytes += m.bytes;
        side.errors += m.errors;
        if side.first_error.is_none() {
            side.first_error = m.first_error;
        }
        let _ = side.latency_us.add(&m.latency_us);
    }
}

fn merge_step(side: &str, offered: f64, measured: Vec<Measured>, secs: f64) -> Step {
    let mut latency_us = histogram();
    let (mut ops, mut errors) = (0, 0);
    let elapsed = secs.max(measured.iter().map(|m| m.elapsed).fold(0.0, f64::max));
    for m in &measured {
        ops += m.ops;
        errors += m.errors;
        let _ = latency_us.add(&m.latency_us);
    }
    Step {
        side: side.to_string(),
        offered_per_sec: offered,
        achieved_per_sec: ops as f64 / elapsed.max(1e-9),
        errors,
        latency_us,
    }
}

/// The engine's side: one thread per producer, each with up to `IN_FLIGHT` appends in flight,
/// sequences in order. `rate`: appends/s offered by all producers together (open loop), or
/// `None` for the closed loop (the next append goes as soon as the window has room).
fn engine_run(
    engine: &Engine,
    tps: &[TopicPartition],
    seqs: &[AtomicU64],
    secs: f64,
    rate: Option<f64>,
) -> Vec<Measured> {
    let records = records_per_batch();
    let keep_going = KEEP_GOING.load(Ordering::Relaxed);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                s.spawn(move || {
                    let mut m = Measured::new();
                    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
                    let mut cx = Context::from_waker(&waker);
                    let interval = rate.map(|r| Duration::from_secs_f64(PRODUCERS as f64 / r));
                    let start = Instant::now();
                    let deadline = start + Duration::from_secs_f64(secs);
                    // Producers' schedules are spread over one interval.
                    let mut next_send = start
                        + interval
                            .map_or(Duration::ZERO, |i| i.mul_f64(p as f64 / PRODUCERS as f64));
                    let mut window: VecDeque<(Instant, u64, Call<AppendOutcome>)> =
                        VecDeque::with_capacity(IN_FLIGHT);
                    let mut stopped = false;
                    loop {
                        // Harvest finished appends, oldest first.
                        while let Some((_, _, call)) = window.front_mut() {
                            match Pin::new(call).poll(&mut cx) {
                                Poll::Ready(r) => {
                                    let Some((since, bytes, _)) = window.pop_front() else {
                                        break;
                                    };
                                    match r {
                                        Ok(_) => m.done(since, bytes),
                                        Err(e) => {
                                            m.failed(e);
                                            stopped |= !keep_going;
                                        }
                                    }
                                }
                                Poll::Pending => break,
                            }
                        }
                        let now = Instant::now();
                        let sending = !stopped && now < deadline;
                        if !sending && window.is_empty() {
                            break;
                        }
                        if sending && window.len() < IN_FLIGHT && now >= next_send {
                            let seq = seqs[p].fetch_add(records as u64, Ordering::Relaxed);
                            let b = batch(p, seq as i32);
                            let len = b.len() as u64;
                            // Open loop: the latency counts from the scheduled time.
                            let since = if interval.is_some() { next_send } else { now };
                            let call = engine.append(&tps[p % PARTITIONS], b, Origin::Client);
                            window.push_back((since, len, call));
                            if let Some(i) = interval {
                                next_send += i;
                            }
                            continue;
                        }
                        // Wait for the oldest append, or the next send time.
                        let wake_at = if sending && window.len() < IN_FLIGHT {
                            next_send
                        } else {
                            now + Duration::from_millis(50)
                        };
                        if window.is_empty() {
                            std::thread::sleep(wake_at.saturating_duration_since(now));
                        } else {
                            std::thread::park_timeout(wake_at.saturating_duration_since(now));
                        }
                    }
                    m.elapsed = start.elapsed().as_secs_f64();
                    m
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}

/// How a baseline appends one batch for client `c` (of `PRODUCERS * IN_FLIGHT`).
trait Appender: Sync {
    fn append(&self, client: usize, data: &[u8]) -> Result<(), String>;
    fn fdatasyncs(&self) -> u64;
}

/// Kafka-style: `pwrite` + `fdatasync` per append under the partition's lock.
struct KafkaStyle {
    files: BufferedFiles,
    syncs: AtomicU64,
}

impl Appender for KafkaStyle {
    fn append(&self, client: usize, data: &[u8]) -> Result<(), String> {
        self.files.append(client % PARTITIONS, data)?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn fdatasyncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }
}

/// One client's slot in the batcher: set when its append is durable.
#[derive(Default)]
struct Slot {
    done: Mutex<Option<Result<(), String>>>,
    ready: Condvar,
}

/// A partition's queue of clients waiting for the batcher.
#[derive(Default)]
struct Queue {
    waiting: Mutex<Vec<usize>>,
    nonempty: Condvar,
}

/// Batcher-style: per partition an appender thread takes every queued append, writes them in
/// one `pwrite` and one `fdatasync`, then acks them all.
struct BatcherStyle {
    queues: Vec<Queue>,
    slots: Vec<Slot>,
    syncs: AtomicU64,
}

impl BatcherStyle {
    fn new() -> Self {
        BatcherStyle {
            queues: (0..PARTITIONS).map(|_| Queue::default()).collect(),
            slots: (0..PRODUCERS * IN_FLIGHT)
                .map(|_| Slot::default())
                .collect(),
            syncs: AtomicU64::new(0),
        }
    }

    /// The appender loop of partition `p` until `stop`.
    fn appender(&self, p: usize, files: &BufferedFiles, data_len: usize, stop: &AtomicBool) {
        let mut taken: Vec<usize> = Vec::with_capacity(PRODUCERS * IN_FLIGHT);
        let all = vec![0x68u8; data_len * PRODUCERS * IN_FLIGHT];
        let q = &self.queues[p];
        loop {
            {
                let mut waiting = q.waiting.lock().unwrap_or_else(|e| e.into_inner());
                while waiting.is_empty() {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    waiting = q
                        .nonempty
                        .wait_timeout(waiting, Duration::from_millis(10))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                std::mem::swap(&mut *waiting, &mut taken);
            }
            let result = files.append(p, &all[..data_len * taken.len()]).map(|_| ());
            self.syncs.fetch_add(1, Ordering::Relaxed);
            for c in taken.drain(..) {
                let slot = &self.slots[c];
                *slot.done.lock().unwrap_or_else(|e| e.into_inner()) = Some(result.clone());
                slot.ready.notify_one();
            }
        }
    }
}

impl Appender for BatcherStyle {
    fn append(&self, client: usize, _data: &[u8]) -> Result<(), String> {
        let q = &self.queues[client % PARTITIONS];
        q.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(client);
        q.nonempty.notify_one();
        let slot = &self.slots[client];
        let mut done = slot.done.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = done.take() {
                return r;
            }
            done = slot.ready.wait(done).unwrap_or_else(|e| e.into_inner());
        }
    }
    fn fdatasyncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }
}

/// A baseline's side: `PRODUCERS * IN_FLIGHT` client threads, one append outstanding each (the
/// same number of appends in flight as the engine's producers keep), closed or open loop.
fn baseline_run(appender: &dyn Appender, secs: f64, rate: Option<f64>) -> Vec<Measured> {
    let clients = PRODUCERS * IN_FLIGHT;
    let data = batch(0, 0);
    let keep_going = KEEP_GOING.load(Ordering::Relaxed);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let data = &data;
                s.spawn(move || {
                    let mut m = Measured::new();
                    let interval = rate.map(|r| Duration::from_secs_f64(clients as f64 / r));
                    let start = Instant::now();
                    let deadline = start + Duration::from_secs_f64(secs);
                    let mut next_send = start
                        + interval.map_or(Duration::ZERO, |i| i.mul_f64(c as f64 / clients as f64));
                    while Instant::now() < deadline {
                        let now = Instant::now();
                        if now < next_send {
                            std::thread::sleep(next_send - now);
                        }
                        let since = if interval.is_some() {
                            next_send
                        } else {
                            Instant::now()
                        };
                        match appender.append(c, data) {
                            Ok(()) => m.done(since, data.len() as u64),
                            Err(e) => {
                                m.failed(e);
                                if !keep_going {
                                    break;
                                }
                            }
                        }
                        if let Some(i) = interval {
                            next_send += i;
                        }
                    }
                    m.elapsed = start.elapsed().as_secs_f64();
                    m
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}

fn engine_syncs(engine: &Engine) -> Result<u64, String> {
    Ok(engine
        .stats()
        .map_err(|e: EngineError| e.to_string())?
        .iter()
        .map(|s| s.fdatasyncs)
        .sum())
}

pub(crate) fn hot_partitions(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let segment = segment_bytes(a, 64);
    let slice = a.seconds / 2.0;
    let step_secs = (a.seconds / 4.0).max(0.1);
    let engine = engine_for(&dir.join("hot"), a)?;
    let tps: Vec<TopicPartition> =
        create_partitions(&engine, "hot", PARTITIONS, produce_config(segment))?;
    let seqs: Vec<AtomicU64> = (0..PRODUCERS).map(|_| AtomicU64::new(0)).collect();
    let kafka = KafkaStyle {
        files: BufferedFiles::new(dir, "hot-kafka", PARTITIONS, segment)?,
        syncs: AtomicU64::new(0),
    };
    let batcher = BatcherStyle::new();
    let batcher_files = BufferedFiles::new(dir, "hot-batcher", PARTITIONS, segment)?;
    let data_len = batch(0, 0).len();
    let mut sides = vec![
        Side::new("mirrorlog"),
        Side::new("kafka-style"),
        Side::new("batcher-style"),
    ];
    for s in &mut sides {
        s.fdatasyncs = Some(0);
    }
    let mut steps = Vec::new();
    let stats_before = engine.stats().map_err(|e| e.to_string())?;
    // The batcher's appender threads run for the whole workload; they sleep when idle.
    let stop = AtomicBool::new(false);
    let result = std::thread::scope(|s| -> Result<(), String> {
        for p in 0..PARTITIONS {
            let (batcher, files, stop) = (&batcher, &batcher_files, &stop);
            s.spawn(move || batcher.appender(p, files, data_len, stop));
        }
        let run =
            |side: usize, secs: f64, rate: Option<f64>| -> Result<(Vec<Measured>, u64), String> {
                Ok(match side {
                    0 => {
                        let before = engine_syncs(&engine)?;
                        let m = engine_run(&engine, &tps, &seqs, secs, rate);
                        (m, engine_syncs(&engine)? - before)
                    }
                    1 => {
                        let before = kafka.fdatasyncs();
                        let m = baseline_run(&kafka, secs, rate);
                        (m, kafka.fdatasyncs() - before)
                    }
                    _ => {
                        let before = batcher.fdatasyncs();
                        let m = baseline_run(&batcher, secs, rate);
                        (m, batcher.fdatasyncs() - before)
                    }
                })
            };
        let mut measure = || -> Result<(), String> {
            for round in 0..2 {
                progress(&format!("hot-partitions: round {} of 2", round + 1));
                for side in order(round, 3) {
                    let (m, syncs) = run(side, slice, None)?;
                    merge_into(&mut sides[side], m, slice);
                    if let Some(n) = sides[side].fdatasyncs.as_mut() {
                        *n += syncs;
                    }
                }
            }
            let saturation = sides[0].ops_per_sec();
            for (k, fraction) in STEPS.iter().enumerate() {
                let rate = saturation * fraction;
                progress(&format!(
                    "hot-partitions: open loop at {:.0} % ({rate:.0} appends/s)",
                    fraction * 100.0
                ));
                for side in order(k, 3) {
                    let (m, _) = run(side, step_secs, Some(rate))?;
                    steps.push(merge_step(&sides[side].name, rate, m, step_secs));
                }
            }
            Ok(())
        };
        let result = measure();
        // The appenders leave once this is set: the scope waits for them.
        stop.store(true, Ordering::Relaxed);
        result
    });
    result?;
    let mut figures = Vec::new();
    let stats_after = engine.stats().map_err(|e| e.to_string())?;
    crate::setup::write_figures(&stats_before, &stats_after, "", 0, &mut figures);
    engine.close().map_err(|e| e.to_string())?;
    let notes = vec![
        format!(
            "{PRODUCERS} idempotent producers, up to {IN_FLIGHT} appends in flight each, {PARTITIONS} partitions, {data_len}-byte batches of 1 KiB records, acks after fdatasync; baselines at the same {} appends outstanding",
            PRODUCERS * IN_FLIGHT
        ),
        sides
            .iter()
            .map(|s| {
                let syncs = s.fdatasyncs.unwrap_or(0);
                format!(
                    "{}: {:.0} fdatasyncs/s, {:.1} appends per fdatasync",
                    s.name,
                    syncs as f64 / s.secs.max(1e-9),
                    s.ops as f64 / (syncs as f64).max(1.0)
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
        "goal: >= 10x kafka-style's appends/s, >= 1.0x batcher-style's, p99 <= kafka-style's (all three)".into(),
    ];
    Ok(Outcome {
        workload: "hot-partitions",
        unit: "appends/s",
        notes,
        sides,
        steps,
        figures,
    })
}
