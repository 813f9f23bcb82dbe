#!/usr/bin/env bash
# The test command (README.md): installs what the tests need, then runs every test.
#
# - A Python venv at .venv with the pinned interop peers (testdata/interop/requirements.txt), used
#   by crates/mirrorlog/tests/interop_kafka_python.rs. Re-created only when the pins change.
# - Fixtures from a real client (confluent-kafka's librdkafka and its mock cluster), written
#   into target/interop/confluent_kafka.
# - Then every test of every crate: the unit, integration, property and interop test binaries
#   `cargo test --workspace` builds, run three at a time by scripts/run_tests.py, then the doc
#   tests (`cargo test --workspace --doc`).
# - Then, with no arguments, each criterion bench once, briefly (`cargo test --benches` with the
#   `bench-smoke` profile: optimized, without the release profile's LTO, built in about 0.7 of its time),
#   so that no bench rots unnoticed (the bench binary's smoke runs in `cargo test`: crates/mirrorlog-bench/tests),
#   and librdkafka's own test suite's quick list against the broker
#   (scripts/librdkafka-suite.sh --quick: testdata/librdkafka/quick.list; it fails when one fails).
#
# With arguments, only `cargo test --workspace ARGS` runs (e.g. `scripts/test.sh --release`, or a
# test name filter).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's time in the log (`timing: N s  command`), so that CI's time can be read off it.
step() { local t0=$SECONDS; "$@"; echo "timing: $((SECONDS - t0)) s  $*"; }

# The Debian packages the tests need (scripts/packages.sh says which and why).
step scripts/packages.sh

venv=.venv
requirements=testdata/interop/requirements.txt
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "scripts/test.sh: creating $venv with $(grep -v "^#" "$requirements" | tr "\n" " ")"
  rm -rf "$venv"
  python3 -m venv "$venv"
  step "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  echo "$want" > "$stamp"
fi
export MIRRORLOG_PYTHON="$PWD/$venv/bin/python"

# Fresh bytes from a real client: librdkafka produces to its mock cluster, the partition is
# fetched raw (testdata/interop/confluent_fixtures.py); crates/mirrorlog-cli/tests/interop_confluent.rs reads them.
fixtures=target/interop/confluent_kafka
step "$MIRRORLOG_PYTHON" testdata/interop/confluent_fixtures.py "$fixtures"
export MIRRORLOG_CONFLUENT_FIXTURES="$PWD/$fixtures"

if [ "$#" -eq 0 ]; then
  # Every test binary `cargo test --workspace` builds, three at a time (scripts/run_tests.py:
  # most wait on fdatasync and sockets), then the doc tests.
  step python3 scripts/run_tests.py --jobs 3
  step cargo test --workspace --doc
  step cargo test --workspace --profile bench-smoke --benches
  step scripts/librdkafka-suite.sh --quick
else
  step cargo test --workspace "$@"
fi
