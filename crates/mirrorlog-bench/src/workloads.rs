//! The workloads: mirror-ingest, produce, recovery, failover and producer-state, each
//! returning an [`Outcome`] with mirrorlog's side first and the baselines after (the fetch
//! path's are `fetch.rs`).

#[path = "../../mirrorlog/benches/support/hashmap_psm.rs"]
mod hashmap_psm;
use crate::args::{Args, FETCH_BYTES};
use crate::baselines::{buffered_side, raw_read, raw_side, ring, BufferedFiles, RawFiles};
use crate::measure::{order, progress, timed, Outcome, Side};
use crate::setup::{
    client_batch, create_partitions, engine_for, fetch_template, ingest_config,
    mirrored_partitions, produce_config, segment_bytes, stamp_fetch,
};
use hashmap_psm::{chunk_map, chunk_ours, ours, turn_map, turn_ours, Workload, CHUNK_BATCHES};
use mirrorlog::api::Origin;
use mirrorlog::engine::{
    MirrorStart, OpenTransactions, PartitionConfig, StartMirroring, StopMirroring, TopicPartition,
};
use mirrorlog::format::{BatchBuilder, BatchOptions, Offset, ProducerFields, RecordSpec};
use mirrorlog::internals::log::{LogConfig, PartitionLog};
use mirrorlog::internals::recovery;
use mirrorlog::internals::segment::SegmentConfig;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub(crate) fn mirror_ingest(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let p = a.partitions;
    let slice = a.seconds / 2.0;
    let segment = segment_bytes(a, 128);
    let templates: Vec<Vec<Vec<u8>>> = (0..p).map(fetch_template).collect();
    // Every side writes the same bytes per durable operation: one fetch.
    let mut probe = Vec::new();
    stamp_fetch(&templates[0], 0, false, &mut probe);
    let fetch_len = probe.len();
    let raw = RawFiles::new(dir, p, segment, a.caching)?;
    let buffered_files = BufferedFiles::new(dir, "ingest", p, segment)?;
    let engine = std::sync::Arc::new(engine_for(&dir.join("engine"), a)?);
    let tps = mirrored_partitions(&engine, "ingest", p, ingest_config(segment))?;
    let mut link = crate::fetch::LinkSide::new(dir, engine.clone(), p, segment)?;
    let next: Vec<AtomicU64> = (0..p).map(|_| AtomicU64::new(0)).collect();
    let batches_per_fetch = templates[0].len() as u64;
    let stats_before = engine.stats().map_err(|e| e.to_string())?;
    let (mut ours, mut rawside, mut buffered, mut linked) = (
        Side::new("mirrorlog"),
        Side::new("raw-odirect"),
        Side::new("buffered"),
        Side::new("mirrorlog-link"),
    );
    for round in 0..2 {
        progress(&format!("mirror-ingest: round {} of 2", round + 1));
        for side in order(round, 4) {
            match side {
                3 => {
                    // The source holds what the raw writer's rate would take (a guess before
                    // it ran).
                    let rate = if rawside.secs > 0.0 {
                        rawside.mb_per_sec()
                    } else {
                        1500.0
                    };
                    link.run(&mut linked, slice, rate)?;
                }
                0 => timed(&mut ours, p, slice, &|t, n| {
                    let mut chunk = Vec::with_capacity(FETCH_BYTES);
                    let start = next[t].load(Ordering::Relaxed) as i64;
                    let end = stamp_fetch(&templates[t], start, n % 4 == 3, &mut chunk);
                    let len = chunk.len() as u64;
                    engine
                        .append(&tps[t], chunk, Origin::Mirror)
                        .wait()
                        .map_err(|e| e.to_string())?;
                    // Only a stored fetch moves the fetcher on.
                    next[t].store(end as u64, Ordering::Relaxed);
                    Ok(len)
                }),
                1 => raw_side(&mut rawside, &raw, p, slice, fetch_len, 1),
                _ => buffered_side(&mut buffered, &buffered_files, p, slice, fetch_len),
            }
        }
    }
    drop(link);
    let mut figures = Vec::new();
    let stats_after = engine.stats().map_err(|e| e.to_string())?;
    crate::setup::write_figures(&stats_before, &stats_after, "", 0, &mut figures);
    std::sync::Arc::into_inner(engine)
        .ok_or("mirror-ingest: the engine is still shared")?
        .close()
        .map_err(|e| e.to_string())?;
    Ok(Outcome {
        workload: "mirror-ingest",
        unit: "MB/s",
        notes: vec![format!(
            "{p} partitions, 1 MiB fetches of {batches_per_fetch} batches (16 KiB data, markers, a barrier every 4th), durable per fetch; {} MiB segments on every side; goal >= 0.90 of raw-odirect and >= 1.5x buffered; mirrorlog-link: {p} MirrorLinks from a source engine in memory (long-poll, 2 appends in flight) into the same destination engine, goal >= 0.90 of raw-odirect",
            segment >> 20
        )],
        sides: vec![ours, rawside, buffered, linked],
        steps: Vec::new(),
        figures,
    })
}

