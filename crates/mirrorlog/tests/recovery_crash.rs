//! Crash safety of the partition log on the simulated disk: a seeded workload (client appends
//! from two producers, transactions with markers, mirrored batches, barriers, commits, rolls,
//! truncations, delete-records, retention) runs until a power cut after a random number of
//! executed I/O operations — anywhere, including in the middle of a commit round, a roll or a
//! snapshot write. The disk a power cut leaves (only synced bytes, or with every unsynced write
//! kept, lost or torn at 512-byte sectors) is then recovered, and: every acknowledged batch
//! reads back byte-identical, whatever came after it is whole valid batches, deleted records
//! stay deleted, a second power cut right after recovery changes nothing, the producer state
//! equals a fresh replay of the recovered batches, reads through the rebuilt indexes find every
//! batch, and the recovered producers continue their sequences. 2 × 1000 cycles a run.
//! Replay with `MIRRORLOG_SEED`.

mod common;

use mirrorlog::format::{self, BatchIter, Offset};
use mirrorlog::internals::io::{CrashModel, SimConfig, SimIo};
use mirrorlog::internals::log::{
    Isolation, LogConfig, MirrorStart, Mode, ModeHistory, OpenTransactions, PartitionLog,
};
use mirrorlog::internals::producer_state::{BatchInfo, Origin, ProducerStateManager};
use mirrorlog::internals::recovery;
use std::path::Path;

const CONFIG: LogConfig = LogConfig {
    retention_bytes: Some(64 << 10),
    ..common::log_config(24 << 10, 1024, 16 << 10)
};
/// Crash cycles per crash model per run: each a dry run to count the operations, then a run
/// cut at a random one of them, recovered twice.
const CASES: u64 = 1000;
/// The producer whose batches arrive mirrored (offsets and every byte kept).
const MIRRORED: i64 = 5;

use common::Rng;

/// What the workload knows of one producer.
#[derive(Debug, Clone, Copy, Default)]
struct Producer {
    next_seq: i32,
    in_txn: bool,
}

/// Recomputes the producers from the batches the log holds (after a truncation).
fn producers_of(stored: &[Vec<u8>]) -> [Producer; 2] {
    let mut producers = [Producer::default(); 2];
    for b in stored {
        let v = format::inspect(b, 0).unwrap();
        let h = v.header();
        let Some(p) = producers.get_mut(h.producer.producer_id.max(0) as usize) else {
            continue;
        };
        if v.kind() == format::BatchKind::Data {
            p.next_seq = h.producer.base_sequence + h.records_count;
            p.in_txn = h.attributes.is_transactional();
        } else {
            p.in_txn = false;
        }
    }
    // A barrier after a producer's batches wipes it: it starts again at sequence 0.
    if let Some(barrier) = stored
        .iter()
        .rposition(|b| format::inspect(b, 0).unwrap().kind() == format::BatchKind::Barrier)
    {
        for (id, p) in producers.iter_mut().enumerate() {
            let after = stored[barrier..]
                .iter()
                .any(|b| format::inspect(b, 0).unwrap().header().producer.producer_id == id as i64);
            if !after {
                *p = Producer::default();
            }
        }
    }
    producers
}

