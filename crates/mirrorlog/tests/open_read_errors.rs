//! A small file of a partition that exists but cannot be read is never taken for a missing one
//! (issue "Fidelity defects": read errors at open). Kafka fails the log directory on an I/O
//! error (`LogDirFailureChannel`, raised from `LogLoader`, `LeaderEpochFileCache`'s checkpoint
//! and `ProducerStateManager`'s snapshot reads); taking `EIO` for `ENOENT` instead reset the log
//! start to 0 (records deleted by DeleteRecords readable again), the epoch cache to empty, the
//! aborted transactions of the active segment to none (aborted records served to read_committed
//! consumers) and a Paused partition to Mirroring.
//!
//! How: one partition with every kind of small file (several segments, aborted transactions in
//! a sealed and in the active segment, a log start moved by `delete_records`, two leader epochs,
//! a mirrored range and a paused mode) is closed cleanly, or cut by a power failure. Then, for
//! each of its files in turn, every read of that file fails with `EIO` (`SimIo::fail_reads_of`)
//! and the partition is opened as an engine opens it. The open either fails with
//! `LogError::Unreadable` naming that file, or gives exactly the state the partition had (the
//! same reads, offsets, epochs, mode, producers); a file derivable from the `.log` (indexes,
//! `.txnindex`, the recovery point) must give the state, the others must fail. Afterwards the
//! disk heals and the next open gives the state: the failed open lost nothing.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::format::Offset;
use mirrorlog::internals::io::SimIo;
use mirrorlog::internals::log::{
    Isolation, LogConfig, LogError, MirrorStart, OffsetSpec, PartitionLog,
};
use std::path::{Path, PathBuf};

const CONFIG: LogConfig = common::log_config(8 << 10, 1024, 16 << 10);
const DIR: &str = "/sim/orders-0";
const ABORTED_PRODUCER: i64 = 2;

/// Appends a transaction of `producer` (two batches) and its marker.
fn transaction(io: &mut SimIo, log: &mut PartitionLog, producer: i64, seq: &mut i32, commit: bool) {
    for _ in 0..2 {
        let b = common::producer_batch(producer, *seq, 3, true, 200);
        log.append(io, &b, Origin::Client).unwrap();
        *seq += 3;
    }
    log.append(io, &common::marker(producer, commit), Origin::Coordinator)
        .unwrap();
    log.commit(io).unwrap();
}

/// The partition, still open: see the module docs.
fn build() -> (SimIo, PartitionLog) {
    let mut io = SimIo::new(mirrorlog::internals::io::SimConfig::default());
    let dir = Path::new(DIR);
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    let (mut seq1, mut seq2, mut seq3) = (0, 0, 0);
    for round in 0..30 {
        let b = common::producer_batch(1, seq1, 4, false, 300);
        log.append(&mut io, &b, Origin::Client).unwrap();
        seq1 += 4;
        log.commit(&mut io).unwrap();
        if round == 6 {
            // An aborted transaction that ends up in a sealed segment.
            transaction(&mut io, &mut log, ABORTED_PRODUCER, &mut seq2, false);
        }
        if round == 12 {
            transaction(&mut io, &mut log, 3, &mut seq3, true);
            log.set_leader_epoch(5);
        }
    }
    assert!(log.segment_base_offsets().len() >= 4, "several segments");
    // DeleteRecords into the second segment: the log start is checkpointed past its base.
    let second = log.segment_base_offsets()[1];
    let start = Offset(second.0 + 2);
    log.delete_records(&mut io, start).unwrap();
    assert_eq!(log.log_start(), start);
    // An aborted transaction in the active segment.
    log.roll(&mut io).unwrap();
    transaction(&mut io, &mut log, ABORTED_PRODUCER, &mut seq2, false);
    // Mirroring from the log end, one mirrored batch, then paused.
    log.start_mirroring(&mut io, "east", MirrorStart::LastStableOffset)
        .unwrap();
    let mirrored = common::stored(
        common::producer_batch(10, 0, 2, false, 100),
        log.log_end(),
        5,
    );
    log.append(&mut io, &mirrored, Origin::Mirror).unwrap();
    log.commit(&mut io).unwrap();
    log.pause_mirroring(&mut io).unwrap();
    (io, log)
}

