//! The mirror command line (`mirrorlog-broker mirrors ...`) against a running broker: tables
//! and `--json` that say what `GET /mirrors` says, and exit codes a script can use (0 done,
//! 1 refused or no such mirror, 2 usage, 3 no answer). The README's failover and failback
//! walk-through runs on it too (`readme_walkthrough.rs`).

mod broker_support;

use broker_support::requests::{mirrored, Mirrored};
use broker_support::BrokerProc;
use serde_json::Value;
use std::process::Command;

/// Runs `mirrors ARGS..` against `b`: (exit code, stdout, stderr).
fn mirrors(b: &BrokerProc, args: &[&str]) -> (i32, String, String) {
    let dir = b.data_dir.to_string_lossy().into_owned();
    let head = ["mirrors", "--admin", &b.admin, "--data-dir", &dir];
    broker_support::run_cli(head.iter().chain(args))
}

fn json(text: &str) -> Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn the_mirror_command_line_says_what_the_surface_says_with_exit_codes() {
    let pair: Mirrored = mirrored("cli");
    let dst = &pair.dst;
    // list and describe, as tables and as JSON.
    let (code, out, _) = mirrors(dst, &["list"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("NAME"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("src") && l.contains("running")),
        "{out}"
    );
    let (code, out, _) = mirrors(dst, &["list", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(json(&out)["mirrors"][0]["name"], "src");
    let (code, out, _) = mirrors(dst, &["describe", "src"]);
    assert_eq!(code, 0);
    assert!(out.contains("mirroring:src"), "{out}");
    // The ACL sync's line: this broker has no authorizer, so it holds none.
    assert!(
        out.contains("ACLs (mirrored topics and groups): 0 here from the sync"),
        "{out}"
    );
    let row = out
        .lines()
        .find(|l| l.starts_with("cli"))
        .expect("a partition row");
    let cols: Vec<&str> = row.split_whitespace().collect();
    // TOPIC PARTITION MODE SOURCE-END LOCAL-END LAG ...
    assert_eq!(&cols[..5], ["cli", "0", "mirroring:src", "1", "1"], "{out}");
    let (code, out, _) = mirrors(dst, &["describe", "src", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(json(&out)["partitions"][0]["log_end"], 1);

    // Refusals exit 1 with the broker's reason.
    let (code, _, err) = mirrors(dst, &["describe", "nobody"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no mirror nobody"), "{err}");
    let (code, _, err) = mirrors(dst, &["delete", "src"]);
    assert_eq!(code, 1);
    assert!(err.contains("409"), "{err}");
    // Usage exits 2; no answer exits 3.
    let (code, _, _) = mirrors(dst, &["create", "x", "--topics", "cli"]);
    assert_eq!(code, 2);
    let out = Command::new(env!("CARGO_BIN_EXE_mirrorlog-broker"))
        .args(["mirrors", "--admin", "127.0.0.1:1", "--token-file"])
        .arg(dst.data_dir.join("broker/admin.token"))
        .arg("list")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let (code, _, err) = mirrors(dst, &["--token-file", "/nonexistent/token", "list"]);
    assert_eq!(code, 3, "{err}");

    // pause and resume.
    let (code, out, _) = mirrors(dst, &["pause", "src"]);
    assert_eq!((code, out.trim()), (0, "src: paused 1 partitions"));
    assert_eq!(
        json(&mirrors(dst, &["describe", "src", "--json"]).1)["state"],
        "paused"
    );
    assert_eq!(mirrors(dst, &["resume", "src"]).0, 0);
    assert_eq!(
        json(&mirrors(dst, &["describe", "src", "--json"]).1)["state"],
        "running"
    );

    // failover: the stop's outcome, then listed as stopped until deleted.
    let (code, out, _) = mirrors(dst, &["failover", "src"]);
    assert_eq!(code, 0);
    assert!(out.contains("LAST-MIRRORED"), "{out}");
    let (code, out, _) = mirrors(dst, &["describe", "src"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("mirror src (stopped)"), "{out}");
    // After the failover, a start's plan, changing nothing: the local record and the barrier,
    // what a start would cut (the source never saw the barrier's epoch).
    let bootstrap = pair.src.kafka.clone();
    let (code, out, _) = mirrors(
        dst,
        &[
            "create",
            "again",
            "--bootstrap",
            &bootstrap,
            "--topics",
            "cli",
            "--dry-run",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{out}");
    let plan = &json(&out)["plan"];
    assert_eq!(plan["partitions"][0]["log_end"], 2, "{plan}");
    assert_eq!(plan["partitions"][0]["truncate_to"], 0, "{plan}");
    assert!(json(&out)["started"].is_null());
    let (code, out, _) = mirrors(dst, &["describe", "src"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("mirror src (stopped)"),
        "the dry run changed nothing: {out}"
    );

    assert_eq!(mirrors(dst, &["delete", "src"]).0, 0);
    assert_eq!(mirrors(dst, &["describe", "src"]).0, 1);
}
