#!/usr/bin/env python3
"""Runs the workspace's test binaries several at a time (scripts/test.sh calls it).

`cargo test` runs one test binary after another. Most of ours spend their time waiting on
fdatasync, sockets and child brokers, not on the CPU, so running a few binaries at once
shortens CI without changing what runs: every binary `cargo test --workspace --no-run`
builds, each with its package directory as working directory and CARGO_MANIFEST_DIR set, as
cargo runs them. Each binary's output is printed whole when it ends, under cargo's own
`Running` line; the run fails when any binary fails, and names them at the end.

Usage: run_tests.py [--jobs N] [-- ARGS to every test binary]
"""

import json
import os
import subprocess
import sys
import threading
import time

# Binaries that take longest, started first so that they do not end the run alone
# (measured in CI logs; a binary not named here starts in cargo's order after them).
SLOW_FIRST = [
    "journal_shard_crash",
    "bench_binary",
    "wire_fuzz",
    "broker_topologies",
    "recovery_crash",
    "many_partitions",
    "mirror_real_sources",
    "broker_faults",
    "journal_crash_sweep",
]


def build_list():
    """Builds the test binaries and lists (name, executable, package directory)."""
    cmd = [
        "cargo", "test", "--workspace", "--no-run",
        "--message-format=json-render-diagnostics",
    ]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True).stdout
    found = []
    for line in out.decode().splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        package_dir = os.path.dirname(msg["manifest_path"])
        found.append((msg["target"]["name"], msg["executable"], package_dir))
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    found.sort(key=lambda f: rank.get(f[0], len(rank)))
    return found


def main():
    args = sys.argv[1:]
    jobs = 3
    if args[:1] == ["--jobs"]:
        jobs = int(args[1])
        args = args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    binaries = build_list()
    print(f"run_tests.py: {len(binaries)} test binaries, {jobs} at a time", flush=True)
    lock = threading.Lock()
    queue = list(binaries)
    failed = []
    timings = []

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                name, exe, cwd = queue.pop(0)
            env = dict(os.environ, CARGO_MANIFEST_DIR=cwd)
            t0 = time.monotonic()
            done = subprocess.run(
                [exe, *args], cwd=cwd, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            )
            took = time.monotonic() - t0
            with lock:
                rel = os.path.relpath(exe)
                sys.stdout.write(f"     Running {name} ({rel}), {took:.1f} s\n")
                sys.stdout.write(done.stdout.decode(errors="replace"))
                sys.stdout.flush()
                timings.append((took, name))
                if done.returncode != 0:
                    failed.append(f"{name} (exit {done.returncode})")

    threads = [threading.Thread(target=worker) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    timings.sort(reverse=True)
    print("run_tests.py: longest: " + ", ".join(f"{n} {t:.0f} s" for t, n in timings[:6]))
    if failed:
        print("run_tests.py: failed: " + ", ".join(failed))
        return 1
    print(f"run_tests.py: all {len(binaries)} test binaries passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