pub(crate) fn produce(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let n = a.callers;
    let partitions = (n * 2).max(2);
    let slice = a.seconds / 2.0;
    let segment = segment_bytes(a, 16);
    let batch_len = client_batch(0, 0).len();
    // The baselines write to one file per caller, as each caller alternates between its two
    // partitions: the same bytes per append, one append in flight per caller on every side.
    let raw = RawFiles::new(dir, n, segment, a.caching)?;
    let buffered_files = BufferedFiles::new(dir, "produce", n, segment)?;
    let engine = engine_for(&dir.join("produce"), a)?;
    let tps = create_partitions(&engine, "produce", partitions, produce_config(segment))?;
    let seqs: Vec<AtomicI32> = (0..partitions).map(|_| AtomicI32::new(0)).collect();
    let (mut ours, mut rawside, mut buffered) = (
        Side::new("mirrorlog"),
        Side::new("raw-odirect"),
        Side::new("buffered"),
    );
    let stats_before = engine.stats().map_err(|e| e.to_string())?;
    for round in 0..2 {
        progress(&format!("produce: round {} of 2", round + 1));
        for side in order(round, 3) {
            match side {
                0 => timed(&mut ours, n, slice, &|t, i| {
                    let p = (t * 2 + (i % 2) as usize) % partitions;
                    let seq = seqs[p].fetch_add(1, Ordering::Relaxed);
                    let b = client_batch(p as i64, seq);
                    let len = b.len() as u64;
                    match engine.append(&tps[p], b, Origin::Client).wait() {
                        Ok(_) => Ok(len),
                        Err(e) => {
                            // The sequence was not used: the next append reuses it.
                            seqs[p].fetch_sub(1, Ordering::Relaxed);
                            Err(e.to_string())
                        }
                    }
                }),
                1 => raw_side(&mut rawside, &raw, n, slice, batch_len, 1),
                _ => buffered_side(&mut buffered, &buffered_files, n, slice, batch_len),
            }
        }
    }
    let mut figures = Vec::new();
    let stats_after = engine.stats().map_err(|e| e.to_string())?;
    crate::setup::write_figures(
        &stats_before,
        &stats_after,
        "fdatasyncs per append",
        ours.ops,
        &mut figures,
    );
    engine.close().map_err(|e| e.to_string())?;
    Ok(Outcome {
        workload: "produce",
        unit: "appends/s",
        notes: vec![format!(
            "{n} caller threads, {partitions} partitions, {batch_len}-byte client batches, durable acks, one append in flight per caller on every side; {} MiB segments; goal >= 1.0x raw-odirect's appends/s with p99 <= 1.2x its p99 (both)",
            segment >> 20
        )],
        sides: vec![ours, rawside, buffered],
        steps: Vec::new(),
        figures,
    })
}

pub(crate) fn recovery_workload(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let dir = dir.join("recovery");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let config = LogConfig {
        segment: SegmentConfig {
            segment_bytes: 256 << 20,
            index_interval_bytes: 4096,
            commit_buffer_bytes: 2 << 20,
            preallocate_step_bytes: mirrorlog::internals::segment::PREALLOCATE_STEP_BYTES_DEFAULT,
        },
        ..LogConfig::default()
    };
    let total = a.recovery_mib << 20;
    let mut io = ring(64, a.caching)?;
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
        for side in order(round, 2) {
            if side == 1 {
                let t = Instant::now();
                raw.bytes += raw_read(&mut io, &dir)?;
                raw.secs += t.elapsed().as_secs_f64();
                raw.ops += 1;
                continue;
            }
            // This workload measures the recovery *scan*: without its recovery point the log
            // is scanned whole (with it, recovery would read only the active segment).
            let _ = std::fs::remove_file(
                dir.join(mirrorlog::internals::log::RECOVERY_POINT_CHECKPOINT),
            );
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
    }
    Ok(Outcome {
        workload: "recovery",
        unit: "MB/s",
        notes: vec![format!(
            "{} MiB after an unclean stop, 2 alternating rounds; time to first durable append p50 {:.3} s; goal >= 0.90 of the raw reader",
            written >> 20,
            first_append.q(0.5) as f64 / 1e6
        )],
        sides: vec![ours, raw],
        steps: Vec::new(),
        figures: Vec::new(),
    })
}