/// Everything a client or the engine can observe of the log. Reads are `Result`s: a read that
/// needs an unreadable file must fail, naming it, and never answer as if it were absent.
fn observe(io: &mut SimIo, log: &mut PartitionLog) -> Vec<String> {
    let mut out = vec![
        format!("log start {:?} end {:?}", log.log_start(), log.log_end()),
        format!(
            "hw {:?} lso {:?}",
            log.high_watermark(),
            log.last_stable_offset()
        ),
        format!("segments {:?}", log.segment_base_offsets()),
        format!(
            "epochs {:?} leader {}",
            log.epoch_cache().entries(),
            log.leader_epoch()
        ),
        format!("mode {:?} history {:?}", log.mode(), log.mode_history()),
        format!(
            "producers {:?}",
            common::snapshot_kept(log.producer_state())
        ),
    ];
    for offset in log.log_start().0..log.log_end().0 {
        for isolation in [Isolation::ReadUncommitted, Isolation::ReadCommitted] {
            let r = log.read(io, Offset(offset), 4 << 10, isolation).map(|r| {
                let digest = r.records.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                    (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
                });
                format!("{} bytes {digest:x} {:?}", r.records.len(), r.aborted)
            });
            out.push(format!("read {offset} {isolation:?}: {r:?}"));
        }
    }
    for t in [0, common::RECORDS_MS, common::RECORDS_MS + 2] {
        let r = log.offset_for_timestamp(io, OffsetSpec::Timestamp(t), Isolation::ReadUncommitted);
        out.push(format!("timestamp {t}: {r:?}"));
    }
    out
}

/// Whether the open must give the state with `name` unreadable (it can be rebuilt from the
/// `.log`) rather than fail.
fn derivable(name: &str) -> bool {
    name.ends_with(".index")
        || name.ends_with(".timeindex")
        || name.ends_with(".txnindex")
        || name == mirrorlog::internals::log::RECOVERY_POINT_CHECKPOINT
}

/// Compares what was observed with `name` unreadable against the fault-free state: equal line
/// by line, except reads that failed naming the file (a sealed segment's `.txnindex` is read
/// only when a read_committed read needs it).
fn assert_same_or_failing_reads(got: &[String], want: &[String], name: &str) {
    assert_eq!(got.len(), want.len(), "{name}: observation shape");
    for (g, w) in got.iter().zip(want) {
        if g != w {
            assert!(
                g.contains("Unreadable") && g.contains(name),
                "{name} unreadable changed what is observed:\n got  {g}\n want {w}"
            );
        }
    }
}

/// Every file of the partition directory except the segments' data.
fn small_files(io: &SimIo) -> Vec<PathBuf> {
    let files: Vec<PathBuf> = io
        .paths()
        .into_iter()
        .filter(|p| p.starts_with(DIR) && p.extension().is_none_or(|e| e != "log"))
        .collect();
    assert!(!files.is_empty());
    files
}

/// For every small file of `image` in turn: opened with the file unreadable, then healed.
/// Returns the names whose unreadability failed the open.
fn each_file_unreadable(image: &SimIo, want: &[String]) -> Vec<String> {
    let dir = Path::new(DIR);
    let mut failed = Vec::new();
    for (i, path) in small_files(image).into_iter().enumerate() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let mut io = image.crash(i as u64);
        io.fail_reads_of(&path, Some(libc::EIO));
        match common::open_or_recover(&mut io, dir, CONFIG) {
            Ok(mut log) => {
                // Derivable, or not needed by this open (an older snapshot, say).
                let got = observe(&mut io, &mut log);
                assert_same_or_failing_reads(&got, want, &name);
            }
            Err(LogError::Unreadable { file, source }) => {
                assert_eq!(file, path, "the error names the unreadable file");
                assert!(
                    source.to_string().contains("Input/output error"),
                    "{name}: errno in {source}"
                );
                assert!(
                    !derivable(&name),
                    "{name} is derivable from the .log: rebuild it"
                );
                failed.push(name.clone());
            }
            Err(other) => panic!("{name} unreadable: {other}"),
        }
        // The disk heals (or the file is restored): nothing was lost by the failed attempt.
        let mut healed = io.crash(i as u64 + 1000);
        let mut log = common::open_or_recover(&mut healed, dir, CONFIG)
            .unwrap_or_else(|e| panic!("{name}: reopen after healing: {e}"));
        assert_eq!(
            observe(&mut healed, &mut log),
            want,
            "{name}: the state after healing"
        );
    }
    failed
}

/// The files holding state no `.log` holds: unreadable, each must fail the open.
const STATE_FILES: [&str; 4] = [
    "log-start-offset",
    "leader-epoch-checkpoint",
    "mirror-mode",
    mirrorlog::internals::log::MIRROR_CHECKPOINT,
];

fn assert_state_files_failed(failed: &[String], what: &str) {
    for must_fail in STATE_FILES {
        assert!(
            failed.iter().any(|n| n == must_fail),
            "{must_fail} failed {what}: {failed:?}"
        );
    }
}

