//! The partition log on both backends: client appends get contiguous offsets and the leader
//! epoch stamped, across many segment rolls; every offset reads back as the batch holding it;
//! client retries return the original offsets and write nothing; mirrored appends keep their
//! offsets and must start at the log end; ReadCommitted stops at the LSO and lists aborted
//! transactions; rolls leave Kafka-named snapshots and sealed segments kafka-python reads;
//! malformed requests change nothing.

mod common;

use mirrorlog::format::{
    self, BatchBuilder, BatchIter, BatchOptions, MarkerSpec, Offset, ProducerFields, RecordSpec,
};
use mirrorlog::internals::io::{Io, SimConfig, SimIo, UringIo};
use mirrorlog::internals::log::{
    EpochCache, Isolation, LogConfig, LogError, MirrorStart, Mode, PartitionLog,
    LEADER_EPOCH_CHECKPOINT,
};
use mirrorlog::internals::producer_state::{
    decode_snapshot, snapshot_file_name, Origin, ProducerStateError,
};
use mirrorlog::internals::segment::{self, SegmentConfig};
use std::path::{Path, PathBuf};

const CONFIG: LogConfig = common::log_config(32 << 10, 4096, 16 << 10);

fn client_batch(producer_id: i64, seq: i32, records: i32, transactional: bool) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        producer: ProducerFields {
            producer_id,
            producer_epoch: 0,
            base_sequence: seq,
        },
        transactional,
        ..BatchOptions::default()
    });
    let value = [7u8; 200];
    for i in 0..records {
        b.push(RecordSpec {
            timestamp: 1_764_403_200_000 + i64::from(seq + i),
            key: Some(b"k"),
            value: Some(&value),
            headers: &[],
        });
    }
    b.build()
}

/// Appends `n` client batches of two producers, committing now and then; returns (base, last)
/// offsets and the base sequence of each batch.
fn fill(io: &mut dyn Io, log: &mut PartitionLog, n: usize) -> Vec<(Offset, Offset, i32)> {
    let mut seqs = [0i32; 2];
    let mut out = Vec::new();
    for i in 0..n {
        let p = i % 2;
        let records = 1 + (i % 7) as i32;
        let outcome = log
            .append(
                io,
                &client_batch(p as i64, seqs[p], records, false),
                Origin::Client,
            )
            .unwrap();
        assert!(!outcome.duplicate);
        let expected = out
            .last()
            .map_or(Offset(0), |&(_, l, _): &(Offset, Offset, i32)| {
                Offset(l.0 + 1)
            });
        assert_eq!(outcome.first_offset, expected);
        out.push((outcome.first_offset, outcome.last_offset, seqs[p]));
        seqs[p] += records;
        if i % 5 == 4 {
            log.commit(io).unwrap();
        }
    }
    log.commit(io).unwrap();
    out
}

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

