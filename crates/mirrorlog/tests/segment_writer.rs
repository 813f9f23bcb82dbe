//! The active segment's write path on both backends: appends accumulate, commit rounds make
//! them durable, durable bytes read back exactly, and a sealed segment is exactly the bytes
//! Kafka would hold (kafka-python reads it). On the simulated disk: no write ever touches a
//! byte's durable copy once acknowledged, a crash at any round boundary leaves an image whose
//! newest commit record describes exactly the acknowledged data, and a failed fdatasync poisons
//! the segment. Batch sizes come from a seed (`MIRRORLOG_SEED` replays).

mod common;

use mirrorlog::format::{
    self, BatchBuilder, BatchIter, BatchOptions, Offset, ProducerFields, RecordSpec, ScanEnd,
};
use mirrorlog::internals::io::{Io, SimConfig, SimIo, UringIo};
use mirrorlog::internals::segment::commit_record::page_floor;
use mirrorlog::internals::segment::{
    self, CommitRecord, SegmentConfig, SegmentError, SegmentWriter, COMMIT_SLOT_SIZE_BYTES,
};
use std::path::Path;

const CONFIG: SegmentConfig = SegmentConfig {
    segment_bytes: 4 << 20,
    index_interval_bytes: 4096,
    commit_buffer_bytes: 256 << 10,
    preallocate_step_bytes: mirrorlog::internals::segment::PREALLOCATE_STEP_BYTES_DEFAULT,
};

use common::Rng;

/// A batch of `records` 100-byte records at `offset`.
fn batch(offset: i64, records: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        producer: ProducerFields {
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: offset as i32,
        },
        ..BatchOptions::default()
    });
    let value = [0x42u8; 100];
    for i in 0..records {
        b.push(RecordSpec {
            timestamp: 1_764_403_200_000 + offset + i,
            key: None,
            value: Some(&value),
            headers: &[],
        });
    }
    let mut bytes = b.build();
    format::stamp_base_offset(&mut bytes, Offset(offset)).unwrap();
    bytes
}

/// Appends random batches with a commit every few; returns every byte appended. After each
/// commit, the durable state equals everything appended and reads back exactly.
fn append_and_commit(
    io: &mut dyn Io,
    w: &mut SegmentWriter,
    rng: &mut Rng,
    batches: usize,
) -> Vec<u8> {
    let mut all = Vec::new();
    let mut offset = w.next_offset().0;
    for i in 0..batches {
        let records = 1 + rng.below(40) as i64;
        let b = batch(offset, records);
        let position = w.append(&b, Offset(offset + records - 1), 0).unwrap();
        assert_eq!(position, all.len() as u64);
        all.extend_from_slice(&b);
        offset += records;
        if rng.below(4) == 0 || i + 1 == batches {
            let durable = w.commit(io).unwrap();
            assert_eq!(durable.data_len, all.len() as u64);
            assert_eq!(durable.next_offset, Offset(offset));
            let start = rng.below(all.len() as u64);
            let len = rng.below(20_000) as usize;
            let got = w.read_durable(io, start, len).unwrap();
            let end = (start as usize + len).min(all.len());
            assert_eq!(got, &all[start as usize..end], "read {start}+{len}");
        }
    }
    assert_eq!(w.read_durable(io, 0, all.len()).unwrap(), all);
    all
}

fn check_whole_batches(bytes: &[u8], first: Offset) -> usize {
    let mut scan = BatchIter::new(bytes, 0);
    let mut expected = first;
    let mut n = 0;
    for b in scan.by_ref() {
        assert_eq!(b.header().base_offset, expected);
        expected = Offset(b.header().last_offset().0 + 1);
        n += 1;
    }
    assert_eq!(scan.end(), Some(&ScanEnd::Clean));
    n
}

