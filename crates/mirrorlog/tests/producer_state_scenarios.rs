//! The scenarios of Kafka's `ProducerStateManagerTest`, in our own words and code, plus the
//! barrier, duplicate and snapshot cases design.md §Producer state adds. Each test builds the batches it needs
//! with the helpers below, stages and applies them through the public PSM API, and checks the
//! resulting entries, errors, open transactions and completed transactions.

use mirrorlog::format::{BatchKind, Offset, ProducerFields};
use mirrorlog::internals::producer_state::{
    decode_snapshot, BatchInfo, CompletedTxn, Origin, ProducerStateConfig, ProducerStateError,
    ProducerStateManager, SnapshotError,
};

const PID: i64 = 1;
const T0: i64 = 1_764_403_200_000;

fn psm() -> ProducerStateManager {
    ProducerStateManager::new(ProducerStateConfig::default())
}

fn data(pid: i64, epoch: i16, seq: i32, offset: i64, records: i64) -> BatchInfo {
    BatchInfo {
        base_offset: Offset(offset),
        last_offset: Offset(offset + records - 1),
        producer: ProducerFields {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
        },
        transactional: false,
        kind: BatchKind::Data,
        timestamp: T0 + offset,
    }
}

fn txn(pid: i64, epoch: i16, seq: i32, offset: i64, records: i64) -> BatchInfo {
    BatchInfo {
        transactional: true,
        ..data(pid, epoch, seq, offset, records)
    }
}

fn marker(pid: i64, epoch: i16, commit: bool, coordinator_epoch: i32, offset: i64) -> BatchInfo {
    BatchInfo {
        base_offset: Offset(offset),
        last_offset: Offset(offset),
        producer: ProducerFields {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: -1,
        },
        transactional: true,
        kind: BatchKind::TxnMarker {
            commit,
            coordinator_epoch,
        },
        timestamp: T0 + offset,
    }
}

fn barrier(offset: i64) -> BatchInfo {
    BatchInfo {
        base_offset: Offset(offset),
        last_offset: Offset(offset),
        producer: ProducerFields::NONE,
        transactional: false,
        kind: BatchKind::Barrier,
        timestamp: T0 + offset,
    }
}

/// Stage + apply with barriers treated as Local.
fn append(
    psm: &mut ProducerStateManager,
    batches: &[BatchInfo],
    origin: Origin,
) -> Result<Vec<CompletedTxn>, ProducerStateError> {
    let staged = psm.stage(batches, origin, |_| true)?;
    Ok(psm.apply(staged)?.to_vec())
}

fn last_seq(psm: &ProducerStateManager, pid: i64) -> i32 {
    psm.get(pid).expect("entry").last_seq()
}

#[test]
fn basic_id_mapping_and_sequence_rules() {
    let mut p = psm();
    append(&mut p, &[data(PID, 0, 0, 0, 1)], Origin::Client).unwrap();
    let e = p.get(PID).unwrap();
    assert_eq!(
        (e.epoch, e.last_seq(), e.last_data_offset()),
        (0, 0, Offset(0))
    );
    append(&mut p, &[data(PID, 0, 1, 1, 1)], Origin::Client).unwrap();
    assert_eq!(last_seq(&p, PID), 1);
    // A gap is out of sequence.
    assert!(matches!(
        append(&mut p, &[data(PID, 0, 3, 2, 1)], Origin::Client),
        Err(ProducerStateError::OutOfOrderSequence {
            first_seq: 3,
            last_seq: 1,
            ..
        })
    ));
    // A lower epoch is fenced.
    let mut p2 = psm();
    append(&mut p2, &[data(PID, 5, 0, 0, 1)], Origin::Client).unwrap();
    assert!(matches!(
        append(&mut p2, &[data(PID, 4, 1, 1, 1)], Origin::Client),
        Err(ProducerStateError::InvalidProducerEpoch {
            epoch: 4,
            current_epoch: 5,
            ..
        })
    ));
    // A new epoch must start at 0…
    assert!(matches!(
        append(&mut p2, &[data(PID, 6, 5, 1, 1)], Origin::Client),
        Err(ProducerStateError::OutOfOrderSequence { .. })
    ));
    // …and then does.
    append(&mut p2, &[data(PID, 6, 0, 1, 1)], Origin::Client).unwrap();
    assert_eq!(p2.get(PID).unwrap().epoch, 6);
}

