//! Sealed segments and their indexes are what Kafka would hold for the same batches. Here: the
//! `.timeindex` of a sealed segment ends with the segment's largest timestamp and the offset of
//! the batch holding it, which Kafka's `LogSegment` appends at roll (`onBecomeInactiveSegment`)
//! and close (`timeIndex.maybeAppend(maxTimestampSoFar, shallowOffsetOfMaxTimestampSoFar,
//! true)`), so a Kafka broker reading our files finds the right largest timestamp — after a
//! roll, a clean close and a recovery alike. The scenario is Kafka's `LogSegmentTest`
//! out-of-order timestamps case, with an index interval so large that no periodic entry is made.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::format::{BatchBuilder, BatchOptions, Offset, RecordSpec};
use mirrorlog::internals::io::{SimConfig, SimIo};
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
