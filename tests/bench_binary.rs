//! The benchmark binary as a user runs it: bad flags get a clear message and exit code 2, and a
//! short run of one workload prints its table and writes JSON with the documented schema and
//! an SVG.

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
    let json = dir.path().join("out.json");
    let svg = dir.path().join("out.svg");
    let out = bench()
        .args(["failover", "--seconds", "0.2", "--dir"])
        .arg(dir.path().join("data"))
        .arg("--json")
        .arg(&json)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("failover") && table.contains("1000 open txns"),
        "{table}"
    );
    let parsed: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(parsed["schema"], "mirrorlog-bench/1");
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
