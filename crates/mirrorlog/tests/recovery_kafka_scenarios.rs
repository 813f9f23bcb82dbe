//! The scenarios of Kafka's `LogSegmentTest` and `LogLoaderTest` recovery tests, ported to
//! mirrorlog's storage (commit records, no silent truncation below the durable end):
//! a corrupt message at a random point, corrupt and deleted `.index` / `.timeindex` files,
//! recovery to the correct offset, transaction-index recovery across segments, producer
//! snapshots after an unclean shutdown, a corrupt snapshot on a clean open, and an empty
//! active segment.

mod common;

use mirrorlog::format::{self, BatchIter, Offset};
use mirrorlog::internals::io::{self, Io, Op, SimConfig, SimIo};
use mirrorlog::internals::log::{Isolation, LogConfig, LogError, PartitionLog};
use mirrorlog::internals::producer_state::{
    decode_txn_index, snapshot_file_name, AbortedTxn, Origin, ProducerEntry,
};
use mirrorlog::internals::recovery;
use mirrorlog::internals::segment::commit_record::{
    page_floor, CommitRecord, COMMIT_HEADER_SIZE_BYTES,
};
use mirrorlog::internals::segment::{self, COMMIT_SLOTS, COMMIT_SLOT_SIZE_BYTES};
use std::path::Path;

const CONFIG: LogConfig = common::log_config(8 << 10, 512, 16 << 10);

use common::Rng;

/// Client batches of three producers, a commit round each, rolling on size; returns the
/// stored batches.
fn fill(io: &mut SimIo, log: &mut PartitionLog, seqs: &mut [i32; 3], count: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..count {
        let p = i % 3;
        let b = common::producer_batch(p as i64, seqs[p], 4, false, 90 + 13 * (i % 5));
        let o = log.append(io, &b, Origin::Client).unwrap();
        seqs[p] += 4;
        out.push(common::stored(b, o.first_offset, 0));
        log.commit(io).unwrap();
    }
    out
}

/// Every producer entry, sorted.
fn producers(log: &PartitionLog) -> Vec<ProducerEntry> {
    let mut v: Vec<_> = log.producer_state().producers().collect();
    v.sort_by_key(|e| e.producer_id);
    v
}

/// What a snapshot keeps of each producer (see [`common::Kept`]).
fn snapshot_view(log: &PartitionLog) -> Vec<common::Kept> {
    common::snapshot_kept(log.producer_state())
}

fn end_of(batches: &[Vec<u8>]) -> Offset {
    batches.last().map_or(Offset(0), |b| {
        Offset(format::inspect(b, 0).unwrap().header().last_offset().0 + 1)
    })
}

fn unlink(io: &mut SimIo, path: std::path::PathBuf) {
    let mut others = Vec::new();
    let _ = io::run(io, Op::Unlink { path }, &mut others);
}

