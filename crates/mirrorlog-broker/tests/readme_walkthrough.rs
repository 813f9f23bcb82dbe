//! The README's mirroring walk-through runs as written: every `sh` block of its section
//! "Mirroring, failover and failback", in order, as one bash script (`set -euo pipefail`), with
//! `MIRRORLOG_BIN` pointing at this build's binaries. Two brokers, a produce, a mirror, a
//! failover after a SIGKILL, a failback, the switch back, and `mirrorlog verify` of both data
//! directories; the test fails when any line fails or the whole takes longer than
//! [`WALKTHROUGH_SECONDS_MAX`].

mod broker_support;

use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the walk-through may take (it waits for mirrors to catch up).
const WALKTHROUGH_SECONDS_MAX: u64 = 180;

/// The `sh` blocks of the README section headed `heading`, in order.
fn shell_blocks(readme: &str, heading: &str) -> Vec<String> {
    let start = readme
        .find(&format!("## {heading}\n"))
        .unwrap_or_else(|| panic!("README has no section {heading:?}"));
    let section = &readme[start + 3..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut blocks = Vec::new();
    let mut rest = section;
    while let Some(open) = rest.find("```sh\n") {
        rest = &rest[open + "```sh\n".len()..];
        let close = rest.find("```").expect("a closed block");
        blocks.push(rest[..close].to_string());
        rest = &rest[close + 3..];
    }
    blocks
}

#[test]
fn the_readmes_failover_and_failback_walkthrough_runs_as_written() {
    let readme = std::fs::read_to_string(broker_support::repo().join("README.md")).unwrap();
    let blocks = shell_blocks(&readme, "Mirroring, failover and failback");
    assert!(blocks.len() >= 5, "{} blocks", blocks.len());
    let script = format!("set -euo pipefail\n{}", blocks.join("\n"));
    let broker = std::path::Path::new(env!("CARGO_BIN_EXE_mirrorlog-broker"));
    let bin = broker.parent().expect("a directory");
    // The walk-through ends with `mirrorlog verify`: the tool must be beside the broker.
    assert_eq!(broker_support::tool_bin().parent(), Some(bin));
    // The walk-through's `mktemp -d` lands in a directory this test removes: its two data
    // directories hold about 0.5 GB (each broker's journal is preallocated).
    let scratch = tempfile::tempdir().unwrap();
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(broker_support::repo())
        .env("MIRRORLOG_BIN", bin)
        .env("TMPDIR", scratch.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("bash");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(WALKTHROUGH_SECONDS_MAX) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // Whatever happened, nothing it started outlives it: SIGKILL to its process group. The group
    // id goes after `--`: procps-ng 4.0.2 reads `kill -9 -12345` as `kill(-1, SIGKILL)` (its first
    // digit only), which signals every process the user may signal.
    let pgid = child.id();
    assert!(pgid > 1, "a process group of its own");
    let _ = Command::new("kill")
        .args(["-s", "KILL", "--", &format!("-{pgid}")])
        .status();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    match status {
        None => {
            panic!("the walk-through took over {WALKTHROUGH_SECONDS_MAX} s\n{stdout}\n{stderr}")
        }
        Some(s) => assert!(
            s.success(),
            "the walk-through failed ({s})\n{stdout}\n{stderr}"
        ),
    }
    assert!(
        stdout.matches("0 problems").count() == 2,
        "both data directories verified clean:\n{stdout}"
    );
}