#[test]
fn delete_records_and_retention_drop_whole_old_segments() {
    let mut io = SimIo::new(SimConfig::default());
    let dir = Path::new("/sim/retention-0");
    let config = LogConfig {
        retention_bytes: Some(100 << 10),
        retention_ms: None,
        ..CONFIG
    };
    let mut log = PartitionLog::create(&mut io, dir, config).unwrap();
    let batches = fill(&mut io, &mut log, 400);
    let end = Offset(batches.last().unwrap().1 .0 + 1);
    let segments = log.segment_base_offsets();
    assert!(segments.len() > 6);
    // delete-records inside the third segment: the first two go, reads below fail.
    let cut = Offset(segments[2].0 + 3);
    assert_eq!(log.delete_records(&mut io, cut).unwrap(), cut);
    assert_eq!(log.segment_base_offsets()[0], segments[2]);
    assert!(
        io.file_bytes(&segment::log_path(dir, segments[0]))
            .is_none(),
        "files deleted"
    );
    assert!(matches!(
        log.read(&mut io, Offset(cut.0 - 1), 100, Isolation::ReadUncommitted),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert!(!log
        .read(&mut io, cut, 100, Isolation::ReadUncommitted)
        .unwrap()
        .records
        .is_empty());
    assert!(matches!(
        log.delete_records(&mut io, Offset(end.0 + 1)),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    // A negative offset is out of range too (Kafka's `deleteRecordsOnLocalLog`), not a no-op.
    for negative in [-1, -2, -1001, i64::MIN] {
        assert!(matches!(
            log.delete_records(&mut io, Offset(negative)),
            Err(LogError::OffsetOutOfRange { .. })
        ));
    }
    assert_eq!(log.log_start(), cut, "refused deletions moved nothing");
    // retention.bytes: the oldest sealed segments go until the log fits.
    let deleted = log.enforce_retention(&mut io, 0).unwrap();
    assert!(deleted > 0);
    assert!(log.size_bytes() < (100 << 10) + CONFIG.segment.segment_bytes);
    assert_eq!(log.log_start(), log.segment_base_offsets()[0]);
    // retention.ms: everything sealed is older than a day after the newest timestamp.
    let mut log_ms = PartitionLog::create(
        &mut io,
        Path::new("/sim/retention-1"),
        LogConfig {
            retention_ms: Some(86_400_000),
            ..CONFIG
        },
    )
    .unwrap();
    fill(&mut io, &mut log_ms, 200);
    assert_eq!(
        log_ms
            .enforce_retention(&mut io, 1_764_403_200_000)
            .unwrap(),
        0,
        "nothing is a day old yet"
    );
    let deleted = log_ms
        .enforce_retention(&mut io, 1_764_403_200_000 + 2 * 86_400_000)
        .unwrap();
    assert_eq!(
        deleted + 1,
        log_ms.segment_base_offsets().len() + deleted,
        "only the active segment stays"
    );
    assert_eq!(log_ms.segment_base_offsets().len(), 1);
}

/// Producer state that survives a truncation: what a snapshot keeps of each entry.
fn psm_summary(log: &PartitionLog) -> PsmSummary {
    let mut v: Vec<_> = log
        .producer_state()
        .producers()
        .map(|e| {
            (
                e.producer_id,
                e.epoch,
                e.last_seq(),
                e.last_data_offset(),
                e.current_txn_first_offset,
            )
        })
        .collect();
    v.sort();
    v
}

fn truncation_case(io: &mut dyn Io, dir: &Path, batches: usize, cut_batch: usize) {
    // The reference: the same appends, stopped at the cut.
    let reference_dir = dir.join("reference");
    let mut reference = PartitionLog::create(io, &reference_dir, CONFIG).unwrap();
    let kept = fill(io, &mut reference, cut_batch);
    let mut log = PartitionLog::create(io, dir, CONFIG).unwrap();
    let all = fill(io, &mut log, batches);
    let (base, last, _) = all[cut_batch];
    let bases_before = log.segment_base_offsets();
    // Cut in the middle of a batch: the whole batch goes, and the log ends at the cut, as
    // Kafka's `truncateTo` sets it (the offsets from the batch's base to the cut stay unused).
    let cut_at = Offset((base.0 + last.0) / 2);
    let new_end = log.truncate_to(io, cut_at).unwrap();
    assert_eq!(new_end, cut_at, "cut {cut_batch}");
    let bases_after = log.segment_base_offsets();
    assert!(bases_after.iter().all(|&b| b <= cut_at));
    assert_eq!(
        bases_after.last() == Some(&cut_at),
        cut_at > base,
        "an end past the batches is a segment of its own: {bases_after:?}"
    );
    for gone in bases_before.iter().filter(|b| !bases_after.contains(b)) {
        let missing = mirrorlog::internals::io::run(
            io,
            mirrorlog::internals::io::Op::Open {
                path: segment::log_path(dir, *gone),
                options: mirrorlog::internals::io::OpenOptions::default(),
            },
            &mut Vec::new(),
        )
        .unwrap();
        assert!(missing.result.is_err(), "segment {gone} deleted");
    }
    assert_eq!(log.log_end(), cut_at);
    assert_eq!(log.durable_end(), cut_at);
    assert_eq!(log.high_watermark(), cut_at);
    assert_eq!(
        psm_summary(&log),
        psm_summary(&reference),
        "cut {cut_batch}: PSM rebuilt"
    );
    assert_eq!(kept.last().map_or(Offset(0), |k| Offset(k.1 .0 + 1)), base);
    // Reads see exactly the kept batches: the last one ends right before the cut.
    if base > Offset(0) {
        let r = log
            .read(io, Offset(base.0 - 1), 1, Isolation::ReadUncommitted)
            .unwrap();
        let b = format::inspect(&r.records, 0).unwrap();
        assert_eq!(b.header().last_offset(), Offset(base.0 - 1));
        assert!(log
            .read(io, base, 1 << 20, Isolation::ReadUncommitted)
            .unwrap()
            .records
            .is_empty());
    }
    // Appends continue at the new end, in sequence for the rebuilt producers.
    let (p, seq) = (cut_batch % 2, all[cut_batch].2);
    let again = log
        .append(io, &client_batch(p as i64, seq, 3, false), Origin::Client)
        .unwrap();
    assert_eq!(again.first_offset, cut_at);
    log.commit(io).unwrap();
    let r = log.read(io, base, 1, Isolation::ReadUncommitted).unwrap();
    assert_eq!(
        format::inspect(&r.records, 0).unwrap().header().base_offset,
        cut_at
    );
    // And the log keeps rolling and reading across the cut.
    let more = fill_from(io, &mut log, 60);
    assert!(more > base);
}

/// Appends `n` more single-producer batches; returns the log end.
fn fill_from(io: &mut dyn Io, log: &mut PartitionLog, n: usize) -> Offset {
    for i in 0..n {
        let b = client_batch(1000 + i as i64, 0, 2, false);
        log.append(io, &b, Origin::Client).unwrap();
    }
    log.commit(io).unwrap();
    let mut next = Offset(0);
    let mut at = log.log_start();
    while at < log.log_end() {
        let r = log
            .read(io, at, 1 << 20, Isolation::ReadUncommitted)
            .unwrap();
        let last = BatchIter::new(&r.records, 0)
            .last()
            .expect("batches")
            .header()
            .last_offset();
        next = Offset(last.0 + 1);
        at = next;
    }
    assert_eq!(next, log.log_end(), "every offset readable after the cut");
    next
}

#[test]
fn truncation_in_the_active_segment_in_a_sealed_one_and_at_a_segment_start() {
    let seed = common::seed("truncation_cases");
    let mut io = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    // 300 batches span several 32 KiB segments: cut near the end (active), in the middle
    // (sealed), and early.
    for (i, cut) in [298usize, 150, 40, 1].into_iter().enumerate() {
        truncation_case(&mut io, Path::new(&format!("/sim/trunc-{i}")), 300, cut);
    }
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let mut uring = UringIo::new(64).unwrap();
    std::fs::create_dir_all(dir.path().join("reference")).unwrap();
    truncation_case(&mut uring, dir.path(), 300, 150);
}

#[test]
fn a_truncation_is_durable_before_it_returns() {
    let mut io = SimIo::new(SimConfig::default());
    let dir = Path::new("/sim/trunc-crash");
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    let all = fill(&mut io, &mut log, 120);
    let active = *log.segment_base_offsets().last().unwrap();
    let (cut, _, _) = *all.iter().rev().find(|b| b.0 > active).unwrap();
    log.truncate_to(&mut io, cut).unwrap();
    let image = io.crash(1);
    let file = image.file_bytes(&segment::log_path(dir, active)).unwrap();
    let slot_base = CONFIG.segment.segment_bytes as usize;
    let slots = [
        &file[slot_base..slot_base + 8192],
        &file[slot_base + 8192..slot_base + 16384],
    ];
    let newest = segment::CommitRecord::newest(slots).expect("a commit record");
    assert_eq!(
        newest.next_offset, cut,
        "after a crash the log ends at the cut"
    );
    assert_eq!(newest.prev_data_len, newest.data_len);
}

#[test]
fn time_index_full_and_relative_offset_rolls() {
    let mut io = SimIo::new(SimConfig::default());
    // segment.ms: a batch an hour newer than the segment's first rolls.
    let mut log = PartitionLog::create(
        &mut io,
        Path::new("/sim/roll-0"),
        LogConfig {
            segment_ms: Some(3_600_000),
            ..CONFIG
        },
    )
    .unwrap();
    let at = |ts: i64, seq: i32| {
        let mut b = BatchBuilder::new(BatchOptions {
            producer: ProducerFields {
                producer_id: 1,
                producer_epoch: 0,
                base_sequence: seq,
            },
            ..BatchOptions::default()
        });
        b.push(RecordSpec {
            timestamp: ts,
            key: None,
            value: Some(b"v"),
            headers: &[],
        });
        b.build()
    };
    log.append(&mut io, &at(1_000_000, 0), Origin::Client)
        .unwrap();
    log.append(&mut io, &at(1_000_000 + 3_600_000, 1), Origin::Client)
        .unwrap();
    assert_eq!(
        log.segment_base_offsets().len(),
        1,
        "exactly segment.ms apart: no roll yet"
    );
    log.append(&mut io, &at(1_000_001 + 3_600_000, 2), Origin::Client)
        .unwrap();
    assert_eq!(log.segment_base_offsets(), vec![Offset(0), Offset(2)]);

    // segment.index.bytes: two entries' worth of index rolls after the second entry.
    let mut log = PartitionLog::create(
        &mut io,
        Path::new("/sim/roll-1"),
        LogConfig {
            segment_index_bytes: Some(16),
            segment: SegmentConfig {
                index_interval_bytes: 100,
                ..CONFIG.segment
            },
            ..CONFIG
        },
    )
    .unwrap();
    for seq in 0..8 {
        log.append(&mut io, &client_batch(1, seq * 2, 2, false), Origin::Client)
            .unwrap();
    }
    assert!(log.segment_base_offsets().len() >= 2, "index full rolls");

    // Relative offsets: a mirrored batch 2^31 offsets past the segment base rolls.
    let mut log = PartitionLog::create(&mut io, Path::new("/sim/roll-2"), CONFIG).unwrap();
    let mut first = client_batch(1, 0, 1, false);
    format::stamp_base_offset(&mut first, Offset(0)).unwrap();
    log.start_mirroring(&mut io, "east", MirrorStart::Offset(Offset(0)))
        .unwrap();
    log.append(&mut io, &first, Origin::Mirror).unwrap();
    // A compacted source batch may span far more offsets than it holds records; the next one
    // would end past base + i32::MAX.
    let span = i32::MAX - 5;
    let mut jump = client_batch(1, 1, 1, false);
    format::stamp_base_offset(&mut jump, Offset(1)).unwrap();
    jump[23..27].copy_from_slice(&span.to_be_bytes());
    let crc = format::crc32c(&jump[21..]);
    jump[17..21].copy_from_slice(&crc.to_be_bytes());
    log.append(&mut io, &jump, Origin::Mirror).unwrap();
    let far = 1 + i64::from(span);
    assert_eq!(log.segment_base_offsets().len(), 1);
    let mut after = client_batch(1, 2, 10, false);
    format::stamp_base_offset(&mut after, Offset(far + 1)).unwrap();
    log.append(&mut io, &after, Origin::Mirror).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![Offset(0), Offset(far + 1)]);
}

/// Producer state as a snapshot keeps it: id, epoch, last sequence, last offset, open txn.
type PsmSummary = Vec<(i64, i16, i32, Offset, Option<Offset>)>;

/// Every byte readable, log end, LSO, producer state, epoch cache, aborted transactions.
type Observable = (Vec<u8>, Offset, Offset, PsmSummary, EpochCache, Vec<u8>);

/// Everything a reader or producer can observe of a log.
fn observable(io: &mut dyn Io, log: &mut PartitionLog) -> Observable {
    let mut all = Vec::new();
    let mut at = log.log_start();
    while at < log.high_watermark() {
        let r = log
            .read(io, at, 1 << 20, Isolation::ReadUncommitted)
            .unwrap();
        let last = BatchIter::new(&r.records, 0)
            .last()
            .unwrap()
            .header()
            .last_offset();
        all.extend_from_slice(&r.records);
        at = Offset(last.0 + 1);
    }
    let committed = log
        .read(io, log.log_start(), 64 << 20, Isolation::ReadCommitted)
        .unwrap();
    let aborted: Vec<u8> = committed.aborted.iter().flat_map(|a| a.encode()).collect();
    (
        all,
        log.log_end(),
        log.last_stable_offset(),
        psm_summary(log),
        log.epoch_cache().clone(),
        aborted,
    )
}

fn close_and_open_case(io: &mut dyn Io, dir: &Path) {
    let mut log = PartitionLog::create(io, dir, CONFIG).unwrap();
    log.set_leader_epoch(3);
    fill(io, &mut log, 120);
    // A transaction aborted, another left open across the close.
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
    log.append(io, &client_batch(50, 0, 2, true), Origin::Client)
        .unwrap();
    log.append(io, &marker(50, false), Origin::Coordinator)
        .unwrap();
    log.set_leader_epoch(4);
    log.append(io, &client_batch(51, 0, 2, true), Origin::Client)
        .unwrap();
    log.commit(io).unwrap();
    let before = observable(io, &mut log);
    let segments = log.segment_base_offsets();
    log.close(io).unwrap();

    let mut reopened = PartitionLog::open(io, dir, CONFIG).unwrap();
    assert_eq!(reopened.segment_base_offsets(), segments);
    assert_eq!(
        observable(io, &mut reopened),
        before,
        "everything observable survives a clean close"
    );
    // Producers continue where they were; the open transaction can still commit.
    reopened
        .append(io, &client_batch(51, 2, 1, true), Origin::Client)
        .unwrap();
    reopened
        .append(io, &marker(51, true), Origin::Coordinator)
        .unwrap();
    reopened.commit(io).unwrap();
    assert_eq!(reopened.last_stable_offset(), reopened.log_end());
    // A second close/open cycle after more appends.
    let again = observable(io, &mut reopened);
    reopened.close(io).unwrap();
    let mut third = PartitionLog::open(io, dir, CONFIG).unwrap();
    assert_eq!(observable(io, &mut third), again);
    // Without the clean-shutdown marker, open refuses: recovery must run.
    drop(third);
    assert!(matches!(
        PartitionLog::open(io, dir, CONFIG),
        Err(LogError::NeedsRecovery { .. })
    ));
}

#[test]
fn a_cleanly_closed_log_reopens_with_everything_observable_intact() {
    let mut io = SimIo::new(SimConfig::default());
    close_and_open_case(&mut io, Path::new("/sim/close-0"));
    // An empty directory opens as a new log.
    let log = PartitionLog::open(&mut io, Path::new("/sim/empty"), CONFIG).unwrap();
    assert_eq!(log.log_end(), Offset(0));

    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let mut uring = UringIo::new(64).unwrap();
    close_and_open_case(&mut uring, dir.path());
}

/// Found by the log model test: rolling an empty active segment must not start a second
/// segment at the same offset (same file name).
#[test]
fn rolling_an_empty_segment_is_a_no_op() {
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, Path::new("/sim/empty-roll"), CONFIG).unwrap();
    log.roll(&mut io).unwrap();
    log.roll(&mut io).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![Offset(0)]);
    log.append(&mut io, &client_batch(0, 0, 4, false), Origin::Client)
        .unwrap();
    log.commit(&mut io).unwrap();
    assert_eq!(log.delete_records(&mut io, Offset(2)).unwrap(), Offset(2));
}

#[test]
fn the_checkpointed_high_watermark_is_what_recovery_starts_from() {
    // `replication-offset-checkpoint`: after a power cut, recovery starts from the
    // last checkpointed managed high watermark (bounded by the recovered log), not the log end.
    let dir = Path::new("/sim/hw-0");
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    for seq in 0..6 {
        let b = common::producer_batch(1, seq * 2, 2, false, 50);
        log.append(&mut io, &b, Origin::Client).unwrap();
        log.commit(&mut io).unwrap();
    }
    assert!(
        !log.checkpoint_high_watermark(&mut io).unwrap(),
        "not managed: nothing to write"
    );
    log.set_high_watermark(Offset(4));
    assert!(log.checkpoint_high_watermark(&mut io).unwrap());
    assert!(
        !log.checkpoint_high_watermark(&mut io).unwrap(),
        "unchanged: not rewritten"
    );
    // Moved but not checkpointed when the power goes: the checkpointed value comes back.
    log.set_high_watermark(Offset(8));
    drop(log);
    let mut after = io.crash(1);
    let log = common::open_or_recover(&mut after, dir, CONFIG).unwrap();
    assert_eq!(
        (log.high_watermark(), log.log_end()),
        (Offset(4), Offset(12))
    );
}
