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
//! - `stat` prints the figures the engine itself reports for the partition.
//! - `dump` of a shard's journal shows its superblock, each live block and each entry.
//! - No bytes make `dump` or `verify` panic (property test over every file kind, seeded).

#[path = "../../tests/common/mod.rs"]
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
        let options = DumpOptions { records, json: records, value_bytes_max: 16 };
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
            },
        );
        assert!(!lines.is_empty(), "seed {seed}");
    }
}

/// A journal the writer wrote (on the simulated disk, then copied to a file): `dump --json`
/// shows the superblock, every block with its lsn and entries, and where the chain ends.
#[test]
fn dump_shows_a_journal_block_by_block() {
    use mirrorlog::internals::io::{Io, SimConfig, SimIo};
    use mirrorlog::internals::journal::{self, Entry, Finished, Flush, JournalWriter};
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
                start: round * 1000,
                inline_from: round * 1000,
                end: round * 1000 + bytes.len() as u64,
                next_offset: Offset(round as i64 + 1),
                inline: &bytes,
            })
            .unwrap();
        }
        assert!(matches!(
            w.start_flush(&mut io).unwrap(),
            Flush::Started { .. }
        ));
        let mut done = Vec::new();
        while w.flushing() {
            io.complete(1, &mut done).unwrap();
            for c in done.drain(..) {
                let _: Finished = w.on_completion(&mut io, c).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(journal::file_name(3));
    std::fs::write(&path, io.file_bytes(&sim_path).unwrap()).unwrap();
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
