//! The SIGKILL loop: a child process appends through the public API on the real io_uring
//! backend — idempotent and transactional client appends with COMMIT/ABORT markers on two
//! partitions, and on a third a mirror with failovers (stop_mirroring: ABORT markers and the
//! barrier), local writes, and failbacks — and writes every acknowledged batch to an oracle
//! file. The parent kills it with SIGKILL at a random moment, then checks the directory:
//!
//! 1. as the kill left it, it passes `mirrorlog verify`'s read-only checks;
//! 2. the engine reopens it (recovery) with no failed partition;
//! 3. every acknowledged batch is there, at its offset, byte-identical (length and every byte
//!    the CRC covers), unless a failback deliberately truncated it (also in the oracle);
//! 4. what the log holds is whole, valid, contiguous batches (the verify pass, again, after
//!    the clean close), and the engine's producer state equals a fresh replay of the batches.
//!
//! Each cycle continues the same data directory, so recovery runs on top of recovery. Besides
//! the three partitions above, 32 more are written in bursts, every one's append in flight at
//! once on rings with room for two commit rounds and with eight append buffers per shard, so
//! rounds wait for ring room and appends for a buffer when killed.
//!
//! `cargo test --test sigkill_loop` runs 50 cycles (CI); a long run:
//! `cargo test --release --test sigkill_loop -- --cycles 1000 [--seed S]`.
//! The seed (printed) replays the kill times; `MIRRORLOG_SEED` works too.

mod common;

use common::Rng;
use mirrorlog::api::Origin;
use mirrorlog::engine::{
    Engine, EngineConfig, MirrorStart, Mode, OpenTransactions, PartitionConfig, StartMirroring,
    StopMirroring, TopicPartition,
};
use mirrorlog::format::{self, BatchIter, BatchKind};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CLIENTS: [&str; 2] = ["orders", "payments"];
const MIRROR: &str = "mirrored";
/// Many more partitions, each written with every other's append in flight at once on a ring
/// with room for two commit rounds (rounds waiting for ring room under the kills).
const WIDE: &str = "wide";
const WIDE_PARTITIONS: i32 = 32;

fn partitions() -> Vec<TopicPartition> {
    CLIENTS
        .iter()
        .chain([MIRROR].iter())
        .map(|t| TopicPartition::new(t, 0))
        .chain((0..WIDE_PARTITIONS).map(|i| TopicPartition::new(WIDE, i)))
        .collect()
}

/// Small segments and retention: many rolls and segment deletions under the kills, and logs
/// that stay small over a long run.
fn config() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 256 << 10,
        max_message_bytes: 64 << 10,
        append_buffer_bytes: 1 << 20,
        retention_bytes: Some(2 << 20),
        ..PartitionConfig::default()
    }
}

fn engine_config(dir: &Path) -> EngineConfig {
    let mut config = EngineConfig::new(dir)
        .shards(2)
        .cluster_id("kill")
        .clock(common::records_clock());
    // Room for two rounds and the doorbell watch per shard, and append buffers for eight
    // partitions of a shard at once: dozens of dirty partitions wait for both.
    config.io_depth = 8;
    config.append_buffers_max(8)
}

/// The CRC field and every byte it covers: what must be identical (the base offset and the
/// leader epoch are stamped by the log and outside the CRC).
fn fingerprint(batch: &[u8]) -> (usize, u32) {
    (batch.len(), crc32c::crc32c(&batch[format::CRC_POS..]))
}

/// The child's record of what was acknowledged. One write(2) per line: a SIGKILL keeps
/// whatever reached the page cache, and a line is written only after its batch was
/// acknowledged (the oracle must outlive the process, not the machine: no fsync needed).
struct Oracle(std::fs::File);

impl Oracle {
    /// `batch` was acknowledged at `offset` of `tp`.
    fn acked(&mut self, tp: &TopicPartition, offset: mirrorlog::format::Offset, batch: &[u8]) {
        let (len, crc) = fingerprint(batch);
        let line = format!("A {} {} {len} {crc}\n", tp.dir_name(), offset.0);
        self.0.write_all(line.as_bytes()).unwrap();
    }

    /// `tp` may be truncated to `from` (written before the call that may do it).
    fn may_truncate(&mut self, tp: &TopicPartition, from: mirrorlog::format::Offset) {
        let line = format!("T {} {}\n", tp.dir_name(), from.0);
        self.0.write_all(line.as_bytes()).unwrap();
    }
}

