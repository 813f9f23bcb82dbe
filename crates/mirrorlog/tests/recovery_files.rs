//! Recovery rebuilds what the log implies, whatever happened to the derived files: with every
//! snapshot, the leader-epoch checkpoint, `.txnindex`, `.index` or `.timeindex` file deleted or
//! damaged, a log stopped without a clean close recovers to exactly the same observable state
//! (every readable byte, log end, LSO, aborted transactions at ReadCommitted, producer state,
//! epoch cache), and the files are rewritten.

mod common;

use mirrorlog::format::{self, Offset};
use mirrorlog::internals::io::{self, Io, Op, OpenOptions, SimConfig, SimIo};
use mirrorlog::internals::log::{
    EpochCache, Isolation, LogConfig, PartitionLog, LEADER_EPOCH_CHECKPOINT,
};
use mirrorlog::internals::producer_state::{snapshot_file_name, Origin};
use mirrorlog::internals::recovery;
use mirrorlog::internals::segment;
use std::path::{Path, PathBuf};

const CONFIG: LogConfig = common::log_config(8 << 10, 1024, 8 << 10);

/// A log with rolls, aborted and committed transactions, one left open, and epoch changes,
/// left without a clean close.
fn build(io: &mut SimIo, dir: &Path) -> PartitionLog {
    let mut log = PartitionLog::create(io, dir, CONFIG).unwrap();
    let mut seqs = [0i32; 3];
    for round in 0..40 {
        log.set_leader_epoch(round / 10);
        let p = (round % 3) as usize;
        let txn = p == 2;
        log.append(
            io,
            &common::producer_batch(p as i64, seqs[p], 5, txn, 60),
            Origin::Client,
        )
        .unwrap();
        seqs[p] += 5;
        if txn && round % 2 == 0 {
            log.append(io, &common::marker(2, round % 4 == 0), Origin::Coordinator)
                .unwrap();
        }
        log.commit(io).unwrap();
    }
    log
}

type Observable = (
    Vec<u8>,
    Offset,
    Offset,
    Vec<u8>,
    Vec<(i64, i16, i32, Offset)>,
    EpochCache,
);

fn observable(io: &mut SimIo, log: &mut PartitionLog) -> Observable {
    let all = log.read(io, log.log_start(), 64 << 20, Isolation::ReadUncommitted);
    let mut bytes = Vec::new();
    let mut at = log.log_start();
    while at < log.high_watermark() {
        let r = log
            .read(io, at, 1 << 20, Isolation::ReadUncommitted)
            .unwrap();
        let last = format::BatchIter::new(&r.records, 0)
            .last()
            .unwrap()
            .header()
            .last_offset();
        bytes.extend_from_slice(&r.records);
        at = Offset(last.0 + 1);
    }
    drop(all);
    let mut aborted = Vec::new();
    let mut at = log.log_start();
    while at < log.last_stable_offset() {
        let r = log.read(io, at, 1 << 20, Isolation::ReadCommitted).unwrap();
        aborted.extend(r.aborted.iter().flat_map(|a| a.encode()));
        let Some(last) = format::BatchIter::new(&r.records, 0).last() else {
            break;
        };
        at = Offset(last.header().last_offset().0 + 1);
    }
    let mut producers: Vec<_> = log
        .producer_state()
        .producers()
        .map(|e| (e.producer_id, e.epoch, e.last_seq(), e.last_data_offset()))
        .collect();
    producers.sort();
    (
        bytes,
        log.log_end(),
        log.last_stable_offset(),
        aborted,
        producers,
        log.epoch_cache().clone(),
    )
}

