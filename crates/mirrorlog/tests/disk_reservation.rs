//! Disk reserved in steps (design.md §Durability), on the real filesystem: an empty partition's
//! active segment holds its two commit slots and nothing of its data region; appends reserve
//! the region ahead of them in steps (1 MiB first, doubling up to `preallocate.step.bytes`),
//! never more than one step past the data; sealing trims the file to its data; a reopened
//! segment goes on reserving from its end. Measured in allocated blocks, not file lengths.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::engine::{Engine, EngineConfig, PartitionConfig, TopicPartition};
use mirrorlog::format::Offset;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const MIB: u64 = 1 << 20;

/// Bytes allocated on disk for `path` (`st_blocks` are 512-byte units).
fn allocated(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    v.sort();
    v
}

#[test]
fn segments_reserve_disk_in_steps_ahead_of_the_appends() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let config = EngineConfig::new(dir.path())
        .shards(1)
        .clock(common::records_clock());
    let engine = Engine::open(config.clone()).unwrap();
    let step = 4 * MIB;
    let pc = PartitionConfig {
        segment_bytes: 16 * MIB,
        max_message_bytes: 256 << 10,
        append_buffer_bytes: 1 << 20,
        preallocate_step_bytes: step,
        ..PartitionConfig::default()
    };
    // Empty partitions: the commit slots only.
    let idle: Vec<TopicPartition> = (0..20).map(|i| TopicPartition::new("idle", i)).collect();
    for tp in &idle {
        engine.create_partition(tp, pc).wait().unwrap();
    }
    for tp in &idle {
        let files = segment_files(&dir.path().join(tp.dir_name()));
        assert_eq!(files.len(), 1);
        let a = allocated(&files[0]);
        assert!(
            a <= 16 << 10,
            "{tp}: an empty partition holds {a} bytes of disk"
        );
        let len = std::fs::metadata(&files[0]).unwrap().len();
        assert!(
            len > 16 * MIB,
            "the file's length still spans the data region and the slots ({len})"
        );
    }

    // One partition written in 100 KiB batches: after each append the data region is
    // reserved past the data, by at most one step (the current step size) beyond it.
    let tp = TopicPartition::new("busy", 0);
    engine.create_partition(&tp, pc).wait().unwrap();
    let pdir = dir.path().join(tp.dir_name());
    let mut seq = 0;
    let mut appended = 0u64;
    let mut largest_gap = 0u64;
    while appended < 15 * MIB {
        let b = common::producer_batch(7, seq, 10, false, 10 << 10);
        appended += b.len() as u64;
        engine.append(&tp, b, Origin::Client).wait().unwrap();
        seq += 10;
        let files = segment_files(&pdir);
        let a = allocated(files.last().unwrap());
        let slots = 16 << 10;
        assert!(
            a + 4096 >= appended,
            "the data is on allocated disk ({a} for {appended})"
        );
        let ahead = a.saturating_sub(appended + slots);
        largest_gap = largest_gap.max(ahead);
        assert!(
            ahead <= step,
            "at most one step ahead: {ahead} bytes past {appended}"
        );
    }
    assert!(
        largest_gap >= MIB,
        "the reservation runs ahead of the appends ({largest_gap})"
    );
    // The roll seals the full segment: trimmed to its data.
    while segment_files(&pdir).len() < 2 {
        let b = common::producer_batch(7, seq, 10, false, 10 << 10);
        engine.append(&tp, b, Origin::Client).wait().unwrap();
        seq += 10;
    }
    let sealed = &segment_files(&pdir)[0];
    let len = std::fs::metadata(sealed).unwrap().len();
    assert!(len <= 16 * MIB);
    // (ext4 may count a block of its extent tree in a file's blocks.)
    let a = allocated(sealed);
    assert!(
        a <= len.div_ceil(4096) * 4096 + 8192,
        "a sealed segment holds its data only: {a} bytes allocated for {len}"
    );
    let end = engine.state(&tp).wait().unwrap().log_end;
    engine.close().unwrap();

    // Reopened: the active segment goes on from its data, reserving as appends come.
    let engine = Engine::open(config).unwrap();
    assert_eq!(engine.state(&tp).wait().unwrap().log_end, end);
    for _ in 0..30 {
        let b = common::producer_batch(7, seq, 10, false, 10 << 10);
        engine.append(&tp, b, Origin::Client).wait().unwrap();
        seq += 10;
    }
    assert_eq!(
        engine.state(&tp).wait().unwrap().log_end,
        Offset(end.0 + 300)
    );
    for tp in &idle {
        let files = segment_files(&dir.path().join(tp.dir_name()));
        assert!(allocated(&files[0]) <= 16 << 10, "{tp} after a reopen");
    }
    engine.close().unwrap();
    common::assert_verifies(dir.path());
}

/// A step reserved while a commit round is in flight (the next append crosses the reserved
/// part) runs an `fallocate` synchronously; the round's completions it reaps meanwhile are
/// given back to the Io, not lost: the round completes for whoever waits for it (found by
/// `benches/log_append.rs`, which hung).
#[test]
fn a_step_reserved_during_a_round_loses_none_of_the_rounds_completions() {
    use mirrorlog::internals::io::{Io, SimConfig, SimIo};
    use mirrorlog::internals::log::PartitionLog;
    for seed in 0..40 {
        let mut io = SimIo::new(SimConfig {
            seed,
            ..SimConfig::default()
        });
        let dir = Path::new("/sim/reserve-in-round");
        io.create_dir(dir).unwrap();
        let mut config = common::log_config(16 << 20, 4096, 512 << 10);
        config.segment.preallocate_step_bytes = 1 << 20;
        let mut log = PartitionLog::create(&mut io, dir, config).unwrap();
        let mut seq = 0;
        let mut rounds = 0;
        let mut completions = Vec::new();
        // ~400 KiB per round: the first step (1 MiB) is crossed while a round is in flight.
        for _ in 0..12 {
            // A round for what is appended so far, then appends while it is in flight (they
            // reserve the next steps), then its completions are reaped.
            log.start_commit(&mut io).unwrap();
            for _ in 0..10 {
                let b = common::producer_batch(1, seq, 4, false, 10_000);
                log.append(&mut io, &b, Origin::Client).unwrap();
                seq += 4;
            }
            let mut spins = 0;
            while log.round_in_flight() {
                spins += 1;
                assert!(
                    spins < 10_000,
                    "seed {seed}: the round's completions were lost"
                );
                io.complete(1, &mut completions).unwrap();
                for c in completions.drain(..) {
                    if log.on_completion(c).unwrap().is_some() {
                        rounds += 1;
                    }
                }
            }
        }
        assert!(rounds >= 10, "seed {seed}: {rounds} rounds");
        log.commit(&mut io).unwrap();
        assert_eq!(log.durable_end(), Offset(i64::from(seq)));
    }
}
