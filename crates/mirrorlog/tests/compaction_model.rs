//! A random keyed workload — three idempotent producers, a transactional one that commits or
//! aborts, tombstones, rolls, delete-records — compacted at random moments with the clock moving
//! on, against a model of Kafka's cleaner rules: after each pass, every record a consumer reads
//! (both isolation levels) is exactly the model's survivors, at their own offsets. The model:
//! below the pass's first uncleanable offset, aborted records go; a key keeps only its newest
//! committed record; a tombstone stays until its batch's delete horizon (set by the first pass
//! that keeps it, `now + delete.retention.ms`) has passed. The producer state never changes by
//! cleaning, and a full recovery of the compacted log reads the same. Replay a failure with
//! `MIRRORLOG_SEED`.

mod common;

use common::Rng;
use mirrorlog::format::{
    self, BatchBuilder, BatchIter, BatchOptions, MarkerSpec, Offset, ProducerFields, RecordSpec,
};
use mirrorlog::internals::io::{Io, SimConfig, SimIo};
use mirrorlog::internals::log::{
    CleanupPolicy, CompactionConfig, Isolation, LogConfig, OffsetMap, PartitionLog,
};
use mirrorlog::internals::producer_state::Origin;
use std::collections::BTreeMap;
use std::path::Path;

const DIR: &str = "/sim/model-0";
const RETENTION_MS: i64 = 86_400_000;
const CONFIG: LogConfig = LogConfig {
    compaction: CompactionConfig {
        policy: CleanupPolicy::COMPACT_DELETE,
        delete_retention_ms: RETENTION_MS,
        ..CompactionConfig::DEFAULT
    },
    ..common::log_config(64 << 10, 512, 32 << 10)
};
const TXN_PRODUCER: i64 = 7;
const CASES: u64 = 24;
const OPS: u64 = 300;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Txn {
    None,
    Open,
    Committed,
    Aborted,
}

#[derive(Debug, Clone)]
struct Rec {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    batch: usize,
    txn: Txn,
    alive: bool,
}

#[derive(Debug, Default)]
struct Model {
    recs: BTreeMap<i64, Rec>,
    /// Per batch (by index): its delete horizon.
    horizons: Vec<Option<i64>>,
    log_start: i64,
}

impl Model {
    /// What a pass at `now` over everything below `upper` leaves.
    fn clean(&mut self, upper: i64, now: i64) {
        let mut newest: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
        for (&o, r) in self.recs.iter().filter(|(o, r)| **o < upper && r.alive) {
            if r.txn != Txn::Aborted {
                newest.insert(r.key.clone(), o);
            }
        }
        let mut set_horizon = Vec::new();
        for (&o, r) in self.recs.iter_mut().filter(|(o, r)| **o < upper && r.alive) {
            if r.txn == Txn::Aborted || newest[&r.key] != o {
                r.alive = false;
                continue;
            }
            if r.value.is_none() {
                match self.horizons[r.batch] {
                    Some(h) if now >= h => r.alive = false,
                    Some(_) => {}
                    None => set_horizon.push(r.batch),
                }
            }
        }
        for b in set_horizon {
            self.horizons[b] = Some(now + RETENTION_MS);
        }
    }

    fn visible(&self, end: i64, committed: bool) -> Vec<(i64, Vec<u8>, Option<Vec<u8>>)> {
        self.recs
            .iter()
            .filter(|(o, r)| {
                **o >= self.log_start
                    && **o < end
                    && r.alive
                    && (!committed || matches!(r.txn, Txn::None | Txn::Committed))
            })
            .map(|(o, r)| (*o, r.key.clone(), r.value.clone()))
            .collect()
    }
}