fn damage(io: &mut SimIo, path: &Path) {
    let file = io::open(
        io,
        path,
        OpenOptions {
            write: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    let mut buf = io::AlignedBuf::new(4096);
    buf.as_mut_slice()[..3].copy_from_slice(b"bad");
    let mut others = Vec::new();
    io::run(
        io,
        Op::Write {
            file,
            offset: 2,
            buf,
            range: 0..3,
        },
        &mut others,
    )
    .unwrap()
    .result
    .unwrap();
    io::run(io, Op::Fdatasync { file }, &mut others)
        .unwrap()
        .result
        .unwrap();
    io::run(io, Op::Close { file }, &mut others)
        .unwrap()
        .result
        .unwrap();
}

fn unlink(io: &mut SimIo, path: PathBuf) {
    let mut others = Vec::new();
    io::run(io, Op::Unlink { path }, &mut others)
        .unwrap()
        .result
        .unwrap();
}

#[test]
fn recovery_rebuilds_missing_or_damaged_derived_files() {
    for full_scan in [true, false] {
        derived_file_cases(full_scan);
    }
}

/// Each case of damaged derived files, recovered by a full scan (no recovery point: every file
/// is rebuilt from the batches) or with the recovery point the rolls left (segments below it are
/// trusted unread; a missing or unreadable file they need refuses the point, and a damaged
/// index below it is rebuilt when a read loads it, so what a consumer sees is the same).
fn derived_file_cases(full_scan: bool) {
    for case in [
        "nothing",
        "snapshots deleted",
        "snapshots damaged",
        "checkpoint deleted",
        "checkpoint damaged",
        "txnindex deleted",
        "indexes damaged",
    ] {
        let dir = Path::new("/sim/files-0");
        let mut io = SimIo::new(SimConfig::default());
        let mut log = build(&mut io, dir);
        let before = observable(&mut io, &mut log);
        assert!(!before.3.is_empty(), "the workload aborts transactions");
        assert!(before.5.entries().len() >= 3, "and changes epochs");
        let bases = log.segment_base_offsets();
        assert!(bases.len() >= 3, "and rolls");
        drop(log); // no clean close
        let names = io.list_dir(dir).unwrap();
        let snapshots = segment::offsets_named(&names, "snapshot");
        assert!(!snapshots.is_empty());
        match case {
            "snapshots deleted" => snapshots
                .iter()
                .for_each(|&o| unlink(&mut io, dir.join(snapshot_file_name(o)))),
            "snapshots damaged" => snapshots
                .iter()
                .for_each(|&o| damage(&mut io, &dir.join(snapshot_file_name(o)))),
            "checkpoint deleted" => unlink(&mut io, dir.join(LEADER_EPOCH_CHECKPOINT)),
            "checkpoint damaged" => damage(&mut io, &dir.join(LEADER_EPOCH_CHECKPOINT)),
            "txnindex deleted" => bases[..bases.len() - 1]
                .iter()
                .for_each(|&b| unlink(&mut io, segment::txn_index_path(dir, b))),
            "indexes damaged" => bases[..bases.len() - 1]
                .iter()
                .for_each(|&b| damage(&mut io, &segment::offset_index_path(dir, b))),
            _ => {}
        }
        let mut crashed = io.crash(1);
        if full_scan {
            common::forget_recovery_point(&mut crashed, dir);
        }
        let mut recovered =
            recovery::recover(&mut crashed, dir, CONFIG).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert!(
            observable(&mut crashed, &mut recovered) == before,
            "{case}, full scan {full_scan}: what a consumer sees changed"
        );
        if !full_scan && case == "indexes damaged" {
            // Below the point the damaged files stay until a read rebuilds them in memory.
            continue;
        }
        // The derived files are back.
        let text = io::read_file(&mut crashed, &dir.join(LEADER_EPOCH_CHECKPOINT)).unwrap();
        assert_eq!(
            &EpochCache::decode(std::str::from_utf8(&text).unwrap()).unwrap(),
            recovered.epoch_cache(),
            "{case}"
        );
        for &b in &bases[..bases.len() - 1] {
            assert!(
                io::read_file(&mut crashed, &segment::txn_index_path(dir, b)).is_ok(),
                "{case}: .txnindex of {b}"
            );
            let index = io::read_file(&mut crashed, &segment::offset_index_path(dir, b)).unwrap();
            segment::decode_offset_index(&index, b)
                .unwrap_or_else(|e| panic!("{case}: .index of {b}: {e}"));
        }
    }
}