#[test]
fn unknown_producer_is_accepted_at_any_sequence() {
    let mut p = psm();
    append(&mut p, &[data(PID, 3, 1234, 0, 2)], Origin::Client).unwrap();
    assert_eq!(last_seq(&p, PID), 1235);
}

#[test]
fn marker_with_no_producer_state_creates_an_entry() {
    let mut p = psm();
    let done = append(&mut p, &[marker(PID, 2, true, 7, 100)], Origin::Coordinator).unwrap();
    assert!(done.is_empty(), "no transaction was open");
    let e = p.get(PID).unwrap();
    assert_eq!((e.epoch, e.coordinator_epoch, e.last_seq()), (2, 7, -1));
    assert_eq!(e.current_txn_first_offset, None);
    assert_eq!(e.last_timestamp, T0 + 100);
}

#[test]
fn an_empty_control_batch_creates_an_entry_and_changes_nothing_else() {
    // Kafka's `testAppendEmptyControlBatch`: the batch's transaction was cleaned from the log;
    // the append completes nothing, but the producer's entry exists afterwards.
    let empty = |pid: i64, offset: i64| BatchInfo {
        kind: BatchKind::EmptyControl,
        ..marker(pid, 145, true, 0, offset)
    };
    for origin in [Origin::Replication, Origin::Mirror, Origin::Coordinator] {
        let mut p = psm();
        let done = append(&mut p, &[empty(23_423, 15)], origin).unwrap();
        assert!(done.is_empty());
        let e = p.get(23_423).expect("an entry");
        assert_eq!((e.epoch, e.last_seq()), (-1, -1), "{origin:?}");
        assert_eq!(e.current_txn_first_offset, None);
        // An existing producer's entry is unchanged by one.
        append(&mut p, &[data(PID, 3, 0, 20, 2)], Origin::Replication).unwrap();
        let before = p.get(PID).unwrap();
        append(&mut p, &[empty(PID, 22)], origin).unwrap();
        assert_eq!(p.get(PID).unwrap(), before, "{origin:?}");
    }
}

#[test]
fn sequence_wraps_after_max_to_zero() {
    let mut p = psm();
    append(&mut p, &[data(PID, 0, i32::MAX, 0, 1)], Origin::Client).unwrap();
    append(&mut p, &[data(PID, 0, 0, 1, 1)], Origin::Client).unwrap();
    assert_eq!(last_seq(&p, PID), 0);
    // A batch straddling the wrap: MAX-1, MAX, 0, 1 → the next must be 2.
    let mut p = psm();
    append(&mut p, &[data(PID, 0, i32::MAX - 1, 0, 4)], Origin::Client).unwrap();
    assert_eq!(last_seq(&p, PID), 1);
    append(&mut p, &[data(PID, 0, 2, 4, 1)], Origin::Client).unwrap();
}

#[test]
fn invalid_wrap_is_out_of_sequence() {
    let mut p = psm();
    append(&mut p, &[data(PID, 0, 17, 0, 1)], Origin::Client).unwrap();
    assert!(matches!(
        append(&mut p, &[data(PID, 0, 0, 1, 1)], Origin::Client),
        Err(ProducerStateError::OutOfOrderSequence { .. })
    ));
    let mut p = psm();
    append(&mut p, &[data(PID, 0, i32::MAX - 3, 0, 1)], Origin::Client).unwrap();
    assert!(matches!(
        append(&mut p, &[data(PID, 0, 0, 1, 1)], Origin::Client),
        Err(ProducerStateError::OutOfOrderSequence { .. })
    ));
}

#[test]
fn no_validation_on_replicated_first_entry() {
    for origin in [Origin::Replication, Origin::Mirror, Origin::Coordinator] {
        let mut p = psm();
        append(&mut p, &[data(PID, 2, 5000, 10, 3)], origin).unwrap();
        assert_eq!(last_seq(&p, PID), 5002, "{origin:?}");
    }
}

