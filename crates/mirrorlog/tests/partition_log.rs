//! The partition log on both backends: client appends get contiguous offsets and the leader
//! epoch stamped, across many segment rolls; every offset reads back as the batch holding it;
//! client retries return the original offsets and write nothing; mirrored appends keep their
//! offsets and must start at the log end; ReadCommitted stops at the LSO and lists aborted
//! transactions; rolls leave Kafka-named snapshots and sealed segments kafka-python reads;
//! malformed requests change nothing. (Removing records: `partition_log_truncation.rs`; rolls and
//! reopens: `partition_log_reopen.rs`.)

mod common;

use common::partition_log::{client_batch, fill, CONFIG};
use mirrorlog::format::{self, BatchIter, MarkerSpec, Offset};
use mirrorlog::internals::io::{Io, SimConfig, SimIo, UringIo};
use mirrorlog::internals::log::{
    EpochCache, Isolation, LogError, MirrorStart, Mode, PartitionLog, LEADER_EPOCH_CHECKPOINT,
};
use mirrorlog::internals::producer_state::{
    decode_snapshot, snapshot_file_name, Origin, ProducerStateError,
};
use mirrorlog::internals::segment::{self};
use std::path::{Path, PathBuf};

fn exercise(io: &mut dyn Io, dir: &Path) -> Vec<PathBuf> {
    let mut log = PartitionLog::create(io, dir, CONFIG).unwrap();
    log.set_leader_epoch(4);
    let batches = fill(io, &mut log, 300);
    let end = Offset(batches.last().unwrap().1 .0 + 1);
    assert_eq!(log.durable_end(), end);
    assert_eq!(log.high_watermark(), end);
    assert!(
        log.segment_base_offsets().len() > 5,
        "small segments rolled"
    );

    // Every offset reads back as the batch that holds it, with the stamped epoch.
    for (i, &(base, last, _)) in batches.iter().enumerate().step_by(7) {
        for offset in [base, last] {
            let r = log.read(io, offset, 1, Isolation::ReadUncommitted).unwrap();
            let first = format::inspect(&r.records, 0).unwrap();
            assert_eq!(first.header().base_offset, base, "batch {i}");
            assert_eq!(first.header().partition_leader_epoch, 4);
            assert_eq!(r.high_watermark, end);
        }
    }
    // A large read returns consecutive whole batches.
    let r = log
        .read(io, Offset(0), 1 << 20, Isolation::ReadUncommitted)
        .unwrap();
    let mut next = Offset(0);
    for b in BatchIter::new(&r.records, 0) {
        assert_eq!(b.header().base_offset, next);
        next = Offset(b.header().last_offset().0 + 1);
    }
    assert!(next > Offset(0));
    assert!(log
        .read(io, end, 100, Isolation::ReadUncommitted)
        .unwrap()
        .records
        .is_empty());
    assert!(matches!(
        log.read(io, Offset(end.0 + 1), 100, Isolation::ReadUncommitted),
        Err(LogError::OffsetOutOfRange { .. })
    ));

    // A client retry of the last batch (producer 1) returns the original offsets and writes
    // nothing.
    let (base, last, seq) = *batches.last().unwrap();
    let records = (last.0 - base.0 + 1) as i32;
    let retry = log
        .append(io, &client_batch(1, seq, records, false), Origin::Client)
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!((retry.first_offset, retry.last_offset), (base, last));
    assert_eq!(log.log_end(), end);

    // Malformed or out-of-sequence requests change nothing.
    let mut bad = client_batch(0, 10_000, 1, false);
    let bad_len = bad.len();
    bad[bad_len - 1] ^= 1;
    assert!(matches!(
        log.append(io, &bad, Origin::Client),
        Err(LogError::Format(_))
    ));
    assert!(matches!(
        log.append(io, &client_batch(0, 10_000, 1, false), Origin::Client),
        Err(LogError::ProducerState(
            ProducerStateError::OutOfOrderSequence { .. }
        ))
    ));
    assert!(matches!(
        log.append(io, &[], Origin::Client),
        Err(LogError::EmptyAppend)
    ));
    assert_eq!(log.log_end(), end);

    // Snapshots at every roll, named by the next offset, decodable.
    let bases = log.segment_base_offsets();
    let snapshot_names: Vec<PathBuf> = bases[1..]
        .iter()
        .map(|&b| dir.join(snapshot_file_name(b)))
        .collect();
    let sealed_logs: Vec<PathBuf> = bases[..bases.len() - 1]
        .iter()
        .map(|&b| segment::log_path(dir, b))
        .collect();
    sealed_logs.into_iter().chain(snapshot_names).collect()
}

