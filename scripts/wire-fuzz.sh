#!/usr/bin/env bash
# The structured wire fuzzer's long run (crates/mirrorlog-broker/tests/wire_fuzz.rs), against a release broker:
# CASES cases (default 100000) from each SEED (default: five seeds), each seed's run replayable
# with MIRRORLOG_SEED. CI runs 1500 cases of one seed inside `cargo test`.
#
#   scripts/wire-fuzz.sh [CASES] [SEED...]
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${1:-100000}
shift || true
seeds=("$@")
[ "${#seeds[@]}" -gt 0 ] || seeds=(1 2 3 4 5)
for seed in "${seeds[@]}"; do
  echo "wire-fuzz: seed $seed, $cases cases"
  MIRRORLOG_SEED=$seed MIRRORLOG_FUZZ_CASES=$cases \
    cargo test --release -p mirrorlog-broker --test wire_fuzz -- --nocapture
done
