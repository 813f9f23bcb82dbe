//! The journal's write protocol against power cuts: a shard's rounds as
//! blocks of many partitions' entries, in a journal small enough to wrap many times, space
//! released by superblocks as partitions would checkpoint. A power cut at every I/O operation,
//! under both crash models, then reading the journal as recovery does, must find:
//! - every acknowledged block not yet released, with exactly the entries written;
//! - no block that was not written, and no block whose bytes differ from what was written;
//! - lsns in order from where the newest durable superblock says.
//!
//! A journal created again over an old one shows none of its blocks, at every power cut of
//! the creation.
//!
//! Replay with `MIRRORLOG_SEED`.

mod common;

use mirrorlog::format::Offset;
use mirrorlog::internals::io::{CrashModel, Io, SimConfig, SimIo};
use mirrorlog::internals::journal::{
    self, read_chain, Entry, Finished, Flush, JournalWriter, Reserve, FIRST_BLOCK_POSITION,
};
use std::collections::BTreeMap;
use std::path::Path;

const DIR: &str = "/sim/data";
const JOURNAL_BYTES: u64 = 1 << 20;
const ROUNDS: usize = 60;

/// One entry as written: key, start, inline bytes.
type Written = (String, u64, Vec<u8>);

#[derive(Default)]
struct Outcome {
    /// Every block submitted, by lsn, with its entries.
    submitted: BTreeMap<u64, Vec<Written>>,
    /// Blocks whose write and fdatasync completed.
    acknowledged: Vec<u64>,
    /// The highest lsn a release was submitted below (durable or not).
    release_started: u64,
}

fn inline_bytes(seed: u64, round: usize, partition: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed as usize ^ round.wrapping_mul(31) ^ partition.wrapping_mul(7) ^ i) as u8)
        .collect()
}

/// Drives the writer until `until` says so, feeding every completion back.
fn drive(
    io: &mut SimIo,
    w: &mut JournalWriter,
    out: &mut Outcome,
    mut until: impl FnMut(&JournalWriter) -> bool,
) -> Result<(), String> {
    let mut completions = Vec::new();
    while !until(w) {
        io.complete(1, &mut completions)
            .map_err(|e| e.to_string())?;
        for c in completions.drain(..) {
            match w.on_completion(io, c).map_err(|e| e.to_string())? {
                Finished::Blocks { last } => {
                    let from = out.acknowledged.last().map_or(0, |l| l + 1);
                    out.acknowledged
                        .extend(out.submitted.range(from..=last).map(|(&l, _)| l));
                }
                Finished::Released(_) | Finished::Nothing | Finished::Syncing(_) => {}
            }
        }
    }
    Ok(())
}

/// The workload; stops at the first I/O error (the power cut).
fn workload(io: &mut SimIo, seed: u64, out: &mut Outcome) -> Result<(), String> {
    let path = Path::new(DIR).join(journal::file_name(0));
    io.create_dir(Path::new(DIR)).map_err(|e| e.to_string())?;
    let mut w = JournalWriter::create(io, &path, 0, JOURNAL_BYTES, 1).map_err(|e| e.to_string())?;
    let mut rng = common::Rng(seed | 1);
    for round in 0..ROUNDS {
        // As the shard does: past half full, partitions checkpoint past all but the newest
        // few blocks, then the space is released.
        if w.ring().used_bytes() * 2 > w.ring().capacity_bytes() {
            let newest = w.ring().next_lsn().saturating_sub(3).max(1);
            out.release_started = out.release_started.max(newest);
            if w.release_below(io, newest)
                .map_err(|e| e.to_string())?
                .is_some()
            {
                let target = newest;
                drive(io, &mut w, out, |w| {
                    w.ring().oldest_live_lsn().is_none_or(|l| l >= target)
                })?;
            }
        }
        let partitions = 1 + rng.below(40) as usize;
        let mut entries: BTreeMap<u64, Vec<Written>> = BTreeMap::new();
        for p in 0..partitions {
            // Every fourth round is large: its entries fill more than one block.
            let len = rng.below(if round % 4 == 0 { 24_000 } else { 3000 }) as usize;
            let key = format!("t-{p}");
            let bytes = inline_bytes(seed, round, p, len);
            let entry = Entry {
                key: &key,
                segment_base: Offset(0),
                segment_id: 1,
                record_sequence: 1,
                start: round as u64 * 10_000,
                inline_from: round as u64 * 10_000,
                end: round as u64 * 10_000 + len as u64,
                next_offset: Offset(round as i64),
                inline: &bytes,
            };
            // Entries past one block fill the next: one flush writes them all.
            let Reserve::At(lsn) = w.reserve(io, entry.encoded_bytes()) else {
                break;
            };
            w.push(&entry).map_err(|e| e.to_string())?;
            entries
                .entry(lsn)
                .or_default()
                .push((key.clone(), entry.start, bytes.clone()));
        }
        match w.start_flush(io, 64).map_err(|e| e.to_string())? {
            Flush::Started { first, last, .. } => {
                assert_eq!(
                    (first..=last).collect::<Vec<_>>(),
                    entries.keys().copied().collect::<Vec<_>>()
                );
                out.submitted.append(&mut entries);
            }
            Flush::Nothing => assert!(entries.is_empty()),
            Flush::Full => return Err("full though every block was placed".into()),
        }
        // One flush is in flight at a time.
        drive(io, &mut w, out, |w| !w.flushing())?;
    }
    Ok(())
}

