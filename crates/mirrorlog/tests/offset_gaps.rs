//! Offset gaps: a copied append across a gap wider than the 32-bit
//! relative offsets of `.index`/`.timeindex` rolls before the far batch, even inside one
//! append; a truncation into an offset gap ends the log at the requested offset (Kafka's
//! `truncateTo`), durably, so a follower's append there is accepted, before and after a
//! restart. A power cut at every operation of such a truncation recovers to a healthy log.
//! Replay with `MIRRORLOG_SEED`.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::format::{self, BatchIter, Offset};
use mirrorlog::internals::io::{CrashModel, SimConfig, SimIo};
use mirrorlog::internals::log::{Isolation, LogConfig, PartitionLog, SEGMENT_GAPS};
use mirrorlog::internals::segment;
use std::path::Path;

/// Kafka's index interval (what `mirrorlog verify` assumes without a `partition.config`); the
/// batches are large enough for entries.
const CONFIG: LogConfig = common::log_config(1 << 20, 4096, 64 << 10);

/// A batch of `records` records from producer 1 at sequence `seq`, stored at `base`.
fn copied(base: i64, seq: i32, records: i32) -> Vec<u8> {
    common::stored(
        common::producer_batch(1, seq, records, false, 2500),
        Offset(base),
        0,
    )
}

fn restart(io: &mut SimIo, dir: &Path) -> PartitionLog {
    common::open_or_recover(io, dir, CONFIG).unwrap_or_else(|e| panic!("restart: {e}"))
}

/// Base offsets of the batches a log holds, read from its start.
fn batch_bases(io: &mut SimIo, log: &mut PartitionLog) -> Vec<i64> {
    BatchIter::new(&common::read_all(io, log), 0)
        .map(|b| b.header().base_offset.0)
        .collect()
}

/// `mirrorlog verify` finds nothing wrong with the partition at `dir` of `io`'s disk.
fn verifies(io: &SimIo, dir: &Path) {
    let root = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    common::export_sim(io, root.path());
    let report = mirrorlog::inspect::inspect_partition(
        &root.path().join(dir.strip_prefix("/").unwrap()),
        &mut |_| {},
    )
    .unwrap();
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
}

/// Every relative offset in the `.index` and `.timeindex` of the segment at `base` is
/// non-negative and names an offset of that segment.
fn indexes_fit(io: &SimIo, dir: &Path, base: Offset, next: Offset) -> usize {
    let index = io
        .file_bytes(&segment::offset_index_path(dir, base))
        .unwrap();
    let time = io.file_bytes(&segment::time_index_path(dir, base)).unwrap();
    let relative: Vec<i32> = index
        .chunks(8)
        .map(|e| i32::from_be_bytes(e[..4].try_into().unwrap()))
        .chain(
            time.chunks(12)
                .map(|e| i32::from_be_bytes(e[8..12].try_into().unwrap())),
        )
        .collect();
    for r in &relative {
        assert!(
            *r >= 0 && base.0 + i64::from(*r) < next.0,
            "segment {base}: relative offset {r}"
        );
    }
    relative.len()
}