/// The child: appends until killed. `cycle` makes its producer ids and leader epochs fresh.
fn child(dir: &Path, cycle: u64) {
    let engine = Engine::open(engine_config(dir)).unwrap();
    let mut oracle = Oracle(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.with_extension("oracle"))
            .unwrap(),
    );
    for tp in partitions() {
        if engine.state(&tp).wait().is_err() {
            engine.create_partition(&tp, config()).wait().unwrap();
        }
    }
    println!("READY");
    let mut rng = Rng(cycle.wrapping_mul(0x9E37_79B9) | 1);
    let mut seqs: BTreeMap<i64, i32> = BTreeMap::new();
    let mut epoch = (cycle as i32 + 1) * 1000;
    let mirror = TopicPartition::new(MIRROR, 0);
    let mut mirrored_seq = 0;
    let source_pid = 50_000 + cycle as i64;
    let source_txn_pid = 60_000 + cycle as i64;
    let mut txn_seq = 0;
    let mut wide_seqs = vec![0i32; WIDE_PARTITIONS as usize];
    loop {
        // Now and then every wide partition at once: all appends queued before any is waited
        // for, so their rounds wait for ring room.
        if rng.below(12) == 0 {
            let calls: Vec<_> = (0..WIDE_PARTITIONS)
                .map(|i| {
                    let tp = TopicPartition::new(WIDE, i);
                    let pid = 1_000_000 + cycle as i64 * 1000 + i64::from(i);
                    let b = common::producer_batch(pid, wide_seqs[i as usize], 1, false, 300);
                    let call = engine.append(&tp, b.clone(), Origin::Client);
                    (tp, b, call)
                })
                .collect();
            for (i, (tp, b, call)) in calls.into_iter().enumerate() {
                let out = call.wait().unwrap();
                wide_seqs[i] += 1;
                oracle.acked(&tp, out.first_offset, &b);
            }
        }
        // Client partitions: idempotent batches, sometimes a transaction with its marker.
        let c = rng.below(2) as usize;
        let tp = TopicPartition::new(CLIENTS[c], 0);
        let pid = (cycle as i64) * 10 + c as i64;
        let txn_pid = pid + 5;
        let seq = seqs.entry(pid).or_insert(0);
        let records = 1 + rng.below(3) as i32;
        let b = common::producer_batch(pid, *seq, records, false, 64 + rng.below(900) as usize);
        let out = engine
            .append(&tp, b.clone(), Origin::Client)
            .wait()
            .unwrap();
        *seq += records;
        oracle.acked(&tp, out.first_offset, &b);
        if rng.below(6) == 0 {
            let tseq = seqs.entry(txn_pid).or_insert(0);
            let b = common::producer_batch(txn_pid, *tseq, 1, true, 80);
            let out = engine
                .append(&tp, b.clone(), Origin::Client)
                .wait()
                .unwrap();
            *tseq += 1;
            oracle.acked(&tp, out.first_offset, &b);
            let m = common::marker(txn_pid, rng.below(2) == 0);
            let out = engine
                .append(&tp, m.clone(), Origin::Coordinator)
                .wait()
                .unwrap();
            oracle.acked(&tp, out.first_offset, &m);
        }
        // The mirror partition: mirror, fail over, write locally, fail back.
        let state = engine.state(&mirror).wait().unwrap();
        match state.mode {
            Mode::Mirroring { .. } if rng.below(25) == 0 => {
                epoch += 1;
                engine
                    .stop_mirroring(
                        &mirror,
                        StopMirroring {
                            leader_epoch: epoch,
                            open_transactions: OpenTransactions::Abort,
                        },
                    )
                    .wait()
                    .unwrap();
            }
            Mode::Mirroring { .. } => {
                // The source's idempotent producer, and its transactional one whose
                // transactions the source sometimes commits (the rest are left open for a
                // failover to abort).
                let b = match rng.below(6) {
                    0 => {
                        let b = common::producer_batch(source_txn_pid, txn_seq, 1, true, 150);
                        txn_seq += 1;
                        b
                    }
                    1 => common::marker(source_txn_pid, true),
                    _ => {
                        let b = common::producer_batch(source_pid, mirrored_seq, 2, false, 200);
                        mirrored_seq += 2;
                        b
                    }
                };
                let b = common::stored(b, state.log_end, 7);
                engine
                    .append(&mirror, b.clone(), Origin::Mirror)
                    .wait()
                    .unwrap();
                oracle.acked(&mirror, state.log_end, &b);
            }
            _ if rng.below(10) == 0 => {
                // Failback: truncates to the LSO (local appends are not transactional, so
                // nothing acknowledged is cut); the oracle hears of it first.
                oracle.may_truncate(&mirror, state.last_stable_offset);
                engine
                    .start_mirroring(
                        &mirror,
                        StartMirroring {
                            source: "east".into(),
                            truncate_to: MirrorStart::LastStableOffset,
                        },
                    )
                    .wait()
                    .unwrap();
            }
            _ => {
                // A fresh local producer after each failover (the barrier cleared the state).
                let local = 100_000 + i64::from(epoch);
                let seq = seqs.entry(local).or_insert(0);
                let b = common::producer_batch(local, *seq, 1, false, 120);
                let out = engine
                    .append(&mirror, b.clone(), Origin::Client)
                    .wait()
                    .unwrap();
                *seq += 1;
                oracle.acked(&mirror, out.first_offset, &b);
            }
        }
    }
}

