//! The log-compaction tests' shared pieces (`log_compaction*.rs`): a compacted log's config,
//! keyed batches and markers, the simulated disk, what a consumer reads, a cleaning pass, and
//! the newest record per key that Kafka's rules leave.

use mirrorlog::format::{
    self, BatchBuilder, BatchIter, BatchOptions, MarkerSpec, Offset, ProducerFields, RecordSpec,
};
use mirrorlog::internals::io::{Io, SimConfig, SimIo};
use mirrorlog::internals::log::{
    CleanStats, CleanupPolicy, CompactionConfig, Isolation, LogConfig, OffsetMap, PartitionLog,
};
use mirrorlog::internals::producer_state::Origin;
use std::collections::BTreeMap;
use std::path::Path;

pub const DIR: &str = "/sim/compacted-0";
pub const NOW_MS: i64 = super::RECORDS_MS + 3_600_000;
pub const DAY_MS: i64 = 86_400_000;

pub const CONFIG: LogConfig = LogConfig {
    compaction: CompactionConfig {
        policy: CleanupPolicy::COMPACT,
        ..CompactionConfig::DEFAULT
    },
    ..super::log_config(64 << 10, 1024, 32 << 10)
};

/// [`CONFIG`] with `cleanup.policy=compact,delete`.
pub const COMPACT_DELETE: LogConfig = LogConfig {
    compaction: CompactionConfig {
        policy: CleanupPolicy::COMPACT_DELETE,
        ..CONFIG.compaction
    },
    ..CONFIG
};

/// One record a consumer reads: offset, key, value.
pub type Seen = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

pub fn keyed(producer: i64, seq: i32, records: &[(&[u8], Option<&[u8]>)], txn: bool) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        producer: ProducerFields {
            producer_id: producer,
            producer_epoch: 0,
            base_sequence: seq,
        },
        transactional: txn,
        ..BatchOptions::default()
    });
    for (i, (key, value)) in records.iter().enumerate() {
        b.push(RecordSpec {
            timestamp: super::RECORDS_MS + i as i64,
            key: Some(key),
            value: *value,
            headers: &[],
        });
    }
    b.build()
}

pub fn marker(producer: i64, commit: bool) -> Vec<u8> {
    format::build_marker(&MarkerSpec {
        base_offset: Offset(0),
        partition_leader_epoch: 0,
        producer_id: producer,
        producer_epoch: 0,
        commit,
        coordinator_epoch: 0,
        timestamp: super::RECORDS_MS,
    })
}

pub fn new_log(io: &mut SimIo, config: LogConfig) -> PartitionLog {
    PartitionLog::create(io, Path::new(DIR), config).unwrap()
}

pub fn sim(test: &str) -> SimIo {
    SimIo::new(SimConfig {
        seed: super::seed(test),
        ..SimConfig::default()
    })
}

/// Every record a consumer reads at `isolation` from the log start.
pub fn consumed(io: &mut dyn Io, log: &mut PartitionLog, isolation: Isolation) -> Vec<Seen> {
    let mut out = Vec::new();
    let mut at = log.log_start();
    let end = match isolation {
        Isolation::ReadCommitted => log.last_stable_offset(),
        _ => log.high_watermark(),
    };
    while at < end {
        let r = log.read(io, at, 1 << 20, isolation).unwrap();
        let Some(last) = BatchIter::new(&r.records, 0).last() else {
            break;
        };
        let next = Offset(last.header().last_offset().0 + 1);
        for batch in BatchIter::new(&r.records, 0) {
            let h = *batch.header();
            if h.attributes.is_control() {
                continue;
            }
            let aborted = isolation == Isolation::ReadCommitted
                && h.attributes.is_transactional()
                && r.aborted.iter().any(|a| {
                    a.producer_id == h.producer.producer_id
                        && a.first_offset <= h.base_offset
                        && h.base_offset < a.last_offset
                });
            if aborted {
                continue;
            }
            let records = batch.decompressed_records(1 << 24).unwrap();
            for rec in records.iter() {
                let rec = rec.unwrap();
                let offset = h.base_offset.0 + i64::from(rec.offset_delta);
                if offset >= at.0 && offset < end.0 {
                    out.push((
                        offset,
                        rec.key.map(<[u8]>::to_vec),
                        rec.value.map(<[u8]>::to_vec),
                    ));
                }
            }
        }
        at = next;
    }
    out
}

/// Runs a whole pass (forced past the dirty ratio), asserting the log's invariants after it.
pub fn clean(io: &mut SimIo, log: &mut PartitionLog, now_ms: i64) -> Option<CleanStats> {
    let (stats, _) = log.clean(io, now_ms, OffsetMap::new(1 << 20), true);
    log.check_invariants();
    stats.unwrap()
}

/// Appends the batches as a client, committing; rolls after each `per_segment` batches.
pub fn append_all(io: &mut SimIo, log: &mut PartitionLog, batches: &[Vec<u8>], per_segment: usize) {
    for (i, b) in batches.iter().enumerate() {
        let control = format::inspect(b, 0)
            .unwrap()
            .header()
            .attributes
            .is_control();
        let origin = if control {
            Origin::Coordinator
        } else {
            Origin::Client
        };
        log.append(io, b, origin).unwrap();
        if (i + 1) % per_segment == 0 {
            log.commit(io).unwrap();
            log.roll(io).unwrap();
        }
    }
    log.commit(io).unwrap();
}

/// What Kafka's rules leave of non-transactional keyed records below `upper`: the newest record
/// of each key (a tombstone only when `tombstones`), everything from `upper` on.
pub fn newest_per_key(all: &[Seen], upper: i64, tombstones: bool) -> Vec<Seen> {
    let mut newest: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
    for (offset, key, _) in all.iter().filter(|r| r.0 < upper) {
        newest.insert(key.clone().unwrap(), *offset);
    }
    all.iter()
        .filter(|(offset, key, value)| {
            *offset >= upper
                || (newest[key.as_ref().unwrap()] == *offset && (value.is_some() || tombstones))
        })
        .cloned()
        .collect()
}

pub fn workload(keys: usize, rounds: usize) -> Vec<Vec<u8>> {
    workload_from(1, 0, keys, rounds)
}

/// `rounds` batches of producer `producer` from sequence `seq`, each writing every key once.
pub fn workload_from(producer: i64, mut seq: i32, keys: usize, rounds: usize) -> Vec<Vec<u8>> {
    (0..rounds)
        .map(|round| {
            let records: Vec<(Vec<u8>, Vec<u8>)> = (0..keys)
                .map(|k| {
                    (
                        format!("key-{k}").into_bytes(),
                        format!("v{round}-{k}").into_bytes(),
                    )
                })
                .collect();
            let refs: Vec<(&[u8], Option<&[u8]>)> = records
                .iter()
                .map(|(k, v)| (&k[..], Some(&v[..])))
                .collect();
            let b = keyed(producer, seq, &refs, false);
            seq += keys as i32;
            b
        })
        .collect()
}
