//! Disk full on a real filesystem: a 32 MiB ext4 image the test makes and loop-mounts (when
//! running as root; otherwise it says why it did not run, and under CI it fails), filled with a
//! filler file until a little less than one segment is free. Then:
//!
//! - appends fill the active segment, whose disk is reserved in steps ahead of them (its writes
//!   never need new space), until reserving the next step — or, in the sweep, some step of the
//!   roll to the next segment — meets ENOSPC: that append fails with `DiskFull`, and so do the
//!   next ones, without poisoning the partition;
//! - nothing acknowledged is lost, and reads keep being served while the disk is full;
//! - creating a partition on the full disk fails with `DiskFull` too;
//! - once the filler is deleted, appends succeed again, and a restart recovers everything
//!   cleanly (`mirrorlog verify` finds nothing).

mod common;

use mirrorlog::api::Origin;
use mirrorlog::engine::{Engine, EngineConfig, EngineError, PartitionConfig, TopicPartition};
use mirrorlog::format::{BatchIter, Offset};
use std::path::{Path, PathBuf};
use std::process::Command;

fn free_bytes(path: &Path) -> u64 {
    let out = Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// One shard with the smallest journal, which the 32 MiB image holds besides the partition.
fn small_journal(data: &Path) -> EngineConfig {
    EngineConfig::new(data)
        .shards(1)
        .journal_bytes(mirrorlog::engine::JOURNAL_BYTES_MIN)
}

fn is_disk_full(r: &Result<impl std::fmt::Debug, EngineError>) -> bool {
    r.as_ref().is_err_and(EngineError::is_disk_full)
}

/// A mounted image with an engine on it, one partition of `segment_bytes` segments, and a
/// filler file leaving `leave` bytes free.
struct FullDisk {
    mounted: common::Mounted,
    data: PathBuf,
    engine: Engine,
    tp: TopicPartition,
    filler: PathBuf,
}

fn full_disk(segment_bytes: u64, step: u64, leave: u64) -> Result<FullDisk, String> {
    let mounted = common::mount_small_ext4("32M")?;
    let data = mounted.mount.join("data");
    let engine = Engine::open(small_journal(&data)).unwrap();
    let tp = TopicPartition::new("full", 0);
    let config = PartitionConfig {
        segment_bytes,
        max_message_bytes: 64 << 10,
        append_buffer_bytes: 1 << 20,
        preallocate_step_bytes: step,
        ..PartitionConfig::default()
    };
    engine.create_partition(&tp, config).wait().unwrap();
    let filler = mounted.mount.join("filler");
    let size = free_bytes(&mounted.mount).saturating_sub(leave);
    let status = Command::new("fallocate")
        .arg("-l")
        .arg(size.to_string())
        .arg(&filler)
        .status()
        .unwrap();
    assert!(status.success());
    Ok(FullDisk {
        mounted,
        data,
        engine,
        tp,
        filler,
    })
}

/// The acknowledged batches as the log stores them.
fn stored(acked: &[(Offset, Vec<u8>)]) -> Vec<u8> {
    acked
        .iter()
        .flat_map(|(o, b)| common::stored(b.clone(), *o, 0))
        .collect()
}

/// Once space is back: `appends` more appends succeed, a clean close passes verify, and after
/// a restart every acknowledged batch reads back. Returns the acknowledged batches.
fn resume_then_restart(
    engine: Engine,
    data: &Path,
    tp: &TopicPartition,
    mut acked: Vec<(Offset, Vec<u8>)>,
    mut seq: i32,
    appends: usize,
    context: &str,
) -> Vec<(Offset, Vec<u8>)> {
    for _ in 0..appends {
        let b = common::producer_batch(1, seq, 4, false, 2000);
        let out = engine
            .append(tp, b.clone(), Origin::Client)
            .wait()
            .unwrap_or_else(|e| panic!("{context}: {e}"));
        acked.push((out.first_offset, b));
        seq += 4;
    }
    engine.close().unwrap();
    common::assert_verifies(data);
    let engine = Engine::open(small_journal(data)).unwrap();
    assert!(engine.failed_partitions().is_empty());
    let state = engine.state(tp).wait().unwrap();
    let got = common::engine_bytes(&engine, tp, Offset(0), state.high_watermark);
    assert_eq!(BatchIter::new(&got, 0).count(), acked.len(), "{context}");
    assert!(
        got == stored(&acked),
        "{context}: everything acknowledged is back after the restart"
    );
    engine.close().unwrap();
    acked
}

/// Fills what is left free with a second filler file, if anything is.
fn fill_the_rest(mount: &Path) -> Option<PathBuf> {
    let rest = mount.join("filler-rest");
    let free = free_bytes(mount);
    (free > 0).then(|| {
        let status = Command::new("fallocate")
            .arg("-l")
            .arg(free.to_string())
            .arg(&rest)
            .status()
            .unwrap();
        assert!(status.success());
        rest
    })
}

#[test]
fn disk_full_when_reserving_the_next_step_then_space_freed() {
    // A 1 MiB segment reserved in 64 KiB steps, 600 KiB free: the appends take the free space
    // step by step until a step cannot be reserved.
    let FullDisk {
        mounted,
        data,
        engine,
        tp,
        filler,
    } = match full_disk(1 << 20, 64 << 10, 600 << 10) {
        Ok(d) => d,
        Err(why) => return common::missing_prerequisite("disk_full", &why),
    };
    let config = PartitionConfig {
        segment_bytes: 1 << 20,
        max_message_bytes: 64 << 10,
        ..PartitionConfig::default()
    };
    eprintln!(
        "free after the filler: {} bytes",
        free_bytes(&mounted.mount)
    );

    let mut acked: Vec<(Offset, Vec<u8>)> = Vec::new();
    let mut seq = 0;
    let mut refusals = 0;
    for _ in 0..400 {
        let b = common::producer_batch(1, seq, 4, false, 2000);
        let r = engine.append(&tp, b.clone(), Origin::Client).wait();
        match r {
            Ok(out) => {
                assert_eq!(refusals, 0, "an append succeeded after the disk was full");
                acked.push((out.first_offset, b));
                seq += 4;
            }
            Err(_) if is_disk_full(&r) => {
                refusals += 1;
                if refusals == 3 {
                    break;
                }
            }
            Err(e) => panic!("expected DiskFull, got {e}"),
        }
    }
    assert_eq!(
        refusals,
        3,
        "the disk filled up ({} appends acknowledged)",
        acked.len()
    );
    // 600 KiB in 64 KiB steps, ~8 KiB a batch: the steps that fit took their appends.
    assert!(
        acked.len() > 50,
        "the reserved steps took appends first ({})",
        acked.len()
    );
    let state = engine.state(&tp).wait().unwrap();
    assert!(
        state.log_end.0 < (1 << 20) / 8000 * 4,
        "the segment did not fill: the disk did"
    );
    // Reads are served, every acknowledged batch is there.
    let expected = stored(&acked);
    assert!(
        common::engine_bytes(&engine, &tp, Offset(0), state.high_watermark) == expected,
        "reads on a full disk return every acknowledged batch"
    );
    // A new partition cannot be made either once nothing is free (less than a step may be).
    let rest = fill_the_rest(&mounted.mount);
    let other = TopicPartition::new("other", 0);
    let created = engine.create_partition(&other, config).wait();
    assert!(is_disk_full(&created), "{created:?}");

    // Space comes back: appends go through (the step is reserved), then a restart.
    std::fs::remove_file(&filler).unwrap();
    if let Some(rest) = rest {
        std::fs::remove_file(&rest).unwrap();
    }
    let acked = resume_then_restart(engine, &data, &tp, acked, seq, 20, "after freeing space");
    eprintln!(
        "disk_full: {} appends acknowledged, 3 refused with DiskFull reserving a step, a partition creation refused, all back after freeing space and a restart",
        acked.len()
    );
}

/// The free space swept around what a roll needs (the sealed segment's indexes, `.txnindex`
/// and the producer snapshot, the next segment's file and commit slots, then its first
/// reserved step), so that ENOSPC lands on each step of the roll in turn. Whatever step it hits: the append fails with `DiskFull`,
/// every acknowledged batch stays readable, and once space is freed appends go on and a
/// restart recovers cleanly.
#[test]
fn disk_full_at_each_step_of_a_roll() {
    let mut cases = 0;
    for extra_kib in (0..48).step_by(4) {
        // The active segment's 256 KiB (its first step: the whole data region), the next
        // segment's two 8 KiB commit slots and the roll's files, and a little more.
        let FullDisk {
            mounted: _mounted,
            data,
            engine,
            tp,
            filler,
        } = match full_disk(
            256 << 10,
            mirrorlog::internals::segment::PREALLOCATE_STEP_BYTES_DEFAULT,
            (256 + 16 + extra_kib) << 10,
        ) {
            Ok(d) => d,
            Err(why) => return common::missing_prerequisite("disk_full", &why),
        };
        let mut acked: Vec<(Offset, Vec<u8>)> = Vec::new();
        let mut seq = 0;
        let mut full = false;
        for _ in 0..200 {
            let b = common::producer_batch(1, seq, 4, false, 2000);
            let r = engine.append(&tp, b.clone(), Origin::Client).wait();
            match r {
                Ok(out) => {
                    acked.push((out.first_offset, b));
                    seq += 4;
                }
                Err(e) => {
                    assert!(
                        e.is_disk_full(),
                        "extra {extra_kib} KiB: expected DiskFull, got {e}"
                    );
                    full = true;
                    break;
                }
            }
        }
        let state = engine.state(&tp).wait().unwrap();
        let expected = stored(&acked);
        assert!(
            common::engine_bytes(&engine, &tp, Offset(0), state.high_watermark) == expected,
            "extra {extra_kib} KiB: acknowledged batches readable on the full disk"
        );
        std::fs::remove_file(&filler).unwrap();
        let context = format!("extra {extra_kib} KiB, after freeing space");
        resume_then_restart(engine, &data, &tp, acked, seq, 10, &context);
        if full {
            cases += 1;
        }
    }
    eprintln!("disk_full: {cases} of 12 free-space levels around a roll met ENOSPC; none lost anything or stayed refused once space was freed");
    assert!(cases > 0);
}
