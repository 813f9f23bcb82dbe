//! Log compaction with Kafka's cleaner rules, on the simulated disk. Each test is named after
//! the `LogCleanerTest` / `LogCleanerManagerTest` case whose rule it checks, and compares what a
//! consumer reads after cleaning with what Kafka's rules leave: the newest record per key,
//! offsets unchanged, tombstones until their delete horizon, aborted transactions gone, markers
//! until safe, producers' last batches kept, barriers never removed. A crash sweep cuts a
//! cleaning pass at every I/O operation (both crash models) and checks that the reopened log
//! reads as before the pass or after it.

mod common;

use mirrorlog::format::{
    self, BatchBuilder, BatchIter, BatchOptions, MarkerSpec, Offset, ProducerFields, RecordSpec,
};
use mirrorlog::internals::io::{CrashModel, Io, SimConfig, SimIo};
use mirrorlog::internals::log::{
    CleanPass, CleanProgress, CleanStats, CleanupPolicy, CompactionConfig, Isolation, LogConfig,
    LogError, MirrorStart, OffsetMap, PartitionLog, CLEANER_OFFSET_CHECKPOINT,
};
use mirrorlog::internals::producer_state::Origin;
use std::collections::BTreeMap;
use std::path::Path;

const DIR: &str = "/sim/compacted-0";
const NOW_MS: i64 = common::RECORDS_MS + 3_600_000;
const DAY_MS: i64 = 86_400_000;

const CONFIG: LogConfig = LogConfig {
    compaction: CompactionConfig {
        policy: CleanupPolicy::COMPACT,
        ..CompactionConfig::DEFAULT
    },
    ..common::log_config(64 << 10, 1024, 32 << 10)
};

/// One record a consumer reads: offset, key, value.
type Seen = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

fn keyed(producer: i64, seq: i32, records: &[(&[u8], Option<&[u8]>)], txn: bool) -> Vec<u8> {
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
            timestamp: common::RECORDS_MS + i as i64,
            key: Some(key),
            value: *value,
            headers: &[],
        });
    }
    b.build()
}

fn marker(producer: i64, commit: bool) -> Vec<u8> {
    format::build_marker(&MarkerSpec {
        base_offset: Offset(0),
        partition_leader_epoch: 0,
        producer_id: producer,
        producer_epoch: 0,
        commit,
        coordinator_epoch: 0,
        timestamp: common::RECORDS_MS,
    })
}

fn new_log(io: &mut SimIo, config: LogConfig) -> PartitionLog {
    PartitionLog::create(io, Path::new(DIR), config).unwrap()
}

fn sim(test: &str) -> SimIo {
    SimIo::new(SimConfig {
        seed: common::seed(test),
        ..SimConfig::default()
    })
}