fn consumed(
    io: &mut dyn Io,
    log: &mut PartitionLog,
    committed: bool,
) -> Vec<(i64, Vec<u8>, Option<Vec<u8>>)> {
    let isolation = if committed {
        Isolation::ReadCommitted
    } else {
        Isolation::ReadUncommitted
    };
    let end = if committed {
        log.last_stable_offset()
    } else {
        log.high_watermark()
    };
    let mut out = Vec::new();
    let mut at = log.log_start();
    while at < end {
        let r = log.read(io, at, 1 << 20, isolation).unwrap();
        let Some(last) = BatchIter::new(&r.records, 0).last() else {
            break;
        };
        for batch in BatchIter::new(&r.records, 0) {
            let h = *batch.header();
            if h.attributes.is_control() {
                continue;
            }
            let aborted = committed
                && h.attributes.is_transactional()
                && r.aborted.iter().any(|a| {
                    a.producer_id == h.producer.producer_id
                        && a.first_offset <= h.base_offset
                        && h.base_offset < a.last_offset
                });
            if aborted {
                continue;
            }
            for rec in batch.decompressed_records(1 << 24).unwrap().iter() {
                let rec = rec.unwrap();
                let o = h.base_offset.0 + i64::from(rec.offset_delta);
                if o >= at.0 && o < end.0 {
                    out.push((o, rec.key.unwrap().to_vec(), rec.value.map(<[u8]>::to_vec)));
                }
            }
        }
        at = Offset(last.header().last_offset().0 + 1);
    }
    out
}