#[test]
fn replica_accepts_gaps_lower_epochs_and_missing_state() {
    for origin in [Origin::Replication, Origin::Mirror] {
        let mut p = psm();
        append(&mut p, &[data(PID, 3, 0, 0, 1)], origin).unwrap();
        append(&mut p, &[data(PID, 3, 40, 1, 1)], origin).unwrap();
        append(&mut p, &[data(PID, 1, 7, 2, 1)], origin).unwrap();
        let e = p.get(PID).unwrap();
        assert_eq!(
            (e.epoch, e.last_seq()),
            (1, 7),
            "{origin:?}: the replica follows the leader"
        );
        // Markers with a stale coordinator epoch too.
        append(&mut p, &[marker(PID, 1, true, 9, 3)], origin).unwrap();
        append(&mut p, &[marker(PID, 1, false, 2, 4)], origin).unwrap();
        assert_eq!(p.get(PID).unwrap().coordinator_epoch, 2);
    }
}

#[test]
fn control_record_bumps_the_epoch() {
    let mut p = psm();
    append(&mut p, &[txn(PID, 0, 0, 0, 2)], Origin::Client).unwrap();
    let done = append(&mut p, &[marker(PID, 1, true, 0, 2)], Origin::Coordinator).unwrap();
    assert_eq!(done.len(), 1);
    let e = p.get(PID).unwrap();
    assert_eq!(e.epoch, 1);
    assert!(
        e.batches.is_empty(),
        "a new epoch forgets the batch history"
    );
    append(&mut p, &[data(PID, 1, 0, 3, 1)], Origin::Client).unwrap();
}

#[test]
fn out_of_sequence_after_control_record_epoch_bump() {
    let mut p = psm();
    append(&mut p, &[txn(PID, 0, 0, 0, 1)], Origin::Client).unwrap();
    append(&mut p, &[marker(PID, 1, true, 0, 1)], Origin::Coordinator).unwrap();
    assert!(matches!(
        append(&mut p, &[data(PID, 1, 1, 2, 1)], Origin::Client),
        Err(ProducerStateError::OutOfOrderSequence {
            first_seq: 1,
            last_seq: -1,
            ..
        })
    ));
}

#[test]
fn staging_does_not_mutate_and_only_the_latest_stage_applies() {
    let mut p = psm();
    append(&mut p, &[data(PID, 0, 0, 0, 1)], Origin::Client).unwrap();
    let before: Vec<_> = p.producers().collect();
    let first = p
        .stage(
            &[data(PID, 0, 1, 1, 1), data(2, 0, 0, 2, 1)],
            Origin::Client,
            |_| true,
        )
        .unwrap();
    assert_eq!(
        p.producers().collect::<Vec<_>>(),
        before,
        "staging changed nothing"
    );
    assert_eq!(p.get(2), None);
    let second = p
        .stage(&[data(PID, 0, 1, 1, 1)], Origin::Client, |_| true)
        .unwrap();
    assert_eq!(p.apply(first), Err(ProducerStateError::StaleStage));
    p.apply(second).unwrap();
    assert_eq!(last_seq(&p, PID), 1);
    assert_eq!(
        p.apply(second),
        Err(ProducerStateError::StaleStage),
        "applies once"
    );
    // A rejected append changes nothing, even when its first batches were valid.
    let before: Vec<_> = p.producers().collect();
    let err = append(
        &mut p,
        &[
            data(PID, 0, 2, 2, 1),
            data(3, 0, 0, 3, 1),
            data(PID, 0, 9, 4, 1),
        ],
        Origin::Client,
    );
    assert!(err.is_err());
    assert_eq!(p.producers().collect::<Vec<_>>(), before);
}

#[test]
fn non_transactional_append_during_a_transaction_is_invalid_for_every_origin() {
    for origin in [
        Origin::Client,
        Origin::Coordinator,
        Origin::Replication,
        Origin::Mirror,
    ] {
        let mut p = psm();
        append(&mut p, &[txn(PID, 0, 0, 0, 1)], origin).unwrap();
        assert!(
            matches!(
                append(&mut p, &[data(PID, 0, 1, 1, 1)], origin),
                Err(ProducerStateError::InvalidTxnState {
                    txn_first_offset: Offset(0),
                    ..
                })
            ),
            "{origin:?}"
        );
    }
}