/// `LogSegmentTest.testRecoveryWithCorruptMessage`, `LogLoaderTest.testCorruptLog`: a byte
/// flipped at a random point. Kafka truncates there; here a flip below the durable end fails
/// the partition naming the segment file, and one in the never-acknowledged last round is cut.
#[test]
fn corrupt_message_at_a_random_point() {
    let seed = common::seed("corrupt_message_at_a_random_point");
    let mut rng = Rng(seed | 1);
    let dir = Path::new("/sim/corrupt-message");
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    let mut seqs = [0; 3];
    let acked = fill(&mut io, &mut log, &mut seqs, 40);
    // A last round that reached the disk but was never acknowledged.
    for p in 0..3 {
        let b = common::producer_batch(p, seqs[p as usize], 6, false, 400);
        log.append(&mut io, &b, Origin::Client).unwrap();
    }
    log.start_commit(&mut io).unwrap();
    while log.round_in_flight() {
        let mut done = Vec::new();
        io.complete(1, &mut done).unwrap();
        for c in done {
            log.on_completion(c).unwrap();
        }
    }
    let bases = log.segment_base_offsets();
    let active_base = *bases.last().unwrap();
    drop(log);
    let mut image = io.crash(1);
    // Kafka's `testCorruptLog` recovers from recovery point 0: every segment is scanned (below
    // a recovery point a flip is found by the read that meets it: tests/recovery_point.rs).
    common::forget_recovery_point(&mut image, dir);
    let active = segment::log_path(dir, active_base);
    let active_bytes = image.file_bytes(&active).unwrap().to_vec();
    let slots_at = active_bytes.len() - COMMIT_SLOTS * COMMIT_SLOT_SIZE_BYTES;
    let records: Vec<(usize, CommitRecord)> = (0..COMMIT_SLOTS)
        .map(|i| slots_at + i * COMMIT_SLOT_SIZE_BYTES)
        .filter_map(|at| {
            CommitRecord::decode(&active_bytes[at..at + COMMIT_SLOT_SIZE_BYTES])
                .ok()
                .map(|r| (at, r))
        })
        .collect();
    let (newest_at, newest) = records
        .iter()
        .max_by_key(|(_, r)| r.sequence)
        .unwrap()
        .clone();
    let acked_len = records.iter().map(|(_, r)| r.data_len).min().unwrap();
    let acked_end = end_of(&acked);
    let mut failed = 0;
    let mut cut = 0;
    for case in 0..60 {
        // A random segment, a random batch in it, a random CRC-checked byte of the batch
        // (`partitionLeaderEpoch`, bytes 12..16, is covered by no checksum, in Kafka too).
        let base = bases[rng.below(bases.len() as u64) as usize];
        let path = segment::log_path(dir, base);
        let mut disk = image.crash(2);
        let (batches, durable_len) = if base == active_base {
            let mut data = active_bytes[..page_floor(newest.data_len) as usize].to_vec();
            data.extend_from_slice(&newest.tail);
            (data, acked_len)
        } else {
            let b = image.file_bytes(&path).unwrap().to_vec();
            let len = b.len() as u64;
            (b, len)
        };
        let views: Vec<_> = BatchIter::new(&batches, 0).collect();
        let v = &views[rng.below(views.len() as u64) as usize];
        let mut in_batch = rng.below(v.bytes().len() as u64) as usize;
        if (12..16).contains(&in_batch) {
            in_batch = 20;
        }
        let position = v.position() + in_batch as u64;
        let flipped = batches[position as usize] ^ (1 << rng.below(8));
        let floor = page_floor(newest.data_len);
        let at = if base == active_base && position >= floor {
            (newest_at + COMMIT_HEADER_SIZE_BYTES) as u64 + (position - floor)
        } else {
            position
        };
        disk.damage(&path, at, &[flipped]);
        let result = recovery::recover(&mut disk, dir, CONFIG);
        if position < durable_len {
            match result {
                // The damaged file is named: as the file, or (a base offset, which no CRC
                // covers, moved past the next segment's start) as the previous one.
                Err(LogError::Corrupt { file, what }) => assert!(
                    file == path || what.contains(&*path.to_string_lossy()),
                    "case {case}: {file:?}: {what}"
                ),
                other => panic!("case {case}: flip at {position} of {base}: {other:?}"),
            }
            failed += 1;
        } else {
            let mut log = result.unwrap_or_else(|e| panic!("case {case}: {e}"));
            assert_eq!(log.log_end(), acked_end, "case {case}");
            assert_eq!(common::read_all(&mut disk, &mut log), acked.concat());
            cut += 1;
        }
    }
    assert!(
        failed > 0 && cut > 0,
        "both kinds happened: {failed} failed, {cut} cut"
    );
}

