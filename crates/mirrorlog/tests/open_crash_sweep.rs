//! A power cut at every I/O operation of opening a partition — the clean open of a cleanly
//! closed log, and the recovery of one that was not — followed by a restart gives a healthy
//! partition holding every acknowledged batch, byte-identical (issue: a crash during a clean
//! open used to leave the partition Failed, its preallocated zeros read as a damaged tail while
//! the clean-shutdown marker still said "clean"). Kafka deletes the marker before loading; so
//! does `PartitionLog::open`, durably. Each cut point is swept under both crash models (unsynced
//! writes dropped, or kept, lost or torn by seed); the restart is what a shard does: the clean
//! open, or recovery when the open says it is needed. Replay with `MIRRORLOG_SEED`.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::internals::io::{CrashModel, SimConfig, SimIo};
use mirrorlog::internals::log::{LogConfig, LogError, PartitionLog, CLEAN_SHUTDOWN_MARKER};
use std::path::Path;

const CONFIG: LogConfig = common::log_config(8 << 10, 1024, 8 << 10);
const DIR: &str = "/sim/open-0";

/// Opens as a shard does: the clean path, or recovery when the log was not closed cleanly.
fn restart(io: &mut SimIo) -> Result<PartitionLog, LogError> {
    common::open_or_recover(io, Path::new(DIR), CONFIG)
}

/// A log of several segments (client batches of two producers, one transaction committed),
/// every batch acknowledged; closed cleanly or left as a power cut leaves it. Returns the disk
/// and the acknowledged bytes.
fn prepare(clean: bool, seed: u64) -> (SimIo, Vec<u8>) {
    let mut io = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let mut log = PartitionLog::create(&mut io, Path::new(DIR), CONFIG).unwrap();
    let mut seqs = [0i32; 2];
    for i in 0..40usize {
        let p = i % 2;
        let txn = p == 1 && i < 10;
        let records = 1 + (i % 3) as i32;
        let batch = common::producer_batch(p as i64, seqs[p], records, txn, 400);
        log.append(&mut io, &batch, Origin::Client).unwrap();
        seqs[p] += records;
        if i == 9 {
            log.append(&mut io, &common::marker(1, true), Origin::Coordinator)
                .unwrap();
        }
        if i % 4 == 3 {
            log.commit(&mut io).unwrap();
        }
    }
    log.commit(&mut io).unwrap();
    assert!(log.segment_base_offsets().len() >= 3, "several segments");
    let acknowledged = common::read_all(&mut io, &mut log);
    if clean {
        log.close(&mut io).unwrap();
        assert!(io
            .file_bytes(&Path::new(DIR).join(CLEAN_SHUTDOWN_MARKER))
            .is_some());
    } else {
        drop(log);
    }
    (io.crash(seed), acknowledged)
}

fn sweep(clean: bool) {
    let seed = common::seed(if clean {
        "open_crash_sweep (clean)"
    } else {
        "open_crash_sweep (unclean)"
    });
    let (base, acknowledged) = prepare(clean, seed);
    let mut probe = base.crash(seed);
    let before = probe.executed_ops();
    drop(restart(&mut probe).expect("the open without a power cut"));
    let ops = probe.executed_ops() - before;
    assert!(ops > 5, "the open does I/O ({ops} operations)");
    for cut in 0..=ops {
        for model in [CrashModel::DropUnsynced, CrashModel::Torn] {
            let case = seed ^ cut.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut disk = base.crash(case);
            disk.set_power_cut_in(Some(cut));
            // The interrupted open may fail anywhere (that is the point); it must not panic.
            drop(restart(&mut disk));
            let mut after = disk.crash_with(case, model);
            let mut log = restart(&mut after).unwrap_or_else(|e| {
                panic!("seed {seed}, clean {clean}, cut {cut} of {ops}, {model:?}: restart failed: {e}")
            });
            let read = common::read_all(&mut after, &mut log);
            assert!(
                read == acknowledged,
                "seed {seed}, clean {clean}, cut {cut} of {ops}, {model:?}: {} bytes read back, {} acknowledged",
                read.len(),
                acknowledged.len()
            );
            // And the partition is healthy: it closes cleanly and opens clean again.
            log.close(&mut after).unwrap();
            let mut again = after.crash(case);
            let mut log = PartitionLog::open(&mut again, Path::new(DIR), CONFIG).unwrap_or_else(|e| {
                panic!("seed {seed}, clean {clean}, cut {cut}, {model:?}: the clean reopen failed: {e}")
            });
            assert!(common::read_all(&mut again, &mut log) == acknowledged);
        }
    }
}

#[test]
fn a_power_cut_at_every_operation_of_a_clean_open_loses_nothing() {
    sweep(true);
}

#[test]
fn a_power_cut_at_every_operation_of_a_recovery_loses_nothing() {
    sweep(false);
}