/// Runs the workload (appends, transactions, commits, rolls, truncations, delete-records) until
/// it ends or the disk fails; returns the acknowledged stored batches.
fn workload(
    io: &mut SimIo,
    dir: &Path,
    seed: u64,
) -> (Vec<Vec<u8>>, Offset, Option<(Mode, ModeHistory)>) {
    let mut rng = Rng(seed | 1);
    let Ok(mut log) = PartitionLog::create(io, dir, CONFIG) else {
        return (Vec::new(), Offset(0), None);
    };
    // The newest log start a delete-records acknowledged.
    let mut log_start = Offset(0);
    let mut stored: Vec<Vec<u8>> = Vec::new();
    let mut acknowledged = 0;
    let mut producers = [Producer::default(); 2];
    let mut mirrored_seq = 0;
    // The leader epoch local appends are stamped with (a failover bumps it).
    let mut epoch = 0;
    for _ in 0..150 {
        let p = rng.below(2) as usize;
        if matches!(log.mode(), Mode::Mirroring { .. }) {
            let ok = match rng.below(16) {
                // Failover: ABORT markers for open transactions, the barrier; durable on return.
                0 => log
                    .stop_mirroring(io, epoch + 1, OpenTransactions::Abort, 1_764_403_200_000)
                    .and_then(|out| {
                        epoch += 1;
                        let mut at = out.last_mirrored_offset;
                        while at < log.log_end() {
                            let r = log.read(io, at, 1 << 20, Isolation::ReadUncommitted)?;
                            for b in BatchIter::new(&r.records, 0) {
                                stored.push(b.bytes().to_vec());
                                at = Offset(b.header().last_offset().0 + 1);
                            }
                        }
                        acknowledged = stored.len();
                        producers = [Producer::default(); 2];
                        Ok(())
                    }),
                1 => log.commit(io).map(|_| acknowledged = stored.len()),
                _ => {
                    // A mirrored batch: the source's offsets (here: the log end) and bytes; the
                    // source's producer 6 writes transactions, left open at a failover.
                    let pid = MIRRORED + (rng.below(2) as i64);
                    let records = 1 + rng.below(6) as i32;
                    let b = common::stored(
                        common::producer_batch(pid, mirrored_seq, records, pid != MIRRORED, 120),
                        log.log_end(),
                        7,
                    );
                    log.append(io, &b, Origin::Mirror).map(|_| {
                        stored.push(b);
                        mirrored_seq += records;
                    })
                }
            };
            if ok.is_err() {
                break;
            }
            continue;
        }
        let ok = match rng.below(20) {
            0 | 1 if producers[p].in_txn => {
                let marker = common::marker(p as i64, rng.below(2) == 0);
                log.append(io, &marker, Origin::Coordinator).map(|o| {
                    let mut bytes = marker;
                    format::stamp_base_offset(&mut bytes, o.first_offset).unwrap();
                    format::stamp_partition_leader_epoch(&mut bytes, epoch).unwrap();
                    stored.push(bytes);
                    producers[p].in_txn = false;
                })
            }
            2 => log.roll(io),
            3 if stored.len() > 4 => {
                // Truncate a few batches back; it is durable when it returns.
                let keep = stored.len() - 1 - rng.below(4) as usize;
                let cut = format::inspect(&stored[keep], 0)
                    .unwrap()
                    .header()
                    .base_offset;
                if cut < log.log_start() {
                    Ok(())
                } else {
                    let result = log.truncate_to(io, cut);
                    // A truncation that fails part-way may or may not have taken effect: from
                    // here on only the kept prefix is owed either way (the caller asked for the
                    // rest to go).
                    stored.truncate(keep);
                    acknowledged = acknowledged.min(keep);
                    result.map(|end| {
                        assert_eq!(end, cut);
                        acknowledged = stored.len();
                        producers = producers_of(&stored);
                    })
                }
            }
            5 => log
                .start_mirroring(io, "east", MirrorStart::Offset(log.log_end()))
                .map(|_| ()),
            6 if !producers.iter().any(|p| p.in_txn) => {
                // A barrier appended locally: the producer state is wiped, producers start over.
                let barrier = format::build_barrier(&format::BarrierSpec {
                    base_offset: Offset(0),
                    partition_leader_epoch: 0,
                    timestamp: 1_764_403_200_000,
                });
                log.append(io, &barrier, Origin::Coordinator).map(|o| {
                    stored.push(common::stored(barrier, o.first_offset, epoch));
                    producers = [Producer::default(); 2];
                })
            }
            7 => log.enforce_retention(io, 0).map(|_| ()),
            4 => log.commit(io).and_then(|hw| {
                acknowledged = stored.len();
                let target = Offset(log.log_start().0 + (hw.0 - log.log_start().0) / 3);
                log.delete_records(io, target)
                    .map(|start| log_start = start)
            }),
            _ => {
                let records = 1 + rng.below(10) as i32;
                let transactional = producers[p].in_txn || rng.below(4) == 0;
                let b = common::producer_batch(
                    p as i64,
                    producers[p].next_seq,
                    records,
                    transactional,
                    80,
                );
                log.append(io, &b, Origin::Client).map(|o| {
                    let mut bytes = b;
                    format::stamp_base_offset(&mut bytes, o.first_offset).unwrap();
                    format::stamp_partition_leader_epoch(&mut bytes, epoch).unwrap();
                    stored.push(bytes);
                    producers[p].next_seq += records;
                    producers[p].in_txn = transactional;
                })
            }
        };
        if ok.is_err() {
            break;
        }
        if rng.below(3) == 0 {
            match log.commit(io) {
                Ok(_) => acknowledged = stored.len(),
                Err(_) => break,
            }
        }
    }
    // The mode at the end, when the workload ran to its end (no power cut, no failure).
    let mut final_mode = None;
    if log.commit(io).is_ok() {
        acknowledged = stored.len();
        final_mode = Some((log.mode().clone(), log.mode_history().clone()));
    }
    stored.truncate(acknowledged);
    (stored, log_start, final_mode)
}