/// A log of several segments left without a clean close.
fn segmented(io: &mut SimIo, dir: &Path) -> (Vec<Offset>, Vec<Vec<u8>>) {
    let mut log = PartitionLog::create(io, dir, CONFIG).unwrap();
    let mut seqs = [0; 3];
    let batches = fill(io, &mut log, &mut seqs, 45);
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 4);
    drop(log);
    (bases, batches)
}

/// Every batch is found through the (rebuilt) indexes: a read at its first and at its last
/// offset starts with it.
fn reads_find_every_batch(io: &mut SimIo, log: &mut PartitionLog, batches: &[Vec<u8>]) {
    for b in batches {
        let v = format::inspect(b, 0).unwrap();
        let h = v.header();
        for offset in [h.base_offset, h.last_offset()] {
            let r = log.read(io, offset, 1, Isolation::ReadUncommitted).unwrap();
            assert_eq!(format::inspect(&r.records, 0).unwrap().bytes(), &b[..]);
        }
    }
}

/// `LogSegmentTest.testRecoveryFixesCorruptIndex` / `testRecoveryFixesCorruptTimeIndex`,
/// `LogLoaderTest.testCorruptIndexRebuild` / `testIndexRebuild`: `.index` and `.timeindex`
/// files damaged with garbage, or deleted, come back byte for byte.
#[test]
fn corrupt_or_deleted_indexes_are_rebuilt() {
    for delete in [false, true] {
        let dir = Path::new("/sim/indexes");
        let mut io = SimIo::new(SimConfig::default());
        let (bases, batches) = segmented(&mut io, dir);
        let sealed = &bases[..bases.len() - 1];
        let mut originals = Vec::new();
        for &b in sealed {
            for path in [
                segment::offset_index_path(dir, b),
                segment::time_index_path(dir, b),
            ] {
                let bytes = io.file_bytes(&path).unwrap().to_vec();
                assert!(!bytes.is_empty(), "{path:?} has entries");
                if delete {
                    unlink(&mut io, path.clone());
                } else {
                    let garbage: Vec<u8> = (0..bytes.len()).map(|i| (i * 37 + 11) as u8).collect();
                    io.damage(&path, 0, &garbage);
                }
                originals.push((path, bytes));
            }
        }
        let mut disk = io.crash(1);
        // As Kafka's test reopens "with recovery point 0 so that the segment recovery can be
        // triggered": below a recovery point, index files load (and are rebuilt) on demand.
        common::forget_recovery_point(&mut disk, dir);
        let mut log = recovery::recover(&mut disk, dir, CONFIG).unwrap();
        for (path, bytes) in &originals {
            assert_eq!(
                disk.file_bytes(path),
                Some(&bytes[..]),
                "{path:?}, deleted {delete}"
            );
        }
        reads_find_every_batch(&mut disk, &mut log, &batches);
    }
}

/// `LogLoaderTest.testLogRecoversToCorrectOffset`: after an unclean stop with every round
/// acknowledged, the log ends exactly where it did and the next append continues there.
#[test]
fn recovers_to_the_correct_offset() {
    let dir = Path::new("/sim/correct-offset");
    let mut io = SimIo::new(SimConfig::default());
    let (bases, batches) = segmented(&mut io, dir);
    let mut disk = io.crash(1);
    let mut log = recovery::recover(&mut disk, dir, CONFIG).unwrap();
    assert_eq!(log.log_end(), end_of(&batches));
    assert_eq!(log.high_watermark(), end_of(&batches));
    assert_eq!(log.segment_base_offsets(), bases);
    let next = common::producer_batch(9, 0, 2, false, 10);
    let o = log.append(&mut disk, &next, Origin::Client).unwrap();
    assert_eq!(o.first_offset, end_of(&batches));
    reads_find_every_batch(&mut disk, &mut log, &batches);
}