#[test]
fn append_commit_read_and_seal_on_io_uring() {
    let seed = common::seed("append_commit_read_and_seal_on_io_uring");
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let mut io = UringIo::new(64).unwrap();
    let mut w = SegmentWriter::create(&mut io, dir.path(), Offset(1000), CONFIG, 0).unwrap();
    let preallocated = std::fs::metadata(segment::log_path(dir.path(), Offset(1000)))
        .unwrap()
        .len();
    assert_eq!(
        preallocated,
        (4 << 20) + 2 * COMMIT_SLOT_SIZE_BYTES as u64,
        "size kept ahead of the data"
    );
    let all = append_and_commit(&mut io, &mut w, &mut Rng(seed | 1), 300);
    let sealed = w.seal(&mut io).unwrap();
    sealed.write_indexes(&mut io, dir.path()).unwrap();
    assert_eq!(sealed.data_len, all.len() as u64);
    let on_disk = std::fs::read(segment::log_path(dir.path(), Offset(1000))).unwrap();
    assert_eq!(
        on_disk, all,
        "the sealed .log is exactly the batches, slots trimmed"
    );
    assert_eq!(check_whole_batches(&on_disk, Offset(1000)), 300);
    let index = std::fs::read(segment::offset_index_path(dir.path(), Offset(1000))).unwrap();
    let entries = segment::decode_offset_index(&index, Offset(1000)).unwrap();
    assert_eq!(entries, sealed.indexes.offset_entries());
    assert!(!entries.is_empty());
    for e in &entries {
        // Every entry points at a batch whose last offset it names.
        let b = format::inspect(&on_disk[e.position as usize..], 0).unwrap();
        assert_eq!(b.header().last_offset(), e.offset);
    }
    let time_index = std::fs::read(segment::time_index_path(dir.path(), Offset(1000))).unwrap();
    assert_eq!(time_index.len(), sealed.indexes.time_entries().len() * 12);
    kafka_python_reads(&segment::log_path(dir.path(), Offset(1000)), all.len(), 300);
}

/// kafka-python's MemoryRecords reads the sealed segment: every CRC valid, offsets contiguous.
fn kafka_python_reads(path: &Path, size: usize, batches: usize) {
    let parsed = common::parse_with_kafka_python(&common::venv_python(), path);
    assert_eq!(parsed["valid_bytes"], size);
    let theirs = parsed["batches"].as_array().unwrap();
    assert_eq!(theirs.len(), batches);
    let mut next = theirs[0]["base_offset"].as_i64().unwrap();
    for b in theirs {
        assert_eq!(b["crc_valid"], true);
        assert_eq!(b["base_offset"].as_i64().unwrap(), next);
        next += b["last_offset_delta"].as_i64().unwrap() + 1;
    }
}

#[test]
fn append_commit_read_and_seal_on_the_simulated_disk() {
    let seed = common::seed("append_commit_read_and_seal_on_the_simulated_disk");
    let mut io = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let dir = Path::new("/sim/t-0");
    let mut w = SegmentWriter::create(&mut io, dir, Offset(0), CONFIG, 0).unwrap();
    let all = append_and_commit(&mut io, &mut w, &mut Rng(seed | 1), 200);
    w.seal(&mut io).unwrap();
    assert_eq!(
        io.file_bytes(&segment::log_path(dir, Offset(0))).unwrap(),
        &all[..]
    );
}

/// Where the durable copy of every acknowledged byte lives: the synced full pages of the
/// `.log`, and the slot of the newest commit record.
fn durable_copies(w: &SegmentWriter) -> Vec<std::ops::Range<u64>> {
    let synced_pages = 0..page_floor(w.durable().data_len);
    let mut copies = Vec::from([synced_pages]);
    if w.sequence() > 0 {
        let slot = w.slot_position((w.sequence() % 2) as usize);
        copies.push(slot..slot + COMMIT_SLOT_SIZE_BYTES as u64);
    }
    copies
}

#[test]
fn no_write_touches_the_durable_copy_of_an_acknowledged_byte() {
    let seed = common::seed("no_write_touches_the_durable_copy_of_an_acknowledged_byte");
    let mut rng = Rng(seed | 1);
    let mut io = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let dir = Path::new("/sim/t-1");
    let log = segment::log_path(dir, Offset(0));
    let mut w = SegmentWriter::create(&mut io, dir, Offset(0), CONFIG, 0).unwrap();
    let mut offset = 0;
    // Writes before the first append (the creation record) protect nothing yet.
    let mut checked = io.writes().len();
    for round in 0..150 {
        for _ in 0..1 + rng.below(6) {
            let records = 1 + rng.below(60) as i64;
            w.append(&batch(offset, records), Offset(offset + records - 1), 0)
                .unwrap();
            offset += records;
        }
        let protected = durable_copies(&w);
        w.commit(&mut io).unwrap();
        for write in &io.writes()[checked..] {
            if write.path != log {
                continue;
            }
            for p in &protected {
                assert!(
                    write.range.end <= p.start || write.range.start >= p.end,
                    "round {round}: write {:?} touches durable copy {p:?}",
                    write.range
                );
            }
        }
        checked = io.writes().len();
    }
    let protected = durable_copies(&w);
    w.seal(&mut io).unwrap();
    for write in &io.writes()[checked..] {
        if write.path == log {
            for p in &protected {
                assert!(
                    write.range.end <= p.start || write.range.start >= p.end,
                    "seal write {:?}",
                    write.range
                );
            }
        }
    }
}

