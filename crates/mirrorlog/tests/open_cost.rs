//! A clean open costs what the partition has, not what it stores (design.md §Recovery): it reads
//! the snapshot, the checkpoints, the last segment's index files and the batches after their last
//! entry, and no byte of any sealed segment. What a request needs of a sealed segment is loaded
//! then — its indexes from `.index`/`.timeindex` (rebuilt from the `.log` when a file is damaged
//! or missing), its aborted transactions from `.txnindex` — and dropped once the partition is
//! idle. Reads after the open (both isolations, every offset, aborted lists) equal reads before
//! the close, time retention finds expired segments by their time index, and damage inside a
//! sealed segment, which the open no longer reads, is still reported by the read that meets it.

mod common;

use mirrorlog::format::Offset;
use mirrorlog::internals::io::{Io, SimConfig, SimIo};
use mirrorlog::internals::log::{Isolation, LogConfig, PartitionLog};
use mirrorlog::internals::producer_state::Origin;
use mirrorlog::internals::segment;
use std::path::Path;

const CONFIG: LogConfig = common::log_config(32 << 10, 1024, 16 << 10);

fn sim() -> SimIo {
    SimIo::new(SimConfig {
        seed: 7,
        ..SimConfig::default()
    })
}

/// Client batches of three producers, every fourth transactional and every second of those
/// aborted; rolls many 32 KiB segments.
fn fill(io: &mut dyn Io, log: &mut PartitionLog, batches: usize) {
    let mut seq = [0i32; 3];
    for i in 0..batches {
        let p = i % 3;
        let txn = i % 4 == 3;
        let b = common::producer_batch(p as i64, seq[p], 3, txn, 300);
        log.append(io, &b, Origin::Client).unwrap();
        seq[p] += 3;
        if txn {
            let m = common::marker(p as i64, i % 8 != 7);
            log.append(io, &m, Origin::Coordinator).unwrap();
        }
        if i % 5 == 0 {
            log.commit(io).unwrap();
        }
    }
    log.commit(io).unwrap();
}

/// Every read a consumer could make, as comparable values.
fn reads(io: &mut dyn Io, log: &mut PartitionLog) -> Vec<String> {
    common::observed_reads(io, log, 7, 2000)
}