fn check(after: &SimIo, out: &Outcome, context: &str) {
    let path = Path::new(DIR).join(journal::file_name(0));
    let Some(file) = after.file_bytes(&path) else {
        assert!(
            out.acknowledged.is_empty(),
            "{context}: the journal vanished"
        );
        return;
    };
    let chain = match read_chain(file) {
        Ok(chain) => chain,
        Err(e) => {
            assert!(out.acknowledged.is_empty(), "{context}: {e}");
            return;
        }
    };
    let lsns: Vec<u64> = chain.blocks.iter().map(|b| b.lsn).collect();
    for pair in lsns.windows(2) {
        assert_eq!(pair[1], pair[0] + 1, "{context}: lsns {lsns:?}");
    }
    for block in &chain.blocks {
        let written = out
            .submitted
            .get(&block.lsn)
            .unwrap_or_else(|| panic!("{context}: block {} never written", block.lsn));
        let read: Vec<Written> = block
            .entries
            .iter()
            .map(|e| (e.key.to_string(), e.start, e.inline.to_vec()))
            .collect();
        assert_eq!(&read, written, "{context}: block {}", block.lsn);
        assert!(block.position >= FIRST_BLOCK_POSITION);
    }
    for &lsn in out
        .acknowledged
        .iter()
        .filter(|&&l| l >= out.release_started)
    {
        assert!(
            lsns.contains(&lsn),
            "{context}: acknowledged block {lsn} lost (chain {lsns:?})"
        );
    }
}

#[test]
fn a_power_cut_at_every_operation_keeps_every_acknowledged_block() {
    let seed = common::seed("journal_crash_sweep");
    let mut whole = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let mut out = Outcome::default();
    workload(&mut whole, seed, &mut out).expect("the uncut run");
    // It wrapped, released and acknowledged every block; some flushes wrote several.
    assert_eq!(out.acknowledged.len(), out.submitted.len());
    assert!(
        out.submitted.len() > ROUNDS,
        "no flush wrote more than one block"
    );
    assert!(out.release_started > 1, "the journal never filled");
    check(&whole.crash(seed), &out, "no cut");
    let ops = whole.executed_ops();
    for cut in 0..ops {
        for model in [CrashModel::DropUnsynced, CrashModel::Torn] {
            let mut io = SimIo::new(SimConfig {
                seed,
                power_cut_after_ops: Some(cut),
                ..SimConfig::default()
            });
            let mut out = Outcome::default();
            let _ = workload(&mut io, seed, &mut out);
            let after = io.crash_with(seed ^ cut, model);
            check(&after, &out, &format!("seed {seed} cut {cut} {model:?}"));
        }
    }
}

/// A journal created again over an old one (the next run's, once the old one is replayed)
/// shows none of the old blocks, even though the old superblocks had higher sequences, and a
/// power cut right after the creation leaves either the old journal whole or the new one
/// empty, never a mix.
#[test]
fn a_recreated_journal_shows_nothing_of_the_old_one() {
    let seed = common::seed("a_recreated_journal_shows_nothing_of_the_old_one");
    let mut io = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let mut out = Outcome::default();
    workload(&mut io, seed, &mut out).expect("the first run");
    let mut io = io.crash(seed);
    let path = Path::new(DIR).join(journal::file_name(0));
    let old: Vec<u64> = read_chain(io.file_bytes(&path).unwrap())
        .unwrap()
        .blocks
        .iter()
        .map(|b| b.lsn)
        .collect();
    assert!(!old.is_empty());
    let next = out.submitted.keys().max().unwrap() + 1;
    let before = io.executed_ops();
    JournalWriter::create(&mut io, &path, 0, JOURNAL_BYTES, next).unwrap();
    let chain = read_chain(io.file_bytes(&path).unwrap()).unwrap();
    assert!(chain.blocks.is_empty());
    assert_eq!(chain.next_lsn, next);
    // Cut at every operation of the creation.
    let ops = io.executed_ops() - before;
    for cut in 0..ops {
        let mut again = SimIo::new(SimConfig {
            seed,
            ..SimConfig::default()
        });
        let mut out = Outcome::default();
        workload(&mut again, seed, &mut out).unwrap();
        let mut again = again.crash(seed);
        again.set_power_cut_in(Some(cut));
        let _ = JournalWriter::create(&mut again, &path, 0, JOURNAL_BYTES, next);
        for model in [CrashModel::DropUnsynced, CrashModel::Torn] {
            let after = again.crash_with(seed ^ cut, model);
            let lsns: Vec<u64> = after
                .file_bytes(&path)
                .and_then(|f| read_chain(f).ok())
                .map(|c| c.blocks.iter().map(|b| b.lsn).collect())
                .unwrap_or_default();
            assert!(
                lsns.is_empty() || lsns == old,
                "cut {cut} {model:?}: {lsns:?} is neither the old journal nor an empty one"
            );
        }
    }
}
