//! Sealed segments and their indexes are what Kafka would hold for the same batches. Here: the
//! `.timeindex` of a sealed segment ends with the segment's largest timestamp and the offset of
//! the batch holding it, which Kafka's `LogSegment` appends at roll (`onBecomeInactiveSegment`)
//! and close (`timeIndex.maybeAppend(maxTimestampSoFar, shallowOffsetOfMaxTimestampSoFar,
//! true)`), so a Kafka broker reading our files finds the right largest timestamp — after a
//! roll, a clean close and a recovery alike. The scenario is Kafka's `LogSegmentTest`
//! out-of-order timestamps case, with an index interval so large that no periodic entry is made.
//! And a corrupt or truncated `.snapshot` is deleted at open, the next older one used (design.md §Producer state,
//! Kafka's `loadFromSnapshot`), the producer state the same as before; index files without
//! their `.log` and stray snapshots are deleted at load, as Kafka's `LogLoader` and
//! `removeStraySnapshots` do; an empty control batch creates its producer's entry (in
//! `producer_state_scenarios.rs`).

mod common;

use mirrorlog::api::Origin;
use mirrorlog::format::{BatchBuilder, BatchOptions, Offset, RecordSpec};
use mirrorlog::internals::io::{Io, SimConfig, SimIo};
use mirrorlog::internals::log::{LogConfig, PartitionLog};
use mirrorlog::internals::recovery;
use mirrorlog::internals::segment;
use std::path::Path;

/// No periodic index entry (the interval is larger than the segment).
const CONFIG: LogConfig = common::log_config(64 << 10, 1 << 20, 16 << 10);

/// A batch of `records` records with these timestamps.
fn batch(timestamps: &[i64]) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions::default());
    for &timestamp in timestamps {
        b.push(RecordSpec {
            timestamp,
            key: None,
            value: Some(b"v"),
            headers: &[],
        });
    }
    b.build()
}

/// The `.timeindex` entries (timestamp, absolute offset) of the segment at `base`.
fn time_index(io: &SimIo, dir: &Path, base: Offset) -> Vec<(i64, Offset)> {
    let bytes = io
        .file_bytes(&segment::time_index_path(dir, base))
        .unwrap_or_else(|| panic!("no .timeindex for {base}"));
    assert_eq!(bytes.len() % 12, 0);
    bytes
        .chunks(12)
        .map(|e| {
            let ts = i64::from_be_bytes(e[..8].try_into().unwrap());
            let rel = i32::from_be_bytes(e[8..].try_into().unwrap());
            (ts, Offset(base.0 + i64::from(rel)))
        })
        .collect()
}

/// Offsets 0-2 (ts 100, 300, 200), 3-4 (ts 900, 400), 5 (ts 500): the largest timestamp is in
/// the second batch, whose last offset is 4.
fn fill(io: &mut SimIo, log: &mut PartitionLog) {
    for b in [batch(&[100, 300, 200]), batch(&[900, 400]), batch(&[500])] {
        log.append(io, &b, Origin::Client).unwrap();
    }
    log.commit(io).unwrap();
}

