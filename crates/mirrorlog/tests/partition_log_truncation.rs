//! Removing a partition's records, on the simulated disk and io_uring: DeleteRecords and
//! retention drop whole old segments; a truncation in the active segment, in a sealed one or
//! at a segment start leaves what a log that never held the cut batches would hold, producer
//! state included, and is durable before it returns. (Appends and reads: `partition_log.rs`;
//! rolls and reopens: `partition_log_reopen.rs`.)

mod common;

use common::partition_log::{client_batch, fill, psm_summary, CONFIG};
use mirrorlog::format::{self, BatchIter, Offset};
use mirrorlog::internals::io::{Io, SimConfig, SimIo, UringIo};
use mirrorlog::internals::log::{Isolation, LogConfig, LogError, PartitionLog};
use mirrorlog::internals::producer_state::Origin;
use mirrorlog::internals::segment::{self};
use std::path::Path;

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
