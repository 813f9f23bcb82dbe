//! Injected I/O errors through the `Io` seam (the simulated disk's `Fault`s), one at a time on
//! each operation type — write, fdatasync, read, fallocate, rename, open — at seeded random
//! points of a workload over three partitions sharing one `Io` (as a shard's partitions do):
//! client appends with commits, rolls (small segments: fallocate, open, snapshot renames) and
//! reads.
//!
//! For every case:
//! - nothing is acknowledged after a failed write or sync: every commit that returned `Ok`
//!   survives a power cut (the disk keeps only synced bytes) and recovery, byte for byte;
//! - the partition that met a failed write, sync, fallocate, open or rename is poisoned with
//!   that first error: every later append or commit on it fails with `Poisoned(first)`; a
//!   failed read fails that read only (it changes nothing on disk);
//! - the other partitions keep appending and committing;
//! - after the power cut, recovery opens every partition and the producer state continues.
//!
//! ENOSPC and EMFILE (no file descriptor) on an open are not poisonous where nothing changed:
//! the append fails with `DiskFull` or `TooManyOpenFiles` and appends go on afterwards; EMFILE
//! never poisons (a roll opens every file it needs before it changes anything).
//!
//! `MIRRORLOG_SEED` replays a run; the case count is `CASES` per operation type.

mod common;

use common::Rng;
use mirrorlog::api::Origin;
use mirrorlog::format::Offset;
use mirrorlog::internals::io::{Fault, OpKind, SimConfig, SimIo};
use mirrorlog::internals::log::{Isolation, LogConfig, LogError, PartitionLog};
use mirrorlog::internals::recovery;
use std::path::PathBuf;

const CONFIG: LogConfig = common::log_config(16 << 10, 1024, 8 << 10);
const PARTITIONS: usize = 3;
const CASES: u64 = 200;
const STEPS: usize = 120;

fn dirs() -> Vec<PathBuf> {
    (0..PARTITIONS)
        .map(|p| PathBuf::from(format!("/sim/faults-{p}")))
        .collect()
}

/// What one partition went through.
#[derive(Default)]
struct Partition {
    /// Batches whose commit returned `Ok`, as stored.
    acked: Vec<Vec<u8>>,
    /// Appended, not yet committed.
    pending: Vec<Vec<u8>>,
    next_seq: i32,
    /// The first error of a write, sync, fallocate, open or rename, and the step it came at.
    poisoned: Option<(LogError, usize)>,
    /// The steps at which a commit was acknowledged.
    commits: Vec<usize>,
}

fn poisonous(e: &LogError) -> bool {
    !matches!(e, LogError::DiskFull)
}

/// What a run leaves: per partition, the disk, the failed reads, and how many operations of
/// each of [`KINDS`] the workload itself executed.
struct Run {
    parts: Vec<Partition>,
    io: SimIo,
    read_errors: u64,
    ops: Vec<u64>,
}

/// Runs the workload with `fault` armed once the partitions exist.
fn workload(seed: u64, fault: Option<Fault>) -> Run {
    let mut io = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let mut rng = Rng(seed | 1);
    let mut logs: Vec<PartitionLog> = dirs()
        .iter()
        .map(|d| PartitionLog::create(&mut io, d, CONFIG).unwrap())
        .collect();
    // Armed once the partitions exist: `nth` counts the workload's operations of the kind.
    if let Some(f) = fault {
        io.inject(f);
    }
    let mut parts: Vec<Partition> = (0..PARTITIONS).map(|_| Partition::default()).collect();
    let mut read_errors = 0;
    let armed: Vec<(OpKind, u64)> = KINDS.iter().map(|&k| (k, io.ops_of(k))).collect();
    for step in 0..STEPS {
        let p = rng.below(PARTITIONS as u64) as usize;
        let (log, part) = (&mut logs[p], &mut parts[p]);
        match rng.below(8) {
            0..=4 => {
                let b = common::producer_batch(p as i64, part.next_seq, 2, false, 300);
                match log.append(&mut io, &b, Origin::Client) {
                    Ok(out) => {
                        assert!(
                            part.poisoned.is_none(),
                            "seed {seed}: a poisoned log appended"
                        );
                        part.next_seq += 2;
                        part.pending.push(common::stored(b, out.first_offset, 0));
                    }
                    Err(e) => note(seed, part, e, step),
                }
            }
            5 | 6 => match log.commit(&mut io) {
                Ok(_) => {
                    assert!(
                        part.poisoned.is_none(),
                        "seed {seed}: a poisoned log committed"
                    );
                    let done = std::mem::take(&mut part.pending);
                    part.acked.extend(done);
                    part.commits.push(step);
                }
                Err(e) => note(seed, part, e, step),
            },
            _ => {
                let at = Offset(rng.below(log.log_end().0.max(1) as u64) as i64);
                match log.read(&mut io, at, 4096, Isolation::ReadUncommitted) {
                    Ok(_) => {}
                    // A failed read changes nothing: the partition is not poisoned by it.
                    Err(_) => read_errors += 1,
                }
            }
        }
    }
    let ops = armed
        .iter()
        .map(|&(k, before)| io.ops_of(k) - before)
        .collect();
    Run {
        parts,
        io,
        read_errors,
        ops,
    }
}

