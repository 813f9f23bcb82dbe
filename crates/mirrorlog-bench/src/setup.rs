//! What the workloads share to set up: the engines they open (their journal, I/O backend and
//! caching), partition configs and creation, the batches clients and mirrors send, fetch
//! answers' templates, and the engine's write figures between two snapshots of its stats.

use crate::args::{Args, FETCH_BYTES, MIRROR_BATCH_BYTES};
use crate::measure::Figure;
use mirrorlog::engine::*;
use mirrorlog::format::{self, *};
use mirrorlog::internals::io::FileCaching;
use std::path::Path;
/// The 1 MiB mirrored fetch of one partition: 16 KiB batches of 4 idempotent producers, a
/// transaction with its COMMIT marker, and every fourth fetch a barrier (the source failed
/// over once), with base offsets from `base`.
pub(crate) fn fetch_template(partition: usize) -> Vec<Vec<u8>> {
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
pub(crate) fn stamp_fetch(
    template: &[Vec<u8>],
    next: i64,
    barrier: bool,
    out: &mut Vec<u8>,
) -> i64 {
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

/// The segment size of a workload: `--segment-mib`, or the workload's default. The baselines'
/// files are segments of the same size.
pub(crate) fn segment_bytes(a: &Args, default_mib: u64) -> u64 {
    a.segment_mib.unwrap_or(default_mib) << 20
}

/// Segments are preallocated: keep the footprint of many partitions modest.
pub(crate) fn ingest_config(segment_bytes: u64) -> PartitionConfig {
    PartitionConfig {
        segment_bytes,
        retention_bytes: Some(256 << 20),
        ..PartitionConfig::default()
    }
}

pub(crate) fn produce_config(segment_bytes: u64) -> PartitionConfig {
    PartitionConfig {
        segment_bytes,
        ..PartitionConfig::default()
    }
}

pub(crate) fn engine_for(dir: &Path, a: &Args) -> Result<Engine, String> {
    let backend = match a.caching {
        FileCaching::Direct => IoBackend::Uring,
        FileCaching::PageCache => IoBackend::UringPageCache,
    };
    Engine::open(
        EngineConfig::new(dir)
            .cluster_id("bench")
            .backend(backend)
            .journal_bytes(a.journal_bytes),
    )
    .map_err(|e| e.to_string())
}

/// Partitions 0..count of `topic`, created empty.
pub(crate) fn create_partitions(
    engine: &Engine,
    topic: &str,
    count: usize,
    config: PartitionConfig,
) -> Result<Vec<TopicPartition>, String> {
    let tps: Vec<TopicPartition> = (0..count as i32)
        .map(|i| TopicPartition::new(topic, i))
        .collect();
    for tp in &tps {
        engine
            .create_partition(tp, config)
            .wait()
            .map_err(|e| e.to_string())?;
    }
    Ok(tps)
}

/// Partitions 0..count of `topic`, created empty and mirroring (from a source named
/// "source").
pub(crate) fn mirrored_partitions(
    engine: &Engine,
    topic: &str,
    count: usize,
    config: PartitionConfig,
) -> Result<Vec<TopicPartition>, String> {
    let tps = create_partitions(engine, topic, count, config)?;
    for tp in &tps {
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
    Ok(tps)
}

pub(crate) fn client_batch(producer: i64, seq: i32) -> Vec<u8> {
    client_batch_of(producer, seq, 1, &[0x42; 950])
}

/// An idempotent client batch of `records` records with `value` each, from sequence `seq`.
pub(crate) fn client_batch_of(producer: i64, seq: i32, records: usize, value: &[u8]) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        producer: ProducerFields {
            producer_id: producer,
            producer_epoch: 0,
            base_sequence: seq,
        },
        ..BatchOptions::default()
    });
    for _ in 0..records {
        b.push(RecordSpec {
            timestamp: 1_764_403_200_000,
            key: None,
            value: Some(value),
            headers: &[],
        });
    }
    b.build()
}

/// The engine's write amplification and fdatasyncs between two snapshots of its stats.
pub(crate) fn write_figures(
    before: &[ShardStats],
    after: &[ShardStats],
    per: &'static str,
    per_count: u64,
    figures: &mut Vec<Figure>,
) {
    let (w0, a0, s0) = totals(before);
    let (w1, a1, s1) = totals(after);
    figures.push(Figure::new(
        crate::report::WRITE_AMPLIFICATION,
        (w1 - w0) as f64 / (a1 - a0).max(1) as f64,
        "x",
    ));
    if per_count > 0 {
        figures.push(Figure::new(
            per,
            (s1 - s0) as f64 / per_count as f64,
            "fdatasyncs",
        ));
    }
}

/// The engine's totals over its shards.
fn totals(stats: &[ShardStats]) -> (u64, u64, u64) {
    stats.iter().fold((0, 0, 0), |(w, a, s), x| {
        (
            w + x.device_bytes_written,
            a + x.append_bytes,
            s + x.fdatasyncs,
        )
    })
}