#[test]
fn fencing_abort_marker_keeps_the_entry() {
    let mut p = psm();
    append(&mut p, &[txn(PID, 0, 0, 0, 3)], Origin::Client).unwrap();
    let done = append(&mut p, &[marker(PID, 1, false, 0, 3)], Origin::Coordinator).unwrap();
    assert_eq!(done.len(), 1);
    assert!(done[0].aborted);
    assert_eq!(done[0].first_offset, Offset(0));
    assert_eq!(done[0].last_offset, Offset(3));
    assert_eq!(done[0].last_stable_offset, Offset(4));
    let e = p.get(PID).expect("the fenced producer keeps its entry");
    assert_eq!(e.epoch, 1);
    assert_eq!(e.current_txn_first_offset, None);
    assert_eq!(p.first_unstable_offset(), None);
    let entry = done[0].aborted_entry().unwrap();
    assert_eq!(entry.producer_id, PID);
}

#[test]
fn coordinator_fencing() {
    let mut p = psm();
    append(&mut p, &[txn(PID, 0, 0, 0, 1)], Origin::Client).unwrap();
    append(&mut p, &[marker(PID, 0, true, 5, 1)], Origin::Coordinator).unwrap();
    append(&mut p, &[txn(PID, 0, 1, 2, 1)], Origin::Client).unwrap();
    assert!(matches!(
        append(&mut p, &[marker(PID, 0, true, 4, 3)], Origin::Coordinator),
        Err(ProducerStateError::CoordinatorFenced {
            coordinator_epoch: 4,
            current_coordinator_epoch: 5,
            ..
        })
    ));
    assert_eq!(
        p.first_unstable_offset(),
        Some(Offset(2)),
        "the transaction is still open"
    );
}

#[test]
fn old_epoch_for_control_record_is_fenced_unless_copied() {
    let mut p = psm();
    append(&mut p, &[txn(PID, 3, 0, 0, 1)], Origin::Client).unwrap();
    assert!(matches!(
        append(&mut p, &[marker(PID, 2, true, 0, 1)], Origin::Coordinator),
        Err(ProducerStateError::InvalidProducerEpoch {
            epoch: 2,
            current_epoch: 3,
            ..
        })
    ));
    append(&mut p, &[marker(PID, 2, true, 0, 1)], Origin::Mirror).unwrap();
}

#[test]
fn first_unstable_offset_and_lso_with_interleaved_producers() {
    let mut p = psm();
    append(&mut p, &[txn(1, 0, 0, 0, 2)], Origin::Client).unwrap();
    append(&mut p, &[txn(2, 0, 0, 2, 3)], Origin::Client).unwrap();
    append(&mut p, &[txn(1, 0, 2, 5, 1)], Origin::Client).unwrap();
    assert_eq!(p.first_unstable_offset(), Some(Offset(0)));
    assert_eq!(p.last_stable_offset(Offset(6)), Offset(0));
    let done = append(&mut p, &[marker(1, 0, true, 0, 6)], Origin::Coordinator).unwrap();
    assert_eq!(
        done[0].last_stable_offset,
        Offset(2),
        "producer 2's transaction is still open"
    );
    assert_eq!(p.first_unstable_offset(), Some(Offset(2)));
    assert_eq!(
        p.last_stable_offset(Offset(1)),
        Offset(1),
        "the high watermark bounds the LSO"
    );
    assert_eq!(p.last_stable_offset(Offset(7)), Offset(2));
    let done = append(&mut p, &[marker(2, 0, false, 0, 7)], Origin::Coordinator).unwrap();
    assert_eq!(done[0].last_stable_offset, Offset(8));
    assert_eq!(p.first_unstable_offset(), None);
    assert_eq!(p.last_stable_offset(Offset(8)), Offset(8));
}

#[test]
fn lso_of_transactions_completed_in_one_append_follows_kafka() {
    // Markers for producers 1 and 2 in one mirrored append: when 1 completes, 2 still counts
    // as open (Kafka removes completed transactions one by one after the whole append).
    let mut p = psm();
    append(
        &mut p,
        &[txn(2, 0, 0, 0, 1), txn(1, 0, 0, 1, 1)],
        Origin::Mirror,
    )
    .unwrap();
    let done = append(
        &mut p,
        &[marker(1, 0, false, 0, 2), marker(2, 0, false, 0, 3)],
        Origin::Mirror,
    )
    .unwrap();
    assert_eq!(done[0].last_stable_offset, Offset(0));
    assert_eq!(done[1].last_stable_offset, Offset(4));
}

