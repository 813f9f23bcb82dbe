//! The benchmark binary as a user runs it: bad flags get a clear message and exit code 2;
//! every workload runs at a smoke size with no error and every figure present (what CI runs);
//! a short run writes JSON with the documented schema and the SVG report; producer-state with
//! `--page-cache` shows its baselines; and a run whose calls fail (a full filesystem) exits
//! non-zero with the first error, or, with `--keep-going`, reports the errors and finishes.

#[path = "../../mirrorlog/tests/common/mod.rs"]
mod common;

use std::process::Command;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mirrorlog-bench"))
}

#[test]
fn bad_flags_are_refused_clearly() {
    for args in [
        &["--bogus"][..],
        &["--seconds", "-1"],
        &["--partitions"],
        &["nope"],
    ] {
        let out = bench().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("usage") || err.contains("takes") || err.contains("needs"),
            "{err}"
        );
    }
}

#[test]
fn a_short_failover_run_writes_json_and_svg() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let svg = dir.path().join("out.svg");
    let svg_arg = svg.to_str().unwrap();
    let (table, parsed) = run_with_json(&dir, &["failover", "--seconds", "0.2", "--svg", svg_arg]);
    assert!(
        table.contains("failover") && table.contains("1000 open txns"),
        "{table}"
    );
    let sides = parsed["workloads"][0]["sides"].as_array().unwrap();
    assert_eq!(sides.len(), 3);
    assert!(sides.iter().all(|s| s["ops"].as_u64().unwrap() >= 1));
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("polyline"));
    assert!(
        svg.contains("stops/s") && svg.contains("latency (µs, log scale)"),
        "axes labelled with units"
    );
    assert!(
        !dir.path().join("data").exists(),
        "the data directory is removed"
    );
}