pub(crate) fn failover(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let engine = engine_for(&dir.join("failover"), a)?;
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
        steps: Vec::new(),
        figures: Vec::new(),
    })
}

/// The producer-state work of ingest and produce, CPU only: `producers` producers, blocks of
/// 64 single-batch idempotent client appends alternating with mirrored chunks of 64 batches,
/// on our PSM and on the `hashmap-psm` baseline (`std::collections::HashMap` with a fast hash,
/// foldhash — the headline — and with the default SipHash, for reference), in rounds whose side
/// order alternates, on this thread. Latency is per block of 64 batches.
pub(crate) fn producer_state(a: &Args) -> Result<Outcome, String> {
    type Sip = std::collections::hash_map::RandomState;
    type Fold = foldhash::fast::RandomState;
    let n = a.producers;
    progress(&format!("producer-state: {n} producers"));
    let (mut wo, mut wf, mut ws) = (Workload::new(n), Workload::new(n), Workload::new(n));
    let mut psm = ours(n, &mut wo);
    let mut fast = hashmap_psm::map::<Fold>(n, &mut wf);
    let mut sip = hashmap_psm::map::<Sip>(n, &mut ws);
    let (mut our_side, mut fast_side, mut sip_side) = (
        Side::new("mirrorlog"),
        Side::new("hashmap-psm"),
        Side::new("hashmap-psm-siphash"),
    );
    let slice = Duration::from_secs_f64((a.seconds / 6.0).max(0.05));
    let mut buf = Vec::with_capacity(CHUNK_BATCHES);
    let block = |side: &mut Side, one: &mut dyn FnMut(u64)| {
        let start = Instant::now();
        let mut blocks = 0u64;
        while start.elapsed() < slice {
            let t = Instant::now();
            one(blocks);
            let _ = side
                .latency_us
                .record((t.elapsed().as_micros() as u64).max(1));
            blocks += 1;
        }
        side.ops += blocks * CHUNK_BATCHES as u64;
        side.secs += start.elapsed().as_secs_f64();
    };
    for round in 0..2 {
        progress(&format!("producer-state: round {} of 2", round + 1));
        for side in order(round, 3) {
            match side {
                0 => block(&mut our_side, &mut |i| {
                    if i % 2 == 0 {
                        turn_ours(&mut psm, &mut wo, &mut buf);
                    } else {
                        chunk_ours(&mut psm, &mut wo, &mut buf);
                    }
                }),
                1 => block(&mut fast_side, &mut |i| {
                    if i % 2 == 0 {
                        turn_map(&mut fast, &mut wf, &mut buf);
                    } else {
                        chunk_map(&mut fast, &mut wf, &mut buf);
                    }
                }),
                _ => block(&mut sip_side, &mut |i| {
                    if i % 2 == 0 {
                        turn_map(&mut sip, &mut ws, &mut buf);
                    } else {
                        chunk_map(&mut sip, &mut ws, &mut buf);
                    }
                }),
            }
        }
    }
    let per_producer = |bytes: usize| bytes as f64 / n as f64;
    Ok(Outcome {
        workload: "producer-state",
        unit: "batches/s",
        notes: vec![format!(
            "{n} producers, CPU only, turns of 64 client appends (ours with the lookahead) alternating with 64-batch mirrored chunks; hashmap-psm hashes with foldhash, hashmap-psm-siphash with std's SipHash; memory {:.1} B/producer vs hashmap-psm est. {:.1}",
            per_producer(psm.memory_bytes()),
            per_producer(fast.memory_bytes())
        )],
        sides: vec![our_side, fast_side, sip_side],
        steps: Vec::new(),
        figures: Vec::new(),
    })
}