const KINDS: [OpKind; 6] = [
    OpKind::Write,
    OpKind::Fdatasync,
    OpKind::Read,
    OpKind::Fallocate,
    OpKind::Rename,
    OpKind::Open,
];

fn note(seed: u64, part: &mut Partition, e: LogError, step: usize) {
    match &part.poisoned {
        Some((first, _)) => assert_eq!(
            e,
            LogError::Poisoned(Box::new(first.clone())),
            "seed {seed}: a poisoned log answers with its first error"
        ),
        None => {
            if let LogError::Poisoned(first) = &e {
                panic!("seed {seed}: poisoned ({first}) without a first error seen");
            }
            if poisonous(&e) {
                // Not-yet-committed appends were never acknowledged: drop them from the oracle.
                part.pending.clear();
                part.poisoned = Some((e, step));
            }
        }
    }
}

/// Power cut (only synced bytes stay), recovery of each partition, every acknowledged batch
/// back; a new append continues each producer's sequence.
fn check_after_power_cut(seed: u64, parts: &[Partition], io: &SimIo) {
    let mut after = io.crash(seed ^ 0xfa17);
    for (p, dir) in dirs().iter().enumerate() {
        let mut log = recovery::recover(&mut after, dir, CONFIG)
            .unwrap_or_else(|e| panic!("seed {seed}: partition {p} does not recover: {e}"));
        let got = common::read_all(&mut after, &mut log);
        let expected: Vec<u8> = parts[p].acked.iter().flatten().copied().collect();
        assert!(
            got.len() >= expected.len() && got[..expected.len()] == expected[..],
            "seed {seed}: partition {p} lost acknowledged bytes"
        );
        // The producer continues where the log says it stopped.
        let next_seq = log
            .producer_state()
            .get(p as i64)
            .map_or(0, |e| e.last_seq() + 1);
        let b = common::producer_batch(p as i64, next_seq, 1, false, 10);
        log.append(&mut after, &b, Origin::Client)
            .unwrap_or_else(|e| panic!("seed {seed}: partition {p} after recovery: {e}"));
        log.commit(&mut after).unwrap();
    }
}

/// A fault of `errno` on one of the operations of `kind` the workload of `seed` does, chosen
/// at random from a clean run of the same workload (`None`: it does none).
fn place_fault(seed: u64, kind: OpKind, errno: i32) -> Option<Fault> {
    let clean = workload(seed, None);
    assert!(clean.parts.iter().all(|p| p.poisoned.is_none()));
    let count = clean.ops[KINDS.iter().position(|&k| k == kind)?];
    (count > 0).then(|| Fault {
        kind,
        nth: Rng(seed ^ 0x10).below(count),
        errno,
    })
}