#[test]
fn empty_control_batch_is_a_no_op() {
    let mut p = psm();
    append(&mut p, &[txn(PID, 0, 0, 0, 1)], Origin::Client).unwrap();
    let empty = BatchInfo {
        kind: BatchKind::EmptyControl,
        ..marker(PID, 9, true, 9, 1)
    };
    assert!(append(&mut p, &[empty], Origin::Coordinator)
        .unwrap()
        .is_empty());
    let e = p.get(PID).unwrap();
    assert_eq!((e.epoch, e.current_txn_first_offset), (0, Some(Offset(0))));
}

#[test]
fn duplicates_return_the_original_offsets_and_change_nothing() {
    let mut p = psm();
    for i in 0..6 {
        append(
            &mut p,
            &[data(PID, 0, i * 2, 100 + i64::from(i) * 2, 2)],
            Origin::Client,
        )
        .unwrap();
    }
    let before: Vec<_> = p.producers().collect();
    // The second-oldest of the last five batches (seq 4-5 at offsets 104-105), retried now at
    // offset 200.
    let staged = p
        .stage(&[data(PID, 0, 4, 200, 2)], Origin::Client, |_| true)
        .unwrap();
    let original = staged.duplicate.expect("a duplicate");
    assert_eq!(
        (original.first_offset(), original.last_offset),
        (Offset(104), Offset(105))
    );
    assert!(p.apply(staged).unwrap().is_empty());
    assert_eq!(p.producers().collect::<Vec<_>>(), before);
    // The sixth-oldest is forgotten: it is out of sequence now.
    assert!(matches!(
        append(&mut p, &[data(PID, 0, 0, 200, 2)], Origin::Client),
        Err(ProducerStateError::OutOfOrderSequence { .. })
    ));
    // The same range under another epoch is no duplicate: the new-epoch rule judges it.
    assert!(matches!(
        p.stage(&[data(PID, 1, 4, 200, 2)], Origin::Client, |_| true),
        Err(ProducerStateError::OutOfOrderSequence { epoch: 1, .. })
    ));
    // Mirror appends never deduplicate.
    assert!(p
        .stage(&[data(PID, 0, 4, 200, 2)], Origin::Mirror, |_| true)
        .unwrap()
        .duplicate
        .is_none());
}

#[test]
fn barrier_in_a_local_range_clears_everything_and_elsewhere_nothing() {
    let mut p = psm();
    append(
        &mut p,
        &[data(1, 0, 0, 0, 1), txn(2, 0, 0, 1, 1)],
        Origin::Client,
    )
    .unwrap();
    // Inside mirrored data: stored, changes nothing.
    let staged = p.stage(&[barrier(2)], Origin::Mirror, |_| false).unwrap();
    assert!(!staged.clears);
    p.apply(staged).unwrap();
    assert_eq!(p.len(), 2);
    assert_eq!(p.first_unstable_offset(), Some(Offset(1)));
    // In a Local range: every entry and the open transaction go.
    let staged = p
        .stage(&[barrier(3)], Origin::Coordinator, |o| o == Offset(3))
        .unwrap();
    assert!(staged.clears);
    p.apply(staged).unwrap();
    assert!(p.is_empty());
    assert_eq!(p.first_unstable_offset(), None);
    // Fresh local producers start clean, even with ids the source used.
    append(&mut p, &[data(2, 0, 0, 4, 1)], Origin::Client).unwrap();
}

#[test]
fn barrier_mid_append_clears_earlier_batches_only() {
    let mut p = psm();
    append(&mut p, &[txn(1, 0, 0, 0, 1)], Origin::Mirror).unwrap();
    let done = append(
        &mut p,
        &[
            marker(1, 0, false, 0, 1),
            data(2, 0, 0, 2, 1),
            barrier(3),
            data(3, 4, 0, 4, 1),
        ],
        Origin::Mirror,
    )
    .unwrap();
    assert_eq!(
        done.len(),
        1,
        "the abort before the barrier is still completed"
    );
    let ids: Vec<_> = p.producers().map(|e| e.producer_id).collect();
    assert_eq!(ids, vec![3]);
}

