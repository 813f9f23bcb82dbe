//! Log alignment and gaps (design.md §Mirroring): a partition starts mirroring *at* an offset past
//! its log end (Kafka's `truncateFullyAndStartAt`) — every segment removed, log start and log
//! end there, no producer state, snapshots or epochs left — and a power cut at every I/O
//! operation of it, under both crash models, restarts to the state before or the state after;
//! a mirrored append may start past the log end (a gap on the source), reads into the gap
//! return the next batch, and the log reopens (clean and unclean) with the gap. Replay with
//! `MIRRORLOG_SEED`.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::format::{BatchIter, Offset};
use mirrorlog::internals::io::{CrashModel, Io, SimConfig, SimIo};
use mirrorlog::internals::log::{
    Isolation, LogConfig, LogError, MirrorStart, Mode, PartitionLog, START_AT_INTENT,
};
use std::path::Path;

const DIR: &str = "/sim/align-0";
const CONFIG: LogConfig = common::log_config(16 << 10, 1024, 16 << 10);
const AT: Offset = Offset(10_000);

fn restart(io: &mut SimIo) -> PartitionLog {
    common::open_or_recover(io, Path::new(DIR), CONFIG).unwrap_or_else(|e| panic!("restart: {e}"))
}

/// What must be "before" or "after": log start, log end, segment bases, producers, epochs,
/// mode, and every byte.
type Observed = (
    Offset,
    Offset,
    Vec<Offset>,
    Vec<i64>,
    Vec<(i32, Offset)>,
    Mode,
    Vec<u8>,
);

fn observe(io: &mut SimIo, log: &mut PartitionLog) -> Observed {
    let mut producers: Vec<i64> = log
        .producer_state()
        .producers()
        .map(|e| e.producer_id)
        .collect();
    producers.sort_unstable();
    (
        log.log_start(),
        log.log_end(),
        log.segment_base_offsets(),
        producers,
        log.epoch_cache().entries().to_vec(),
        log.mode().clone(),
        common::read_all(io, log),
    )
}

/// A new partition on a simulated disk, mirroring.
fn mirroring_log(seed: u64) -> (SimIo, PartitionLog) {
    let mut io = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let mut log = PartitionLog::create(&mut io, Path::new(DIR), CONFIG).unwrap();
    log.start_mirroring(&mut io, "east/t-0", MirrorStart::LastStableOffset)
        .unwrap();
    (io, log)
}

/// A cleanly closed mirroring partition holding several segments of mirrored batches from
/// three producers (snapshots at the rolls, epochs 1 and 4).
fn prepare(seed: u64) -> SimIo {
    let (mut io, mut log) = mirroring_log(seed);
    let mut at = 0i64;
    for i in 0..24 {
        let producer = 5 + i % 3;
        let b = common::stored(
            common::producer_batch(producer, (i / 3) as i32 * 2, 2, false, 900),
            Offset(at),
            if i < 12 { 1 } else { 4 },
        );
        log.append(&mut io, &b, Origin::Mirror).unwrap();
        at += 2;
    }
    log.commit(&mut io).unwrap();
    assert!(log.segment_base_offsets().len() > 2, "several segments");
    log.close(&mut io).unwrap();
    io.crash(seed)
}

fn mirrored_at(base: i64, producer: i64) -> Vec<u8> {
    common::stored(
        common::producer_batch(producer, 0, 3, false, 100),
        Offset(base),
        9,
    )
}

