//! What recovery does with damage, by where it is (design.md §Durability–5, issue "Recovery"):
//! - the torn-tail matrix: every byte of the last three batches (a commit round that was never
//!   acknowledged) cut or garbled — recovery keeps exactly the acknowledged prefix;
//! - damage before the durable end (a bit flip in a sealed segment or in the acknowledged part of
//!   the active one, a missing middle segment) fails the partition with the file and position,
//!   never truncating silently.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::format::{self, BatchIter, Offset};
use mirrorlog::internals::io::{Io, SimConfig, SimIo};
use mirrorlog::internals::log::{LogConfig, LogError, PartitionLog};
use mirrorlog::internals::recovery;
use mirrorlog::internals::segment::commit_record::{
    page_floor, CommitRecord, COMMIT_HEADER_SIZE_BYTES,
};
use mirrorlog::internals::segment::{self, COMMIT_SLOTS, COMMIT_SLOT_SIZE_BYTES};
use std::path::Path;

const CONFIG: LogConfig = common::log_config(64 << 10, 1024, 16 << 10);
/// `partitionLeaderEpoch`: no checksum covers it in the v2 format (Kafka's CRC starts at
/// `attributes`), so a flip there cannot be told from a real epoch, here as in Kafka.
const EPOCH_FIELD: std::ops::Range<usize> = 12..16;

/// Appends `count` batches of two producers as one commit round each (`per_round` batches per
/// round); returns the stored batches.
fn append_rounds(
    io: &mut SimIo,
    log: &mut PartitionLog,
    seqs: &mut [i32; 2],
    count: usize,
    per_round: usize,
    value_len: usize,
) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..count {
        let p = i % 2;
        let b = common::producer_batch(p as i64, seqs[p], 3, false, value_len + i * 7);
        let o = log.append(io, &b, Origin::Client).unwrap();
        seqs[p] += 3;
        out.push(common::stored(b, o.first_offset, 0));
        if (i + 1) % per_round == 0 {
            log.commit(io).unwrap();
        }
    }
    out
}

fn end_of(batches: &[Vec<u8>]) -> Offset {
    batches.last().map_or(Offset(0), |b| {
        Offset(format::inspect(b, 0).unwrap().header().last_offset().0 + 1)
    })
}

#[test]
fn torn_tail_matrix_keeps_exactly_the_acknowledged_prefix() {
    let dir = Path::new("/sim/torn-tail");
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    let mut seqs = [0; 2];
    let acked = append_rounds(&mut io, &mut log, &mut seqs, 10, 1, 150);
    // The last three batches: one round whose I/O all reached the disk but whose
    // acknowledgement never did (the power failed first).
    let round = append_rounds(&mut io, &mut log, &mut seqs, 3, 3, 900);
    drop(log);
    let image = io.crash(1);
    let acked_bytes: Vec<u8> = acked.concat();
    let p0 = acked_bytes.len() as u64;
    let p_end = p0 + round.iter().map(Vec::len).sum::<usize>() as u64;
    let floor = page_floor(p_end);
    assert!(
        p0 < floor && floor < p_end,
        "the round spans a page boundary"
    );
    let path = segment::log_path(dir, Offset(0));
    let file = image.file_bytes(&path).unwrap().to_vec();
    let slots_at = file.len() - COMMIT_SLOTS * COMMIT_SLOT_SIZE_BYTES;
    let newest_slot = (0..COMMIT_SLOTS)
        .map(|i| slots_at + i * COMMIT_SLOT_SIZE_BYTES)
        .find(|&at| {
            CommitRecord::decode(&file[at..at + COMMIT_SLOT_SIZE_BYTES])
                .is_ok_and(|r| r.data_len == p_end)
        })
        .expect("the round's commit record");
    // Where logical byte `i` of the partition lives: the file below the tail page, the newest
    // commit record's tail above it.
    let place = |i: u64| -> u64 {
        if i < floor {
            i
        } else {
            (newest_slot + COMMIT_HEADER_SIZE_BYTES) as u64 + (i - floor)
        }
    };
    // Undamaged, the whole round is there: it was durable, only its acknowledgement was lost.
    let mut whole = image.crash(2);
    let mut log = recovery::recover(&mut whole, dir, CONFIG).unwrap();
    assert_eq!(log.log_end(), end_of(&round));
    assert_eq!(
        common::read_all(&mut whole, &mut log),
        [acked_bytes.clone(), round.concat()].concat()
    );
    let starts: Vec<u64> = BatchIter::new(&round.concat(), p0)
        .map(|b| b.position())
        .collect();
    let mut cases = 0;
    let mut unchanged_cuts = 0;
    for i in p0..p_end {
        let batch_start = starts.iter().rev().find(|&&s| s <= i).copied().unwrap();
        let in_batch = (i - batch_start) as usize;
        for garble in [false, true] {
            if garble && EPOCH_FIELD.contains(&in_batch) {
                continue;
            }
            let mut disk = image.crash(3);
            if garble {
                let at = place(i);
                let old = disk.file_bytes(&path).unwrap()[at as usize];
                disk.damage(&path, at, &[old ^ 0xff]);
            } else {
                // Cut: nothing of the round from byte `i` on reached the disk.
                let (from, to) = if i < floor {
                    (i, floor)
                } else {
                    (place(i), place(p_end))
                };
                disk.damage(&path, from, &vec![0; (to - from) as usize]);
            }
            // A cut over bytes that were zero anyway changes nothing: the round stays whole.
            let changed = disk.file_bytes(&path) != Some(&file[..]);
            let mut log = recovery::recover(&mut disk, dir, CONFIG)
                .unwrap_or_else(|e| panic!("byte {i}, garble {garble}: {e}"));
            let (end, bytes) = if changed {
                (end_of(&acked), acked_bytes.clone())
            } else {
                (
                    end_of(&round),
                    [acked_bytes.clone(), round.concat()].concat(),
                )
            };
            assert_eq!(
                log.log_end(),
                end,
                "byte {i} (offset {in_batch} in its batch), garble {garble}"
            );
            assert_eq!(common::read_all(&mut disk, &mut log), bytes);
            cases += usize::from(changed);
            unchanged_cuts += usize::from(!changed && !garble);
        }
    }
    eprintln!("torn-tail matrix: {cases} damaged disks recovered to the acknowledged prefix");
    // Every garble changes a byte; only cuts of the last few bytes (zeroes already: a record's
    // empty header count) can leave the disk as it was.
    assert!(unchanged_cuts < 8, "{unchanged_cuts}");
    assert_eq!(
        cases + unchanged_cuts,
        2 * (p_end - p0) as usize - round.len() * EPOCH_FIELD.len()
    );
}

