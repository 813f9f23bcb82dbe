//! The partition log's and the segment writer's invariants as code (`check_invariants`, STYLE §4):
//! they hold after every kind of mutation (appends, commit rounds started and completed, rolls,
//! truncations, delete-records, retention, mirroring start and stop, a reopen), checked here
//! explicitly after each step on the simulated disk — and, in debug builds, by the types
//! themselves after every mutation. The two Kafka bounds the chain `log start ≤ LSO ≤ HW` needs
//! are tested on their own: a broker-managed high watermark below the log start reads as the
//! log start (Kafka's `updateHighWatermark`), and a transaction whose first offset was deleted
//! is unstable from the log start on (Kafka clamps its first unstable offset).

mod common;

use mirrorlog::api::Origin;
use mirrorlog::format::Offset;
use mirrorlog::internals::io::{Io, SimConfig, SimIo};
use mirrorlog::internals::log::{MirrorStart, OpenTransactions, PartitionLog};
use std::path::Path;

const CONFIG: mirrorlog::internals::log::LogConfig = common::log_config(16 << 10, 4096, 8 << 10);

fn append(io: &mut dyn Io, log: &mut PartitionLog, producer: i64, seq: i32, txn: bool) -> Offset {
    let batch = common::producer_batch(producer, seq, 2, txn, 300);
    let out = log.append(io, &batch, Origin::Client).unwrap();
    log.check_invariants();
    out.first_offset
}

#[test]
fn invariants_hold_after_every_kind_of_mutation() {
    let mut io = SimIo::new(SimConfig::default());
    let dir = Path::new("/sim/inv-0");
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    log.check_invariants();
    let mut second = 0;
    for seq in (0..240).step_by(2) {
        append(&mut io, &mut log, 1, seq, false);
        if seq % 6 == 0 {
            // A round started and left in flight while appends continue, then completed.
            assert!(log.start_commit(&mut io).unwrap());
            log.check_invariants();
            append(&mut io, &mut log, 2, second, false);
            second += 2;
        }
        log.commit(&mut io).unwrap();
        log.check_invariants();
    }
    assert!(
        log.segment_base_offsets().len() > 3,
        "the appends rolled segments"
    );
    log.roll(&mut io).unwrap();
    log.check_invariants();
    let mid = log.segment_base_offsets()[2];
    log.delete_records(&mut io, Offset(mid.0 + 1)).unwrap();
    log.check_invariants();
    assert_eq!(log.segment_base_offsets()[0], mid);
    log.enforce_retention(&mut io, i64::MAX).unwrap();
    log.check_invariants();
    let end = log.log_end();
    log.truncate_to(&mut io, Offset(end.0 - 3)).unwrap();
    log.check_invariants();
    log.start_mirroring(&mut io, "east/inv-0", MirrorStart::LastStableOffset)
        .unwrap();
    log.check_invariants();
    log.stop_mirroring(&mut io, 3, OpenTransactions::Abort, 1_764_403_200_000)
        .unwrap();
    log.check_invariants();
    log.close(&mut io).unwrap();
    let reopened = PartitionLog::open(&mut io, dir, CONFIG).unwrap();
    reopened.check_invariants();
}

#[test]
fn a_managed_high_watermark_below_the_log_start_reads_as_the_log_start() {
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, Path::new("/sim/inv-1"), CONFIG).unwrap();
    for seq in (0..20).step_by(2) {
        append(&mut io, &mut log, 1, seq, false);
    }
    log.commit(&mut io).unwrap();
    log.delete_records(&mut io, Offset(8)).unwrap();
    log.set_high_watermark(Offset(3));
    log.check_invariants();
    assert_eq!(log.high_watermark(), Offset(8));
    assert_eq!(log.last_stable_offset(), Offset(8));
    log.set_high_watermark(Offset(12));
    assert_eq!(log.high_watermark(), Offset(12));
}

#[test]
fn a_transaction_whose_start_was_deleted_is_unstable_from_the_log_start() {
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, Path::new("/sim/inv-2"), CONFIG).unwrap();
    let txn_start = append(&mut io, &mut log, 7, 0, true); // open transaction at 0-1
    for seq in (0..10).step_by(2) {
        append(&mut io, &mut log, 1, seq, false);
    }
    log.commit(&mut io).unwrap();
    assert_eq!(log.last_stable_offset(), txn_start);
    log.delete_records(&mut io, Offset(4)).unwrap();
    log.check_invariants();
    assert_eq!(log.last_stable_offset(), Offset(4));
    assert_eq!(log.log_start(), Offset(4));
}