#[test]
fn a_copied_append_across_a_gap_wider_than_relative_offsets_rolls_before_the_far_batch() {
    let dir = Path::new("/sim/overflow-0");
    let far = 3_000_000_000i64;
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    // One replicated append: offsets 0..3, then (a gap of ~3·10⁹ offsets, left by compaction
    // on the leader) far..far+2 and far+2..far+4.
    let append = [copied(0, 0, 3), copied(far, 3, 2), copied(far + 2, 5, 2)].concat();
    let out = log.append(&mut io, &append, Origin::Replication).unwrap();
    assert_eq!(
        (out.first_offset, out.last_offset),
        (Offset(0), Offset(far + 3))
    );
    log.commit(&mut io).unwrap();
    assert_eq!(log.segment_base_offsets(), [Offset(0), Offset(far)]);
    assert_eq!(log.log_end(), Offset(far + 4));
    log.check_invariants();
    // Reads cross the gap: an offset in it reads the next batch, in the next segment.
    let r = log
        .read(&mut io, Offset(3), 1, Isolation::ReadUncommitted)
        .unwrap();
    let first = format::inspect(&r.records, 0).unwrap();
    assert_eq!(first.header().base_offset, Offset(far));
    assert_eq!(batch_bases(&mut io, &mut log), [0, far, far + 2]);
    // Sealed, the far segment's indexes hold only relative offsets that fit.
    log.close(&mut io).unwrap();
    assert!(indexes_fit(&io, dir, Offset(far), Offset(far + 4)) > 0);
    assert!(io.file_bytes(&dir.join(SEGMENT_GAPS)).is_some());
    verifies(&io, dir);
    // A clean open and a recovery after a power cut both find the same log.
    for unclean in [false, true] {
        let mut disk = io.crash(7);
        let mut log = restart(&mut disk, dir);
        if unclean {
            drop(log);
            disk = disk.crash(8);
            log = restart(&mut disk, dir);
        }
        assert_eq!(log.segment_base_offsets(), [Offset(0), Offset(far)]);
        assert_eq!(log.log_end(), Offset(far + 4));
        assert_eq!(batch_bases(&mut disk, &mut log), [0, far, far + 2]);
        // Appends continue at the end.
        log.append(&mut disk, &copied(far + 4, 7, 1), Origin::Replication)
            .unwrap();
        log.commit(&mut disk).unwrap();
        assert_eq!(log.log_end(), Offset(far + 5));
    }
}

#[test]
fn a_far_batch_into_an_empty_active_segment_gets_a_segment_of_its_own() {
    // The active segment is empty (just rolled) and its base is far below the batch.
    let dir = Path::new("/sim/overflow-1");
    let far = i64::from(i32::MAX) + 10;
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    log.append(&mut io, &copied(0, 0, 2), Origin::Replication)
        .unwrap();
    log.roll(&mut io).unwrap();
    // A follower's append after the leader compacted everything in between: the first batch
    // continues the log, the second is far.
    let append = [copied(2, 2, 1), copied(far, 3, 1)].concat();
    log.append(&mut io, &append, Origin::Replication).unwrap();
    log.commit(&mut io).unwrap();
    assert_eq!(
        log.segment_base_offsets(),
        [Offset(0), Offset(2), Offset(far)]
    );
    log.close(&mut io).unwrap();
    for base in [Offset(2), Offset(far)] {
        indexes_fit(&io, dir, base, Offset(far + 1));
    }
    verifies(&io, dir);
    let mut disk = io.crash(3);
    let mut log = restart(&mut disk, dir);
    assert_eq!(batch_bases(&mut disk, &mut log), [0, 2, far]);
}

/// Batches at 0..3, 10..13 and 20..23 (gaps left by compaction on the leader).
fn gapped_log(dir: &Path, seed: u64) -> SimIo {
    let mut io = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    let append = [copied(0, 0, 3), copied(10, 3, 3), copied(20, 6, 3)].concat();
    log.append(&mut io, &append, Origin::Replication).unwrap();
    log.commit(&mut io).unwrap();
    log.close(&mut io).unwrap();
    io.crash(seed)
}

