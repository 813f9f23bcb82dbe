//! Log compaction's passes as the shard runs them, on the simulated disk: a pass in steps
//! stops when the segments change under it; a crash at every I/O operation of a pass (both
//! crash models) reopens as before the pass or after it; cleaned segments are Kafka batches
//! kafka-python reads; mirrored unkeyed records are removed; the dirty offset is reset when
//! out of the log. Each test named after a `LogCleanerTest` case checks that case's rule.
//! (The cleaner's rules themselves: `log_compaction.rs`.)

mod common;

use common::compaction::*;
use mirrorlog::format::{self, BatchBuilder, BatchOptions, Offset, ProducerFields, RecordSpec};
use mirrorlog::internals::io::{CrashModel, SimConfig, SimIo};
use mirrorlog::internals::log::{
    CleanPass, CleanProgress, Isolation, MirrorStart, OffsetMap, PartitionLog,
    CLEANER_OFFSET_CHECKPOINT,
};
use mirrorlog::internals::producer_state::Origin;
use std::path::Path;

#[test]
fn a_pass_in_steps_stops_when_the_segments_change_under_it() {
    let mut io = sim("pass_abandoned");
    let mut log = new_log(&mut io, COMPACT_DELETE);
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
    let mut log = new_log(&mut io, COMPACT_DELETE);
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
