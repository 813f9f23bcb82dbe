//! Log compaction with Kafka's cleaner rules, on the simulated disk. Each test is named after
//! the `LogCleanerTest` / `LogCleanerManagerTest` case whose rule it checks, and compares what a
//! consumer reads after cleaning with what Kafka's rules leave: the newest record per key,
//! offsets unchanged, tombstones until their delete horizon, aborted transactions gone, markers
//! until safe, producers' last batches kept, barriers never removed. The passes in steps,
//! their crash recovery (a pass cut at every I/O operation) and their output are
//! `log_compaction_recovery.rs`.

mod common;

use common::compaction::*;
use mirrorlog::format::{self, BatchBuilder, BatchIter, BatchOptions, Offset, RecordSpec};
use mirrorlog::internals::io::{Io, SimIo};
use mirrorlog::internals::log::{
    CompactionConfig, Isolation, LogConfig, LogError, MirrorStart, OffsetMap, PartitionLog,
};
use mirrorlog::internals::producer_state::Origin;
use std::path::Path;

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
