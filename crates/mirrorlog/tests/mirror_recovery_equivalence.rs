//! Recovery equivalence with mirroring (design.md §Mirroring): random sequences of operations on one
//! partition — client appends and transactions, mirrored batches, start / stop / pause /
//! resume of mirroring, failovers and failbacks (start with truncation), truncations, rolls —
//! and after every step, a power cut (everything acknowledged is durable) and recovery must
//! give back the same producer state, mode, mode history, log end, high watermark and LSO.
//! Seeded; replay with `MIRRORLOG_SEED`.

mod common;

use common::Rng;
use mirrorlog::api::Origin;
use mirrorlog::format::Offset;
use mirrorlog::internals::io::{SimConfig, SimIo};
use mirrorlog::internals::log::{LogConfig, MirrorStart, Mode, OpenTransactions, PartitionLog};
use mirrorlog::internals::recovery;
use std::path::Path;

const CONFIG: LogConfig = common::log_config(16 << 10, 1024, 16 << 10);

fn next_seq(log: &PartitionLog, pid: i64) -> i32 {
    log.producer_state()
        .get(pid)
        .map_or(0, |e| e.last_seq() + 1)
}

/// One random step; its errors (a rule rejecting it) are part of the test, not failures.
fn step(rng: &mut Rng, io: &mut SimIo, log: &mut PartitionLog, epoch: &mut i32) -> String {
    let mirroring = matches!(log.mode(), Mode::Mirroring { .. });
    let choice = rng.below(14);
    let r: Result<(), String> = match choice {
        0..=4 if !mirroring => {
            let pid = rng.below(3) as i64;
            let in_txn = log
                .producer_state()
                .get(pid)
                .is_some_and(|e| e.current_txn_first_offset.is_some());
            if in_txn && rng.below(2) == 0 {
                log.append(
                    io,
                    &common::marker(pid, rng.below(2) == 0),
                    Origin::Coordinator,
                )
                .map(|_| ())
                .map_err(|e| e.to_string())
            } else {
                let txn = in_txn || rng.below(3) == 0;
                let b = common::producer_batch(
                    pid,
                    next_seq(log, pid),
                    1 + rng.below(4) as i32,
                    txn,
                    50,
                );
                log.append(io, &b, Origin::Client)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        }
        0 if mirroring => {
            // The source failed over once: its barrier arrives mirrored, and clears nothing.
            let barrier = mirrorlog::format::build_barrier(&mirrorlog::format::BarrierSpec {
                base_offset: log.log_end(),
                partition_leader_epoch: 3,
                timestamp: 1_764_403_200_000,
            });
            log.append(io, &barrier, Origin::Mirror)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        1..=6 if mirroring => {
            let pid = 10 + rng.below(2) as i64;
            let b = common::stored(
                common::producer_batch(
                    pid,
                    next_seq(log, pid),
                    1 + rng.below(4) as i32,
                    pid == 11,
                    50,
                ),
                log.log_end(),
                3,
            );
            log.append(io, &b, Origin::Mirror)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        7 => {
            // Start (or fail back): truncate somewhere in the log first.
            let span = (log.log_end().0 - log.log_start().0).max(0) as u64;
            let to = Offset(log.log_start().0 + rng.below(span + 1) as i64);
            log.start_mirroring(io, "peer", MirrorStart::Offset(to))
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        8 => {
            *epoch += 1;
            let open = if rng.below(2) == 0 {
                OpenTransactions::Abort
            } else {
                OpenTransactions::TruncateToLso
            };
            log.stop_mirroring(io, *epoch, open, 1_764_403_200_000)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        9 => log.pause_mirroring(io).map_err(|e| e.to_string()),
        10 => log.resume_mirroring(io).map_err(|e| e.to_string()),
        11 => {
            let span = (log.log_end().0 - log.log_start().0).max(0) as u64;
            let to = Offset(log.log_start().0 + rng.below(span + 1) as i64);
            log.truncate_to(io, to)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        12 => log.roll(io).map_err(|e| e.to_string()),
        _ => Ok(()),
    };
    let committed = log.commit(io).map(|_| ()).map_err(|e| e.to_string());
    format!("choice {choice}: {r:?}, commit {committed:?}")
}

type Observed = (
    Vec<common::Kept>,
    usize,
    Mode,
    mirrorlog::internals::log::ModeHistory,
    Offset,
    Offset,
    Offset,
);

fn observe(log: &PartitionLog) -> Observed {
    (
        common::snapshot_kept(log.producer_state()),
        log.producer_state().len(),
        log.mode().clone(),
        log.mode_history().clone(),
        log.log_end(),
        log.high_watermark(),
        log.last_stable_offset(),
    )
}

#[test]
fn every_step_survives_a_power_cut_unchanged() {
    let seed = common::seed("every_step_survives_a_power_cut_unchanged");
    let mut stops = 0;
    let mut barriers_kept = 0;
    for case in 0..40u64 {
        let mut rng = Rng(seed.wrapping_add(case) | 1);
        let dir = Path::new("/sim/equivalence");
        let mut io = SimIo::new(SimConfig {
            seed: seed.wrapping_add(case),
            ..SimConfig::default()
        });
        let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
        let mut epoch = 0;
        let mut trail = Vec::new();
        for n in 0..60 {
            let what = step(&mut rng, &mut io, &mut log, &mut epoch);
            stops += usize::from(what.starts_with("choice 8: Ok"));
            if std::env::var("EQ_TRACE").is_ok() {
                eprintln!("{what} end {:?} mode {:?}", log.log_end(), log.mode());
            }
            trail.push(what);
            let before = observe(&log);
            let mut after = io.crash(seed ^ n);
            let recovered = recovery::recover(&mut after, dir, CONFIG)
                .unwrap_or_else(|e| panic!("seed {seed} case {case} step {n}: {e}\n{trail:#?}"));
            assert_eq!(
                observe(&recovered),
                before,
                "seed {seed} case {case} step {n}\n{trail:#?}"
            );
        }
        // Mirrored producers still known after a failback means a barrier inside a mirrored
        // range was kept without clearing.
        barriers_kept += usize::from(log.producer_state().get(10).is_some() && epoch > 0);
    }
    eprintln!("{stops} failovers, {barriers_kept} cases ending with mirrored producers after one");
    assert!(stops > 20, "the sequences fail over: {stops}");
}