/// Every record a consumer reads at `isolation` from the log start.
fn consumed(io: &mut dyn Io, log: &mut PartitionLog, isolation: Isolation) -> Vec<Seen> {
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
fn clean(io: &mut SimIo, log: &mut PartitionLog, now_ms: i64) -> Option<CleanStats> {
    let (stats, _) = log.clean(io, now_ms, OffsetMap::new(1 << 20), true);
    log.check_invariants();
    stats.unwrap()
}

/// Appends the batches as a client, committing; rolls after each `per_segment` batches.
fn append_all(io: &mut SimIo, log: &mut PartitionLog, batches: &[Vec<u8>], per_segment: usize) {
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
fn newest_per_key(all: &[Seen], upper: i64, tombstones: bool) -> Vec<Seen> {
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

fn workload(keys: usize, rounds: usize) -> Vec<Vec<u8>> {
    workload_from(1, 0, keys, rounds)
}

/// `rounds` batches of producer `producer` from sequence `seq`, each writing every key once.
fn workload_from(producer: i64, mut seq: i32, keys: usize, rounds: usize) -> Vec<Vec<u8>> {
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

#[test]
fn test_clean_segments_keeps_the_newest_record_of_each_key_at_its_offset() {
    let mut io = sim("test_clean_segments");
    let mut log = new_log(&mut io, CONFIG);
    append_all(&mut io, &mut log, &workload(20, 30), 4);
    let before = consumed(&mut io, &mut log, Isolation::ReadUncommitted);
    let size_before = log.size_bytes();
    let upper = log.segment_base_offsets().last().unwrap().0;
    let stats = clean(&mut io, &mut log, NOW_MS).expect("a pass ran");
    let after = consumed(&mut io, &mut log, Isolation::ReadUncommitted);
    assert_eq!(after, newest_per_key(&before, upper, true));
    assert!(log.size_bytes() < size_before / 2, "{stats:?}");
    assert!(stats.segments_replaced >= 2 && stats.records_kept < stats.records_read);
    assert_eq!(stats.end_offset, Offset(upper));
    assert_eq!(log.cleaner_checkpoint(&mut io), Some(Offset(upper)));
    // Reopened (clean and after a crash): the same records.
    log.close(&mut io).unwrap();
    let mut log = PartitionLog::open(&mut io, Path::new(DIR), CONFIG).unwrap();
    assert_eq!(
        consumed(&mut io, &mut log, Isolation::ReadUncommitted),
        after
    );
    drop(log);
    let mut io = io.crash(7);
    common::forget_recovery_point(&mut io, Path::new(DIR));
    let mut log = common::open_or_recover(&mut io, Path::new(DIR), CONFIG).unwrap();
    assert_eq!(
        consumed(&mut io, &mut log, Isolation::ReadUncommitted),
        after
    );
    // A second pass finds nothing dirty until new segments are sealed.
    assert!(clean(&mut io, &mut log, NOW_MS).is_none());
}

#[test]
fn test_clean_keeps_producer_state_equal_to_a_replay() {
    let mut io = sim("test_clean_keeps_producer_state");
    let mut log = new_log(&mut io, CONFIG);
    append_all(&mut io, &mut log, &workload(10, 24), 3);
    let psm = common::snapshot_kept(log.producer_state());
    clean(&mut io, &mut log, NOW_MS).unwrap();
    assert_eq!(common::snapshot_kept(log.producer_state()), psm);
    drop(log);
    let mut io = io.crash(3);
    common::forget_recovery_point(&mut io, Path::new(DIR));
    let log = common::open_or_recover(&mut io, Path::new(DIR), CONFIG).unwrap();
    assert_eq!(
        common::snapshot_kept(log.producer_state()),
        psm,
        "a replay of the compacted segments gives the same producer state"
    );
}

#[test]
fn test_clean_tombstone_stays_until_its_delete_horizon_kip_534() {
    let mut io = sim("test_tombstones_kip_534");
    let mut log = new_log(&mut io, CONFIG);
    let batches = vec![
        keyed(1, 0, &[(b"a", Some(b"1")), (b"b", Some(b"1"))], false),
        keyed(1, 2, &[(b"a", None)], false),
        keyed(1, 3, &[(b"c", Some(b"1"))], false),
    ];
    append_all(&mut io, &mut log, &batches, 1);
    let upper = log.segment_base_offsets().last().unwrap().0;
    clean(&mut io, &mut log, NOW_MS).unwrap();
    let seen = consumed(&mut io, &mut log, Isolation::ReadUncommitted);
    assert_eq!(
        seen.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![1, 2, 3],
        "a's old value goes; its tombstone stays, with a horizon set"
    );
    assert_eq!(seen[1], (2, Some(b"a".to_vec()), None));
    // Before the horizon (now + delete.retention.ms) another pass keeps it.
    log.append(
        &mut io,
        &keyed(1, 4, &[(b"d", Some(b"1"))], false),
        Origin::Client,
    )
    .unwrap();
    log.commit(&mut io).unwrap();
    log.roll(&mut io).unwrap();
    clean(&mut io, &mut log, NOW_MS + DAY_MS - 1).unwrap();
    assert!(consumed(&mut io, &mut log, Isolation::ReadUncommitted)
        .iter()
        .any(|r| r.0 == 2));
    // Past it, the tombstone goes; offsets stay.
    log.append(
        &mut io,
        &keyed(1, 5, &[(b"e", Some(b"1"))], false),
        Origin::Client,
    )
    .unwrap();
    log.commit(&mut io).unwrap();
    log.roll(&mut io).unwrap();
    clean(&mut io, &mut log, NOW_MS + DAY_MS).unwrap();
    let offsets: Vec<i64> = consumed(&mut io, &mut log, Isolation::ReadUncommitted)
        .iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(offsets, vec![1, 3, 4, 5]);
    assert!(upper > 0);
}

#[test]
fn test_aborted_transactions_are_removed_and_markers_kept_until_safe() {
    let mut io = sim("test_aborted_transactions_removed");
    let mut log = new_log(&mut io, CONFIG);
    let batches = vec![
        keyed(2, 0, &[(b"t", Some(b"aborted"))], true),
        marker(2, false),
        keyed(3, 0, &[(b"u", Some(b"committed"))], true),
        marker(3, true),
        keyed(1, 0, &[(b"x", Some(b"1"))], false),
    ];
    append_all(&mut io, &mut log, &batches, 1);
    let committed_before = consumed(&mut io, &mut log, Isolation::ReadCommitted);
    clean(&mut io, &mut log, NOW_MS).unwrap();
    let all = consumed(&mut io, &mut log, Isolation::ReadUncommitted);
    assert_eq!(
        all.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![2, 4],
        "the aborted record is gone even for read_uncommitted"
    );
    assert_eq!(
        consumed(&mut io, &mut log, Isolation::ReadCommitted),
        committed_before
    );
    // The markers are still stored (the ABORT one emptied of its transaction: it waits for its
    // horizon); the producers' state is whole.
    let kinds = stored_batches(&mut io, &mut log);
    assert!(kinds.iter().any(|(o, control, _)| *o == 1 && *control));
    assert!(kinds.iter().any(|(o, control, _)| *o == 3 && *control));
    assert!(log.producer_state().get(2).is_some() && log.producer_state().get(3).is_some());
}

#[test]
fn test_commit_marker_removal_and_test_abort_marker_removal_after_the_horizon() {
    let mut io = sim("test_marker_removal");
    let mut log = new_log(&mut io, CONFIG);
    let batches = vec![
        keyed(2, 0, &[(b"t", Some(b"aborted"))], true),
        marker(2, false),
        keyed(3, 0, &[(b"u", Some(b"1"))], true),
        marker(3, true),
        keyed(2, 1, &[(b"t", Some(b"b"))], true),
        marker(2, true),
        keyed(3, 1, &[(b"u", Some(b"2"))], true),
        marker(3, true),
        keyed(1, 0, &[(b"x", Some(b"1"))], false),
    ];
    append_all(&mut io, &mut log, &batches, 1);
    let markers = |io: &mut SimIo, log: &mut PartitionLog| -> Vec<i64> {
        stored_batches(io, log)
            .into_iter()
            .filter(|(_, control, _)| *control)
            .map(|(o, _, _)| o)
            .collect()
    };
    clean(&mut io, &mut log, NOW_MS).unwrap();
    // The ABORT marker waits for its transaction's data to be gone (this pass removed it); the
    // first COMMIT marker's transaction was read in this pass.
    assert_eq!(markers(&mut io, &mut log), vec![1, 3, 5, 7]);
    let mut seq = 1;
    let mut next_pass = |io: &mut SimIo, log: &mut PartitionLog, now: i64| {
        append_all(io, log, &[keyed(1, seq, &[(b"y", Some(b"1"))], false)], 1);
        seq += 1;
        clean(io, log, now).unwrap();
    };
    // Now both are markers of emptied transactions: they get a horizon, and stay until it.
    next_pass(&mut io, &mut log, NOW_MS);
    assert_eq!(markers(&mut io, &mut log), vec![1, 3, 5, 7]);
    next_pass(&mut io, &mut log, NOW_MS + DAY_MS - 1);
    assert_eq!(markers(&mut io, &mut log), vec![1, 3, 5, 7]);
    next_pass(&mut io, &mut log, NOW_MS + DAY_MS);
    assert_eq!(
        markers(&mut io, &mut log),
        vec![5, 7],
        "past the horizon, the markers of emptied transactions go; the others stay"
    );
    assert_eq!(
        consumed(&mut io, &mut log, Isolation::ReadCommitted)
            .iter()
            .map(|r| r.0)
            .collect::<Vec<_>>(),
        vec![4, 6, 8, 11],
        "y was written three times: its newest stays"
    );
}

/// `(base offset, control, records)` of every stored batch.
fn stored_batches(io: &mut dyn Io, log: &mut PartitionLog) -> Vec<(i64, bool, i32)> {
    let bytes = common::read_all(io, log);
    BatchIter::new(&bytes, 0)
        .map(|b| {
            let h = b.header();
            (h.base_offset.0, h.attributes.is_control(), h.records_count)
        })
        .collect()
}

#[test]
fn test_duplicate_check_after_cleaning_keeps_a_producers_last_batch() {
    let mut io = sim("test_duplicate_check_after_cleaning");
    let mut log = new_log(&mut io, CONFIG);
    // Producer 9's only batch is overwritten by producer 1: its records go, its batch stays
    // (empty) so that its sequence survives.
    let batches = vec![
        keyed(9, 0, &[(b"k", Some(b"old"))], false),
        keyed(1, 0, &[(b"k", Some(b"new"))], false),
        keyed(1, 1, &[(b"z", Some(b"1"))], false),
    ];
    append_all(&mut io, &mut log, &batches, 1);
    clean(&mut io, &mut log, NOW_MS).unwrap();
    let stored = stored_batches(&mut io, &mut log);
    assert_eq!(stored.first(), Some(&(0, false, 0)), "{stored:?}");
    assert_eq!(
        consumed(&mut io, &mut log, Isolation::ReadUncommitted)[0].0,
        1
    );
    // A retry of producer 9's batch is still a duplicate.
    let retry = log
        .append(
            &mut io,
            &keyed(9, 0, &[(b"k", Some(b"old"))], false),
            Origin::Client,
        )
        .unwrap();
    assert_eq!(retry.first_offset, Offset(0));
}

#[test]
fn the_mirroring_barrier_survives_compaction_and_offsets_are_never_rewritten() {
    let mut io = sim("barrier_survives_compaction");
    let mut log = new_log(&mut io, CONFIG);
    log.start_mirroring(&mut io, "east/t-0", MirrorStart::LastStableOffset)
        .unwrap();
    for round in 0..6 {
        let v = format!("{round}");
        let b = common::stored(
            keyed(5, round, &[(b"m", Some(v.as_bytes()))], false),
            Offset(i64::from(round)),
            1,
        );
        log.append(&mut io, &b, Origin::Mirror).unwrap();
        log.commit(&mut io).unwrap();
        log.roll(&mut io).unwrap();
    }
    // Mirroring: never compacted.
    assert!(clean(&mut io, &mut log, NOW_MS).is_none());
    log.stop_mirroring(
        &mut io,
        2,
        mirrorlog::internals::log::OpenTransactions::Abort,
        NOW_MS,
    )
    .unwrap();
    append_all(
        &mut io,
        &mut log,
        &[keyed(1, 0, &[(b"m", Some(b"local"))], false)],
        1,
    );
    log.append(
        &mut io,
        &keyed(1, 1, &[(b"q", Some(b"1"))], false),
        Origin::Client,
    )
    .unwrap();
    log.commit(&mut io).unwrap();
    clean(&mut io, &mut log, NOW_MS).unwrap();
    let stored = stored_batches(&mut io, &mut log);
    assert!(
        stored
            .iter()
            .any(|(o, control, n)| *o == 6 && *control && *n == 1),
        "the barrier at offset 6 is kept whole: {stored:?}"
    );
    let seen = consumed(&mut io, &mut log, Isolation::ReadUncommitted);
    assert_eq!(seen[0].0, 7, "only the newest m remains, at its own offset");
}

#[test]
fn test_cleanable_offsets_active_segment_and_test_undecided_transactional_data_not_cleanable() {
    let mut io = sim("test_cleanable_offsets");
    let mut log = new_log(&mut io, CONFIG);
    append_all(&mut io, &mut log, &workload(5, 6), 2);
    // An open transaction in the second segment: the LSO stops cleaning there.
    let bases = log.segment_base_offsets();
    let plan = log.cleanable(&mut io, NOW_MS).unwrap();
    assert_eq!(plan.first_dirty, Offset(0));
    assert_eq!(plan.first_uncleanable, *bases.last().unwrap());
    log.append(
        &mut io,
        &keyed(4, 0, &[(b"o", Some(b"open"))], true),
        Origin::Client,
    )
    .unwrap();
    log.commit(&mut io).unwrap();
    log.roll(&mut io).unwrap();
    append_all(&mut io, &mut log, &workload_from(6, 0, 5, 2), 1);
    let plan = log.cleanable(&mut io, NOW_MS).unwrap();
    assert_eq!(
        plan.first_uncleanable,
        *bases.last().unwrap(),
        "the segment holding the open transaction's first offset is uncleanable"
    );
    // min.compaction.lag.ms past the records' age: nothing is cleanable.
    let lagged = LogConfig {
        compaction: CompactionConfig {
            min_compaction_lag_ms: NOW_MS,
            ..CONFIG.compaction
        },
        ..CONFIG
    };
    log.close(&mut io).unwrap();
    let mut log = PartitionLog::open(&mut io, Path::new(DIR), lagged).unwrap();
    let plan = log.cleanable(&mut io, NOW_MS).unwrap();
    assert_eq!(plan.first_uncleanable, plan.first_dirty);
    assert_eq!(plan.cleanable_bytes, 0);
}

#[test]
fn test_log_to_clean_dirty_ratio_and_max_compaction_lag() {
    let mut io = sim("test_dirty_ratio");
    let mut log = new_log(&mut io, CONFIG);
    append_all(&mut io, &mut log, &workload(5, 6), 2);
    let plan = log.cleanable(&mut io, NOW_MS).unwrap();
    assert!(plan.dirty_ratio() > 0.99 && plan.is_due(500_000));
    clean(&mut io, &mut log, NOW_MS).unwrap();
    // One more dirty segment beside the cleaned ones: below the 0.5 ratio, not due...
    append_all(&mut io, &mut log, &workload_from(6, 0, 1, 1), 1);
    let plan = log.cleanable(&mut io, NOW_MS).unwrap();
    assert!(
        plan.cleanable_bytes > 0 && !plan.is_due(500_000),
        "{plan:?}"
    );
    let (stats, _) = log.clean(&mut io, NOW_MS, OffsetMap::new(1 << 20), false);
    assert!(stats.unwrap().is_none());
    // ...unless its first batch is older than max.compaction.lag.ms.
    let forced = LogConfig {
        compaction: CompactionConfig {
            max_compaction_lag_ms: 1_000,
            ..CONFIG.compaction
        },
        ..CONFIG
    };
    log.close(&mut io).unwrap();
    let mut log = PartitionLog::open(&mut io, Path::new(DIR), forced).unwrap();
    let plan = log.cleanable(&mut io, NOW_MS).unwrap();
    assert!(plan.overdue && plan.is_due(500_000));
}

#[test]
fn test_build_partial_offset_map_cleans_up_to_where_it_got_and_the_next_pass_goes_on() {
    let mut io = sim("a_full_dedupe_map");
    let mut log = new_log(&mut io, CONFIG);
    // 100 keys, 10 per batch: a 60-slot map takes 54 keys a pass.
    let batches: Vec<Vec<u8>> = (0..30)
        .map(|i| {
            let records: Vec<(Vec<u8>, Vec<u8>)> = (0..10)
                .map(|k| {
                    let key = (i * 10 + k) % 100;
                    (
                        format!("key-{key}").into_bytes(),
                        format!("v{i}").into_bytes(),
                    )
                })
                .collect();
            let refs: Vec<(&[u8], Option<&[u8]>)> = records
                .iter()
                .map(|(k, v)| (&k[..], Some(&v[..])))
                .collect();
            keyed(1, i * 10, &refs, false)
        })
        .collect();
    append_all(&mut io, &mut log, &batches, 4);
    let before = consumed(&mut io, &mut log, Isolation::ReadUncommitted);
    let upper = log.segment_base_offsets().last().unwrap().0;
    let (stats, map) = log.clean(&mut io, NOW_MS, OffsetMap::new(60 * 24), true);
    let stats = stats.unwrap().unwrap();
    assert!(stats.end_offset.0 < upper, "{stats:?}");
    let mut map = map;
    for _ in 0..40 {
        let (s, m) = log.clean(&mut io, NOW_MS, map, true);
        map = m;
        if s.unwrap().is_none() {
            break;
        }
    }
    assert_eq!(log.cleaner_checkpoint(&mut io), Some(Offset(upper)));
    assert_eq!(
        consumed(&mut io, &mut log, Isolation::ReadUncommitted),
        newest_per_key(&before, upper, true)
    );
}

#[test]
fn client_records_without_a_key_are_refused_by_a_compacted_log() {
    let mut io = sim("keyless_refused");
    let mut log = new_log(&mut io, CONFIG);
    let keyless = common::producer_batch(1, 0, 2, false, 10);
    let err = log.append(&mut io, &keyless, Origin::Client).unwrap_err();
    assert!(
        matches!(&err, LogError::KeylessRecordInCompactedLog { indexes, .. } if indexes == &[0, 1]),
        "{err:?}"
    );
    assert_eq!(log.log_end(), Offset(0), "nothing appended");
    let compressed = {
        let mut b = BatchBuilder::new(BatchOptions::default());
        b.push(RecordSpec {
            timestamp: common::RECORDS_MS,
            key: Some(b"k"),
            value: Some(b"v"),
            headers: &[],
        });
        b.push(RecordSpec {
            timestamp: common::RECORDS_MS,
            key: None,
            value: Some(b"v"),
            headers: &[],
        });
        b.build_compressed(format::Compression::Zstd).unwrap()
    };
    assert!(matches!(
        log.append(&mut io, &compressed, Origin::Client),
        Err(LogError::KeylessRecordInCompactedLog { indexes, .. }) if indexes == [1]
    ));
    // A dedupe map that cannot hold one batch's keys is a typed error, not a pass that never
    // moves.
    let mut many = Vec::new();
    for round in 0..4 {
        let keys: Vec<Vec<u8>> = (0..50)
            .map(|k| format!("{round}-{k}").into_bytes())
            .collect();
        let refs: Vec<(&[u8], Option<&[u8]>)> =
            keys.iter().map(|k| (&k[..], Some(&b"v"[..]))).collect();
        many.push(keyed(1, round * 50, &refs, false));
    }
    append_all(&mut io, &mut log, &many, 1);
    let (stats, _) = log.clean(&mut io, NOW_MS, OffsetMap::new(10 * 24), true);
    assert!(
        matches!(stats, Err(LogError::DedupeBufferTooSmall { slots: 10, .. })),
        "{stats:?}"
    );
    // The default policy (delete) takes them.
    let mut other = PartitionLog::create(
        &mut io,
        Path::new("/sim/plain-0"),
        common::log_config(64 << 10, 1024, 32 << 10),
    )
    .unwrap();
    other.append(&mut io, &keyless, Origin::Client).unwrap();
}

#[test]
fn test_logs_with_segments_to_delete_should_not_consider_a_compact_only_log() {
    let mut io = sim("retention_compact_only");
    let config = LogConfig {
        retention_bytes: Some(1),
        ..CONFIG
    };
    let mut log = new_log(&mut io, config);
    append_all(&mut io, &mut log, &workload(5, 6), 2);
    let segments = log.segment_base_offsets().len();
    assert_eq!(log.enforce_retention(&mut io, NOW_MS).unwrap(), 0);
    assert_eq!(log.segment_base_offsets().len(), segments);
}

#[test]
fn a_pass_in_steps_stops_when_the_segments_change_under_it() {
    let mut io = sim("pass_abandoned");
    let config = LogConfig {
        compaction: CompactionConfig {
            policy: CleanupPolicy::COMPACT_DELETE,
            ..CONFIG.compaction
        },
        ..CONFIG
    };
    let mut log = new_log(&mut io, config);
    append_all(&mut io, &mut log, &workload(20, 30), 4);
    let mut pass: CleanPass = match log.begin_clean(&mut io, NOW_MS, OffsetMap::new(1 << 20), true)
    {
        Ok(Ok(p)) => p,
        _ => panic!("a pass is due"),
    };
    assert_eq!(
        log.clean_step(&mut io, &mut pass, 1).unwrap(),
        CleanProgress::Working
    );
    // Delete-records removes the first segment: the pass stops and leaves nothing behind.
    let second = log.segment_base_offsets()[1];
    log.delete_records(&mut io, second).unwrap();
    assert_eq!(
        log.clean_step(&mut io, &mut pass, usize::MAX).unwrap(),
        CleanProgress::Abandoned
    );
    let strays: Vec<_> = io
        .paths()
        .into_iter()
        .filter(|p| {
            let n = p.to_string_lossy();
            n.ends_with(".cleaned") || n.ends_with(".swap")
        })
        .collect();
    assert!(strays.is_empty(), "{strays:?}");
    assert!(clean(&mut io, &mut log, NOW_MS).is_some());
}

/// A pass cut at every I/O operation, both crash models: the reopened log reads as before the
/// pass or as after it, and a pass run then reaches the same records.
#[test]
fn test_recovery_after_crash_at_every_operation_of_a_pass_leaves_the_old_or_the_new_segments() {
    let seed = common::seed("compaction crash sweep");
    let prepare = || {
        let mut io = SimIo::new(SimConfig {
            seed,
            ..SimConfig::default()
        });
        let mut log = new_log(&mut io, CONFIG);
        let mut batches = workload(6, 8);
        batches.insert(3, keyed(2, 0, &[(b"key-1", Some(b"aborted"))], true));
        batches.insert(4, marker(2, false));
        append_all(&mut io, &mut log, &batches, 3);
        log.close(&mut io).unwrap();
        io.crash(seed)
    };
    let base = prepare();
    let observe = |io: &mut SimIo, log: &mut PartitionLog| {
        (
            consumed(io, log, Isolation::ReadUncommitted),
            consumed(io, log, Isolation::ReadCommitted),
            log.log_end(),
            common::snapshot_kept(log.producer_state()),
        )
    };
    let (before, after, ops) = {
        let mut io = base.crash(seed);
        let mut log = common::open_or_recover(&mut io, Path::new(DIR), CONFIG).unwrap();
        let before = observe(&mut io, &mut log);
        let start = io.executed_ops();
        clean(&mut io, &mut log, NOW_MS).unwrap();
        let ops = io.executed_ops() - start;
        (before, observe(&mut io, &mut log), ops)
    };
    assert_ne!(before.0, after.0);
    let (mut befores, mut afters) = (0, 0);
    for cut in 0..=ops {
        for model in [CrashModel::DropUnsynced, CrashModel::Torn] {
            let case = seed ^ cut.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut disk = base.crash(case);
            let mut log = common::open_or_recover(&mut disk, Path::new(DIR), CONFIG).unwrap();
            disk.set_power_cut_in(Some(cut));
            drop(log.clean(&mut disk, NOW_MS, OffsetMap::new(1 << 20), true));
            drop(log);
            let mut io = disk.crash_with(case, model);
            let what = format!("seed {seed}, cut {cut} of {ops}, {model:?}");
            let mut log = common::open_or_recover(&mut io, Path::new(DIR), CONFIG)
                .unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
            log.check_invariants();
            let got = observe(&mut io, &mut log);
            // Groups swap one at a time: a cut between two swaps leaves a log whose first
            // groups are clean; every record of it is one the log held before, and the newest
            // of each key is there.
            if got == after {
                afters += 1;
            } else if got == before {
                befores += 1;
            } else {
                assert!(
                    got.0.iter().all(|r| before.0.contains(r)),
                    "{what}: records changed"
                );
                assert_eq!(got.2, before.2, "{what}");
                assert_eq!(got.3, before.3, "{what}: producer state");
            }
            let strays: Vec<_> = io
                .paths()
                .into_iter()
                .filter(|p| {
                    let n = p.to_string_lossy();
                    n.ends_with(".cleaned") || n.ends_with(".swap")
                })
                .collect();
            assert!(strays.is_empty(), "{what}: {strays:?}");
            clean(&mut io, &mut log, NOW_MS);
            assert_eq!(
                observe(&mut io, &mut log).0,
                after.0,
                "{what}: a pass from there"
            );
        }
    }
    assert!(
        befores > 0 && afters > 0,
        "{befores} before, {afters} after"
    );
}

#[test]
fn cleaned_segments_are_kafka_batches_kafka_python_reads_with_valid_crcs() {
    let mut io = sim("cleaned_segments_kafka_python");
    let mut log = new_log(&mut io, CONFIG);
    let mut batches = Vec::new();
    for round in 0..12i32 {
        let mut b = BatchBuilder::new(BatchOptions {
            producer: ProducerFields {
                producer_id: 1,
                producer_epoch: 0,
                base_sequence: round * 4,
            },
            ..BatchOptions::default()
        });
        for k in 0..4 {
            let key = format!("key-{}", (round * 4 + k) % 10);
            let value = format!("value-{round}");
            b.push(RecordSpec {
                timestamp: common::RECORDS_MS + i64::from(round),
                key: Some(key.as_bytes()),
                // Every seventh record a tombstone: kept with a horizon in the rebuilt batch.
                value: ((round * 4 + k) % 7 != 0).then_some(value.as_bytes()),
                headers: &[(b"h", Some(b"x"))],
            });
        }
        let codec = if round % 2 == 0 {
            format::Compression::Gzip
        } else {
            format::Compression::None
        };
        batches.push(b.build_compressed(codec).unwrap());
    }
    append_all(&mut io, &mut log, &batches, 4);
    let before = consumed(&mut io, &mut log, Isolation::ReadUncommitted);
    clean(&mut io, &mut log, NOW_MS).unwrap();
    let after = consumed(&mut io, &mut log, Isolation::ReadUncommitted);
    let first = log.segment_base_offsets()[0];
    let path = mirrorlog::internals::segment::log_path(Path::new(DIR), first);
    let bytes = io.file_bytes(&path).unwrap().to_vec();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &bytes).unwrap();
    let parsed = common::parse_with_kafka_python(&common::venv_python(), file.path());
    assert_eq!(parsed["valid_bytes"], parsed["size"]);
    let parsed_batches = parsed["batches"].as_array().unwrap();
    assert!(parsed_batches.len() > 1);
    assert!(parsed_batches.iter().all(|b| b["crc_valid"] == true));
    // kafka-python sees the records we serve, at the same offsets, timestamps kept.
    let theirs: Vec<(i64, i64)> = parsed_batches
        .iter()
        .flat_map(|b| b["records"].as_array().unwrap().clone())
        .map(|r| {
            (
                r["offset"].as_i64().unwrap(),
                r["timestamp"].as_i64().unwrap(),
            )
        })
        .collect();
    let ours: Vec<i64> = after.iter().map(|r| r.0).filter(|o| *o < 48).collect();
    assert_eq!(theirs.iter().map(|t| t.0).collect::<Vec<_>>(), ours);
    for (offset, timestamp) in &theirs {
        let round = offset / 4;
        assert_eq!(*timestamp, common::RECORDS_MS + round, "offset {offset}");
    }
    assert!(after.len() < before.len());
    // A tombstone kept with its horizon: the batch's attribute bit 6.
    assert!(parsed_batches
        .iter()
        .any(|b| b["attributes"].as_i64().unwrap() & 0x40 != 0));
}

#[test]
fn test_cleaning_with_unkeyed_messages_removes_them_from_mirrored_data() {
    let mut io = sim("test_cleaning_with_unkeyed_messages");
    let mut log = new_log(&mut io, CONFIG);
    // Mirrored batches are stored as-is, keyless records included...
    log.start_mirroring(&mut io, "east/t-0", MirrorStart::LastStableOffset)
        .unwrap();
    let keyless = common::stored(common::producer_batch(5, 0, 3, false, 20), Offset(0), 1);
    log.append(&mut io, &keyless, Origin::Mirror).unwrap();
    let keyed_batch = common::stored(keyed(5, 3, &[(b"k", Some(b"v"))], false), Offset(3), 1);
    log.append(&mut io, &keyed_batch, Origin::Mirror).unwrap();
    log.commit(&mut io).unwrap();
    log.roll(&mut io).unwrap();
    log.stop_mirroring(
        &mut io,
        2,
        mirrorlog::internals::log::OpenTransactions::Abort,
        NOW_MS,
    )
    .unwrap();
    append_all(
        &mut io,
        &mut log,
        &[keyed(1, 0, &[(b"x", Some(b"1"))], false)],
        1,
    );
    // ...and the cleaner removes them, as Kafka's counts them invalid and drops them.
    let stats = clean(&mut io, &mut log, NOW_MS).unwrap();
    assert_eq!(stats.keyless_records, 3);
    let offsets: Vec<i64> = consumed(&mut io, &mut log, Isolation::ReadUncommitted)
        .iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(offsets, vec![3, 5]);
}

#[test]
fn test_dirty_offset_reset_if_smaller_than_start_offset_or_larger_than_end_offset() {
    let mut io = sim("test_dirty_offset_reset");
    let config = LogConfig {
        compaction: CompactionConfig {
            policy: CleanupPolicy::COMPACT_DELETE,
            ..CONFIG.compaction
        },
        ..CONFIG
    };
    let mut log = new_log(&mut io, config);
    append_all(&mut io, &mut log, &workload(5, 6), 2);
    let bases = log.segment_base_offsets();
    log.delete_records(&mut io, bases[1]).unwrap();
    let write_checkpoint = |io: &mut SimIo, offset: i64| {
        mirrorlog::internals::io::write_file_atomically(
            io,
            Path::new(DIR),
            CLEANER_OFFSET_CHECKPOINT,
            format!("0\n1\ncompacted 0 {offset}\n").as_bytes(),
        )
        .unwrap();
    };
    for bad in [bases[0].0, log.log_end().0 + 10] {
        write_checkpoint(&mut io, bad);
        let plan = log.cleanable(&mut io, NOW_MS).unwrap();
        assert_eq!(plan.first_dirty, log.log_start(), "checkpoint {bad}");
    }
    write_checkpoint(&mut io, bases[2].0);
    assert_eq!(
        log.cleanable(&mut io, NOW_MS).unwrap().first_dirty,
        bases[2]
    );
}
