//! The `mirrorlog` tool as a user runs it, on a data directory the engine wrote: a partition
//! with client, transactional, aborted, mirrored and barrier batches over several sealed
//! segments and an active one.
//!
//! - `dump` prints one line per batch, and `--json` objects whose fields equal what was
//!   written (offsets, producer fields, control types, CRC validity); `--records` shows keys and
//!   values safely; every other file kind dumps.
//! - `verify` finds nothing on the clean directory (exit 0), and names the file and position of
//!   each kind of damage planted in a copy (exit 1): a flipped byte in a sealed segment, an
//!   index that disagrees, a snapshot that disagrees with the replay, a mode history that
//!   stops mirroring without a barrier. Missing paths and foreign directories exit 2.
//! - `stat` prints the figures the engine itself reports for the partition, and for a compacted
//!   one its policy, cleaner checkpoint and dirty ratio; `verify` finds a compacted partition
//!   clean and names a key kept twice below the checkpoint.
//! - `dump` of a shard's journal shows its superblock, each live block and each entry;
//!   `verify` holds the journal against the segments.
//! - No bytes make `dump` or `verify` panic (property test over every file kind, seeded).

#[path = "../../mirrorlog/tests/common/mod.rs"]
mod common;

use mirrorlog::api::Origin;
use mirrorlog::engine::{
    Engine, EngineConfig, MirrorStart, OpenTransactions, PartitionConfig, StartMirroring,
    StopMirroring, TopicPartition,
};
use mirrorlog::format::{BatchIter, Offset};
use mirrorlog::inspect::{self, DumpOptions};
use proptest::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn tool() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mirrorlog"))
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = tool().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What the engine reported, to hold `stat` against.
struct Written {
    dir: tempfile::TempDir,
    partition: PathBuf,
    log_end: Offset,
    last_stable: Offset,
    producers: usize,
}

/// A partition with every kind of batch, small segments (several sealed), closed cleanly,
/// with one transaction left open.
fn write_partition() -> Written {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let tp = TopicPartition::new("orders", 0);
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1)).unwrap();
    let config = PartitionConfig {
        segment_bytes: 64 << 10,
        max_message_bytes: 32 << 10,
        append_buffer_bytes: 256 << 10,
        ..PartitionConfig::default()
    };
    engine.create_partition(&tp, config).wait().unwrap();
    let append = |b: Vec<u8>, origin| {
        engine.append(&tp, b, origin).wait().unwrap();
    };
    let mut seq = 0;
    for i in 0..20 {
        append(
            common::producer_batch(1, seq, 3, false, 2000 + i),
            Origin::Client,
        );
        seq += 3;
    }
    append(common::producer_batch(2, 0, 1, true, 50), Origin::Client);
    append(common::marker(2, false), Origin::Coordinator);
    append(common::producer_batch(2, 1, 1, true, 50), Origin::Client);
    append(common::marker(2, true), Origin::Coordinator);
    // Mirror a source's batches (their own offsets), then stop: the barrier.
    let mut at = engine
        .start_mirroring(
            &tp,
            StartMirroring {
                source: "east".into(),
                truncate_to: MirrorStart::LastStableOffset,
            },
        )
        .wait()
        .unwrap();
    for s in 0..10 {
        let b = common::stored(common::producer_batch(9, s * 2, 2, false, 3000), at, 4);
        append(b, Origin::Mirror);
        at = Offset(at.0 + 2);
    }
    engine
        .stop_mirroring(
            &tp,
            StopMirroring {
                leader_epoch: 5,
                open_transactions: OpenTransactions::Abort,
            },
        )
        .wait()
        .unwrap();
    append(common::producer_batch(3, 0, 1, true, 50), Origin::Client);
    let state = engine.state(&tp).wait().unwrap();
    engine.close().unwrap();
    Written {
        partition: dir.path().join(tp.dir_name()),
        dir,
        log_end: state.log_end,
        last_stable: state.last_stable_offset,
        producers: state.producer_count,
    }
}