fn run_case(seed: u64, cut_after: Option<u64>, model: CrashModel) -> u64 {
    let dir = Path::new("/sim/crash-0");
    let mut io = SimIo::new(SimConfig {
        seed,
        power_cut_after_ops: cut_after,
        ..SimConfig::default()
    });
    let (acknowledged, log_start, final_mode) = workload(&mut io, dir, seed);
    let executed = io.executed_ops();
    let mut after = io.crash_with(seed ^ 0x5eed, model);
    let log = recovery::recover(&mut after, dir, CONFIG).unwrap_or_else(|e| {
        panic!("seed {seed}, cut {cut_after:?}, {model:?}: recovery failed: {e}")
    });
    // A second power cut right after recovery (before anything new is appended) must find the
    // same log: what recovery wrote must never outrank what it recovered.
    let recovered_end = log.log_end();
    drop(log);
    let mut after = after.crash_with(seed ^ 0xa9a1, model);
    let mut log = recovery::recover(&mut after, dir, CONFIG).unwrap_or_else(|e| {
        panic!("seed {seed}, cut {cut_after:?}, {model:?}: second recovery failed: {e}")
    });
    assert_eq!(
        log.log_end(),
        recovered_end,
        "seed {seed}, cut {cut_after:?}, {model:?}: a second recovery moved the log end"
    );
    assert!(
        log.log_start() >= log_start,
        "seed {seed}, cut {cut_after:?}, {model:?}: deleted records came back ({} < {log_start})",
        log.log_start()
    );
    let acked_end = acknowledged.last().map_or(Offset(0), |b| {
        Offset(format::inspect(b, 0).unwrap().header().last_offset().0 + 1)
    });
    assert!(
        log.log_end() >= acked_end,
        "seed {seed}, cut {cut_after:?}: lost acknowledged data ({} < {acked_end})",
        log.log_end()
    );
    // Every acknowledged batch from the recovered log start on, byte for byte; then whole
    // batches to the end.
    let mut got = Vec::new();
    let mut at = log.log_start();
    while at < log.high_watermark() {
        let r = log
            .read(&mut after, at, 1 << 20, Isolation::ReadUncommitted)
            .unwrap();
        let last = BatchIter::new(&r.records, 0)
            .last()
            .expect("whole batches")
            .header()
            .last_offset();
        got.extend_from_slice(&r.records);
        at = Offset(last.0 + 1);
    }
    let expected: Vec<u8> = acknowledged
        .iter()
        .filter(|b| format::inspect(b, 0).unwrap().header().last_offset() >= log.log_start())
        .flat_map(|b| b.iter().copied())
        .collect();
    assert!(
        got.len() >= expected.len() && got[..expected.len()] == expected[..],
        "seed {seed}, cut {cut_after:?}, {model:?}: acknowledged bytes differ"
    );
    // The recovered producer state is the one a fresh replay of every batch the log ever
    // held gives (those of deleted segments come from the acknowledged list; recovery knows
    // them from the snapshot at its first segment, which keeps only each producer's last
    // batch, as Kafka's does: so compare what a snapshot keeps).
    let readable = common::read_all(&mut after, &mut log);
    let first_readable = BatchIter::new(&readable, 0)
        .next()
        .map(|b| b.header().base_offset);
    let mut physical: Vec<u8> = acknowledged
        .iter()
        .filter(|b| {
            let base = format::inspect(b, 0).unwrap().header().base_offset;
            first_readable.is_none_or(|f| base < f)
        })
        .flat_map(|b| b.iter().copied())
        .collect();
    physical.extend_from_slice(&readable);
    let mut fresh = ProducerStateManager::new(CONFIG.producer);
    let history = log.mode_history().clone();
    for b in BatchIter::new(&physical, 0) {
        let info = BatchInfo::from_view(&b, b.header().base_offset);
        let staged = fresh
            .stage(&[info], Origin::Replication, |o| history.is_local(o))
            .unwrap();
        fresh.apply(staged).unwrap();
    }
    assert_eq!(
        common::snapshot_kept(log.producer_state()),
        common::snapshot_kept(&fresh),
        "seed {seed}, cut {cut_after:?}, {model:?}: producer state differs from a fresh replay"
    );
    // The rebuilt indexes agree with the log: a read at any batch's first or last offset
    // starts with that batch.
    for b in BatchIter::new(&readable, 0) {
        let h = b.header();
        for offset in [h.base_offset.max(log.log_start()), h.last_offset()] {
            let r = log
                .read(&mut after, offset, 1, Isolation::ReadUncommitted)
                .unwrap();
            let first = format::inspect(&r.records, 0).unwrap();
            assert_eq!(
                first.bytes(),
                b.bytes(),
                "seed {seed}, cut {cut_after:?}, {model:?}: read at {offset}"
            );
        }
    }
    // Without a power cut the recovered mode is the workload's; the recovered producers then
    // continue their sequences (after a failover if the partition was mirroring).
    if cut_after.is_none() {
        let recovered = (log.mode().clone(), log.mode_history().clone());
        assert_eq!(
            Some(recovered),
            final_mode,
            "seed {seed}: mode and mode history"
        );
    }
    if matches!(log.mode(), Mode::Mirroring { .. }) {
        log.stop_mirroring(&mut after, 9, OpenTransactions::Abort, 0)
            .unwrap_or_else(|e| panic!("seed {seed}: failover after recovery: {e}"));
    }
    for p in 0..2i64 {
        if let Some(e) = log.producer_state().get(p) {
            if e.current_txn_first_offset.is_none() {
                let next = common::producer_batch(p, e.last_seq() + 1, 1, false, 80);
                log.append(&mut after, &next, Origin::Client)
                    .unwrap_or_else(|err| panic!("seed {seed}: producer {p}: {err}"));
            }
        }
    }
    log.commit(&mut after).unwrap();
    executed
}

fn power_cuts(test: &str, model: CrashModel) {
    let seed = common::seed(test);
    let mut rng = Rng(seed | 1);
    for case in 0..CASES {
        let case_seed = seed.wrapping_add(case);
        // A dry run counts the operations; then cut power at a random one of them.
        let total = run_case(case_seed, None, model);
        let cut = 1 + rng.below(total);
        run_case(case_seed, Some(cut), model);
    }
}

#[test]
fn power_cuts_anywhere_lose_nothing_acknowledged() {
    power_cuts(
        "power_cuts_anywhere_lose_nothing_acknowledged",
        CrashModel::DropUnsynced,
    );
}

/// The same with unsynced writes kept, lost or torn at 512-byte sectors, independently.
#[test]
fn power_cuts_with_torn_writes_lose_nothing_acknowledged() {
    power_cuts(
        "power_cuts_with_torn_writes_lose_nothing_acknowledged",
        CrashModel::Torn,
    );
}