fn sealed_logs(io: &SimIo, dir: &Path) -> Vec<std::path::PathBuf> {
    let mut logs: Vec<_> = io
        .paths()
        .into_iter()
        .filter(|p| p.parent() == Some(dir) && p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop(); // the last one is reopened as the active segment
    logs
}

#[test]
fn a_clean_open_reads_no_sealed_segment_and_reads_load_what_they_need() {
    let mut io = sim();
    let dir = Path::new("/sim/open-cost");
    io.create_dir(dir).unwrap();
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    fill(&mut io, &mut log, 600);
    let before = reads(&mut io, &mut log);
    let state_before = (
        log.log_end(),
        log.last_stable_offset(),
        log.producer_state().len(),
    );
    log.close(&mut io).unwrap();

    let sealed = sealed_logs(&io, dir);
    assert!(
        sealed.len() >= 10,
        "many sealed segments ({})",
        sealed.len()
    );
    let read_before: Vec<u64> = sealed.iter().map(|p| io.read_bytes_of(p)).collect();
    let mut log = PartitionLog::open(&mut io, dir, CONFIG).unwrap();
    for (p, was) in sealed.iter().zip(&read_before) {
        assert_eq!(
            io.read_bytes_of(p),
            *was,
            "the open read {} (a sealed segment)",
            p.display()
        );
    }
    assert_eq!(log.loaded_sealed_indexes(), 0);
    assert_eq!(
        (
            log.log_end(),
            log.last_stable_offset(),
            log.producer_state().len()
        ),
        state_before
    );

    // Reads load indexes on demand and answer as before the close.
    assert_eq!(reads(&mut io, &mut log), before);
    // Bounded: at most SEALED_INDEXES_LOADED_MAX segments' indexes at once (least recently
    // used dropped) though every sealed segment was read.
    assert_eq!(
        log.loaded_sealed_indexes(),
        mirrorlog::internals::log::SEALED_INDEXES_LOADED_MAX.min(sealed.len())
    );
    // Idle: the first release keeps what was used since, the second drops everything.
    let loaded = log.loaded_sealed_indexes();
    assert_eq!(log.release_idle_caches(), 0);
    assert_eq!(log.release_idle_caches(), loaded);
    assert_eq!(log.loaded_sealed_indexes(), 0);
    assert_eq!(reads(&mut io, &mut log), before, "reloaded after release");

    // The reopened log goes on: appends into the reopened active segment and across rolls,
    // a clean close and an open again.
    for producer in 50..53 {
        sim_fill_more(&mut io, &mut log, producer);
        log.close(&mut io).unwrap();
        log = PartitionLog::open(&mut io, dir, CONFIG).unwrap();
    }
    let before = reads(&mut io, &mut log);
    log.close(&mut io).unwrap();
    let mut log = PartitionLog::open(&mut io, dir, CONFIG).unwrap();
    assert_eq!(reads(&mut io, &mut log), before);
    log.close(&mut io).unwrap();
    // Segments that were reopened and sealed again hold the indexes appending built, as Kafka
    // writes them: the time index's sealing entry of an earlier close is not left inside it
    // (found by the SIGKILL loop's verify).
    for base in log_bases(&io, dir) {
        let data = io.file_bytes(&segment::log_path(dir, base)).unwrap();
        let (_, rebuilt) =
            segment::index_batches(data, base, CONFIG.segment.index_interval_bytes).unwrap();
        assert_eq!(
            io.file_bytes(&segment::time_index_path(dir, base)).unwrap(),
            rebuilt.encode_time_index(),
            "time index of {base}"
        );
        assert_eq!(
            io.file_bytes(&segment::offset_index_path(dir, base))
                .unwrap(),
            rebuilt.encode_offset_index(),
            "offset index of {base}"
        );
    }
}

/// Batches whose timestamps grow, so the time index gains entries (and a sealing entry).
fn sim_fill_more(io: &mut dyn Io, log: &mut PartitionLog, producer: i64) {
    let value = [0x42u8; 300];
    for i in 0..200 {
        let mut b = mirrorlog::format::BatchBuilder::new(mirrorlog::format::BatchOptions {
            producer: mirrorlog::format::ProducerFields {
                producer_id: producer,
                producer_epoch: 0,
                base_sequence: i * 2,
            },
            ..mirrorlog::format::BatchOptions::default()
        });
        for r in 0..2 {
            b.push(mirrorlog::format::RecordSpec {
                timestamp: common::RECORDS_MS + producer * 10_000 + i64::from(i * 10 + r),
                key: None,
                value: Some(&value),
                headers: &[],
            });
        }
        log.append(io, &b.build(), Origin::Client).unwrap();
        if i % 50 == 49 {
            // Closed and reopened in the middle of segments: each close seals the active
            // segment (time index ends with its largest timestamp), each open reopens it.
            log.commit(io).unwrap();
        }
    }
    log.commit(io).unwrap();
}

#[test]
fn damaged_or_missing_index_files_are_rebuilt_from_the_batches() {
    let mut io = sim();
    let dir = Path::new("/sim/open-index");
    io.create_dir(dir).unwrap();
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    fill(&mut io, &mut log, 300);
    let before = reads(&mut io, &mut log);
    log.close(&mut io).unwrap();
    let bases = log_bases(&io, dir);
    // One sealed segment's offset index points into the middle of a batch, another's time
    // index names an offset below its base, a third's offset index has a partial entry, and the last
    // segment's offset index is gone.
    let ix = segment::offset_index_path(dir, bases[2]);
    assert!(io.file_bytes(&ix).unwrap().len() >= 8);
    io.damage(&ix, 4, &[0, 0, 0, 5]);
    let tix = segment::time_index_path(dir, bases[4]);
    assert!(io.file_bytes(&tix).unwrap().len() >= 12);
    io.damage(&tix, 8, &[0xff; 4]);
    let pix = segment::offset_index_path(dir, bases[6]);
    let plen = io.file_bytes(&pix).unwrap().len() as u64;
    io.damage(&pix, plen, &[1, 2, 3]);
    let last = *bases.last().unwrap();
    mirrorlog::internals::io::run(
        &mut io,
        mirrorlog::internals::io::Op::Unlink {
            path: segment::offset_index_path(dir, last),
        },
        &mut Vec::new(),
    )
    .unwrap()
    .result
    .unwrap();
    let mut log = PartitionLog::open(&mut io, dir, CONFIG).unwrap();
    assert_eq!(reads(&mut io, &mut log), before);
    log.close(&mut io).unwrap();
}

fn log_bases(io: &SimIo, dir: &Path) -> Vec<Offset> {
    let names: Vec<String> = io
        .paths()
        .into_iter()
        .filter(|p| p.parent() == Some(dir))
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    segment::offsets_named(&names, "log")
}

#[test]
fn damage_inside_a_sealed_segment_is_reported_by_the_read_that_meets_it() {
    let mut io = sim();
    let dir = Path::new("/sim/open-damage");
    io.create_dir(dir).unwrap();
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    fill(&mut io, &mut log, 300);
    log.close(&mut io).unwrap();
    let bases = log_bases(&io, dir);
    let victim = segment::log_path(dir, bases[3]);
    let len = io.file_bytes(&victim).unwrap().len() as u64;
    io.damage(&victim, len / 2, &[0xff; 64]);
    let mut log = PartitionLog::open(&mut io, dir, CONFIG).expect("the open does not read it");
    // Reads elsewhere are fine; the read of the damaged segment's batches fails loudly.
    log.read(&mut io, bases[1], 1 << 20, Isolation::ReadUncommitted)
        .unwrap();
    let mut failed = false;
    let mut offset = bases[3];
    while offset < bases[4] {
        match log.read(&mut io, offset, 1 << 20, Isolation::ReadUncommitted) {
            Ok(r) => {
                let last = mirrorlog::format::BatchIter::new(&r.records, 0)
                    .last()
                    .map(|b| b.header().last_offset());
                offset = Offset(last.map_or(offset.0 + 1, |l| l.0 + 1));
            }
            Err(e) => {
                eprintln!("the read meeting the damage: {e}");
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "the damaged batch was not returned as data");
}

#[test]
fn a_clean_open_reads_only_the_tail_of_the_last_segment() {
    // One large segment, closed cleanly: the open reads the batches after its last index
    // entry and its first batch's header, not the segment (the replay from the snapshot at
    // the end has nothing to read either; found by the `restart` workload: 8 GiB opened 6x
    // slower than 1 GiB).
    let config = common::log_config(4 << 20, 1024, 64 << 10);
    let mut io = sim();
    let dir = Path::new("/sim/open-tail");
    io.create_dir(dir).unwrap();
    let mut log = PartitionLog::create(&mut io, dir, config).unwrap();
    fill(&mut io, &mut log, 2_000);
    let before = reads(&mut io, &mut log);
    log.close(&mut io).unwrap();
    let bases = log_bases(&io, dir);
    assert_eq!(bases.len(), 1, "one segment");
    let path = segment::log_path(dir, bases[0]);
    let size = io.file_bytes(&path).unwrap().len() as u64;
    assert!(size > 1 << 20, "{size}");
    let was = io.read_bytes_of(&path);
    let mut log = PartitionLog::open(&mut io, dir, config).unwrap();
    let read = io.read_bytes_of(&path) - was;
    assert!(
        read <= 16 << 10,
        "the open read {read} of {size} bytes of the last segment"
    );
    assert_eq!(reads(&mut io, &mut log), before);
}