#[test]
fn starting_at_an_offset_past_the_end_removes_everything_and_starts_there() {
    let seed = common::seed("starting_at_an_offset_past_the_end");
    let mut io = prepare(seed);
    let mut log = restart(&mut io);
    assert_eq!(
        log.realign_mirror(&mut io, AT).unwrap(),
        AT,
        "realigned while mirroring"
    );
    let after = observe(&mut io, &mut log);
    assert_eq!((after.0, after.1), (AT, AT), "log start = log end = {AT}");
    assert_eq!(after.2, vec![AT], "one empty segment named by the offset");
    assert!(
        after.3.is_empty() && after.4.is_empty(),
        "no producers, no epochs"
    );
    assert!(matches!(after.5, Mode::Mirroring { .. }));
    assert!(log.producer_state().is_empty());
    // Reads below the new start are out of range; the first mirrored batch lands at it.
    assert!(matches!(
        log.read(&mut io, Offset(0), 1 << 20, Isolation::ReadUncommitted),
        Err(LogError::OffsetOutOfRange { log_start, .. }) if log_start == AT
    ));
    log.append(&mut io, &mirrored_at(AT.0, 40), Origin::Mirror)
        .unwrap();
    log.commit(&mut io).unwrap();
    let bytes = common::read_all(&mut io, &mut log);
    assert_eq!(bytes, mirrored_at(AT.0, 40));
    // Nothing of the old data is left on disk: no old segment, no snapshot.
    let names = io.list_dir(Path::new(DIR)).unwrap();
    assert!(
        !names.iter().any(|n| n.ends_with(".snapshot")
            || (n.ends_with(".log") && !n.starts_with("00000000000000010000"))),
        "{names:?}"
    );
    // Clean and unclean reopen keep it.
    log.close(&mut io).unwrap();
    let mut clean = io.crash(seed ^ 1);
    let mut reopened = restart(&mut clean);
    assert_eq!(common::read_all(&mut clean, &mut reopened), bytes);
    assert_eq!(reopened.log_start(), AT);
    drop(reopened);
    let mut unclean = clean.crash(seed ^ 2);
    let mut recovered = restart(&mut unclean);
    assert_eq!(recovered.log_start(), AT);
    assert_eq!(common::read_all(&mut unclean, &mut recovered), bytes);

    // From Local, `start_mirroring(StartAt)` does the same, and refuses an offset below the
    // log start.
    let mut io = prepare(seed);
    let mut log = restart(&mut io);
    let out = log.stop_mirroring(&mut io, 9, Default::default(), common::RECORDS_MS);
    out.unwrap();
    let end = log
        .start_mirroring(&mut io, "west/t-0", MirrorStart::StartAt(AT))
        .unwrap();
    assert_eq!((end, log.log_start()), (AT, AT));
    assert!(log.producer_state().is_empty());
    assert!(matches!(
        log.truncate_fully_and_start_at(&mut io, Offset(5)),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    // A realign below the end is a truncation, not an alignment: refused.
    log.append(&mut io, &mirrored_at(AT.0, 41), Origin::Mirror)
        .unwrap();
    assert!(matches!(
        log.realign_mirror(&mut io, AT),
        Err(LogError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn a_power_cut_at_every_operation_of_an_alignment_leaves_before_or_after() {
    let seed = common::seed("a_power_cut_at_every_operation_of_an_alignment");
    let base = prepare(seed);
    let (before, after, ops) = {
        let mut io = base.crash(seed);
        let mut log = restart(&mut io);
        let before = observe(&mut io, &mut log);
        let start = io.executed_ops();
        log.realign_mirror(&mut io, AT).unwrap();
        let ops = io.executed_ops() - start;
        (before, observe(&mut io, &mut log), ops)
    };
    let (mut befores, mut afters) = (0, 0);
    for cut in 0..=ops {
        for model in [CrashModel::DropUnsynced, CrashModel::Torn] {
            let case = seed ^ cut.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut disk = base.crash(case);
            let mut log = restart(&mut disk);
            disk.set_power_cut_in(Some(cut));
            drop(log.realign_mirror(&mut disk, AT));
            drop(log);
            let mut io = disk.crash_with(case, model);
            let mut log = restart(&mut io);
            let got = observe(&mut io, &mut log);
            let what = format!("seed {seed}, cut {cut} of {ops}, {model:?}");
            assert!(
                io.file_bytes(&Path::new(DIR).join(START_AT_INTENT))
                    .is_none(),
                "{what}: the open finished or never saw the intent"
            );
            if got == after {
                afters += 1;
            } else {
                assert_eq!(
                    got, before,
                    "{what}: neither before nor after the alignment"
                );
                befores += 1;
            }
            // Either way the partition takes the source's batch at the offset after a retry.
            if got != after {
                log.realign_mirror(&mut io, AT)
                    .unwrap_or_else(|e| panic!("{what}: retry: {e}"));
            }
            assert_eq!(
                observe(&mut io, &mut log),
                after,
                "{what}: as the alignment"
            );
            log.append(&mut io, &mirrored_at(AT.0, 40), Origin::Mirror)
                .unwrap_or_else(|e| panic!("{what}: append: {e}"));
        }
    }
    assert!(
        befores > 0 && afters > 0,
        "both outcomes seen: {befores} before, {afters} after"
    );
}

#[test]
fn a_mirrored_append_past_the_end_leaves_a_gap_that_reads_skip_and_reopens_keep() {
    let seed = common::seed("a_mirrored_append_past_the_end");
    let (mut io, mut log) = mirroring_log(seed);
    // Batches as compaction leaves them: offsets 0-2, 10-12, 13-15 (one append), 40-42,
    // then one past the 32-bit relative offsets of the segment (its own segment).
    let far = 40 + i64::from(i32::MAX) + 7;
    let batches = [
        vec![mirrored_at(0, 1)],
        vec![mirrored_at(10, 2), mirrored_at(13, 3)],
        vec![mirrored_at(40, 4)],
        vec![mirrored_at(far, 5)],
    ];
    for append in &batches {
        let out = log
            .append(&mut io, &append.concat(), Origin::Mirror)
            .unwrap();
        assert!(!out.duplicate);
    }
    log.commit(&mut io).unwrap();
    assert_eq!(log.log_end(), Offset(far + 3));
    assert_eq!(log.producer_state().len(), 5, "every producer replayed");
    let all: Vec<u8> = batches.iter().flatten().flatten().copied().collect();
    let check = |io: &mut SimIo, log: &mut PartitionLog| {
        assert_eq!(common::read_all(io, log), all, "every batch as fetched");
        // A read into a gap returns the next batch.
        for (offset, first) in [(3, 10), (7, 10), (16, 40), (43, far), (far - 1, far)] {
            let r = log
                .read(io, Offset(offset), 1, Isolation::ReadUncommitted)
                .unwrap();
            let got = BatchIter::new(&r.records, 0)
                .next()
                .map(|b| b.header().base_offset);
            assert_eq!(got, Some(Offset(first)), "read at {offset}");
        }
        assert_eq!(log.log_end(), Offset(far + 3));
    };
    check(&mut io, &mut log);
    log.close(&mut io).unwrap();
    let mut clean = io.crash(seed ^ 1);
    let mut reopened = restart(&mut clean);
    check(&mut clean, &mut reopened);
    assert_eq!(reopened.producer_state().len(), 5);
    drop(reopened);
    let mut unclean = clean.crash(seed ^ 2);
    common::forget_recovery_point(&mut unclean, Path::new(DIR));
    let mut recovered = restart(&mut unclean);
    check(&mut unclean, &mut recovered);
    assert_eq!(
        recovered.producer_state().len(),
        5,
        "recovery replays across the gaps"
    );
}