#[test]
fn clear_is_constant_time_in_the_table_and_keeps_it_usable() {
    let mut p = psm();
    let batches: Vec<_> = (0..50_000).map(|i| data(i, 0, 0, i, 1)).collect();
    append(&mut p, &batches, Origin::Mirror).unwrap();
    assert_eq!(p.len(), 50_000);
    p.clear_for_barrier();
    assert!(p.is_empty());
    assert_eq!(p.get(49_999), None);
    append(&mut p, &[data(7, 0, 0, 50_000, 1)], Origin::Client).unwrap();
    assert_eq!(p.len(), 1);
    p.check_invariants();
}

#[test]
fn expiration_spares_open_transactions() {
    let config = ProducerStateConfig {
        producer_id_expiration_ms: 1_000,
    };
    let mut p = ProducerStateManager::new(config);
    append(
        &mut p,
        &[data(1, 0, 0, 0, 1), txn(2, 0, 0, 1, 1)],
        Origin::Client,
    )
    .unwrap();
    assert_eq!(p.remove_expired(T0 + 999), 0);
    assert_eq!(p.remove_expired(T0 + 5_000), 1);
    assert_eq!(p.get(1), None);
    assert!(p.get(2).is_some(), "an open transaction never expires");
}

#[test]
fn snapshot_round_trip_and_recovery_with_unfinished_and_finished_transactions() {
    let mut p = psm();
    append(&mut p, &[txn(1, 0, 0, 0, 2)], Origin::Client).unwrap();
    append(&mut p, &[txn(2, 3, 0, 2, 1)], Origin::Client).unwrap();
    append(&mut p, &[marker(2, 3, true, 4, 3)], Origin::Coordinator).unwrap();
    append(&mut p, &[data(3, 1, 0, 4, 5)], Origin::Client).unwrap();
    let bytes = p.snapshot();
    assert_eq!(bytes.len(), 10 + 3 * 46);
    let mut q = psm();
    assert_eq!(q.load_snapshot(&bytes, T0).unwrap(), 3);
    let mut ours: Vec<_> = p.producers().collect();
    let mut theirs: Vec<_> = q.producers().collect();
    ours.sort_by_key(|e| e.producer_id);
    theirs.sort_by_key(|e| e.producer_id);
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a.epoch, b.epoch);
        assert_eq!(a.coordinator_epoch, b.coordinator_epoch);
        assert_eq!(a.current_txn_first_offset, b.current_txn_first_offset);
        assert_eq!(a.last_seq(), b.last_seq());
        assert_eq!(a.last_data_offset(), b.last_data_offset());
        assert_eq!(a.last_timestamp, b.last_timestamp);
    }
    // The unfinished transaction is open again and can be completed; the finished one is not.
    assert_eq!(q.first_unstable_offset(), Some(Offset(0)));
    assert_eq!(q.get(2).unwrap().current_txn_first_offset, None);
    let done = append(&mut q, &[marker(1, 0, false, 0, 9)], Origin::Coordinator).unwrap();
    assert_eq!(done[0].first_offset, Offset(0));
    assert_eq!(q.first_unstable_offset(), None);
    // Producer 3 continues its sequence after recovery.
    append(&mut q, &[data(3, 1, 5, 10, 1)], Origin::Client).unwrap();
}

#[test]
fn empty_psm_snapshot_loads_empty() {
    let bytes = psm().snapshot();
    assert_eq!(bytes.len(), 10);
    let mut q = psm();
    append(&mut q, &[data(1, 0, 0, 0, 1)], Origin::Client).unwrap();
    assert_eq!(q.load_snapshot(&bytes, T0).unwrap(), 0);
    assert!(q.is_empty());
}

#[test]
fn expired_producers_are_dropped_on_load() {
    let mut p = psm();
    append(
        &mut p,
        &[data(1, 0, 0, 0, 1), txn(2, 0, 0, 1, 1), data(3, 0, 0, 2, 1)],
        Origin::Client,
    )
    .unwrap();
    let bytes = p.snapshot();
    let mut q = psm();
    let day = 86_400_000;
    assert_eq!(q.load_snapshot(&bytes, T0 + day + 2).unwrap(), 1);
    assert!(
        q.get(2).is_some(),
        "the producer with an open transaction stays"
    );
}

