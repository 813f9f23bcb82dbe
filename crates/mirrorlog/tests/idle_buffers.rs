//! Idle partitions hand their append buffers back: a log whose appends are all durable
//! and with no round in flight returns every buffer to the Io; the next append takes one again,
//! with the partial last page copied back, and nothing changes for readers, rolls, truncations,
//! seals, closes or recovery. Checked against the bytes acknowledged, with buffers released at
//! random points of a seeded workload (replay with `MIRRORLOG_SEED`).

mod common;

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