#[test]
fn a_sealed_time_index_ends_with_the_largest_timestamp_after_roll_close_and_recovery() {
    let dir = Path::new("/sim/timeindex-0");
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    fill(&mut io, &mut log);
    log.roll(&mut io).unwrap();
    assert_eq!(
        time_index(&io, dir, Offset(0)),
        [(900, Offset(4))],
        "at roll"
    );
    fill(&mut io, &mut log);
    log.close(&mut io).unwrap();
    assert_eq!(
        time_index(&io, dir, Offset(6)),
        [(900, Offset(10))],
        "at close"
    );
    // After an unclean stop recovery rewrites every sealed segment's indexes the same way.
    let mut log = PartitionLog::open(&mut io, dir, CONFIG).unwrap();
    fill(&mut io, &mut log);
    log.roll(&mut io).unwrap();
    drop(log);
    let mut after = io.crash(7);
    // Without its recovery point recovery scans every segment (below the point it would trust
    // them unread, and their indexes load on demand).
    common::forget_recovery_point(&mut after, dir);
    for base in [Offset(0), Offset(6)] {
        mirrorlog::internals::io::write_file(&mut after, &segment::time_index_path(dir, base), b"")
            .unwrap();
    }
    let log = recovery::recover(&mut after, dir, CONFIG).unwrap();
    // The clean open reopened segment 6 as the active one: it holds 6-17 now.
    assert_eq!(
        log.segment_base_offsets(),
        [Offset(0), Offset(6), Offset(18)]
    );
    assert_eq!(time_index(&after, dir, Offset(0)), [(900, Offset(4))]);
    assert_eq!(
        time_index(&after, dir, Offset(6)),
        [(900, Offset(10))],
        "the first batch with the largest timestamp (Kafka keeps the first on a tie)"
    );
}

/// `n` rounds of one batch from each of producers 1 and 2, each round rolled to a new segment
/// (a snapshot at every base).
fn rounds(io: &mut SimIo, log: &mut PartitionLog, n: i32) {
    for round in 0..n {
        for (producer, seq) in [(1, round * 2), (2, round * 2)] {
            let b = common::producer_batch(producer, seq, 2, false, 50);
            log.append(io, &b, Origin::Client).unwrap();
        }
        log.roll(io).unwrap();
    }
}

#[test]
fn a_corrupt_snapshot_is_deleted_and_the_next_older_one_used() {
    for damage in ["garbage", "truncated"] {
        let dir = Path::new("/sim/snapshot-0");
        let mut io = SimIo::new(SimConfig::default());
        let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
        rounds(&mut io, &mut log, 3);
        let producers = |log: &PartitionLog| common::snapshot_kept(log.producer_state());
        let before = producers(&log);
        let end = log.log_end();
        log.close(&mut io).unwrap();
        let newest = dir.join(mirrorlog::internals::producer_state::snapshot_file_name(
            end,
        ));
        let bytes = io
            .file_bytes(&newest)
            .expect("the close's snapshot")
            .to_vec();
        let mut after = io.crash(1);
        let broken = match damage {
            "garbage" => {
                let mut b = bytes.clone();
                let mid = b.len() / 2;
                b[mid] ^= 0xff;
                b
            }
            _ => bytes[..bytes.len() / 2].to_vec(),
        };
        mirrorlog::internals::io::write_file(&mut after, &newest, &broken).unwrap();
        let log = PartitionLog::open(&mut after, dir, CONFIG).unwrap();
        assert_eq!(
            producers(&log),
            before,
            "{damage}: rebuilt from the older snapshot"
        );
        assert!(
            after.file_bytes(&newest).is_none(),
            "{damage}: the corrupt snapshot is deleted"
        );
    }
}

#[test]
fn orphan_index_files_and_stray_snapshots_are_deleted_at_load() {
    for clean in [true, false] {
        let dir = Path::new("/sim/tidy-0");
        let mut io = SimIo::new(SimConfig::default());
        let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
        fill(&mut io, &mut log);
        log.roll(&mut io).unwrap();
        fill(&mut io, &mut log);
        log.close(&mut io).unwrap();
        let mut after = io.crash(3);
        let name = |o: i64, ext: &str| dir.join(format!("{o:020}.{ext}"));
        let planted = [
            name(999, "index"),
            name(999, "timeindex"),
            name(999, "txnindex"),
            // Between the bases 0 and 6: a stray (Kafka's `removeStraySnapshots`).
            name(3, "snapshot"),
        ];
        for p in &planted {
            mirrorlog::internals::io::write_file(&mut after, p, b"x").unwrap();
        }
        if !clean {
            let mut others = Vec::new();
            mirrorlog::internals::io::run(
                &mut after,
                mirrorlog::internals::io::Op::Unlink {
                    path: dir.join("clean-shutdown"),
                },
                &mut others,
            )
            .unwrap()
            .result
            .unwrap();
        }
        let log = if clean {
            PartitionLog::open(&mut after, dir, CONFIG).unwrap()
        } else {
            recovery::recover(&mut after, dir, CONFIG).unwrap()
        };
        for p in &planted {
            assert!(
                after.file_bytes(p).is_none(),
                "clean {clean}: {} left",
                p.display()
            );
        }
        // The segments' own files and the snapshot at a base stay.
        assert!(
            after.file_bytes(&name(6, "snapshot")).is_some(),
            "clean {clean}"
        );
        assert!(
            after.file_bytes(&name(0, "index")).is_some(),
            "clean {clean}"
        );
        assert_eq!(log.log_end(), Offset(12));
    }
}

