//! Mirror appends at the partition log (design.md §Mirroring, "Mirror appends"): a fetch retried after its
//! first attempt was stored is an idempotent no-op (a prefix already stored byte for byte is
//! skipped, the rest appended), a fetch overlapping stored offsets with other bytes moves the
//! partition to Failed, and so does a batch the producer-state rules reject (`InvalidTxnState`)
//! — nothing of the refused fetch is written, and Failed survives a reopen.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::format::Offset;
use mirrorlog::internals::io::{Io, SimConfig, SimIo};
use mirrorlog::internals::log::{LogError, MirrorStart, Mode, PartitionLog};
use mirrorlog::internals::producer_state::ProducerStateError;
use std::path::Path;

const CONFIG: mirrorlog::internals::log::LogConfig = common::log_config(64 << 10, 1024, 16 << 10);

/// A batch as the source stored it: offsets from `base`, the source's leader epoch 3.
fn mirrored(producer: i64, seq: i32, records: i32, txn: bool, base: i64) -> Vec<u8> {
    common::stored(
        common::producer_batch(producer, seq, records, txn, 100),
        Offset(base),
        3,
    )
}

fn mirroring(io: &mut SimIo, dir: &str) -> PartitionLog {
    let mut log = PartitionLog::create(io, Path::new(dir), CONFIG).unwrap();
    log.start_mirroring(io, "east/t-0", MirrorStart::LastStableOffset)
        .unwrap();
    log
}

fn bytes(io: &mut dyn Io, log: &mut PartitionLog) -> Vec<u8> {
    log.commit(io).unwrap();
    common::read_all(io, log)
}

#[test]
fn a_retried_fetch_is_a_no_op_and_a_different_overlap_fails_the_mirror() {
    let mut io = SimIo::new(SimConfig::default());
    let mut log = mirroring(&mut io, "/sim/mirror-0");
    let fetch = [
        mirrored(1, 0, 2, false, 0),
        mirrored(1, 2, 2, false, 2),
        mirrored(2, 0, 1, false, 4),
    ]
    .concat();
    let first = log.append(&mut io, &fetch, Origin::Mirror).unwrap();
    assert_eq!(
        (first.first_offset, first.last_offset, first.duplicate),
        (Offset(0), Offset(4), false)
    );
    let stored = bytes(&mut io, &mut log);

    // The same fetch again (the first attempt's answer was lost): accepted, nothing written.
    let again = log.append(&mut io, &fetch, Origin::Mirror).unwrap();
    assert_eq!(
        (again.first_offset, again.last_offset, again.duplicate),
        (Offset(0), Offset(4), true)
    );
    assert_eq!(log.log_end(), Offset(5));
    assert_eq!(bytes(&mut io, &mut log), stored);
    assert!(matches!(log.mode(), Mode::Mirroring { .. }));

    // A fetch from an earlier offset that runs past the log end: the stored part is skipped.
    let overlapping = [mirrored(2, 0, 1, false, 4), mirrored(1, 4, 2, false, 5)].concat();
    let out = log.append(&mut io, &overlapping, Origin::Mirror).unwrap();
    assert_eq!((out.first_offset, out.last_offset), (Offset(5), Offset(6)));
    assert_eq!(log.log_end(), Offset(7));
    let stored = bytes(&mut io, &mut log);
    assert_eq!(
        &stored[stored.len() - overlapping.len()..],
        &overlapping[..],
        "stored as fetched"
    );

    // Stored offsets with other bytes: the mirror has diverged. Failed, nothing written.
    let diverged = mirrored(1, 40, 2, false, 5);
    let r = log.append(&mut io, &diverged, Origin::Mirror);
    assert!(matches!(r, Err(LogError::NotAtLogEnd { .. })), "{r:?}");
    assert!(
        matches!(log.mode(), Mode::Failed { .. }),
        "{:?}",
        log.mode()
    );
    assert_eq!(bytes(&mut io, &mut log), stored);
}

#[test]
fn a_mirrored_batch_the_producer_rules_reject_fails_the_partition() {
    let mut io = SimIo::new(SimConfig::default());
    let dir = "/sim/mirror-1";
    let mut log = mirroring(&mut io, dir);
    log.append(&mut io, &mirrored(9, 0, 1, true, 0), Origin::Mirror)
        .unwrap();
    let stored = bytes(&mut io, &mut log);
    // Producer 9 has an open transaction: a non-transactional batch from it is InvalidTxnState.
    let r = log.append(&mut io, &mirrored(9, 1, 1, false, 1), Origin::Mirror);
    assert!(
        matches!(
            r,
            Err(LogError::ProducerState(
                ProducerStateError::InvalidTxnState { .. }
            ))
        ),
        "{r:?}"
    );
    let Mode::Failed { reason } = log.mode().clone() else {
        panic!("{:?}", log.mode());
    };
    assert!(reason.contains("9"), "{reason}");
    assert_eq!(log.log_end(), Offset(1));
    assert_eq!(bytes(&mut io, &mut log), stored);
    // Failed is durable: a reopen finds it, and the batch was never written.
    log.close(&mut io).unwrap();
    let mut log = PartitionLog::open(&mut io, Path::new(dir), CONFIG).unwrap();
    assert!(matches!(log.mode(), Mode::Failed { .. }));
    assert_eq!(bytes(&mut io, &mut log), stored);
}