#[test]
fn partition_log_on_io_uring() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let mut io = UringIo::new(64).unwrap();
    let files = exercise(&mut io, dir.path());
    for f in &files {
        let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if f.extension().is_some_and(|e| e == "snapshot") {
            let entries = decode_snapshot(&bytes).unwrap();
            assert_eq!(entries.len(), 2, "both producers in {}", f.display());
        } else {
            let n = BatchIter::new(&bytes, 0).count();
            assert!(n > 0);
        }
    }
    // kafka-python reads the first sealed segment with valid CRCs.
    let parsed = common::parse_with_kafka_python(&common::venv_python(), &files[0]);
    assert_eq!(parsed["valid_bytes"], parsed["size"]);
    assert!(parsed["batches"]
        .as_array()
        .unwrap()
        .iter()
        .all(|b| b["crc_valid"] == true && b["leader_epoch"] == 4));
}

#[test]
fn partition_log_on_the_simulated_disk() {
    let seed = common::seed("partition_log_on_the_simulated_disk");
    let mut io = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let files = exercise(&mut io, Path::new("/sim/topic-0"));
    for f in &files {
        assert!(io.file_bytes(f).is_some(), "{} exists", f.display());
    }
}

#[test]
fn mirrored_appends_keep_offsets_and_start_at_or_past_the_log_end() {
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, Path::new("/sim/mirror-0"), CONFIG).unwrap();
    let at = |offset: i64, seq: i32| {
        let mut b = client_batch(9, seq, 3, false);
        format::stamp_base_offset(&mut b, Offset(offset)).unwrap();
        format::stamp_partition_leader_epoch(&mut b, 17).unwrap();
        b
    };
    // Mirror appends need a Mirroring partition.
    assert!(matches!(
        log.append(&mut io, &at(0, 0), Origin::Mirror),
        Err(LogError::NotMirroring { mode: Mode::Local })
    ));
    log.start_mirroring(&mut io, "east", MirrorStart::Offset(Offset(0)))
        .unwrap();
    assert!(matches!(
        log.append(&mut io, &client_batch(1, 0, 1, false), Origin::Client),
        Err(LogError::ReadOnlyPartition { .. })
    ));
    // The first mirrored batch may start past the log end (a gap on the source, design.md §Mirroring).
    let out = log.append(&mut io, &at(5, 0), Origin::Mirror).unwrap();
    assert_eq!((out.first_offset, out.last_offset), (Offset(5), Offset(7)));
    assert_eq!(log.log_end(), Offset(8));
    // One overlapping stored offsets with other bytes fails the partition (only it), with the
    // reason.
    assert!(matches!(
        log.append(&mut io, &at(6, 9), Origin::Mirror),
        Err(LogError::NotAtLogEnd {
            expected: Offset(8),
            got: Offset(6)
        })
    ));
    assert!(matches!(log.mode(), Mode::Failed { reason } if reason.contains("6")));
    log.start_mirroring(&mut io, "east", MirrorStart::Offset(Offset(0)))
        .unwrap();
    let mut chunk = at(0, 0);
    chunk.extend(at(3, 3));
    let outcome = log.append(&mut io, &chunk, Origin::Mirror).unwrap();
    assert_eq!(
        (outcome.first_offset, outcome.last_offset),
        (Offset(0), Offset(5))
    );
    let mut backwards = at(6, 6);
    backwards.extend(at(7, 9));
    assert!(matches!(
        log.append(&mut io, &backwards, Origin::Mirror),
        Err(LogError::OffsetsNotIncreasing { .. })
    ));
    log.commit(&mut io).unwrap();
    let r = log
        .read(&mut io, Offset(0), 1 << 20, Isolation::ReadUncommitted)
        .unwrap();
    assert_eq!(
        r.records, chunk,
        "mirrored bytes are stored as-is (source epoch 17 kept)"
    );
}