#[test]
fn a_directory_without_a_log_loses_its_leftover_index_files_at_a_clean_open() {
    // Kafka's `LogLoader` deletes index files whose `.log` is gone before it loads, also when
    // no segment is left; `PartitionLog::open` used to create the new log first and keep them.
    let dir = Path::new("/sim/tidy-empty");
    let mut io = SimIo::new(SimConfig::default());
    io.create_dir(dir).unwrap();
    let name = |o: i64, ext: &str| dir.join(format!("{o:020}.{ext}"));
    let planted = [
        name(0, "index"),
        name(0, "timeindex"),
        name(40, "index"),
        name(40, "timeindex"),
        name(40, "txnindex"),
    ];
    for p in &planted {
        mirrorlog::internals::io::write_file(&mut io, p, b"leftover").unwrap();
    }
    let mut log = PartitionLog::open(&mut io, dir, CONFIG).unwrap();
    for p in &planted[2..] {
        assert!(io.file_bytes(p).is_none(), "{} left", p.display());
    }
    // The new log's own first segment files, not the leftovers, are at offset 0.
    assert_ne!(io.file_bytes(&name(0, "index")), Some(&b"leftover"[..]));
    assert_eq!(log.log_end(), Offset(0));
    fill(&mut io, &mut log);
    assert_eq!(log.log_end(), Offset(6));
}

#[test]
fn recovery_rebuilds_missing_snapshots_at_segment_bases() {
    // design.md §Recovery: missing derived files are rebuilt from the log, snapshots included.
    let dir = Path::new("/sim/snapshot-1");
    let mut io = SimIo::new(SimConfig::default());
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    rounds(&mut io, &mut log, 4);
    let bases = log.segment_base_offsets();
    assert_eq!(bases.len(), 5);
    log.commit(&mut io).unwrap();
    drop(log);
    let mut after = io.crash(5);
    let name = |b: Offset| dir.join(mirrorlog::internals::producer_state::snapshot_file_name(b));
    let originals: Vec<Vec<u8>> = bases[1..]
        .iter()
        .map(|&b| {
            after
                .file_bytes(&name(b))
                .expect("a roll's snapshot")
                .to_vec()
        })
        .collect();
    for &b in &bases[1..] {
        let mut others = Vec::new();
        mirrorlog::internals::io::run(
            &mut after,
            mirrorlog::internals::io::Op::Unlink { path: name(b) },
            &mut others,
        )
        .unwrap()
        .result
        .unwrap();
    }
    recovery::recover(&mut after, dir, CONFIG).unwrap();
    for (&b, original) in bases[1..].iter().zip(&originals) {
        let rebuilt = after
            .file_bytes(&name(b))
            .unwrap_or_else(|| panic!("no snapshot rebuilt at {b}"));
        assert_eq!(
            mirrorlog::internals::producer_state::decode_snapshot(rebuilt).unwrap(),
            mirrorlog::internals::producer_state::decode_snapshot(original).unwrap(),
            "the snapshot at {b}"
        );
    }
}
