//! `stop_mirroring` is atomic (design.md §Mirroring, "Atomic stop"): a power cut at every I/O operation of a
//! stop, under both crash models, then a restart, leaves either the state after the stop or
//! the state before it; from before, a retried stop reports the same `last_mirrored_offset`
//! (and the same barrier offset and aborted producers) and ends in the same state as a stop
//! that was never interrupted. A `DiskFull` at the barrier's roll leaves the state before the
//! stop too, in memory and after a restart, and the retry succeeds once space is back.
//! Replay with `MIRRORLOG_SEED`.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::format::Offset;
use mirrorlog::internals::io::{CrashModel, Fault, OpKind, SimConfig, SimIo};
use mirrorlog::internals::log::{
    LogConfig, LogError, MirrorStart, Mode, ModeHistory, OpenTransactions, PartitionLog,
    StopOutcome, STOP_INTENT,
};
use std::path::Path;

const DIR: &str = "/sim/stop-0";
const CONFIG: LogConfig = LogConfig {
    // The stop's barrier is far newer than the first batch: its append rolls the segment.
    segment_ms: Some(60_000),
    ..common::log_config(64 << 10, 1024, 16 << 10)
};
const NOW_MS: i64 = common::RECORDS_MS + 3_600_000;

fn restart(io: &mut SimIo) -> PartitionLog {
    common::open_or_recover(io, Path::new(DIR), CONFIG).unwrap_or_else(|e| panic!("restart: {e}"))
}

/// What must be "before" or "after".
type Observed = (Mode, ModeHistory, Offset, Vec<i64>, Vec<u8>);

fn observe(io: &mut SimIo, log: &mut PartitionLog) -> Observed {
    let mut producers: Vec<i64> = log
        .producer_state()
        .producers()
        .map(|e| e.producer_id)
        .collect();
    producers.sort_unstable();
    (
        log.mode().clone(),
        log.mode_history().clone(),
        log.log_end(),
        producers,
        common::read_all(io, log),
    )
}

/// A cleanly closed mirroring partition: mirrored batches from three producers, one of them
/// with a transaction left open (the stop aborts it).
fn prepare(seed: u64) -> SimIo {
    let mut io = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let mut log = PartitionLog::create(&mut io, Path::new(DIR), CONFIG).unwrap();
    log.start_mirroring(&mut io, "east/t-0", MirrorStart::LastStableOffset)
        .unwrap();
    let mut at = 0i64;
    for (producer, txn) in [(5, false), (6, true), (7, false), (5, false)] {
        let seq = if producer == 5 && at > 0 { 2 } else { 0 };
        let b = common::stored(
            common::producer_batch(producer, seq, 2, txn, 200),
            Offset(at),
            1,
        );
        log.append(&mut io, &b, Origin::Mirror).unwrap();
        at += 2;
    }
    log.commit(&mut io).unwrap();
    log.close(&mut io).unwrap();
    io.crash(seed)
}

fn stop(
    io: &mut SimIo,
    log: &mut PartitionLog,
    open: OpenTransactions,
) -> Result<StopOutcome, LogError> {
    log.stop_mirroring(io, 3, open, NOW_MS)
}

fn sweep(open: OpenTransactions) {
    let seed = common::seed(&format!("stop_crash_sweep {open:?}"));
    let base = prepare(seed);
    let (before, reference, after, ops) = {
        let mut io = base.crash(seed);
        let mut log = restart(&mut io);
        let before = observe(&mut io, &mut log);
        let start = io.executed_ops();
        let reference = stop(&mut io, &mut log, open).unwrap();
        let ops = io.executed_ops() - start;
        (before, reference, observe(&mut io, &mut log), ops)
    };
    let aborted: &[i64] = if open == OpenTransactions::Abort {
        &[6]
    } else {
        &[]
    };
    assert_eq!(reference.aborted_producers, aborted);
    assert!(matches!(after.0, Mode::Local));
    let (mut befores, mut afters) = (0, 0);
    for cut in 0..=ops {
        for model in [CrashModel::DropUnsynced, CrashModel::Torn] {
            let case = seed ^ cut.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut disk = base.crash(case);
            let mut log = restart(&mut disk);
            disk.set_power_cut_in(Some(cut));
            drop(stop(&mut disk, &mut log, open));
            drop(log);
            let mut io = disk.crash_with(case, model);
            let mut log = restart(&mut io);
            let got = observe(&mut io, &mut log);
            let what = format!("seed {seed}, {open:?}, cut {cut} of {ops}, {model:?}");
            if got == after {
                afters += 1;
                assert!(
                    io.file_bytes(&Path::new(DIR).join(STOP_INTENT)).is_none(),
                    "{what}"
                );
                continue;
            }
            befores += 1;
            if open == OpenTransactions::Abort {
                assert_eq!(got, before, "{what}: neither before nor after the stop");
            } else {
                assert!(
                    !matches!(got.0, Mode::Local),
                    "{what}: half stopped: {:?}",
                    got.0
                );
            }
            let retried =
                stop(&mut io, &mut log, open).unwrap_or_else(|e| panic!("{what}: retry: {e}"));
            assert_eq!(
                retried, reference,
                "{what}: the retry reports what the stop would have"
            );
            assert_eq!(
                observe(&mut io, &mut log),
                after,
                "{what}: the retry ends as the stop"
            );
        }
    }
    assert!(
        befores > 0 && afters > 0,
        "both outcomes seen: {befores} before, {afters} after"
    );
}

#[test]
fn a_power_cut_at_every_operation_of_a_stop_leaves_before_or_after() {
    sweep(OpenTransactions::Abort);
}

#[test]
fn a_power_cut_at_every_operation_of_a_stop_that_truncates_to_the_lso() {
    sweep(OpenTransactions::TruncateToLso);
}

#[test]
fn disk_full_at_the_barriers_roll_leaves_the_state_before_the_stop() {
    let seed = common::seed("disk_full_at_the_barriers_roll");
    let base = prepare(seed);
    let reference = {
        let mut io = base.crash(seed);
        let mut log = restart(&mut io);
        stop(&mut io, &mut log, OpenTransactions::Abort).unwrap()
    };
    let mut io = base.crash(seed);
    let mut log = restart(&mut io);
    let before = observe(&mut io, &mut log);
    io.inject(Fault {
        kind: OpKind::Fallocate,
        nth: 0,
        errno: libc::ENOSPC,
    });
    assert_eq!(
        stop(&mut io, &mut log, OpenTransactions::Abort),
        Err(LogError::DiskFull)
    );
    assert_eq!(observe(&mut io, &mut log), before, "in memory");
    // Nothing of the failed attempt reaches the disk later (it used to be committed by the
    // next round), and a restart finds the state before the stop.
    log.commit(&mut io).unwrap();
    let mut after = io.crash(seed ^ 1);
    let mut reopened = restart(&mut after);
    assert_eq!(
        observe(&mut after, &mut reopened),
        before,
        "after a restart"
    );
    // Space is back: the retry reports what the stop would have.
    assert_eq!(
        stop(&mut io, &mut log, OpenTransactions::Abort).unwrap(),
        reference
    );
    assert_eq!(
        stop(&mut after, &mut reopened, OpenTransactions::Abort).unwrap(),
        reference
    );
}