/// Which snapshot error a case expects.
type ErrorCheck = fn(&SnapshotError) -> bool;

#[test]
fn empty_truncated_and_corrupt_snapshot_files_are_typed_errors() {
    let mut p = psm();
    append(
        &mut p,
        &[txn(1, 0, 0, 0, 1), data(2, 0, 0, 1, 1)],
        Origin::Client,
    )
    .unwrap();
    let good = p.snapshot();
    let mut q = psm();
    append(&mut q, &[data(9, 0, 0, 0, 1)], Origin::Client).unwrap();
    let cases: Vec<(Vec<u8>, ErrorCheck)> = vec![
        (Vec::new(), |e| {
            matches!(e, SnapshotError::Truncated { size_bytes: 0 })
        }),
        (good[..7].to_vec(), |e| {
            matches!(e, SnapshotError::Truncated { size_bytes: 7 })
        }),
        (good[..good.len() - 1].to_vec(), |e| {
            matches!(e, SnapshotError::CrcMismatch { .. })
        }),
        (
            {
                let mut b = good.clone();
                b[30] ^= 1;
                b
            },
            |e| matches!(e, SnapshotError::CrcMismatch { .. }),
        ),
        (
            {
                let mut b = good.clone();
                b[1] = 2;
                b
            },
            |e| matches!(e, SnapshotError::UnsupportedVersion { version: 2 }),
        ),
        (
            {
                // A count that disagrees with the size, behind a valid CRC.
                let mut b = good.clone();
                b[6..10].copy_from_slice(&5i32.to_be_bytes());
                let crc = mirrorlog::format::crc32c(&b[6..]);
                b[2..6].copy_from_slice(&crc.to_be_bytes());
                b
            },
            |e| matches!(e, SnapshotError::EntryCountMismatch { declared: 5, .. }),
        ),
    ];
    for (i, (bytes, expected)) in cases.iter().enumerate() {
        let err = q.load_snapshot(bytes, T0).unwrap_err();
        assert!(expected(&err), "case {i}: {err:?}");
        assert_eq!(decode_snapshot(bytes).unwrap_err(), err);
        // The state is untouched by a failed load.
        assert_eq!(q.len(), 1, "case {i}");
        assert!(q.get(9).is_some());
    }
    assert_eq!(q.load_snapshot(&good, T0).unwrap(), 2);
}

/// Found by the model test (seed 1795941955004175957): replicated histories need not be
/// monotonic, so a client batch that follows the last sequence can still repeat an older batch;
/// Kafka checks duplicates before sequences.
#[test]
fn in_sequence_batch_repeating_a_replicated_one_is_a_duplicate() {
    let mut p = psm();
    append(&mut p, &[data(PID, 0, 5, 0, 2)], Origin::Replication).unwrap();
    append(&mut p, &[data(PID, 0, 0, 2, 5)], Origin::Replication).unwrap();
    // Last sequence is 4; 5-6 follows it, and also repeats the batch at offsets 0-1.
    let staged = p
        .stage(&[data(PID, 0, 5, 7, 2)], Origin::Client, |_| true)
        .unwrap();
    let original = staged.duplicate.expect("a duplicate");
    assert_eq!(
        (original.first_offset(), original.last_offset),
        (Offset(0), Offset(1))
    );
}

/// Found by the model test (seed 1795941944277981454): when the history holds the same range
/// twice, the duplicate reported is the oldest, as Kafka's `findDuplicateBatch` returns.
#[test]
fn duplicate_of_a_repeated_range_reports_the_oldest() {
    let mut p = psm();
    append(&mut p, &[data(PID, 0, 0, 0, 2)], Origin::Mirror).unwrap();
    append(&mut p, &[data(PID, 0, 0, 2, 2)], Origin::Mirror).unwrap();
    let staged = p
        .stage(&[data(PID, 0, 0, 4, 2)], Origin::Client, |_| true)
        .unwrap();
    assert_eq!(staged.duplicate.map(|d| d.first_offset()), Some(Offset(0)));
}
