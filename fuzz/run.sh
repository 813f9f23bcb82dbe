#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS each (default 60) on the stable toolchain
# (`--sanitizer none`: no ASan on stable; the targets are safe Rust, a panic is the finding;
# `--debug-assertions`: integer overflow is a finding too),
# and prints executions and crashes per target. Corpora stay in fuzz/corpus/ (git-ignored);
# a crash leaves its input in fuzz/artifacts/<target>/ and fails the script.
#
#   fuzz/run.sh 300          # 5 minutes per target
#   fuzz/run.sh 60 dump      # one target
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
fi
status=0
for t in "${targets[@]}"; do
  log=$(mktemp)
  if cargo fuzz run "$t" --sanitizer none -O --debug-assertions -- -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
    result="0 crashes"
  else
    result="CRASH (see fuzz/artifacts/$t/)"
    status=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  echo "$t: ${seconds}s, $execs executions, $result"
  [ "$status" -eq 0 ] || tail -30 "$log"
  rm -f "$log"
done
exit $status