#[test]
fn truncating_into_an_offset_gap_ends_the_log_at_that_offset_durably() {
    let dir = Path::new("/sim/gap-0");
    let mut io = gapped_log(dir, 11);
    let mut log = restart(&mut io, dir);
    assert_eq!(log.truncate_to(&mut io, Offset(15)).unwrap(), Offset(15));
    assert_eq!(log.log_end(), Offset(15));
    assert_eq!(log.durable_end(), Offset(15));
    assert_eq!(log.high_watermark(), Offset(15));
    assert_eq!(batch_bases(&mut io, &mut log), [0, 10]);
    log.check_invariants();
    // A restart, clean or not, keeps the end: it is a segment of its own.
    let image = io.crash(12);
    for clean in [false, true] {
        let mut disk = image.crash(13);
        let mut log = restart(&mut disk, dir);
        if clean {
            log.close(&mut disk).unwrap();
            verifies(&disk, dir);
            log = restart(&mut disk, dir);
        }
        assert_eq!(log.log_end(), Offset(15), "clean {clean}");
        assert_eq!(batch_bases(&mut disk, &mut log), [0, 10]);
        // The follower's next append starts at the offset it truncated to.
        log.append(&mut disk, &copied(15, 6, 2), Origin::Replication)
            .unwrap_or_else(|e| panic!("clean {clean}: {e}"));
        log.commit(&mut disk).unwrap();
        assert_eq!(batch_bases(&mut disk, &mut log), [0, 10, 15]);
        let mut after = disk.crash(14);
        let mut log = restart(&mut after, dir);
        assert_eq!(log.log_end(), Offset(17));
        assert_eq!(batch_bases(&mut after, &mut log), [0, 10, 15]);
        log.close(&mut after).unwrap();
        verifies(&after, dir);
    }
    // Truncating back below the gap's segment drops it and its record.
    let mut disk = image.crash(15);
    let mut log = restart(&mut disk, dir);
    assert_eq!(log.truncate_to(&mut disk, Offset(2)).unwrap(), Offset(2));
    assert_eq!(log.segment_base_offsets(), [Offset(0), Offset(2)]);
    assert_eq!(batch_bases(&mut disk, &mut log), [] as [i64; 0]);
    assert_eq!(log.truncate_to(&mut disk, Offset(0)).unwrap(), Offset(0));
    assert_eq!(log.segment_base_offsets(), [Offset(0)]);
    log.close(&mut disk).unwrap();
    assert!(disk.file_bytes(&dir.join(SEGMENT_GAPS)).is_none());
    verifies(&disk, dir);
}

#[test]
fn a_power_cut_at_every_operation_of_a_truncation_into_a_gap_recovers_a_healthy_log() {
    let seed = common::seed("truncation_into_a_gap_crash_sweep");
    let dir = Path::new("/sim/gap-1");
    let base = gapped_log(dir, seed);
    let ops = {
        let mut io = base.crash(seed);
        let mut log = restart(&mut io, dir);
        let start = io.executed_ops();
        log.truncate_to(&mut io, Offset(15)).unwrap();
        io.executed_ops() - start
    };
    let (mut before, mut after, mut cut_only) = (0, 0, 0);
    for cut in 0..=ops {
        for model in [CrashModel::DropUnsynced, CrashModel::Torn] {
            let case = seed ^ cut.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let what = format!("seed {seed}, cut {cut} of {ops}, {model:?}");
            let mut disk = base.crash(case);
            let mut log = restart(&mut disk, dir);
            disk.set_power_cut_in(Some(cut));
            drop(log.truncate_to(&mut disk, Offset(15)));
            drop(log);
            let mut io = disk.crash_with(case, model);
            let mut log = restart(&mut io, dir);
            log.check_invariants();
            let bases = batch_bases(&mut io, &mut log);
            match (log.log_end().0, bases.as_slice()) {
                (23, [0, 10, 20]) => before += 1,
                (15, [0, 10]) => after += 1,
                // The batches went; the power cut came before the segment that moves the end.
                (13, [0, 10]) => cut_only += 1,
                other => panic!("{what}: {other:?}"),
            }
            // Whatever it found, the log takes the follower's next batch at its end.
            let end = log.log_end();
            log.append(&mut io, &copied(end.0, 9, 1), Origin::Replication)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            log.commit(&mut io).unwrap();
            let mut again = io.crash(case ^ 1);
            let log = restart(&mut again, dir);
            assert_eq!(log.log_end(), Offset(end.0 + 1), "{what}");
        }
    }
    assert!(
        before > 0 && after > 0,
        "both ends seen: {before} before, {after} after, {cut_only} cut only"
    );
}