fn faults_on(kind: OpKind, test: &str) {
    let seed = common::seed(test);
    let (mut met, mut poisoned, mut survivors_kept_going, mut read_failures) = (0, 0, 0, 0);
    for case in 0..CASES {
        let case_seed = seed.wrapping_add(case);
        let Some(fault) = place_fault(case_seed, kind, libc::EIO) else {
            continue; // this workload never did one (no roll, say)
        };
        met += 1;
        let run = workload(case_seed, Some(fault));
        read_failures += run.read_errors;
        let hit: Vec<usize> = (0..PARTITIONS)
            .filter(|&p| run.parts[p].poisoned.is_some())
            .collect();
        assert!(
            hit.len() <= 1,
            "seed {case_seed}: one fault poisons at most one partition"
        );
        if let Some(&p) = hit.first() {
            poisoned += 1;
            let at = run.parts[p].poisoned.as_ref().map_or(0, |(_, step)| *step);
            // Another partition of the same Io acknowledged a commit after the fault.
            if (0..PARTITIONS).any(|q| q != p && run.parts[q].commits.iter().any(|&c| c > at)) {
                survivors_kept_going += 1;
            }
        }
        check_after_power_cut(case_seed, &run.parts, &run.io);
    }
    eprintln!(
        "{kind:?}: {CASES} cases (seed {seed}), {met} met the fault, {poisoned} poisoned a partition, {survivors_kept_going} of those with another partition acknowledging afterwards, {read_failures} failed reads"
    );
    match kind {
        OpKind::Read => assert!(read_failures > 0 && poisoned == 0, "reads fail alone"),
        _ => {
            assert_eq!(poisoned, met, "every fault met poisons its partition");
            assert!(survivors_kept_going > 0, "the other partitions kept going");
        }
    }
}

#[test]
fn eio_on_write() {
    faults_on(OpKind::Write, "eio_on_write");
}

#[test]
fn eio_on_fdatasync() {
    faults_on(OpKind::Fdatasync, "eio_on_fdatasync");
}

#[test]
fn eio_on_read() {
    faults_on(OpKind::Read, "eio_on_read");
}

#[test]
fn eio_on_fallocate() {
    faults_on(OpKind::Fallocate, "eio_on_fallocate");
}

#[test]
fn eio_on_rename() {
    faults_on(OpKind::Rename, "eio_on_rename");
}

#[test]
fn eio_on_open() {
    faults_on(OpKind::Open, "eio_on_open");
}

/// ENOSPC instead of EIO, on each operation a roll does (open and preallocate the next
/// segment, write the sealed segment's files and the snapshot, rename it into place) and on
/// the commit rounds' writes. At a roll: the append that met it fails with `DiskFull`, the
/// partition is not poisoned and keeps appending once the disk has room again (no fault is
/// planned after it), every acknowledged batch reading back. In a commit round (a data write:
/// possible even into preallocated pages, e.g. on thin-provisioned storage): the round's
/// outcome is unknown, so the partition is poisoned with `DiskFull` and the remedy is a
/// restart. Either way a power cut then recovers every acknowledged batch.
fn enospc_on(kind: OpKind, test: &str) {
    let seed = common::seed(test);
    let (mut met, mut full, mut poisoned) = (0, 0, 0);
    for case in 0..CASES {
        let case_seed = seed.wrapping_add(case);
        let Some(fault) = place_fault(case_seed, kind, libc::ENOSPC) else {
            continue; // this workload never did one (no roll, say)
        };
        met += 1;
        match workload_transient(case_seed, fault, &LogError::DiskFull) {
            Outcome::WentOn => full += 1,
            Outcome::Poisoned => poisoned += 1,
            Outcome::Unnoticed => {}
        }
    }
    eprintln!("{kind:?} ENOSPC: {CASES} cases (seed {seed}), {met} met the fault, {full} answered DiskFull and went on, {poisoned} poisoned (a failed commit round, or a step of a roll that cannot be undone)");
    assert!(full + poisoned > 0);
}

/// How a partition took an ENOSPC.
enum Outcome {
    /// `DiskFull`, then appends went on.
    WentOn,
    /// A commit round failed: poisoned with `DiskFull` until a restart.
    Poisoned,
    /// The fault hit nothing the partition reports (a read).
    Unnoticed,
}