#[test]
fn a_crash_leaves_exactly_the_acknowledged_data() {
    let seed = common::seed("a_crash_leaves_exactly_the_acknowledged_data");
    let mut rng = Rng(seed | 1);
    for case in 0..40 {
        let mut io = SimIo::new(SimConfig {
            seed: seed ^ case,
            ..SimConfig::default()
        });
        let dir = Path::new("/sim/t-2");
        let log = segment::log_path(dir, Offset(0));
        let mut w = SegmentWriter::create(&mut io, dir, Offset(0), CONFIG, 0).unwrap();
        let mut all = Vec::new();
        let mut offset = 0;
        let mut acknowledged = 0;
        for _ in 0..1 + rng.below(30) {
            let records = 1 + rng.below(50) as i64;
            let b = batch(offset, records);
            w.append(&b, Offset(offset + records - 1), 0).unwrap();
            all.extend_from_slice(&b);
            offset += records;
            if rng.below(3) == 0 {
                acknowledged = w.commit(&mut io).unwrap().data_len as usize;
            }
        }
        // Crash with a round possibly in flight and partly executed.
        if rng.below(2) == 0 {
            w.start_commit(&mut io).unwrap();
            let mut some = Vec::new();
            io.complete(0, &mut some).unwrap();
        }
        let crashed = io.crash(case);
        let image = crashed.file_bytes(&log).unwrap();
        // Before the first fdatasync even the preallocated size may be lost: a missing slot
        // holds no record.
        let slot = |i: usize| {
            let at = w.slot_position(i) as usize;
            image
                .get(at..at + COMMIT_SLOT_SIZE_BYTES)
                .unwrap_or_default()
        };
        let newest = CommitRecord::newest([slot(0), slot(1)]);
        let durable_len = newest.as_ref().map_or(0, |r| r.data_len as usize);
        // Nothing acknowledged is lost; a round whose fdatasync completed but whose completion
        // was not reaped yet may also be visible — whole, never in part.
        assert!(
            durable_len >= acknowledged,
            "case {case}: {durable_len} < {acknowledged}"
        );
        assert!(durable_len <= all.len(), "case {case}");
        let mut data = image[..page_floor(durable_len as u64) as usize].to_vec();
        if let Some(r) = newest {
            data.extend_from_slice(&r.tail);
        }
        assert_eq!(
            data,
            &all[..durable_len],
            "case {case}: the durable image is the acknowledged prefix"
        );
    }
}

#[test]
fn full_segment_full_buffer_and_poisoning() {
    // Sync 0 makes the segment's directory entry durable, 1 is its creation record; the first
    // commit's fdatasync (2) fails.
    let mut io = SimIo::new(SimConfig {
        fail_syncs_from: Some(2),
        ..SimConfig::default()
    });
    let small = SegmentConfig {
        segment_bytes: 20_000,
        index_interval_bytes: 4096,
        commit_buffer_bytes: 8192,
        preallocate_step_bytes: mirrorlog::internals::segment::PREALLOCATE_STEP_BYTES_DEFAULT,
    };
    let mut w = SegmentWriter::create(&mut io, Path::new("/sim/t-3"), Offset(0), small, 0).unwrap();
    let b = batch(0, 40);
    w.append(&b, Offset(39), 0).unwrap();
    assert!(matches!(
        w.append(&batch(40, 40), Offset(79), 0),
        Err(SegmentError::BufferFull { .. })
    ));
    // The fdatasync fails: the segment is poisoned, and says so from then on.
    assert!(matches!(w.commit(&mut io), Err(SegmentError::Io(_))));
    assert!(matches!(
        w.append(&b, Offset(79), 0),
        Err(SegmentError::Poisoned(_))
    ));
    assert_eq!(w.durable().data_len, 0, "nothing was acknowledged");

    let mut io = SimIo::new(SimConfig::default());
    let mut w = SegmentWriter::create(&mut io, Path::new("/sim/t-4"), Offset(0), small, 0).unwrap();
    let mut offset = 0;
    let err = loop {
        match w.append(&batch(offset, 10), Offset(offset + 9), 0) {
            Ok(_) => offset += 10,
            Err(SegmentError::BufferFull { .. }) => {
                w.commit(&mut io).unwrap();
            }
            Err(e) => break e,
        }
    };
    assert!(matches!(err, SegmentError::SegmentFull { .. }));
}