/// The log of `damage_before_the_durable_end_fails_loudly`: three sealed segments and an active
/// one with more than a page of acknowledged data, all of it durable.
fn segmented(io: &mut SimIo, dir: &Path) -> (Vec<Offset>, Vec<Vec<u8>>) {
    let config = common::log_config(8 << 10, 1024, 16 << 10);
    let mut log = PartitionLog::create(io, dir, config).unwrap();
    let mut seqs = [0; 2];
    let mut batches = Vec::new();
    while log.segment_base_offsets().len() < 4 {
        batches.extend(append_rounds(io, &mut log, &mut seqs, 4, 2, 300));
        log.roll(io).ok();
    }
    batches.extend(append_rounds(io, &mut log, &mut seqs, 8, 2, 400));
    let bases = log.segment_base_offsets();
    drop(log);
    (bases, batches)
}

#[test]
fn damage_before_the_durable_end_fails_loudly() {
    let config = common::log_config(8 << 10, 1024, 16 << 10);
    let dir = Path::new("/sim/damage");
    let mut io = SimIo::new(SimConfig::default());
    let (bases, _) = segmented(&mut io, dir);
    let mut image = io.crash(1);
    // The full scan: without the recovery point every segment is read and verified (the
    // point's own rows are `damage_below_the_recovery_point_is_left_to_reads`).
    common::forget_recovery_point(&mut image, dir);
    let mut control = image.crash(2);
    recovery::recover(&mut control, dir, config).expect("undamaged, it recovers");

    // A bit flip in a sealed segment, in CRC-covered bytes of its second batch.
    let sealed = segment::log_path(dir, bases[1]);
    let bytes = image.file_bytes(&sealed).unwrap().to_vec();
    let second = BatchIter::new(&bytes, 0).nth(1).unwrap().position();
    let at = second + 40;
    let mut disk = image.crash(3);
    disk.damage(&sealed, at, &[bytes[at as usize] ^ 0x10]);
    match recovery::recover(&mut disk, dir, config) {
        Err(LogError::Corrupt { file, what }) => {
            assert_eq!(file, sealed);
            assert!(
                what.contains(&format!("position {}", second + 17)),
                "{what}"
            );
        }
        other => panic!("a flipped bit in a sealed segment must fail: {other:?}"),
    }

    // A missing middle segment.
    let mut disk = image.crash(4);
    let mut others = Vec::new();
    mirrorlog::internals::io::run(
        &mut disk,
        mirrorlog::internals::io::Op::Unlink {
            path: segment::log_path(dir, bases[2]),
        },
        &mut others,
    )
    .unwrap()
    .result
    .unwrap();
    match recovery::recover(&mut disk, dir, config) {
        Err(LogError::Corrupt { file, what }) => {
            assert_eq!(file, segment::log_path(dir, bases[3]));
            assert!(what.contains("but the previous one"), "{what}");
        }
        other => panic!("a missing middle segment must fail: {other:?}"),
    }

    // A flip in the acknowledged, page-aligned part of the active segment.
    let active = segment::log_path(dir, bases[3]);
    let bytes = image.file_bytes(&active).unwrap().to_vec();
    let first = BatchIter::new(&bytes, 0).next().unwrap();
    assert!(first.bytes().len() < 4096);
    let at = first.position() + 30;
    let mut disk = image.crash(5);
    disk.damage(&active, at, &[bytes[at as usize] ^ 0x01]);
    match recovery::recover(&mut disk, dir, config) {
        Err(LogError::Corrupt { file, what }) => {
            assert_eq!(file, active);
            assert!(what.contains("crc"), "{what}");
        }
        other => panic!("damage below the durable end must fail: {other:?}"),
    }
    // Nothing was truncated or rewritten by the failed attempts.
    assert_eq!(
        disk.file_bytes(&active).unwrap()[at as usize],
        bytes[at as usize] ^ 0x01
    );
    assert_eq!(
        disk.list_dir(dir).unwrap(),
        image.crash(6).list_dir(dir).unwrap()
    );
}