/// One partition appending and committing through a fault that must surface as `expected`
/// (ENOSPC: `DiskFull`; EMFILE: `TooManyOpenFiles`), and never poison unless a commit round
/// failed.
fn workload_transient(seed: u64, fault: Fault, expected: &LogError) -> Outcome {
    let dir = PathBuf::from("/sim/enospc-0");
    let mut io = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let mut log = PartitionLog::create(&mut io, &dir, CONFIG).unwrap();
    io.inject(fault);
    let mut acked: Vec<Vec<u8>> = Vec::new();
    let mut pending: Vec<Vec<u8>> = Vec::new();
    let mut seq = 0;
    let (mut disk_full, mut poisoned) = (false, false);
    let mut note = |e: LogError, step: usize| match e {
        e if e == *expected => disk_full = true,
        LogError::Poisoned(first) if *first == *expected => poisoned = true,
        e => panic!("seed {seed}, step {step}: the fault must be {expected}, got {e}"),
    };
    for step in 0..STEPS {
        let b = common::producer_batch(1, seq, 2, false, 300);
        match log.append(&mut io, &b, Origin::Client) {
            Ok(out) => {
                seq += 2;
                pending.push(common::stored(b, out.first_offset, 0));
            }
            Err(e) => note(e, step),
        }
        if step % 3 == 2 {
            match log.commit(&mut io) {
                Ok(_) => acked.append(&mut pending),
                Err(e) => note(e, step),
            }
        }
    }
    let expected: Vec<u8> = if poisoned {
        acked.iter().flatten().copied().collect()
    } else {
        log.commit(&mut io)
            .unwrap_or_else(|e| panic!("seed {seed}: the fault has passed: {e}"));
        acked.append(&mut pending);
        let expected: Vec<u8> = acked.iter().flatten().copied().collect();
        let got = common::read_all(&mut io, &mut log);
        assert!(
            got == expected,
            "seed {seed}: reads after the fault {fault:?}: {} bytes read, {} expected",
            got.len(),
            expected.len()
        );
        expected
    };
    let mut after = io.crash(seed ^ 0x5eed);
    let mut log = recovery::recover(&mut after, &dir, CONFIG).unwrap();
    let got = common::read_all(&mut after, &mut log);
    assert!(
        got.len() >= expected.len() && got[..expected.len()] == expected[..],
        "seed {seed}: acknowledged batches lost after the fault and a power cut"
    );
    if poisoned {
        Outcome::Poisoned
    } else if disk_full {
        Outcome::WentOn
    } else {
        Outcome::Unnoticed
    }
}

#[test]
fn enospc_on_fallocate() {
    enospc_on(OpKind::Fallocate, "enospc_on_fallocate");
}

#[test]
fn enospc_on_write() {
    enospc_on(OpKind::Write, "enospc_on_write");
}

#[test]
fn enospc_on_open() {
    enospc_on(OpKind::Open, "enospc_on_open");
}

#[test]
fn enospc_on_rename() {
    enospc_on(OpKind::Rename, "enospc_on_rename");
}

#[test]
fn emfile_on_open_never_poisons() {
    // No descriptor for a file a roll opens (the segment, its read handle, its indexes, the
    // snapshot, the recovery point): the append fails with TooManyOpenFiles, nothing is
    // poisoned, and appends go on once a descriptor is free again; nothing acknowledged is lost.
    let seed = common::seed("emfile_on_open_never_poisons");
    let expected = LogError::TooManyOpenFiles {
        errno: libc::EMFILE,
    };
    let (mut met, mut went_on) = (0, 0);
    for case in 0..CASES {
        let case_seed = seed.wrapping_add(case);
        let Some(fault) = place_fault(case_seed, OpKind::Open, libc::EMFILE) else {
            continue;
        };
        met += 1;
        match workload_transient(case_seed, fault, &expected) {
            Outcome::WentOn => went_on += 1,
            Outcome::Poisoned => panic!("seed {case_seed}: EMFILE poisoned the partition"),
            Outcome::Unnoticed => {}
        }
    }
    eprintln!("Open EMFILE: {CASES} cases (seed {seed}), {met} met the fault, {went_on} answered TooManyOpenFiles and went on");
    assert!(went_on > 0);
}
