//! The recovery point (design.md §Recovery): after an unclean stop, the segments below it are
//! opened unread — nothing below it is rescanned — and recovery scans only from it, from the
//! snapshot the roll to it wrote. What a consumer sees after such a recovery equals what it saw
//! before the crash and what a full scan gives; damage above the point is still found by
//! recovery, damage below it by the read that meets it; a truncation below the point lowers it
//! first, at every power cut of the truncation.

mod common;

use mirrorlog::format::{BatchIter, Offset};
use mirrorlog::internals::io::{CrashModel, Io, SimConfig, SimIo};
use mirrorlog::internals::log::{
    decode_recovery_point, Isolation, LogConfig, LogError, PartitionLog, RECOVERY_POINT_CHECKPOINT,
};
use mirrorlog::internals::producer_state::Origin;
use mirrorlog::internals::{recovery, segment};
use std::path::Path;

const CONFIG: LogConfig = common::log_config(16 << 10, 1024, 16 << 10);

/// Client batches of three producers with aborted and committed transactions and leader-epoch
/// changes; many 16 KiB segments.
fn fill(io: &mut dyn Io, log: &mut PartitionLog, batches: usize, first_producer: i64) {
    let mut seq = [0i32; 3];
    for i in 0..batches {
        let p = i % 3;
        if i % 97 == 0 {
            log.set_leader_epoch((i / 97) as i32);
        }
        let txn = i % 5 == 4;
        let producer = first_producer + p as i64;
        let b = common::producer_batch(producer, seq[p], 2, txn, 250);
        log.append(io, &b, Origin::Client).unwrap();
        seq[p] += 2;
        if txn {
            let m = common::marker(producer, i % 10 != 9);
            log.append(io, &m, Origin::Coordinator).unwrap();
        }
        if i % 7 == 0 {
            log.commit(io).unwrap();
        }
    }
    log.commit(io).unwrap();
}

/// What a consumer can observe: every read (both isolations) from a spread of offsets, with
/// its aborted list, and the log's bounds and producers.
fn observe(io: &mut dyn Io, log: &mut PartitionLog) -> Vec<String> {
    // Producers as a snapshot keeps them (the last batch of each): recovery from the point
    // loads the snapshot the roll wrote, as Kafka's load does, so deeper batch history differs
    // from a replay from the first batch.
    let mut out = vec![format!(
        "start {} end {} lso {} producers {:?} epochs {:?}",
        log.log_start(),
        log.log_end(),
        log.last_stable_offset(),
        common::snapshot_kept(log.producer_state()),
        log.epoch_cache()
    )];
    out.extend(common::observed_reads(io, log, 11, 1500));
    out
}

fn point_of(io: &SimIo, dir: &Path) -> Option<Offset> {
    io.file_bytes(&dir.join(RECOVERY_POINT_CHECKPOINT))
        .and_then(|b| decode_recovery_point(&String::from_utf8_lossy(b)))
}

/// A log of many segments, dropped without a close (an unclean stop), its observation.
fn crashed_log(dir: &Path) -> (SimIo, Vec<String>, Vec<Offset>) {
    let mut io = SimIo::new(SimConfig::default());
    io.create_dir(dir).unwrap();
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    fill(&mut io, &mut log, 700, 0);
    let seen = observe(&mut io, &mut log);
    let bases = log.segment_base_offsets();
    drop(log);
    (io.crash(1), seen, bases)
}

#[test]
fn recovery_scans_only_above_the_recovery_point() {
    let dir = Path::new("/sim/point-0");
    let (mut io, seen, bases) = crashed_log(dir);
    assert!(bases.len() >= 8, "{} segments", bases.len());
    let point = point_of(&io, dir).expect("rolls wrote the recovery point");
    assert_eq!(point, *bases.last().unwrap(), "the active segment's base");
    let logs: Vec<_> = bases.iter().map(|&b| segment::log_path(dir, b)).collect();
    let read_before: Vec<u64> = logs.iter().map(|p| io.read_bytes_of(p)).collect();
    let mut log = recovery::recover(&mut io, dir, CONFIG).unwrap();
    for (i, p) in logs.iter().enumerate() {
        let read = io.read_bytes_of(p) - read_before[i];
        if bases[i] < point {
            assert_eq!(read, 0, "{} is below the point: not read", p.display());
        } else {
            assert!(read > 0, "{} is scanned", p.display());
        }
    }
    assert_eq!(observe(&mut io, &mut log), seen, "as before the crash");

    // The same disk by a full scan gives the same log.
    let (mut full, _, _) = crashed_log(dir);
    common::forget_recovery_point(&mut full, dir);
    let mut scanned = recovery::recover(&mut full, dir, CONFIG).unwrap();
    assert_eq!(observe(&mut full, &mut scanned), seen, "as a full scan");

    // The recovered log goes on, rolls, and crashes again: recovery from the new point.
    fill(&mut io, &mut log, 200, 10);
    let seen = observe(&mut io, &mut log);
    let point = point_of(&io, dir).unwrap();
    assert!(point > *bases.last().unwrap());
    drop(log);
    let mut io = io.crash(2);
    let mut log = recovery::recover(&mut io, dir, CONFIG).unwrap();
    assert_eq!(observe(&mut io, &mut log), seen, "after a second crash");
}