#[test]
fn an_unreadable_file_fails_the_clean_open_or_is_rebuilt() {
    let (mut io, mut log) = build();
    let want = observe(&mut io, &mut log);
    log.close(&mut io).unwrap();
    let image = io.crash(0);
    let names: Vec<String> = small_files(&image)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for needed in STATE_FILES.iter().chain(&["clean-shutdown"]) {
        assert!(names.iter().any(|n| n == needed), "{needed} in {names:?}");
    }
    let failed = each_file_unreadable(&image, &want);
    assert_state_files_failed(&failed, "the open");
    assert!(
        failed.iter().any(|n| n.ends_with(".snapshot")),
        "the clean close's snapshot: {failed:?}"
    );
}

#[test]
fn an_unreadable_file_fails_recovery_or_is_rebuilt() {
    let (mut io, mut log) = build();
    let want = observe(&mut io, &mut log);
    drop(log);
    // A power cut: everything acknowledged (committed) is durable, the rest is gone.
    let image = io.crash(7);
    assert!(image
        .file_bytes(&Path::new(DIR).join("clean-shutdown"))
        .is_none());
    let failed = each_file_unreadable(&image, &want);
    assert_state_files_failed(&failed, "recovery");
}

#[test]
fn an_unreadable_active_txnindex_still_hides_aborted_records() {
    // The failure the issue reports, end to end: a read_committed consumer of the active
    // segment must be told of the aborted transaction after an open with its `.txnindex`
    // unreadable.
    let (mut io, log) = build();
    let active = *log.segment_base_offsets().last().unwrap();
    log.close(&mut io).unwrap();
    let mut io = io.crash(0);
    let txn = mirrorlog::internals::segment::txn_index_path(Path::new(DIR), active);
    assert!(io.file_bytes(&txn).is_some_and(|b| !b.is_empty()));
    io.fail_reads_of(&txn, Some(libc::EIO));
    let mut log = common::open_or_recover(&mut io, Path::new(DIR), CONFIG).unwrap();
    let r = log
        .read(&mut io, active, 1 << 20, Isolation::ReadCommitted)
        .unwrap();
    assert!(
        r.aborted.iter().any(|a| a.producer_id == ABORTED_PRODUCER),
        "aborted transactions {:?}",
        r.aborted
    );
}

#[test]
fn an_unreadable_partition_config_fails_the_partition_not_resets_it() {
    // On a real disk through io_uring: `partition.config` replaced by a directory of the same
    // name opens, and every read of it fails with EISDIR, an error that is not ENOENT. Opening
    // with the defaults would silently lift its max.message.bytes and retention.
    use mirrorlog::api::{EngineError, PartitionConfig, PARTITION_CONFIG_FILE};
    use mirrorlog::engine::{Engine, EngineConfig, TopicPartition};
    let dir = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("orders", 0);
    let config = PartitionConfig {
        max_message_bytes: 4096,
        retention_ms: Some(3_600_000),
        ..PartitionConfig::default()
    };
    let engine = Engine::open(EngineConfig::new(dir.path())).unwrap();
    engine.create_partition(&tp, config).wait().unwrap();
    let small = common::producer_batch(1, 0, 1, false, 100);
    engine
        .append(&tp, small.clone(), Origin::Client)
        .wait()
        .unwrap();
    engine.close().unwrap();

    let path = dir.path().join("orders-0").join(PARTITION_CONFIG_FILE);
    let saved = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path())).unwrap();
    let failed = engine.failed_partitions();
    assert_eq!(failed.len(), 1, "{failed:?}");
    match &failed[0] {
        (
            p,
            EngineError::Failed {
                source: LogError::Unreadable { file, .. },
                ..
            },
        ) => {
            assert_eq!(p, &tp);
            assert_eq!(file, &path);
        }
        other => panic!("{other:?}"),
    }
    let refused = engine.append(&tp, small.clone(), Origin::Client).wait();
    assert!(
        matches!(refused, Err(EngineError::Failed { .. })),
        "{refused:?}"
    );
    engine.close().unwrap();

    // Restored: the partition opens with its own config again, nothing lost.
    std::fs::remove_dir(&path).unwrap();
    std::fs::write(&path, saved).unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path())).unwrap();
    assert!(engine.failed_partitions().is_empty());
    assert_eq!(engine.state(&tp).wait().unwrap().log_end, Offset(1));
    let large = common::producer_batch(1, 1, 1, false, 8000);
    let too_large = engine.append(&tp, large, Origin::Client).wait();
    assert!(
        matches!(too_large, Err(EngineError::MessageTooLarge { .. })),
        "max.message.bytes kept: {too_large:?}"
    );
    engine.close().unwrap();
}
