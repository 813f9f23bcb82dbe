//! `mirrorlog`: look inside a data directory without opening it for writing.
//!
//! - `mirrorlog dump FILE... [--records] [--json] [--value-bytes N]`: every batch of a `.log`
//!   (or every entry of `.index`, `.timeindex`, `.txnindex`, `.snapshot`,
//!   `leader-epoch-checkpoint`, `mirror-checkpoint`, ...) by the file's name; a partition
//!   directory dumps each of its files in turn.
//! - `mirrorlog verify DATA_DIR`: checks every partition read-only and lists each problem with
//!   its file and position. Exit 0 clean, 1 problems found, 2 could not run.
//! - `mirrorlog stat DATA_DIR`: per partition log start, LEO, HW, LSO, mode, producers,
//!   segments and bytes.
//!
//! Errors (missing paths, directories that are not mirrorlog's, bad flags) print one line and
//! exit 2.

use mirrorlog::inspect::{self, DumpOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "\
usage: mirrorlog <command> [options]

commands:
  dump <file | partition-dir>... [--records] [--json] [--value-bytes N]
        one line per batch of a .log (offsets, position, size, CRC and validity, magic,
        attributes, producer id/epoch/sequences, leader epoch, count, timestamps, control
        type), or per entry of .index .timeindex .txnindex .snapshot leader-epoch-checkpoint
        mirror-checkpoint mirror-mode log-start-offset partition.config; --records adds each
        record (keys and values as UTF-8 or hex, cut at --value-bytes, default 64); --json
        prints one JSON object per line
  verify <data-dir | partition-dir>   (a broker's data directory: its engine's, DIR/log)
        checks every partition read-only: batch CRCs, offset continuity, indexes against the
        log, snapshots against a replay, mode history against the barriers, commit records;
        exit 0 clean, 1 problems found, 2 could not run
  stat <data-dir | partition-dir> [--json]   (a broker's: DIR/log)
        per partition: log start, LEO, HW, LSO, mode, producers, open transactions,
        segments, bytes
  version  the tool's version (also --version)
  help  this text";

/// A failure that stops the command: printed as one line, exit 2.
struct Fatal(String);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None | Some("help" | "-h" | "--help") => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        Some("version" | "-V" | "--version") => {
            println!("mirrorlog {}", env!("CARGO_PKG_VERSION"));
            Ok(ExitCode::SUCCESS)
        }
        Some("dump") => dump(&args[1..]),
        Some("verify") => verify(&args[1..]),
        Some("stat") => stat(&args[1..]),
        Some(other) => Err(Fatal(format!(
            "unknown command {other:?} (try mirrorlog help)"
        ))),
    };
    match result {
        Ok(code) => code,
        Err(Fatal(message)) => {
            eprintln!("mirrorlog: {message}");
            ExitCode::from(2)
        }
    }
}

/// Paths, then the flags given with their values.
type Parsed<'a> = (Vec<PathBuf>, Vec<(&'static str, Option<&'a str>)>);

/// Splits `args` into paths and the flags `allowed` (flag → takes a value).
fn parse<'a>(args: &'a [String], allowed: &[(&'static str, bool)]) -> Result<Parsed<'a>, Fatal> {
    let mut paths = Vec::new();
    let mut flags = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-h" || a == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        if let Some(&(name, takes)) = allowed.iter().find(|(n, _)| *n == a) {
            let value = if takes {
                Some(
                    it.next()
                        .map(String::as_str)
                        .ok_or_else(|| Fatal(format!("{name} needs a value")))?,
                )
            } else {
                None
            };
            flags.push((name, value));
        } else if a.starts_with("--") {
            return Err(Fatal(format!("unknown option {a} (try mirrorlog help)")));
        } else {
            paths.push(PathBuf::from(a));
        }
    }
    if paths.is_empty() {
        return Err(Fatal("a path is needed (try mirrorlog help)".into()));
    }
    for p in &paths {
        if !p.exists() {
            return Err(Fatal(format!("{}: no such file or directory", p.display())));
        }
    }
    Ok((paths, flags))
}