#[test]
fn read_committed_stops_at_the_lso_and_lists_aborted_transactions() {
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, Path::new("/sim/txn-0"), CONFIG).unwrap();
    let marker = |producer_id: i64, commit: bool| {
        format::build_marker(&MarkerSpec {
            base_offset: Offset(0),
            partition_leader_epoch: 0,
            producer_id,
            producer_epoch: 0,
            commit,
            coordinator_epoch: 1,
            timestamp: 1_764_403_300_000,
        })
    };
    log.append(&mut io, &client_batch(1, 0, 2, true), Origin::Client)
        .unwrap(); // 0-1
    log.append(&mut io, &client_batch(2, 0, 2, false), Origin::Client)
        .unwrap(); // 2-3
    log.append(&mut io, &marker(1, false), Origin::Coordinator)
        .unwrap(); // 4: abort
    log.append(&mut io, &client_batch(3, 0, 1, true), Origin::Client)
        .unwrap(); // 5, open
    log.append(&mut io, &client_batch(2, 2, 1, false), Origin::Client)
        .unwrap(); // 6
    log.commit(&mut io).unwrap();
    assert_eq!(log.high_watermark(), Offset(7));
    assert_eq!(log.last_stable_offset(), Offset(5));
    let r = log
        .read(&mut io, Offset(0), 1 << 20, Isolation::ReadCommitted)
        .unwrap();
    let offsets: Vec<_> = BatchIter::new(&r.records, 0)
        .map(|b| b.header().base_offset.0)
        .collect();
    assert_eq!(offsets, vec![0, 2, 4], "nothing at or past the LSO");
    assert_eq!(r.aborted.len(), 1);
    assert_eq!(
        (
            r.aborted[0].producer_id,
            r.aborted[0].first_offset,
            r.aborted[0].last_offset
        ),
        (1, Offset(0), Offset(4))
    );
    let r = log
        .read(&mut io, Offset(0), 1 << 20, Isolation::ReadUncommitted)
        .unwrap();
    assert_eq!(BatchIter::new(&r.records, 0).count(), 5);
    log.append(&mut io, &marker(3, true), Origin::Coordinator)
        .unwrap();
    log.commit(&mut io).unwrap();
    assert_eq!(log.last_stable_offset(), Offset(8));
}

#[test]
fn a_failed_fsync_poisons_and_a_full_disk_does_not() {
    // Sync 0 makes the new segment's directory entry durable, 1 is its creation record, 2 and
    // 3 write the leader-epoch checkpoint of the first append; the commit's fdatasync (4) fails.
    let mut io = SimIo::new(SimConfig {
        fail_syncs_from: Some(4),
        ..SimConfig::default()
    });
    let mut log = PartitionLog::create(&mut io, Path::new("/sim/p-0"), CONFIG).unwrap();
    log.append(&mut io, &client_batch(1, 0, 1, false), Origin::Client)
        .unwrap();
    assert!(log.commit(&mut io).is_err());
    assert!(matches!(
        log.append(&mut io, &client_batch(1, 1, 1, false), Origin::Client),
        Err(LogError::Poisoned(_))
    ));

    // A full disk refuses the roll's preallocation; nothing is lost and it works once freed.
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, Path::new("/sim/p-1"), CONFIG).unwrap();
    let mut seq = 0;
    let full_at = loop {
        io.set_disk_capacity(Some(200 << 10));
        match log.append(&mut io, &client_batch(1, seq, 5, false), Origin::Client) {
            Ok(_) => seq += 5,
            Err(LogError::DiskFull) => break log.log_end(),
            Err(e) => panic!("{e}"),
        }
        log.commit(&mut io).unwrap();
    };
    assert_eq!(log.durable_end(), full_at, "everything acknowledged stays");
    io.set_disk_capacity(None);
    log.append(&mut io, &client_batch(1, seq, 5, false), Origin::Client)
        .unwrap();
    log.commit(&mut io).unwrap();
    assert_eq!(log.durable_end(), Offset(full_at.0 + 5));
}

#[test]
fn leader_epochs_are_cached_and_checkpointed() {
    let mut io = SimIo::new(SimConfig::default());
    let dir = Path::new("/sim/epochs-0");
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    log.set_leader_epoch(2);
    log.append(&mut io, &client_batch(1, 0, 3, false), Origin::Client)
        .unwrap(); // 0-2
    log.append(&mut io, &client_batch(1, 3, 2, false), Origin::Client)
        .unwrap(); // 3-4
    log.set_leader_epoch(5);
    log.append(&mut io, &client_batch(1, 5, 1, false), Origin::Client)
        .unwrap(); // 5
    log.commit(&mut io).unwrap();
    assert_eq!(
        log.epoch_cache().entries(),
        &[(2, Offset(0)), (5, Offset(5))]
    );
    assert_eq!(log.epoch_end_offset(2), Some(Offset(5)));
    assert_eq!(log.epoch_end_offset(5), Some(Offset(6)));
    assert_eq!(log.epoch_end_offset(1), None);
    let text = io.file_bytes(&dir.join(LEADER_EPOCH_CHECKPOINT)).unwrap();
    let on_disk = EpochCache::decode(std::str::from_utf8(text).unwrap()).unwrap();
    assert_eq!(&on_disk, log.epoch_cache());
}
