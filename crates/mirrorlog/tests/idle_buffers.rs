//! Idle partitions hand their append buffers back: a log whose appends are all durable
//! and with no round in flight returns every buffer to the Io; the next append takes one again,
//! with the partial last page copied back, and nothing changes for readers, rolls, truncations,
//! seals, closes or recovery. Checked against the bytes acknowledged, with buffers released at
//! random points of a seeded workload (replay with `MIRRORLOG_SEED`).
//!
//! In an engine with its journal, an idle partition whose journal rounds left full pages
//! deferred in its buffer writes them on a tick and hands the buffer back once written; its
//! bytes read back the same before and after, and after a reopen.

mod common;

use mirrorlog::engine::{Engine, EngineConfig, PartitionConfig, TopicPartition};
use mirrorlog::format::Offset;
use mirrorlog::internals::io::{Io, SimConfig, SimIo};
use mirrorlog::internals::log::{LogConfig, PartitionLog};
use mirrorlog::internals::producer_state::Origin;
use mirrorlog::internals::recovery;
use std::path::Path;

const CONFIG: LogConfig = common::log_config(24 << 10, 1024, 16 << 10);

#[test]
fn buffers_released_at_random_points_change_nothing() {
    let seed = common::seed("idle_buffers");
    let mut rng = common::Rng(seed | 1);
    let dir = Path::new("/sim/idle");
    let mut io = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    io.create_dir(dir).unwrap();
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    let mut acked: Vec<(Offset, Vec<u8>)> = Vec::new();
    let (mut producer, mut seq) = (1i64, 0);
    let mut released = 0;
    for step in 0..600 {
        match rng.below(10) {
            0..=5 => {
                let records = 1 + rng.below(4) as i32;
                let value = 50 + rng.below(600) as usize;
                let b = common::producer_batch(producer, seq, records, false, value);
                let o = log.append(&mut io, &b, Origin::Client).unwrap();
                acked.push((o.first_offset, common::stored(b, o.first_offset, 0)));
                seq += records;
            }
            6 | 7 => {
                log.commit(&mut io).unwrap();
                if log.release_buffers(&mut io) {
                    released += 1;
                }
            }
            8 => {
                // Reads right after a release: the durable tail is still served.
                log.commit(&mut io).unwrap();
                log.release_buffers(&mut io);
                assert_eq!(
                    common::read_all(&mut io, &mut log),
                    acked
                        .iter()
                        .flat_map(|(_, b)| b.clone())
                        .collect::<Vec<_>>(),
                    "step {step} (seed {seed})"
                );
            }
            _ => {
                if rng.below(3) == 0 && acked.len() > 4 {
                    // A truncation of a released log.
                    log.commit(&mut io).unwrap();
                    log.release_buffers(&mut io);
                    let keep = acked.len() - 1 - rng.below(3) as usize;
                    let cut = acked[keep].0;
                    log.truncate_to(&mut io, cut).unwrap();
                    acked.truncate(keep);
                    // The producer's later sequences went with the batches: go on as a new one.
                    producer += 1;
                    seq = 0;
                } else {
                    log.commit(&mut io).unwrap();
                    log.release_buffers(&mut io);
                    log.roll(&mut io).unwrap();
                }
            }
        }
    }
    assert!(released > 50, "buffers were released ({released} times)");
    log.commit(&mut io).unwrap();
    let expected: Vec<u8> = acked.iter().flat_map(|(_, b)| b.clone()).collect();
    assert_eq!(common::read_all(&mut io, &mut log), expected, "seed {seed}");
    // A released log closes (its seal takes a buffer for the last page) and reopens whole.
    log.release_buffers(&mut io);
    assert!(
        !log.release_buffers(&mut io),
        "released (now, or by the last step)"
    );
    log.close(&mut io).unwrap();
    let mut log = PartitionLog::open(&mut io, dir, CONFIG).unwrap();
    assert_eq!(
        common::read_all(&mut io, &mut log),
        expected,
        "after close, seed {seed}"
    );
    // An opened log holds no append buffer until it is appended to; it recovers whole after
    // an unclean stop.
    assert!(
        !log.release_buffers(&mut io),
        "opened: nothing to hand back"
    );
    drop(log);
    let mut disk = io.crash(seed);
    let mut log = recovery::recover(&mut disk, dir, CONFIG).unwrap();
    assert_eq!(
        common::read_all(&mut disk, &mut log),
        expected,
        "after recovery, seed {seed}"
    );
}

#[test]
fn a_log_with_a_round_in_flight_or_undurable_appends_keeps_its_buffers() {
    let dir = Path::new("/sim/idle-busy");
    let mut io = SimIo::new(SimConfig::default());
    io.create_dir(dir).unwrap();
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    let b = common::producer_batch(1, 0, 2, false, 300);
    log.append(&mut io, &b, Origin::Client).unwrap();
    assert!(!log.release_buffers(&mut io), "appends not yet durable");
    assert!(log.start_commit(&mut io).unwrap());
    assert!(!log.release_buffers(&mut io), "a round in flight");
    log.commit(&mut io).unwrap();
    assert!(log.release_buffers(&mut io));
    assert!(!log.release_buffers(&mut io), "already released");
    let b = common::producer_batch(1, 2, 2, false, 300);
    assert_eq!(
        log.append(&mut io, &b, Origin::Client)
            .unwrap()
            .first_offset,
        Offset(2)
    );
    log.commit(&mut io).unwrap();
    assert_eq!(log.durable_end(), Offset(4));
}

#[test]
fn an_idle_partition_writes_its_deferred_pages_then_hands_its_buffer_back() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let config = EngineConfig::new(dir.path())
        .shards(1)
        .clock(common::records_clock());
    let engine = Engine::open(config.clone()).unwrap();
    let tp = TopicPartition::new("idle", 0);
    engine
        .create_partition(&tp, PartitionConfig::default())
        .wait()
        .unwrap();
    // About 40 KiB in small appends: journal rounds, full pages deferred (well below 512 KiB).
    let mut acked = Vec::new();
    for k in 0..10 {
        let b = common::producer_batch(1, k * 2, 2, false, 2000);
        let o = engine
            .append(&tp, b.clone(), mirrorlog::api::Origin::Client)
            .wait()
            .unwrap();
        acked.extend(common::stored(b, o.first_offset, 0));
    }
    let stats = engine.stats().unwrap();
    assert!(stats[0].journal_rounds >= 10, "{stats:?}");
    assert_eq!(stats[0].partitions_holding_buffers, 1);
    let read = |engine: &Engine| {
        let s = engine.state(&tp).wait().unwrap();
        common::engine_bytes(engine, &tp, s.log_start, s.high_watermark)
    };
    assert!(read(&engine) == acked, "before the ticks");
    // Ticks come at least once a second: the first writes the pages, and the write's
    // completion hands the buffer back.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let s = engine.stats().unwrap();
        if s[0].partitions_holding_buffers == 0 {
            assert_eq!(s[0].page_writes, 1, "one write of the deferred pages");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "buffer still held: {s:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(read(&engine) == acked, "after the buffer went back");
    engine.close().unwrap();
    let engine = Engine::open(config).unwrap();
    assert!(read(&engine) == acked, "after a reopen");
    engine.close().unwrap();
}