/// What the oracle says must be in each partition: offset → fingerprint.
fn oracle(dir: &Path) -> BTreeMap<String, BTreeMap<i64, (usize, u32)>> {
    let text = std::fs::read_to_string(dir.with_extension("oracle")).unwrap_or_default();
    let mut out: BTreeMap<String, BTreeMap<i64, (usize, u32)>> = BTreeMap::new();
    // Only whole lines: a kill can never split one write(2), but be strict anyway.
    let whole = text.rsplit_once('\n').map_or("", |(w, _)| w);
    for line in whole.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let batches = out.entry(f[1].to_string()).or_default();
        match f[0] {
            "A" => {
                batches.insert(
                    f[2].parse().unwrap(),
                    (f[3].parse().unwrap(), f[4].parse().unwrap()),
                );
            }
            _ => {
                let from: i64 = f[2].parse().unwrap();
                batches.retain(|&o, _| o < from);
            }
        }
    }
    out
}

/// What the log held at a check: acknowledged batches checked, barriers, transaction markers.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    acknowledged: usize,
    barriers: usize,
    markers: usize,
}

fn check(dir: &Path, cycle: u64, seed: u64) -> Seen {
    let context = format!("cycle {cycle}, seed {seed}");
    // 1. As the kill left it.
    common::assert_verifies(dir);
    // 2. Recovery.
    let engine = Engine::open(engine_config(dir)).unwrap();
    assert!(
        engine.failed_partitions().is_empty(),
        "{context}: {:?}",
        engine.failed_partitions()
    );
    let expected = oracle(dir);
    let mut seen = Seen::default();
    // What stays to be checked next time: the acknowledged batches retention has not deleted
    // (the oracle is rewritten with them, so it stays as small as the logs).
    let mut kept = String::new();
    let mut producers = BTreeMap::new();
    for tp in partitions() {
        let Ok(state) = engine.state(&tp).wait() else {
            continue; // killed before it was created
        };
        let bytes = common::engine_bytes(&engine, &tp, state.log_start, state.high_watermark);
        for b in BatchIter::new(&bytes, 0) {
            match b.kind() {
                BatchKind::Barrier => seen.barriers += 1,
                BatchKind::TxnMarker { .. } => seen.markers += 1,
                _ => {}
            }
        }
        let stored: BTreeMap<i64, (usize, u32)> = BatchIter::new(&bytes, 0)
            .map(|b| (b.header().base_offset.0, fingerprint(b.bytes())))
            .collect();
        // 3. Every acknowledged batch, at its offset, byte-identical.
        // (Retention deletes whole segments from the start: offsets below the log start.)
        for (offset, want) in expected
            .get(&tp.dir_name())
            .into_iter()
            .flatten()
            .filter(|(o, _)| **o >= state.log_start.0)
        {
            assert_eq!(
                stored.get(offset),
                Some(want),
                "{context}: {tp} offset {offset} acknowledged but not there as acknowledged"
            );
            seen.acknowledged += 1;
            kept.push_str(&format!(
                "A {} {offset} {} {}\n",
                tp.dir_name(),
                want.0,
                want.1
            ));
        }
        producers.insert(
            tp.dir_name(),
            common::snapshot_kept_entries(&engine.producers(&tp).wait().unwrap()),
        );
    }
    engine.close().unwrap();
    std::fs::write(dir.with_extension("oracle"), kept).unwrap();
    // 4. Whole, valid, contiguous; the producer state equals a fresh replay.
    for d in mirrorlog::inspect::partition_dirs(dir).unwrap() {
        let report = mirrorlog::inspect::inspect_partition(&d, &mut |_| {}).unwrap();
        assert!(
            report.problems.is_empty(),
            "{context}: {:#?}",
            report.problems
        );
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            common::snapshot_kept_entries(&report.producers),
            producers[&name],
            "{context}: {name}: producer state differs from a replay of the batches"
        );
    }
    seen
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(Path::new(&args[i + 1]), args[i + 2].parse().unwrap());
        return;
    }
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .map(|v| {
                v.parse::<u64>()
                    .unwrap_or_else(|_| panic!("{flag} takes a number"))
            })
    };
    let cycles = value("--cycles").unwrap_or(50);
    let seed = value("--seed").unwrap_or_else(|| common::seed("sigkill_loop"));
    let root = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let dir: PathBuf = root.path().join("data");
    let mut rng = Rng(seed | 1);
    let exe = std::env::current_exe().unwrap();
    let started = Instant::now();
    let mut seen = Seen::default();
    for cycle in 0..cycles {
        let mut child = Command::new(&exe)
            .arg("--child")
            .arg(&dir)
            .arg(cycle.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // Wait for the child to be up (its recovery done), then kill it at a random moment.
        let mut out = child.stdout.take().unwrap();
        let mut ready = [0u8; 6];
        std::io::Read::read_exact(&mut out, &mut ready).expect("the child starts");
        std::thread::sleep(Duration::from_millis(20 + rng.below(400)));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert!(
            !status.success(),
            "cycle {cycle}: the child was killed, it did not finish"
        );
        seen = check(&dir, cycle, seed);
    }
    println!(
        "sigkill_loop: {cycles} SIGKILL cycles (seed {seed}) in {:.1} s; after the last: {} acknowledged batches checked, none lost; the logs hold {} barriers (failovers) and {} transaction markers",
        started.elapsed().as_secs_f64(),
        seen.acknowledged,
        seen.barriers,
        seen.markers
    );
}
