//! The benchmark binary as a user runs it: bad flags get a clear message and exit code 2, a
//! short run of one workload prints its table and writes JSON with the documented schema and
//! an SVG, and the producer-state workload with `--page-cache` shows both baselines' kinds.

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
    assert_eq!(v["schema"], "mirrorlog-bench/1");
    for k in ["cores", "shards", "kernel", "filesystem", "o_direct"] {
        assert!(v["machine"][k].is_string(), "machine.{k}");
    }
    assert!(v["config"]["seconds"].is_number());
    for k in ["partitions", "callers", "recovery_mib", "producers"] {
        assert!(v["config"][k].is_u64(), "config.{k}");
    }
    assert!(v["config"]["o_direct"].is_boolean());
    for w in v["workloads"].as_array().unwrap() {
        assert!(w["workload"].is_string() && w["unit"].is_string());
        assert!(w["notes"].as_array().unwrap().iter().all(|n| n.is_string()));
        for g in w["goals"].as_array().unwrap() {
            assert!(g["what"].is_string() && g["comparison"].is_string());
            assert!(g["target"].is_number() && g["measured"].is_number());
            assert!(g["met"].is_boolean());
        }
        for s in w["sides"].as_array().unwrap() {
            assert!(s["name"].is_string());
            for k in ["ops", "bytes"] {
                assert!(s[k].is_u64(), "{k}");
            }
            for k in ["seconds", "ops_per_sec", "mb_per_sec"] {
                assert!(s[k].is_number(), "{k}");
            }
            for k in ["p50", "p90", "p99", "p999", "max"] {
                assert!(s["latency_us"][k].is_u64(), "latency_us.{k}");
            }
        }
    }
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
    assert_eq!(names, ["mirrorlog", "hashmap-psm"]);
    let goal = &psm["goals"][0];
    assert_eq!(goal["target"], 2.0);
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