/// `LogSegmentTest.testRecoverTransactionIndex`, `LogLoaderTest.testFullTransactionIndexRecovery`:
/// transactions that span segments, aborted or committed, with every `.txnindex` deleted; the
/// rebuilt indexes and the aborted list at ReadCommitted are those of the log.
#[test]
fn transaction_index_recovery_across_segments() {
    let dir = Path::new("/sim/txn-index");
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    let mut seqs = [0i32; 4];
    let mut first = [None; 4];
    let mut markers = Vec::new();
    // Producers 1..=3 open transactions early; filler from producer 0 rolls segments; then
    // 1 aborts, 2 commits, 3 aborts, each a few segments later.
    for step in 0..60 {
        let p = match step {
            0..=2 => step + 1,
            _ => 0,
        };
        let b = common::producer_batch(p as i64, seqs[p], 4, p != 0, 200);
        let o = log.append(&mut io, &b, Origin::Client).unwrap();
        first[p].get_or_insert(o.first_offset);
        seqs[p] += 4;
        if let Some((pid, commit)) = match step {
            20 => Some((1, false)),
            35 => Some((2, true)),
            50 => Some((3, false)),
            _ => None,
        } {
            let o = log
                .append(&mut io, &common::marker(pid, commit), Origin::Coordinator)
                .unwrap();
            markers.push((pid, commit, o.first_offset));
        }
        log.commit(&mut io).unwrap();
    }
    log.roll(&mut io).unwrap();
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 5);
    drop(log);
    for &b in &bases {
        unlink(&mut io, segment::txn_index_path(dir, b));
    }
    let mut disk = io.crash(1);
    let mut log = recovery::recover(&mut disk, dir, CONFIG).unwrap();
    let expected: Vec<(i64, Offset, Offset)> = markers
        .iter()
        .filter(|m| !m.1)
        .map(|&(pid, _, at)| (pid, first[pid as usize].unwrap(), at))
        .collect();
    // Each aborted transaction is in the .txnindex of the segment holding its marker.
    let mut indexed = Vec::new();
    for (i, &b) in bases[..bases.len() - 1].iter().enumerate() {
        let bytes = io::read_file(&mut disk, &segment::txn_index_path(dir, b)).unwrap();
        for a in decode_txn_index(&bytes).unwrap() {
            assert!(a.last_offset >= b && a.last_offset < bases[i + 1]);
            indexed.push((a.producer_id, a.first_offset, a.last_offset));
        }
    }
    assert_eq!(indexed, expected);
    // And a ReadCommitted fetch from the start lists them.
    let mut listed: Vec<AbortedTxn> = Vec::new();
    let mut at = log.log_start();
    while at < log.last_stable_offset() {
        let r = log
            .read(&mut disk, at, 4096, Isolation::ReadCommitted)
            .unwrap();
        for a in r.aborted {
            if !listed.contains(&a) {
                listed.push(a);
            }
        }
        at = Offset(
            BatchIter::new(&r.records, 0)
                .last()
                .unwrap()
                .header()
                .last_offset()
                .0
                + 1,
        );
    }
    let listed: Vec<_> = listed
        .iter()
        .map(|a| (a.producer_id, a.first_offset, a.last_offset))
        .collect();
    assert_eq!(listed, expected);
    assert_eq!(log.last_stable_offset(), log.log_end());
}