/// Frozen from `corrupt_message_at_a_random_point` (seed 1795950405247437924): a flipped bit in
/// the base offset of a sealed segment's last batch (bytes no CRC covers) still validates in
/// that file; the gap it opens to the next segment fails the partition, naming both files.
#[test]
fn a_damaged_base_offset_at_a_segment_end_names_both_files() {
    let config = common::log_config(8 << 10, 1024, 16 << 10);
    let dir = Path::new("/sim/base-offset");
    let mut io = SimIo::new(SimConfig::default());
    let (bases, _) = segmented(&mut io, dir);
    let mut image = io.crash(1);
    common::forget_recovery_point(&mut image, dir);
    let sealed = segment::log_path(dir, bases[0]);
    let bytes = image.file_bytes(&sealed).unwrap().to_vec();
    let last = BatchIter::new(&bytes, 0).last().unwrap().position();
    let mut disk = image.crash(2);
    // The batch's baseOffset one higher: still increasing within the file.
    let base = i64::from_be_bytes(bytes[last as usize..last as usize + 8].try_into().unwrap());
    disk.damage(&sealed, last, &(base + 1).to_be_bytes());
    match recovery::recover(&mut disk, dir, config) {
        Err(LogError::Corrupt { file, what }) => {
            assert_eq!(file, segment::log_path(dir, bases[1]));
            assert!(what.contains(&*sealed.to_string_lossy()), "{what}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_lone_sealed_segment_damaged_in_the_middle_fails_loudly_in_recovery_and_verify() {
    // A single-segment log, closed cleanly (its segment sealed: trimmed, no commit slots), then
    // stopped uncleanly right after the next open removed the marker. Damage in the middle of
    // the acknowledged batches used to pass for a segment that never committed and was cut to
    // its valid prefix without a word; the same damage in a two-segment log failed loudly.
    for (name, fill) in [("garbage", 0xa5u8), ("a zeroed sector", 0u8)] {
        let dir = Path::new("/sim/lone-0");
        let mut io = SimIo::new(SimConfig::default());
        let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
        let mut seqs = [0; 2];
        let stored = append_rounds(&mut io, &mut log, &mut seqs, 12, 3, 400);
        assert_eq!(log.segment_base_offsets().len(), 1, "one segment");
        log.close(&mut io).unwrap();
        let mut others = Vec::new();
        mirrorlog::internals::io::run(
            &mut io,
            mirrorlog::internals::io::Op::Unlink {
                path: dir.join(mirrorlog::internals::log::CLEAN_SHUTDOWN_MARKER),
            },
            &mut others,
        )
        .unwrap()
        .result
        .unwrap();
        let path = segment::log_path(dir, Offset(0));
        let middle = (stored[..6].iter().map(Vec::len).sum::<usize>() / 512 * 512) as u64;
        io.damage(&path, middle, &[fill; 512]);
        let mut after = io.crash(1);
        match recovery::recover(&mut after, dir, CONFIG) {
            Err(LogError::Corrupt { file, what }) => {
                assert_eq!(file, path, "{name}");
                assert!(what.contains("position"), "{name}: {what}");
            }
            Ok(log) => panic!(
                "{name}: recovered silently to log end {} of {}",
                log.log_end(),
                end_of(&stored)
            ),
            Err(e) => panic!("{name}: {e}"),
        }
        // `mirrorlog verify` sees the same damage where recovery does.
        let root = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
        common::export_sim(&io, root.path());
        let report =
            mirrorlog::inspect::inspect_partition(&root.path().join("sim/lone-0"), &mut |_| {})
                .unwrap();
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.file.ends_with("00000000000000000000.log")),
            "{name}: {:#?}",
            report.problems
        );
    }
}