fn logs(partition: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(partition)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn dump_prints_every_batch_with_the_fields_written() {
    let w = write_partition();
    let files = logs(&w.partition);
    assert!(files.len() >= 3, "several segments: {files:?}");
    let mut offsets = Vec::new();
    let mut kinds = Vec::new();
    for f in &files {
        let (code, out, err) = run(&["dump", "--json", f.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        for line in out.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            if v.get("commit_slot_position").is_some() || v.get("end").is_some() {
                continue;
            }
            assert_eq!(v["crc_valid"], true, "{line}");
            assert_eq!(v["magic"], 2);
            offsets.push((
                v["base_offset"].as_i64().unwrap(),
                v["last_offset"].as_i64().unwrap(),
            ));
            kinds.push((
                v["producer_id"].as_i64().unwrap(),
                v["control_type"].as_str().map(str::to_string),
                v["transactional"].as_bool().unwrap(),
            ));
        }
    }
    // Contiguous offsets from 0 to the log end.
    let mut next = 0;
    for (base, last) in &offsets {
        assert_eq!(*base, next);
        next = last + 1;
    }
    assert_eq!(next, w.log_end.0);
    let count = |pid: i64, control: Option<&str>| {
        kinds
            .iter()
            .filter(|(p, c, _)| *p == pid && c.as_deref() == control)
            .count()
    };
    assert_eq!(count(1, None), 20);
    assert_eq!(count(2, Some("ABORT")), 1);
    assert_eq!(count(2, Some("COMMIT")), 1);
    assert_eq!(count(9, None), 10);
    assert_eq!(count(-1, Some("MIRROR_PID_RESET (barrier)")), 1);
    assert!(kinds.iter().any(|(p, c, t)| *p == 3 && c.is_none() && *t));

    // Text, with records: keys null, values shown as text.
    let (code, out, _) = run(&[
        "dump",
        "--records",
        "--value-bytes",
        "8",
        files[0].to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let first = out.lines().next().unwrap();
    assert!(
        first.contains("base_offset: 0") && first.contains("crc_valid: true"),
        "{first}"
    );
    assert!(
        first.contains("truncated: true") && first.contains("key: null"),
        "{first}"
    );

    // Every other file of the partition dumps without an error line.
    let (code, out, err) = run(&["dump", w.partition.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for kind in [
        "snapshot",
        "index",
        "timeindex",
        "mirror-checkpoint",
        "leader-epoch-checkpoint",
    ] {
        assert!(out.contains(kind), "{kind} dumped");
    }
    assert!(!out.contains("error:"), "{out}");
    assert!(out.contains("mode: mirror source: east") && out.contains("mode: local"));
}

#[test]
fn verify_is_clean_then_names_each_planted_problem() {
    let w = write_partition();
    let (code, out, err) = run(&["verify", w.dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("1 partitions") && out.contains("0 problems"),
        "{out}"
    );

    let planted = |name: &str, damage: &dyn Fn(&Path)| -> String {
        let copy = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
        let part = copy.path().join("orders-0");
        copy_dir(&w.partition, &part);
        damage(&part);
        let (code, out, err) = run(&["verify", copy.path().to_str().unwrap()]);
        assert_eq!(code, 1, "{name}: {out}{err}");
        out
    };
    // A flipped byte inside a sealed segment's first batch: its CRC.
    let sealed = logs(&w.partition)[0].file_name().unwrap().to_owned();
    let out = planted("flip", &|p| {
        let f = p.join(&sealed);
        let mut b = std::fs::read(&f).unwrap();
        b[100] ^= 0x40;
        std::fs::write(&f, b).unwrap();
    });
    assert!(
        out.contains(&format!("{} at position 0", sealed.to_string_lossy())) && out.contains("Crc"),
        "{out}"
    );
    // An index entry that points elsewhere.
    let index = Path::new(&sealed).with_extension("index");
    let out = planted("index", &|p| {
        let f = p.join(&index);
        let mut b = std::fs::read(&f).unwrap();
        assert!(!b.is_empty(), "the sealed segment has index entries");
        b[7] ^= 1;
        std::fs::write(&f, b).unwrap();
    });
    assert!(out.contains(".index") && out.contains("differs"), "{out}");
    // A snapshot whose producer disagrees with the replay: rewrite it from a wrong state.
    let snapshot = std::fs::read_dir(&w.partition)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".snapshot"))
        .max()
        .unwrap();
    let out = planted("snapshot", &|p| {
        let f = p.join(&snapshot);
        let mut entries =
            mirrorlog::internals::producer_state::decode_snapshot(&std::fs::read(&f).unwrap())
                .unwrap();
        assert!(!entries.is_empty());
        entries[0].coordinator_epoch += 7;
        std::fs::write(
            &f,
            mirrorlog::internals::producer_state::encode_snapshot(entries.iter()),
        )
        .unwrap();
    });
    assert!(out.contains(&snapshot) && out.contains("replay"), "{out}");
    // A mode history claiming mirroring stopped where no barrier is.
    let out = planted("history", &|p| {
        std::fs::write(
            p.join("mirror-checkpoint"),
            "0\n2\n0 mirror east\n3 local\n",
        )
        .unwrap();
    });
    assert!(
        out.contains("mirror-checkpoint") && out.contains("stopped at offset 3"),
        "{out}"
    );

    // Could not run: exit 2 with one line.
    let (code, _, err) = run(&["verify", "/nonexistent/mirrorlog"]);
    assert_eq!(code, 2);
    assert!(err.contains("no such file"), "{err}");
    let foreign = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    std::fs::write(foreign.path().join("notes.txt"), "hello").unwrap();
    let (code, _, err) = run(&["verify", foreign.path().to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("not a mirrorlog data directory"), "{err}");
    let (code, _, err) = run(&["verify", "--bogus", "x"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown option"), "{err}");
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("dump") && out.contains("verify") && out.contains("stat"));
}

#[test]
fn stat_reports_what_the_engine_reported() {
    let w = write_partition();
    let (code, out, err) = run(&["stat", "--json", w.dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(v["partition"], "orders-0");
    assert_eq!(v["log_end"].as_i64().unwrap(), w.log_end.0);
    assert_eq!(v["high_watermark"].as_i64().unwrap(), w.log_end.0);
    assert_eq!(v["last_stable_offset"].as_i64().unwrap(), w.last_stable.0);
    assert!(
        w.last_stable < w.log_end,
        "the open transaction holds the LSO back"
    );
    assert_eq!(v["open_transactions"], 1);
    assert_eq!(v["producers"].as_u64().unwrap() as usize, w.producers);
    assert_eq!(v["mode"], "local");
    assert_eq!(v["clean_shutdown"], true);
    assert_eq!(v["problems"], 0);
    let bytes: u64 = logs(&w.partition)
        .iter()
        .map(|f| {
            let data = inspect::segment_data(
                &std::fs::read(f).unwrap(),
                inspect::offset_in_name(&f.file_name().unwrap().to_string_lossy()).unwrap(),
            );
            BatchIter::new(&data.data, 0)
                .map(|b| b.bytes().len() as u64)
                .sum::<u64>()
        })
        .sum();
    assert_eq!(v["bytes"].as_u64().unwrap(), bytes);
    let (code, out, _) = run(&["stat", w.partition.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.lines().nth(1).unwrap().starts_with("orders-0"), "{out}");
}

const NAMES: [&str; 11] = [
    "00000000000000000000.log",
    "00000000000000000007.index",
    "00000000000000000007.timeindex",
    "00000000000000000000.txnindex",
    "00000000000000000003.snapshot",
    "leader-epoch-checkpoint",
    "mirror-checkpoint",
    "mirror-mode",
    "log-start-offset",
    "partition.config",
    "journal-0.mlj",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// `dump` of arbitrary bytes under every file name returns lines, never panics.
    #[test]
    fn dump_never_panics(kind in 0..NAMES.len(), bytes in proptest::collection::vec(any::<u8>(), 0..4096), records in any::<bool>()) {
        let options = DumpOptions { records, json: records, value_bytes_max: 16, path: None };
        let _ = inspect::dump_file(NAMES[kind], &bytes, &options);
    }

    /// A partition directory made of arbitrary bytes is inspected without a panic.
    #[test]
    fn verify_never_panics(files in proptest::collection::vec((0..NAMES.len(), proptest::collection::vec(any::<u8>(), 0..2048)), 1..6)) {
        let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
        let part = dir.path().join("fuzz-0");
        std::fs::create_dir(&part).unwrap();
        for (kind, bytes) in &files {
            std::fs::write(part.join(NAMES[*kind]), bytes).unwrap();
        }
        let _ = inspect::inspect_partition(&part, &mut |_| {});
    }
}

/// Batches a real segment holds, with random bytes flipped: `dump` still walks them, marks
/// the damaged one invalid and never panics.
#[test]
fn dump_survives_damage_to_a_real_segment() {
    let w = write_partition();
    let file = &logs(&w.partition)[0];
    let clean = std::fs::read(file).unwrap();
    let seed = common::seed("dump_survives_damage_to_a_real_segment");
    let mut rng = common::Rng(seed);
    for _ in 0..500 {
        let mut bytes = clean.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bytes.len() as u64) as usize;
            bytes[at] ^= 1 << rng.below(8);
        }
        let lines = inspect::dump_file(
            "00000000000000000000.log",
            &bytes,
            &DumpOptions {
                records: true,
                json: true,
                value_bytes_max: 8,
                path: None,
            },
        );
        assert!(!lines.is_empty(), "seed {seed}");
    }
}

/// Flushes the journal's block and feeds completions to it and to `w` until both are done.
fn flush_journal(
    io: &mut mirrorlog::internals::io::SimIo,
    j: &mut mirrorlog::internals::journal::JournalWriter,
    mut w: Option<&mut mirrorlog::internals::segment::SegmentWriter>,
) {
    use mirrorlog::internals::io::Io;
    use mirrorlog::internals::journal::{Finished, Flush};
    assert!(matches!(
        j.start_flush(io, 64).unwrap(),
        Flush::Started { .. }
    ));
    let mut done = Vec::new();
    while j.flushing() || w.as_ref().is_some_and(|w| w.round_in_flight()) {
        io.complete(1, &mut done).unwrap();
        for c in done.drain(..) {
            match w.as_deref_mut() {
                Some(w) if w.owns(&c) => {
                    w.on_completion(c).unwrap();
                }
                _ => {
                    if let Finished::Blocks { last: lsn } = j.on_completion(io, c).unwrap() {
                        if let Some(w) = w.as_deref_mut() {
                            w.on_journal_durable(lsn);
                        }
                    }
                }
            }
        }
    }
}

/// Copies the simulated disk's files under `from` into `to`.
fn copy_sim_dir(io: &mirrorlog::internals::io::SimIo, from: &Path, to: &Path) {
    for p in io.paths() {
        if let Ok(rel) = p.strip_prefix(from) {
            if let Some(bytes) = io.file_bytes(&p) {
                let dest = to.join(rel);
                std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                std::fs::write(dest, bytes).unwrap();
            }
        }
    }
}

/// A journal the writer wrote (on the simulated disk, then copied to a file): `dump --json`
/// shows the superblock, every block with its lsn and entries, and where the chain ends.
#[test]
fn dump_shows_a_journal_block_by_block() {
    use mirrorlog::internals::io::{Io, SimConfig, SimIo};
    use mirrorlog::internals::journal::{self, Entry, JournalWriter};
    let mut io = SimIo::new(SimConfig::default());
    let sim_path = Path::new("/sim/data").join(journal::file_name(3));
    io.create_dir(Path::new("/sim/data")).unwrap();
    let mut w = JournalWriter::create(&mut io, &sim_path, 3, 1 << 20, 41).unwrap();
    for round in 0..2u64 {
        for p in 0..3 {
            let bytes = vec![p as u8; 100 * (p + 1)];
            w.push(&Entry {
                key: &format!("orders-{p}"),
                segment_base: Offset(0),
                segment_id: 1,
                record_sequence: 1,
                start: round * 1000,
                inline_from: round * 1000,
                end: round * 1000 + bytes.len() as u64,
                next_offset: Offset(round as i64 + 1),
                inline: &bytes,
            })
            .unwrap();
        }
        flush_journal(&mut io, &mut w, None);
    }
    let dir = tempfile::tempdir().unwrap();
    copy_sim_dir(&io, Path::new("/sim/data"), dir.path());
    let path = dir.path().join(journal::file_name(3));
    let (code, out, err) = run(&["dump", "--json", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1 + 2 * (1 + 3) + 1, "{out}");
    assert_eq!(lines[0]["shard"], 3);
    assert_eq!(lines[0]["start_lsn"], 41);
    assert_eq!(lines[1]["lsn"], 41);
    assert_eq!(lines[1]["entries"], 3);
    assert_eq!(lines[3]["key"], "orders-1");
    assert_eq!(lines[3]["end"], 200);
    assert_eq!(lines[5]["lsn"], 42);
    assert_eq!(lines[8]["start"], 1000);
    assert_eq!(lines[9]["next_lsn"], 43);
    assert!(
        lines[9]["chain_end"].as_str().unwrap().contains("no block"),
        "{out}"
    );
}

/// `verify` holds a data directory's journal against its segments: clean after journal rounds
/// and a checkpoint; a commit record that does not supersede the entries it covers is named
/// with the journal's file and block; a journal without a superblock is named too.
#[test]
fn verify_holds_the_journal_against_the_segments() {
    use mirrorlog::internals::io::{Io, SimConfig, SimIo};
    use mirrorlog::internals::journal::{self, JournalWriter};
    use mirrorlog::internals::segment::{
        self, CommitRecord, JournalStart, SegmentConfig, SegmentWriter, COMMIT_SLOT_SIZE_BYTES,
    };
    let mut io = SimIo::new(SimConfig::default());
    let data = Path::new("/sim/data");
    io.create_dir(data).unwrap();
    let mut j =
        JournalWriter::create(&mut io, &data.join(journal::file_name(0)), 0, 1 << 20, 1).unwrap();
    let part = data.join("orders-0");
    io.create_dir(&part).unwrap();
    let config = SegmentConfig {
        segment_bytes: 1 << 20,
        ..SegmentConfig::default()
    };
    let mut w = SegmentWriter::create(&mut io, &part, Offset(0), config, 0).unwrap();
    for round in 0..2i64 {
        let batch = common::stored(
            common::producer_batch(5, round as i32 * 3, 3, false, 100),
            Offset(round * 3),
            0,
        );
        w.append(&batch, Offset(round * 3 + 2), 0).unwrap();
        let started = w.start_journal_round(&mut io, &mut j, "orders-0").unwrap();
        assert!(matches!(started, JournalStart::Started { .. }));
        flush_journal(&mut io, &mut j, Some(&mut w));
    }
    let followed = w.sequence(); // the entries follow the creation record
    w.commit(&mut io).unwrap(); // the checkpoint: a newer record supersedes them
    let dir = tempfile::tempdir().unwrap();
    copy_sim_dir(&io, data, dir.path());
    assert_eq!(inspect::verify_journals(dir.path()), Vec::new());
    // A record that covers both entries but carries the sequence they follow: it supersedes
    // nothing (the other slot emptied, so it is the newest).
    let log = segment::log_path(&dir.path().join("orders-0"), Offset(0));
    let mut file = std::fs::read(&log).unwrap();
    let at = (0..2)
        .map(|i| w.slot_position(i) as usize)
        .max_by_key(|&at| {
            CommitRecord::decode(&file[at..at + COMMIT_SLOT_SIZE_BYTES]).map_or(0, |r| r.sequence)
        })
        .unwrap();
    let mut record = CommitRecord::decode(&file[at..at + COMMIT_SLOT_SIZE_BYTES]).unwrap();
    assert_eq!(record.sequence, followed + 1);
    record.sequence = followed;
    record.encode_into(&mut file[at..at + COMMIT_SLOT_SIZE_BYTES]);
    for i in 0..2 {
        let other = w.slot_position(i) as usize;
        if other != at {
            file[other..other + COMMIT_SLOT_SIZE_BYTES].fill(0);
        }
    }
    std::fs::write(&log, &file).unwrap();
    let problems = inspect::verify_journals(dir.path());
    assert_eq!(problems.len(), 2, "{problems:?}");
    for (problem, lsn) in problems.iter().zip(1..) {
        assert!(problem.file.ends_with(journal::file_name(0)));
        assert!(problem.what.contains(&format!("lsn {lsn} ")), "{problem}");
    }
    // A journal with no valid superblock.
    std::fs::write(dir.path().join(journal::file_name(1)), vec![0u8; 1 << 16]).unwrap();
    let problems = inspect::verify_journals(dir.path());
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(
        problems[2].what.contains("no valid superblock"),
        "{}",
        problems[2]
    );
}

#[test]
fn stat_and_verify_of_a_compacted_partition() {
    use mirrorlog::api::{CleanupPolicy, CompactionConfig};
    use mirrorlog::format::{BatchBuilder, BatchOptions, RecordSpec};
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let tp = TopicPartition::new("changelog", 0);
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1)).unwrap();
    let config = PartitionConfig {
        segment_bytes: 64 << 10,
        max_message_bytes: 16 << 10,
        append_buffer_bytes: 1 << 20,
        compaction: CompactionConfig {
            policy: CleanupPolicy::COMPACT,
            ..CompactionConfig::DEFAULT
        },
        ..PartitionConfig::default()
    };
    engine.create_partition(&tp, config).wait().unwrap();
    let produce = |rounds: usize| {
        for _ in 0..rounds {
            let mut b = BatchBuilder::new(BatchOptions::default());
            for k in 0..10 {
                let key = format!("key-{k}");
                b.push(RecordSpec {
                    timestamp: 1_764_403_200_000,
                    key: Some(key.as_bytes()),
                    value: Some(&[b'v'; 200]),
                    headers: &[],
                });
            }
            engine
                .append(&tp, b.build(), Origin::Client)
                .wait()
                .unwrap();
        }
    };
    produce(100);
    let stats = engine.clean(&tp).wait().unwrap().expect("a pass");
    // New dirty segments after the pass: a dirty ratio between 0 and 1.
    produce(60);
    engine.close().unwrap();
    let (code, out, err) = run(&["stat", "--json", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(v["cleanup_policy"], "compact");
    assert_eq!(
        v["cleaner_checkpoint"].as_i64().unwrap(),
        stats.end_offset.0
    );
    let ratio = v["dirty_ratio"].as_f64().unwrap();
    assert!(ratio > 0.0 && ratio < 1.0, "{ratio}");
    assert_eq!(v["problems"], 0);
    let (code, out, _) = run(&["stat", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains(&format!("{ratio:.2}")), "{out}");
    let (code, out, err) = run(&["verify", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    // A key planted twice below the checkpoint is named (the cleaner keeps only the newest):
    // the cleaned segment holding records gets a copy of such a batch appended.
    let (first, batch) = logs(&dir.path().join("changelog-0"))
        .into_iter()
        .find_map(|f| {
            let bytes = std::fs::read(&f).unwrap();
            let found = BatchIter::new(&bytes, 0)
                .find(|b| {
                    b.header().records_count > 0
                        && b.header().last_offset() < stats.end_offset
                        && !b.header().attributes.is_control()
                })
                .map(|b| b.bytes().to_vec());
            found.map(|b| (f, b))
        })
        .expect("a cleaned batch with records");
    let mut bytes = std::fs::read(&first).unwrap();
    let damaged = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let partition = damaged.path().join("changelog-0");
    copy_dir(&dir.path().join("changelog-0"), &partition);
    bytes.extend_from_slice(&batch);
    std::fs::write(partition.join(first.file_name().unwrap()), &bytes).unwrap();
    let (code, out, _) = run(&["verify", partition.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("below the cleaner's checkpoint"), "{out}");
}

#[test]
fn stat_and_verify_take_a_brokers_data_directory() {
    let w = write_partition();
    // A broker's data directory: the engine's under log/, the broker's own files under broker/.
    let root = tempfile::tempdir().unwrap();
    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.path().is_dir() {
                copy_tree(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }
    copy_tree(w.dir.path(), &root.path().join("log"));
    std::fs::create_dir_all(root.path().join("broker")).unwrap();
    let root_arg = root.path().to_str().unwrap();
    let (code, out, err) = run(&["stat", "--json", root_arg]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(v["partition"], "orders-0");
    assert_eq!(v["log_end"].as_i64().unwrap(), w.log_end.0);
    let (code, out, err) = run(&["verify", root_arg]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 partitions"), "{out}");
}
