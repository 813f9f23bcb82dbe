//! A partition log across rolls and reopens: the time index and relative offsets roll
//! segments; a cleanly closed log reopens with everything a reader or producer observes
//! intact; rolling an empty segment is a no-op; recovery starts from the checkpointed high
//! watermark. (Appends and reads: `partition_log.rs`; removing records:
//! `partition_log_truncation.rs`.)

mod common;

use common::partition_log::{client_batch, fill, psm_summary, PsmSummary, CONFIG};
use mirrorlog::format::{
    self, BatchBuilder, BatchIter, BatchOptions, MarkerSpec, Offset, ProducerFields, RecordSpec,
};
use mirrorlog::internals::io::{Io, SimConfig, SimIo, UringIo};
use mirrorlog::internals::log::{
    EpochCache, Isolation, LogConfig, LogError, MirrorStart, PartitionLog,
};
use mirrorlog::internals::producer_state::Origin;
use mirrorlog::internals::segment::SegmentConfig;
use std::path::Path;

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