/// Runs the bench with `args`, its data under `dir/data` and `--json dir/out.json`; it must
/// succeed. Returns the table and the JSON, already checked against the documented schema.
fn run_with_json(dir: &tempfile::TempDir, args: &[&str]) -> (String, serde_json::Value) {
    let json = dir.path().join("out.json");
    let out = bench()
        .args(args)
        .arg("--dir")
        .arg(dir.path().join("data"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_schema(&parsed);
    (String::from_utf8_lossy(&out.stdout).into_owned(), parsed)
}

/// Every key `docs/bench-json.md` documents, with its type.
fn assert_schema(v: &serde_json::Value) {
    assert_eq!(v["schema"], "mirrorlog-bench/2");
    for k in ["cores", "shards", "kernel", "filesystem", "o_direct"] {
        assert!(v["machine"][k].is_string(), "machine.{k}");
    }
    assert!(v["config"]["seconds"].is_number());
    for k in [
        "partitions",
        "callers",
        "recovery_mib",
        "producers",
        "wide_partitions",
        "restart_gib",
        "compaction_mib",
    ] {
        assert!(v["config"][k].is_u64(), "config.{k}");
    }
    assert!(v["config"]["o_direct"].is_boolean() && v["config"]["keep_going"].is_boolean());
    assert!(v["errors"].is_u64());
    for w in v["workloads"].as_array().unwrap() {
        assert!(w["workload"].is_string() && w["unit"].is_string());
        assert!(w["notes"].as_array().unwrap().iter().all(|n| n.is_string()));
        for g in w["goals"].as_array().unwrap() {
            assert!(g["met"].is_boolean() && g["errors"].is_u64());
            let parts = g["parts"].as_array().unwrap();
            assert!(!parts.is_empty());
            for p in parts {
                assert!(p["what"].is_string() && p["comparison"].is_string());
                assert!(p["target"].is_number() && p["measured"].is_number());
                assert!(p["met"].is_boolean());
            }
            // A compound goal is met only when every part is (and nothing failed).
            assert_eq!(
                g["met"].as_bool().unwrap(),
                g["errors"] == 0 && parts.iter().all(|p| p["met"] == true)
            );
        }
        for s in w["sides"].as_array().unwrap() {
            assert!(s["name"].is_string());
            for k in ["ops", "bytes", "errors"] {
                assert!(s[k].is_u64(), "{k}");
            }
            assert!(s["first_error"].is_null() || s["first_error"].is_string());
            for k in ["seconds", "ops_per_sec", "mb_per_sec"] {
                assert!(s[k].is_number(), "{k}");
            }
            for k in ["p50", "p90", "p99", "p999", "max"] {
                assert!(s["latency_us"][k].is_u64(), "latency_us.{k}");
            }
        }
        for f in w["figures"].as_array().unwrap() {
            assert!(f["name"].is_string() && f["value"].is_number() && f["unit"].is_string());
        }
        for st in w["open_loop"].as_array().unwrap() {
            assert!(st["side"].is_string() && st["errors"].is_u64());
            assert!(st["offered_per_sec"].is_number() && st["achieved_per_sec"].is_number());
            assert!(st["latency_us"]["p99"].is_u64());
        }
    }
}

/// Every workload at a smoke size, as CI runs it: no error, and every figure there — each
/// side did work, each workload with a goal reports it, hot-partitions has its four open-loop
/// steps for each side and counts fdatasyncs.
#[test]
fn every_workload_runs_at_a_smoke_size_with_no_error_and_every_figure() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let svg = dir.path().join("report.svg");
    let (table, parsed) = run_with_json(
        &dir,
        &[
            "--seconds",
            "0.4",
            "--partitions",
            "2",
            "--callers",
            "2",
            "--recovery-mib",
            "16",
            "--producers",
            "2000",
            "--segment-mib",
            "8",
            "--wide-partitions",
            "300",
            "--restart-gib",
            "1",
            "--compaction-mib",
            "16",
            "--svg",
            svg.to_str().unwrap(),
        ],
    );
    assert_eq!(parsed["errors"], 0, "{table}");
    let workloads = parsed["workloads"].as_array().unwrap();
    let names: Vec<&str> = workloads
        .iter()
        .map(|w| w["workload"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "mirror-ingest",
            "mirror-wide",
            "produce",
            "hot-partitions",
            "partitions",
            "restart",
            "recovery",
            "failover",
            "tail-read",
            "catch-up",
            "compaction",
            "producer-state",
            "broker",
            "broker-mirror",
            "groups"
        ]
    );
    // The scale workloads' figures: memory and disk per partition, open times.
    let figure = |w: &serde_json::Value, name: &str| {
        w["figures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .and_then(|f| f["value"].as_f64())
            .unwrap_or_else(|| panic!("{name} in {}", w["workload"]))
    };
    let by_name = |name: &str| {
        workloads
            .iter()
            .find(|w| w["workload"] == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    let wide = by_name("partitions");
    // How many of the 300 the two callers reach in their slices depends on the machine.
    let written = figure(wide, "partitions written");
    assert!(written > 0.0 && written <= 300.0, "{written}");
    for name in [
        "disk allocated per partition, empty",
        "clean open of all partitions",
        "unclean open of all partitions",
    ] {
        assert!(figure(wide, name) > 0.0, "{name}");
    }
    // Resident memory is the process's growth: at 300 partitions (a few MiB) the memory earlier
    // workloads left (glibc keeps exited threads' stacks for reuse; hot-partitions ran 320
    // threads) can outweigh it, so here the figure must be there, not above zero (found by
    // CI: it measured 0 once). The full run's 10,000 partitions measure it.
    assert!(figure(wide, "resident memory per partition, idle after load") >= 0.0);
    assert!(figure(by_name("restart"), "larger / smaller open time") > 0.0);
    // The journal's figures: bytes written per byte appended wherever the engine
    // appends, flushes per fetch or append, flushes per second on both sides of `partitions`.
    let amplification = "write amplification (bytes written / appended)";
    for name in [
        "mirror-ingest",
        "mirror-wide",
        "produce",
        "hot-partitions",
        "partitions",
    ] {
        assert!(figure(by_name(name), amplification) >= 1.0, "{name}");
    }
    assert!(figure(by_name("mirror-wide"), "fdatasyncs per fetch") > 0.0);
    assert!(figure(by_name("produce"), "fdatasyncs per append") > 0.0);
    for name in ["fdatasyncs/s, wide", "fdatasyncs/s, 16 partitions"] {
        assert!(figure(wide, name) > 0.0, "{name}");
    }
    for w in workloads {
        let name = w["workload"].as_str().unwrap();
        for s in w["sides"].as_array().unwrap() {
            assert_eq!(s["errors"], 0, "{name}: {s}");
            assert!(s["ops"].as_u64().unwrap() > 0, "{name}: {s}");
            assert!(s["ops_per_sec"].as_f64().unwrap() > 0.0, "{name}: {s}");
        }
        // mirror-ingest has three goals (direct appends, their write amplification, and
        // through MirrorLinks), catch-up two (the consumer beside the producers, the link).
        let goals = match name {
            "failover" => 0,
            "mirror-ingest" => 3,
            "catch-up" => 2,
            "compaction" => 3,
            _ => 1,
        };
        assert_eq!(
            w["goals"].as_array().unwrap().len(),
            goals,
            "{name}: its goals"
        );
    }
    // The fetch path's figures: device reads at the tail, the producers' p99 beside a reader.
    assert!(figure(by_name("tail-read"), "device reads at the tail") >= 0.0);
    let catch_up = by_name("catch-up");
    assert!(figure(catch_up, "producer p99 without a reader") > 0.0);
    assert!(figure(catch_up, "producer p99 with the link") > 0.0);
    let side_names = |w: &serde_json::Value| -> Vec<String> {
        w["sides"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        side_names(catch_up),
        ["mirrorlog", "mirrorlog-link", "raw reader"]
    );
    // Compaction: the cleaner against the raw two-pass I/O, producers alone and beside it.
    let compaction = by_name("compaction");
    assert_eq!(
        side_names(compaction),
        [
            "mirrorlog",
            "raw two-pass",
            "producers alone",
            "producers beside the cleaner"
        ]
    );
    assert_eq!(figure(compaction, "dedupe bytes per key"), 24.0);
    assert!(figure(compaction, "producer p99 beside the cleaner / alone") > 0.0);
    // The broker's end-to-end latency was measured on records the consumer saw.
    assert!(figure(by_name("broker"), "end-to-end samples") > 0.0);
    // librdkafka, the engine API, our own pipelined client (what the broker costs alone), the
    // same client while 50 slowloris connections drip unfinished requests, and against a
    // broker that counts no metrics.
    assert_eq!(
        side_names(by_name("broker")),
        [
            "broker (librdkafka)",
            "engine API",
            "broker (own client)",
            "broker (own client), 50 slowloris",
            "broker (own client), metrics off"
        ]
    );
    // What the metrics cost: both sides ran, and the counting broker was scraped.
    assert!(
        figure(
            by_name("broker"),
            "metrics counted and scraped: our client's MB/s ratio to metrics off (median of pairs)"
        ) > 0.0
    );
    assert!(figure(by_name("broker"), "scrapes of GET /metrics answered") > 0.0);
    // The counting timed alone, and its share of a request's CPU: both measured, both small.
    let counting = figure(
        by_name("broker"),
        "metrics counting per request, done alone",
    );
    assert!(counting > 0.0 && counting < 100_000.0, "{counting} ns");
    assert!(figure(
        by_name("broker"),
        "metrics counting per request: share of the process's CPU per request (metrics off)"
    )
    .is_finite());
    // CPU time is read in 10 ms ticks: a smoke run's slices may show none, so only that the
    // figure is there and a number.
    assert!(figure(
        by_name("broker"),
        "metrics counted and scraped: process CPU per MB, ratio to metrics off (median of pairs)"
    )
    .is_finite());
    assert!(
        figure(
            by_name("broker"),
            "our client's p99 with 50 slowloris connections: ratio to without"
        ) > 0.0
    );
    assert!(
        figure(
            by_name("broker"),
            "broker with our pipelined client: MB/s ratio to the engine API"
        ) > 0.0
    );
    // Groups: commits against a produce of the same size, and rebalances of 10 members.
    // The broker's mirror, the path users run: --wide-partitions bounds its wide side; every
    // partition mirrored byte-identical, its RPO and fetch-to-durable measured, and its figure
    // set against mirror-wide's of the same run.
    let mirror = by_name("broker-mirror");
    assert_eq!(side_names(mirror), ["300 partitions", "16 partitions"]);
    assert_eq!(figure(mirror, "partitions not byte-identical"), 0.0);
    assert!(figure(mirror, "bytes compared between the brokers") > 1e6);
    for name in [
        "wide: RPO p99",
        "narrow: RPO p99",
        "wide: destination fetch-to-durable p50",
        "narrow: achieved load",
        "wide MB/s ratio to narrow MB/s",
        "wide MB/s ratio to mirror-wide's engine MB/s",
    ] {
        assert!(figure(mirror, name) > 0.0, "{name}");
    }
    let groups = by_name("groups");
    assert_eq!(
        side_names(groups),
        [
            "OffsetCommit (1,000 groups)",
            "Produce (same size)",
            "rebalance (10 members)"
        ]
    );
    assert!(figure(groups, "OffsetCommit p99: ratio to Produce p99") > 0.0);
    assert!(figure(groups, "rebalance of 10 members p50") > 0.0);
    let hot = by_name("hot-partitions");
    let steps = hot["open_loop"].as_array().unwrap();
    assert_eq!(steps.len(), 4 * 3, "four steps for each of three sides");
    assert!(hot["sides"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["fdatasyncs"].as_u64().unwrap() > 0));
    let svg = std::fs::read_to_string(&svg).unwrap();
    for w in &names {
        assert!(svg.contains(&format!(">{w}</text>")), "{w} in the report");
    }
    assert!(svg.contains("offered load (appends/s)"));
}

/// A run whose calls fail — mirror-ingest on a 32 MiB filesystem, where the engine's segments
/// (4 MiB, 256 MiB retention) soon find no room — exits 1 with the first error's message;
/// with `--keep-going` it reports the errors (table and JSON) and finishes with exit 0.
#[test]
fn failed_calls_fail_the_run_unless_keep_going() {
    let mounted = match common::mount_small_ext4("32M") {
        Ok(m) => m,
        Err(why) => return common::missing_prerequisite("failed_calls_fail_the_run", &why),
    };
    let args = [
        "mirror-ingest",
        "--partitions",
        "1",
        "--segment-mib",
        "4",
        "--journal-mib",
        "1",
        "--seconds",
        "1",
    ];
    let out = bench()
        .args(args)
        .arg("--dir")
        .arg(mounted.mount.join("strict"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("mirror-ingest") && err.contains("failed call") && err.contains("first:"),
        "{err}"
    );
    let json = mounted.mount.join("keep-going.json");
    let out = bench()
        .args(args)
        .arg("--keep-going")
        .arg("--dir")
        .arg(mounted.mount.join("keep-going"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("first error"), "{table}");
    let parsed: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_schema(&parsed);
    assert!(parsed["errors"].as_u64().unwrap() > 0, "{parsed}");
    let goal = &parsed["workloads"][0]["goals"][0];
    assert_eq!(goal["met"], false, "a run with errors meets no goal");
}

/// The producer-state workload runs our PSM against the `hashmap-psm` baseline, and
/// `--page-cache` runs without O_DIRECT and says so in the facts and the JSON.
#[test]
fn producer_state_against_hashmap_psm_and_the_page_cache_flag() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let (table, parsed) = run_with_json(
        &dir,
        &[
            "producer-state",
            "failover",
            "--producers",
            "1000",
            "--seconds",
            "0.2",
            "--page-cache",
        ],
    );
    assert!(
        table.contains("hashmap-psm") && table.contains("o_direct=off"),
        "{table}"
    );
    assert_eq!(parsed["config"]["o_direct"], false);
    let psm = &parsed["workloads"][0];
    assert_eq!(psm["workload"], "producer-state");
    let names: Vec<&str> = psm["sides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["mirrorlog", "hashmap-psm", "hashmap-psm-siphash"]);
    let goal = &psm["goals"][0]["parts"][0];
    assert_eq!(goal["target"], 2.0);
    assert!(goal["what"].as_str().unwrap().contains("foldhash"));
    assert_eq!(
        goal["met"].as_bool().unwrap(),
        goal["measured"].as_f64().unwrap() >= 2.0
    );
    assert!(psm["sides"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["ops"].as_u64().unwrap() >= 64));
}