/// Runs one workload; returns (passes run, records they removed, tombstones among those).
fn run(seed: u64) -> (u64, u64, u64) {
    let mut rng = Rng(seed);
    let mut io = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let mut log = PartitionLog::create(&mut io, Path::new(DIR), CONFIG).unwrap();
    let mut model = Model::default();
    let mut seqs = [0i32; 8];
    let mut now = common::RECORDS_MS;
    let mut open_txn: Vec<i64> = Vec::new();
    let codecs = [
        format::Compression::None,
        format::Compression::Gzip,
        format::Compression::Snappy,
        format::Compression::Lz4,
        format::Compression::Zstd,
    ];
    let mut map = OffsetMap::new(1 << 20);
    let (mut passes, mut removed, mut tombstones) = (0, 0, 0);
    for op in 0..OPS {
        let what = format!("seed {seed}, op {op}");
        match rng.below(20) {
            0..=11 => {
                // A data batch: producer 1-3, or the transactional one.
                let txn = rng.below(4) == 0;
                let producer = if txn {
                    TXN_PRODUCER
                } else {
                    1 + rng.below(3) as i64
                };
                let n = 1 + rng.below(3) as usize;
                let mut b = BatchBuilder::new(BatchOptions {
                    producer: ProducerFields {
                        producer_id: producer,
                        producer_epoch: 0,
                        base_sequence: seqs[producer as usize],
                    },
                    transactional: txn,
                    ..BatchOptions::default()
                });
                let recs: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..n)
                    .map(|_| {
                        let key = format!("k{}", rng.below(12)).into_bytes();
                        let value = (rng.below(8) != 0).then(|| format!("v{op}").into_bytes());
                        (key, value)
                    })
                    .collect();
                for (k, v) in &recs {
                    b.push(RecordSpec {
                        timestamp: now,
                        key: Some(k),
                        value: v.as_deref(),
                        headers: &[],
                    });
                }
                let codec = codecs[rng.below(5) as usize];
                let bytes = b.build_compressed(codec).unwrap();
                let outcome = log
                    .append(&mut io, &bytes, Origin::Client)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                seqs[producer as usize] += n as i32;
                let batch = model.horizons.len();
                model.horizons.push(None);
                for (i, (key, value)) in recs.into_iter().enumerate() {
                    model.recs.insert(
                        outcome.first_offset.0 + i as i64,
                        Rec {
                            key,
                            value,
                            batch,
                            txn: if txn { Txn::Open } else { Txn::None },
                            alive: true,
                        },
                    );
                }
                if txn {
                    open_txn.push(outcome.first_offset.0);
                }
            }
            12 | 13 if !open_txn.is_empty() => {
                let commit = rng.below(2) == 0;
                let marker = format::build_marker(&MarkerSpec {
                    base_offset: Offset(0),
                    partition_leader_epoch: 0,
                    producer_id: TXN_PRODUCER,
                    producer_epoch: 0,
                    commit,
                    coordinator_epoch: 0,
                    timestamp: now,
                });
                log.append(&mut io, &marker, Origin::Coordinator)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                model.horizons.push(None);
                for r in model.recs.values_mut().filter(|r| r.txn == Txn::Open) {
                    r.txn = if commit { Txn::Committed } else { Txn::Aborted };
                }
                open_txn.clear();
            }
            14..=16 => {
                log.commit(&mut io).unwrap();
                log.roll(&mut io).unwrap();
            }
            17 if rng.below(4) == 0 => {
                log.commit(&mut io).unwrap();
                let hw = log.high_watermark().0;
                let start = log.log_start().0;
                if hw > start {
                    let to = start + rng.below((hw - start) as u64 / 4 + 1) as i64;
                    log.delete_records(&mut io, Offset(to)).unwrap();
                    model.log_start = log.log_start().0;
                }
            }
            _ => {
                log.commit(&mut io).unwrap();
                now += rng.below(2 * RETENTION_MS as u64) as i64;
                let psm = common::snapshot_kept(log.producer_state());
                let upper = log.cleanable(&mut io, now).unwrap().first_uncleanable.0;
                let (stats, m) = log.clean(&mut io, now, map, true);
                map = m;
                let ran = stats.unwrap_or_else(|e| panic!("{what}: clean: {e}"));
                log.check_invariants();
                if let Some(stats) = ran {
                    let alive = |m: &Model| m.recs.values().filter(|r| r.alive).count() as u64;
                    let dead_tombstones = |m: &Model| {
                        m.recs
                            .values()
                            .filter(|r| !r.alive && r.value.is_none())
                            .count() as u64
                    };
                    let (a, t) = (alive(&model), dead_tombstones(&model));
                    model.clean(upper, now);
                    passes += 1;
                    removed += a - alive(&model);
                    tombstones += dead_tombstones(&model) - t;
                    assert!(
                        stats.records_read >= stats.records_kept,
                        "{what}: {stats:?}"
                    );
                }
                assert_eq!(
                    common::snapshot_kept(log.producer_state()),
                    psm,
                    "{what}: producer state"
                );
                let hw = log.high_watermark().0;
                let lso = log.last_stable_offset().0;
                assert_eq!(
                    consumed(&mut io, &mut log, false),
                    model.visible(hw, false),
                    "{what}: read_uncommitted after a pass below {upper}"
                );
                assert_eq!(
                    consumed(&mut io, &mut log, true),
                    model.visible(lso, true),
                    "{what}: read_committed after a pass below {upper}"
                );
            }
        }
    }
    log.commit(&mut io).unwrap();
    let psm = common::snapshot_kept(log.producer_state());
    let reads = (
        consumed(&mut io, &mut log, false),
        consumed(&mut io, &mut log, true),
    );
    drop(log);
    let mut io = io.crash(seed);
    common::forget_recovery_point(&mut io, Path::new(DIR));
    let mut log = common::open_or_recover(&mut io, Path::new(DIR), CONFIG).unwrap();
    assert_eq!(
        common::snapshot_kept(log.producer_state()),
        psm,
        "seed {seed}: recovery's producer state"
    );
    assert_eq!(
        (
            consumed(&mut io, &mut log, false),
            consumed(&mut io, &mut log, true)
        ),
        reads,
        "seed {seed}: recovery reads"
    );
    // `mirrorlog verify` finds nothing wrong with the compacted partition (one record per key
    // below the cleaner's checkpoint, indexes and `.txnindex` as the cleaner wrote them).
    log.close(&mut io).unwrap();
    let root = tempfile::tempdir().unwrap();
    common::export_sim(&io, root.path());
    // The partition's settings, as an engine keeps them (verify rebuilds indexes by them).
    let settings = mirrorlog::api::PartitionConfig {
        segment_bytes: CONFIG.segment.segment_bytes,
        index_interval_bytes: CONFIG.segment.index_interval_bytes,
        max_message_bytes: 16 << 10,
        compaction: CONFIG.compaction,
        ..mirrorlog::api::PartitionConfig::default()
    };
    std::fs::write(
        root.path().join("sim/model-0/partition.config"),
        settings.encode(),
    )
    .unwrap();
    common::assert_verifies(&root.path().join("sim"));
    (passes, removed, tombstones)
}

#[test]
fn random_workloads_compact_as_kafkas_rules_say() {
    let seed = common::seed("compaction model");
    let (mut passes, mut removed, mut tombstones) = (0, 0, 0);
    for case in 0..CASES {
        let (p, r, t) = run(seed.wrapping_add(case.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        passes += p;
        removed += r;
        tombstones += t;
    }
    eprintln!("{passes} passes removed {removed} records, {tombstones} of them tombstones");
    // The workload exercises what it claims: passes that remove records, tombstones included.
    assert!(passes >= CASES && removed > passes && tombstones > 0);
}