#[test]
fn damage_above_the_point_is_found_by_recovery_and_below_it_by_reads() {
    let dir = Path::new("/sim/point-1");
    let (image, _, bases) = crashed_log(dir);
    let point = point_of(&image, dir).unwrap();
    // Above: a flipped bit in the acknowledged part of the active segment fails recovery.
    let active = segment::log_path(dir, point);
    let bytes = image.file_bytes(&active).unwrap().to_vec();
    let first = BatchIter::new(&bytes, 0).next().unwrap();
    let at = first.position() + 30;
    let mut disk = image.crash(3);
    disk.damage(&active, at, &[bytes[at as usize] ^ 0x01]);
    match recovery::recover(&mut disk, dir, CONFIG) {
        Err(LogError::Corrupt { file, .. }) => assert_eq!(file, active),
        other => panic!("damage above the recovery point must fail recovery: {other:?}"),
    }
    // Below: recovery trusts the segment; a read that meets the damage fails loudly.
    let victim = segment::log_path(dir, bases[2]);
    let bytes = image.file_bytes(&victim).unwrap().to_vec();
    let second = BatchIter::new(&bytes, 0).nth(1).unwrap();
    let at = second.position() + 40;
    let mut disk = image.crash(4);
    disk.damage(&victim, at, &[bytes[at as usize] ^ 0x10]);
    let mut log = recovery::recover(&mut disk, dir, CONFIG).expect("below the point: not read");
    let offset = second.header().base_offset;
    let r = log.read(&mut disk, offset, 1 << 20, Isolation::ReadUncommitted);
    assert!(r.is_err(), "the damaged batch is not served: {r:?}");
}

#[test]
fn a_truncation_below_the_point_lowers_it_first_at_every_power_cut() {
    let dir = Path::new("/sim/point-2");
    let (image, _, bases) = crashed_log(dir);
    let mut io = image.crash(5);
    let mut log = recovery::recover(&mut io, dir, CONFIG).unwrap();
    // A batch boundary inside segment 3 (a cut inside a batch ends the log in a gap, whose
    // crash cases tests/offset_gaps.rs sweeps).
    let held = log
        .read(&mut io, bases[3], 1 << 20, Isolation::ReadUncommitted)
        .unwrap();
    let cut = BatchIter::new(&held.records, 0)
        .nth(2)
        .unwrap()
        .header()
        .base_offset;
    // The reference: the truncated log, recovered by a full scan after a clean stop of it.
    let start_ops = io.executed_ops();
    log.truncate_to(&mut io, cut).unwrap();
    let ops = io.executed_ops() - start_ops;
    assert_eq!(
        point_of(&io, dir),
        Some(bases[3]),
        "lowered to the reopened segment"
    );
    drop(log);
    let mut reference_io = io.crash(6);
    common::forget_recovery_point(&mut reference_io, dir);
    let mut reference = recovery::recover(&mut reference_io, dir, CONFIG).unwrap();
    let expected = observe(&mut reference_io, &mut reference);
    assert_eq!(reference.log_end(), cut);

    for model in [CrashModel::DropUnsynced, CrashModel::Torn] {
        for at in 0..=ops {
            let mut io = image.crash(7);
            let mut log = recovery::recover(&mut io, dir, CONFIG).unwrap();
            io.set_power_cut_in(Some(at));
            let _ = log.truncate_to(&mut io, cut);
            drop(log);
            let mut after = io.crash_with(8, model);
            let mut log = recovery::recover(&mut after, dir, CONFIG)
                .unwrap_or_else(|e| panic!("cut after {at} of {ops} ops ({model:?}): {e}"));
            log.check_invariants();
            // Either the truncation took effect or it did not; with the point it reads as a
            // full scan of the same disk does.
            let seen = observe(&mut after, &mut log);
            if log.log_end() == cut {
                assert_eq!(seen, expected, "cut after {at} ops ({model:?})");
            } else {
                assert!(log.log_end() > cut);
            }
            drop(log);
            let mut again = after.crash(9);
            common::forget_recovery_point(&mut again, dir);
            let mut full = recovery::recover(&mut again, dir, CONFIG).unwrap();
            assert_eq!(
                observe(&mut again, &mut full),
                seen,
                "as a full scan ({at} ops)"
            );
        }
    }
}