fn dump(args: &[String]) -> Result<ExitCode, Fatal> {
    let (paths, flags) = parse(
        args,
        &[
            ("--records", false),
            ("--json", false),
            ("--value-bytes", true),
        ],
    )?;
    let mut options = DumpOptions::default();
    for (name, value) in flags {
        match name {
            "--records" => options.records = true,
            "--json" => options.json = true,
            _ => {
                options.value_bytes_max = value
                    .and_then(|v| v.parse().ok())
                    .filter(|&n: &usize| n > 0)
                    .ok_or_else(|| Fatal("--value-bytes takes a positive number".into()))?;
            }
        }
    }
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut names: Vec<PathBuf> = std::fs::read_dir(&p)
                .map_err(|e| Fatal(format!("{}: {e}", p.display())))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|f| f.is_file())
                .collect();
            names.sort();
            files.extend(names);
        } else {
            files.push(p);
        }
    }
    let out = std::io::stdout();
    let mut out = out.lock();
    let several = files.len() > 1;
    for f in files {
        let bytes = std::fs::read(&f).map_err(|e| Fatal(format!("{}: {e}", f.display())))?;
        let name = file_name(&f);
        if several && !options.json {
            let _ = writeln!(out, "Dumping {}", f.display());
        }
        options.path = Some(f.clone());
        for line in inspect::dump_file(&name, &bytes, &options) {
            if writeln!(out, "{line}").is_err() {
                return Ok(ExitCode::SUCCESS); // the reader went away (e.g. `| head`)
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The engine's directory of `path`: a broker's data directory holds it under `log/`, beside
/// `broker/`, so `mirrorlog stat DIR` and `verify DIR` take the directory the broker was given
/// as well as the engine's own.
fn engine_dir(path: &Path) -> PathBuf {
    let log = path.join("log");
    if path.join("broker").is_dir() && log.is_dir() {
        log
    } else {
        path.to_path_buf()
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// Runs the read-only pass over every partition of `path`, with a progress bar on stderr
/// when the data is large and stderr is a terminal.
fn reports(path: &Path) -> Result<Vec<inspect::PartitionReport>, Fatal> {
    let dirs = inspect::partition_dirs(path).map_err(|e| Fatal(e.to_string()))?;
    let total: u64 = dirs
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten())
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    let bar = if total >= 64 << 20 {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut out = Vec::new();
    for d in &dirs {
        bar.set_message(file_name(d));
        let report = inspect::inspect_partition(d, &mut |bytes| bar.inc(bytes))
            .map_err(|e| Fatal(e.to_string()))?;
        out.push(report);
    }
    bar.finish_and_clear();
    Ok(out)
}

fn verify(args: &[String]) -> Result<ExitCode, Fatal> {
    let (paths, _) = parse(args, &[])?;
    let mut problems = 0usize;
    let (mut partitions, mut batches) = (0usize, 0u64);
    for p in paths {
        let p = engine_dir(&p);
        for r in reports(&p)? {
            partitions += 1;
            batches += r.batches;
            for problem in &r.problems {
                println!("{problem}");
            }
            problems += r.problems.len();
        }
        // A data directory's shard journals, against its segments.
        let journal = inspect::verify_journals(&p);
        for problem in &journal {
            println!("{problem}");
        }
        problems += journal.len();
    }
    println!("{partitions} partitions, {batches} batches checked, {problems} problems");
    Ok(if problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn stat(args: &[String]) -> Result<ExitCode, Fatal> {
    let (paths, flags) = parse(args, &[("--json", false)])?;
    let json = !flags.is_empty();
    if !json {
        println!(
            "{:<32} {:>12} {:>12} {:>12} {:>12} {:>9} {:>6} {:>8} {:>14} {:>6}  mode",
            "partition",
            "log start",
            "LEO",
            "HW",
            "LSO",
            "producers",
            "txns",
            "segments",
            "bytes",
            "dirty"
        );
    }
    for p in paths {
        let p = engine_dir(&p);
        for r in reports(&p)? {
            let s = &r.stat;
            if json {
                println!(
                    "{}",
                    serde_json::json!({
                        "partition": s.partition, "log_start": s.log_start.0, "log_end": s.log_end.0,
                        "high_watermark": s.high_watermark.0, "last_stable_offset": s.last_stable.0,
                        "mode": s.mode, "producers": s.producers,
                        "open_transactions": s.open_transactions, "segments": s.segments,
                        "bytes": s.bytes, "clean_shutdown": s.clean_shutdown,
                        "cleanup_policy": s.cleanup_policy,
                        "cleaner_checkpoint": s.cleaner_checkpoint.map(|o| o.0),
                        "dirty_ratio": s.dirty_ratio_ppm.map(|p| f64::from(p) / 1e6),
                        "problems": r.problems.len(),
                    })
                );
            } else {
                println!(
                    "{:<32} {:>12} {:>12} {:>12} {:>12} {:>9} {:>6} {:>8} {:>14} {:>6}  {}{}",
                    s.partition,
                    s.log_start.0,
                    s.log_end.0,
                    s.high_watermark.0,
                    s.last_stable.0,
                    s.producers,
                    s.open_transactions,
                    s.segments,
                    s.bytes,
                    s.dirty_ratio_ppm
                        .map_or_else(|| "-".to_string(), |p| format!("{:.2}", f64::from(p) / 1e6)),
                    s.mode,
                    if r.problems.is_empty() {
                        String::new()
                    } else {
                        format!(" ({} problems: run verify)", r.problems.len())
                    }
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