/// `LogLoaderTest.testProducerSnapshotsRecoveryAfterUncleanShutdown`: snapshots written at
/// rolls survive an unclean stop; stray ones (past the log end, before the first segment) are
/// removed; the recovered producers are those of the log (a clean close and open then agrees).
#[test]
fn producer_snapshots_after_unclean_shutdown() {
    let dir = Path::new("/sim/snapshots");
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    let mut seqs = [0; 3];
    // Producer 7 writes only at the start: once its segments are deleted, only the snapshots
    // remember it.
    let early = common::producer_batch(7, 0, 3, false, 50);
    log.append(&mut io, &early, Origin::Client).unwrap();
    let batches = fill(&mut io, &mut log, &mut seqs, 60);
    let before = producers(&log);
    assert!(before.iter().any(|e| e.producer_id == 7));
    // Delete the first two segments; their snapshots now describe records that are gone.
    let bases = log.segment_base_offsets();
    log.delete_records(&mut io, bases[2]).unwrap();
    drop(log);
    let names = io.list_dir(dir).unwrap();
    let all = segment::offsets_named(&names, "snapshot");
    assert!(all.len() >= 4, "a snapshot per roll: {all:?}");
    let snapshots: Vec<Offset> = all.iter().copied().filter(|&o| o >= bases[2]).collect();
    assert!(snapshots.len() < all.len());
    let stray = Offset(end_of(&batches).0 + 100);
    let copy = io
        .file_bytes(&dir.join(snapshot_file_name(snapshots[0])))
        .unwrap()
        .to_vec();
    io::write_file(&mut io, &dir.join(snapshot_file_name(stray)), &copy).unwrap();
    let mut disk = io.crash(1);
    let log = recovery::recover(&mut disk, dir, CONFIG).unwrap();
    // From the snapshot at the recovery point plus the active segment's replay: what a
    // snapshot keeps of each producer (its last batch), as Kafka's load from a snapshot.
    assert_eq!(snapshot_view(&log), common::snapshot_kept_entries(&before));
    let names = disk.list_dir(dir).unwrap();
    let left = segment::offsets_named(&names, "snapshot");
    assert!(!left.contains(&stray), "stray snapshot removed: {left:?}");
    assert_eq!(left, snapshots);
    let view = snapshot_view(&log);
    log.close(&mut disk).unwrap();
    let reopened = PartitionLog::open(&mut disk, dir, CONFIG).unwrap();
    assert_eq!(snapshot_view(&reopened), view);
}

/// A corrupt newest snapshot on a clean open: the open falls back to an older snapshot (or
/// the log) and replays, ending with the same producers.
#[test]
fn corrupt_snapshot_falls_back_on_a_clean_open() {
    let dir = Path::new("/sim/corrupt-snapshot");
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    let mut seqs = [0; 3];
    fill(&mut io, &mut log, &mut seqs, 45);
    let before = snapshot_view(&log);
    log.close(&mut io).unwrap();
    let names = io.list_dir(dir).unwrap();
    let newest = *segment::offsets_named(&names, "snapshot").last().unwrap();
    let path = dir.join(snapshot_file_name(newest));
    let len = io.file_bytes(&path).unwrap().len();
    io.damage(&path, (len / 2) as u64, b"\xde\xad\xbe\xef");
    let log = PartitionLog::open(&mut io, dir, CONFIG).unwrap();
    assert_eq!(snapshot_view(&log), before);
}

/// An empty active segment (a roll just happened) recovers as the active segment, and the next
/// append lands in it at its base offset.
#[test]
fn recovery_with_an_empty_active_segment() {
    let dir = Path::new("/sim/empty-active");
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    let mut seqs = [0; 3];
    let batches = fill(&mut io, &mut log, &mut seqs, 20);
    log.roll(&mut io).unwrap();
    let bases = log.segment_base_offsets();
    assert_eq!(*bases.last().unwrap(), end_of(&batches));
    let before = producers(&log);
    drop(log);
    let mut disk = io.crash(1);
    let mut log = recovery::recover(&mut disk, dir, CONFIG).unwrap();
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(log.log_end(), end_of(&batches));
    // The empty active segment is the recovery point: the producers come from its snapshot.
    assert_eq!(snapshot_view(&log), common::snapshot_kept_entries(&before));
    let next = common::producer_batch(0, seqs[0], 1, false, 10);
    let o = log.append(&mut disk, &next, Origin::Client).unwrap();
    assert_eq!(o.first_offset, *bases.last().unwrap());
    log.commit(&mut disk).unwrap();
    assert_eq!(log.segment_base_offsets(), bases);
    reads_find_every_batch(&mut disk, &mut log, &batches);
}