#[test]
fn preallocation_on_a_full_disk_is_a_typed_error() {
    let mut io = SimIo::new(SimConfig {
        disk_capacity_bytes: Some(1 << 20),
        ..SimConfig::default()
    });
    let err =
        SegmentWriter::create(&mut io, Path::new("/sim/t-5"), Offset(0), CONFIG, 0).unwrap_err();
    assert!(
        matches!(
            err,
            SegmentError::Io(mirrorlog::internals::io::IoError::NoSpace { .. })
        ),
        "{err:?}"
    );
}

#[test]
fn recent_rounds_are_read_from_memory_and_older_data_from_the_file() {
    let mut io = SimIo::new(SimConfig::default());
    let mut w =
        SegmentWriter::create(&mut io, Path::new("/sim/t-6"), Offset(0), CONFIG, 0).unwrap();
    let mut all = Vec::new();
    let mut offset = 0;
    for _ in 0..10 {
        // ~40 KiB per round: ten full pages and a partial one.
        for _ in 0..12 {
            let b = batch(offset, 30);
            w.append(&b, Offset(offset + 29), 0).unwrap();
            all.extend_from_slice(&b);
            offset += 30;
        }
        w.commit(&mut io).unwrap();
    }
    let reads = io.read_ops();
    // The last round's pages: from memory.
    let end = all.len() as u64;
    let recent = end - 20_000;
    assert_eq!(
        w.read_durable(&mut io, recent, 10_000).unwrap(),
        &all[recent as usize..recent as usize + 10_000]
    );
    assert_eq!(io.read_ops(), reads, "no device read for the newest pages");
    // The first round's pages were evicted: from the file, and still right.
    assert_eq!(
        w.read_durable(&mut io, 100, 5_000).unwrap(),
        &all[100..5_100]
    );
    assert_eq!(io.read_ops(), reads + 1);
}

#[test]
fn offsets_outside_the_segments_relative_range_are_refused() {
    // Kafka's `LogSegment.ensureOffsetInRange` (`LogSegmentOffsetOverflowException`): a
    // segment holds offsets base..=base + i32::MAX; one past that used to panic in a debug
    // build and return Ok in release. The segment refuses by itself, changing nothing.
    let mut io = SimIo::new(SimConfig::default());
    let base = Offset(1000);
    let config = SegmentConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: 4096,
        commit_buffer_bytes: 64 << 10,
        preallocate_step_bytes: mirrorlog::internals::segment::PREALLOCATE_STEP_BYTES_DEFAULT,
    };
    let mut w = SegmentWriter::create(&mut io, Path::new("/sim/t-range"), base, config, 0).unwrap();
    let past = 1000 + i64::from(i32::MAX) + 1;
    for (first, last, stamp) in [
        (past, past, None),
        (1000, past, None),
        (999, 999, None),
        (0, past, Some((Offset(past), 0))),
    ] {
        let b = batch(first, 1);
        let r = w.append_stamped(&b, stamp, Offset(last), 0);
        assert!(
            matches!(r, Err(SegmentError::OffsetOutOfRange { base_offset, .. }) if base_offset == base),
            "batch {first}..={last}: {r:?}"
        );
    }
    assert_eq!(w.data_len(), 0);
    // The last offset the indexes can hold is accepted.
    let edge = 1000 + i64::from(i32::MAX);
    w.append(&batch(edge, 1), Offset(edge), 0).unwrap();
    assert_eq!(w.next_offset(), Offset(edge + 1));
}
