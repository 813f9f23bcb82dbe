#!/usr/bin/env bash
# librdkafka's own test suite against mirrorlog-broker: the clients' conformance bar.
#
#   scripts/librdkafka-suite.sh                 the full list (testdata/librdkafka/full.list)
#   scripts/librdkafka-suite.sh --quick         the quick list CI runs (testdata/librdkafka/quick.list)
#   scripts/librdkafka-suite.sh 0081_admin ...  the named tests
#   --list FILE   another list; --release  use the release broker (the default is the debug one,
#   which the test command has built already); --report FILE  also write the table there;
#   --run-dir DIR  the broker's data and the logs (default target/librdkafka-suite/run).
#
# What it does:
# - copies librdkafka's source out of the cargo registry (the rdkafka-sys crate the bench and the
#   broker tests use; never builds inside the registry) into target/librdkafka-suite/ and builds
#   the library and its test runner there (once per source version); installs the C packages the
#   build needs on Debian when missing and running as root, as scripts/test.sh does;
# - starts a broker on a fresh data directory and a free port, writes test.conf;
# - runs each test in its own invocation, not in quick mode (-Q skips sub-tests silently), with
#   the list's timeout, TEST_KAFKA_VERSION set to the Kafka version the broker claims, without
#   librdkafka's local tests (`-L`: those run against its mock cluster, and share name
#   prefixes with the broker tests `TESTS=` selects); a broker
#   that died during a test fails that test (named) and is restarted on a fresh directory;
# - prints a table: test, verdict, seconds, first failure line. Exit status 1 when any test
#   failed.
#
# List files: one test per line, `<name> <timeout seconds> [scenario [sub-tests]]` (librdkafka's
# scenario, as the test's table entry names it: `noautocreate` starts the broker without
# auto-creation; a `+acl` suffix, e.g. `default+acl`, runs that scenario on a broker with Kafka's
# authorizer on and `super.users=User:ANONYMOUS`, as librdkafka's own ACL tests want; a
# `+consumer` suffix runs the test's consumers with KIP-848's `group.protocol=consumer`
# (TEST_CONSUMER_GROUP_PROTOCOL); sub-tests: librdkafka's SUBTESTS, a substring of the sub-tests to run), or
# `<name> skip <reason>` for a test a single node cannot pass (the reason is printed). `#` starts
# a comment.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# The Kafka version whose behaviour the broker claims (its newest API versions are Kafka 3.9's
# for the APIs it serves); librdkafka's tests gate features on it.
kafka_version=3.9.0
list=""
profile=debug
report=""
run_dir=""
names=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --quick) list=testdata/librdkafka/quick.list ;;
    --list) list=$2; shift ;;
    --release) profile=release ;;
    --report) report=$2; shift ;;
    --run-dir) run_dir=$2; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    -*) echo "librdkafka-suite: unknown option $1" >&2; exit 2 ;;
    *) names+=("$1") ;;
  esac
  shift
done
if [ -z "$list" ] && [ "${#names[@]}" -eq 0 ]; then list=testdata/librdkafka/full.list; fi

# --- C packages the build needs (gcc, g++, make and pkg-config; zlib's headers; RapidJSON's,
# without which the tests that parse statistics JSON skip themselves).
missing=()
for c in gcc g++ make pkg-config; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
[ -e /usr/include/zlib.h ] || missing+=(zlib1g-dev)
[ -e /usr/include/rapidjson/document.h ] || missing+=(rapidjson-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "librdkafka-suite: installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  else
    echo "librdkafka-suite: ${missing[*]} missing and not root: cannot build librdkafka's tests" >&2
    exit 1
  fi
fi

# --- librdkafka's source, from the rdkafka-sys crate the workspace locks.
src=$(cargo metadata --format-version 1 --locked 2>/dev/null | python3 -c '
import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "rdkafka-sys":
        print(os.path.join(os.path.dirname(p["manifest_path"]), "librdkafka")); break')
if [ ! -f "$src/tests/test.c" ]; then
  echo "librdkafka-suite: librdkafka's source not found (rdkafka-sys in the cargo registry: run cargo fetch)" >&2
  exit 1
fi
version=$(basename "$(dirname "$src")")
work=$root/target/librdkafka-suite
# librdkafka's configure (mklove) cannot run from a path holding the crate version's `+`.
build=$work/librdkafka-${version##*+}
runner=$build/tests/test-runner
stamp="$build/.mirrorlog-built"
want="librdkafka $version, rapidjson $([ -e /usr/include/rapidjson/document.h ] && echo yes || echo no)"
# The library cargo built for rdkafka-sys (its OUT_DIR: this source, configured without SSL,
# GSSAPI, curl and zstd, built by `make libs`), when it has what the runner needs (RapidJSON
# when installed: scripts/packages.sh installs it before the first cargo build): copied, and only
# the test runner built in the copy: the suite compiles no library of its own.
built_by_cargo() {
  local rapidjson out
  rapidjson=$([ -e /usr/include/rapidjson/document.h ] && echo y || echo n)
  for out in "$root"/target/debug/build/rdkafka-sys-*/out; do
    [ -e "$out/src/librdkafka.so.1" ] && [ -e "$out/src-cpp/librdkafka++.so.1" ] || continue
    cmp -s "$out/src/rdkafka.h" "$src/src/rdkafka.h" || continue
    grep -qE "^WITH_RAPIDJSON=[[:space:]]*$rapidjson\$" "$out/Makefile.config" || continue
    echo "$out"; return 0
  done
  return 1
}
if [ ! -x "$runner" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  t0=$SECONDS
  rm -rf "$build" && mkdir -p "$work"
  if out=$(built_by_cargo); then
    echo "librdkafka-suite: $version's library as cargo built it ($out); building the test runner in $build"
    cp -a "$out" "$build"
    (cd "$build" && make -j"$(nproc)" -C tests build > "$work/make.txt" 2>&1) || {
      echo "librdkafka-suite: build failed; see $work/make.txt" >&2
      rm -f "$runner"; exit 1; }
    echo "$want" > "$stamp"
    echo "timing: $((SECONDS - t0)) s  librdkafka's test runner (the library from cargo's build)"
  else
    echo "librdkafka-suite: building $version's library and test runner in $build"
    cp -r "$src" "$build"
    (cd "$build" && ./configure --disable-ssl --disable-gssapi --disable-curl --disable-zstd \
        --disable-sasl > "$work/configure.txt" 2>&1 && make -j"$(nproc)" libs > "$work/make.txt" 2>&1 \
        && make -j"$(nproc)" -C tests build >> "$work/make.txt" 2>&1) || {
      echo "librdkafka-suite: build failed; see $work/configure.txt and $work/make.txt" >&2
      rm -f "$runner"; exit 1; }
    echo "$want" > "$stamp"
    echo "timing: $((SECONDS - t0)) s  librdkafka and its test runner"
  fi
fi
export LD_LIBRARY_PATH=$build/src:$build/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# --- the broker.
if [ "$profile" = release ]; then cargo build --quiet --release --bin mirrorlog-broker;
else cargo build --quiet --bin mirrorlog-broker; fi
broker_bin=$root/target/$profile/mirrorlog-broker
run_dir=${run_dir:-$work/run}
rm -rf "$run_dir" && mkdir -p "$run_dir/logs"
broker_pid=""
generation=0
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# The broker set up as librdkafka's test scenarios (tests/scenarios/*.json) set up Kafka:
# 4 partitions per auto-created topic; auto-creation off in `noautocreate`; ACLs with `+acl`.
scenario=default
# The scenario as librdkafka names it (without our suffixes).
base_scenario() { local s=${scenario%+consumer}; echo "${s%+acl}"; }
# KIP-848's protocol for the test's consumers, with `+consumer`.
group_protocol() { [ "${scenario%+consumer}" != "$scenario" ] && echo consumer || echo classic; }
start_broker() {
  generation=$((generation + 1))
  local data=$run_dir/data.$generation log=$run_dir/broker.$generation.log auto=true acl=()
  [ "$(base_scenario)" = noautocreate ] && auto=false
  [ "${scenario%+acl}" != "$scenario" ] && acl=(--set \
    authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
    --set super.users=User:ANONYMOUS)
  port=$(free_port); admin=$(free_port)
  "$broker_bin" --data-dir "$data" --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" \
    --set num.partitions=4 --set auto.create.topics.enable=$auto \
    --set group.consumer.heartbeat.interval.ms=1000 "${acl[@]}" > "$log" 2>&1 &
  broker_pid=$!
  for _ in $(seq 1 200); do
    grep -q "mirrorlog-broker ready" "$log" 2>/dev/null && break
    kill -0 "$broker_pid" 2>/dev/null || { echo "librdkafka-suite: broker did not start: $(tail -3 "$log")" >&2; exit 1; }
    sleep 0.05
  done
  grep -q "mirrorlog-broker ready" "$log" || { echo "librdkafka-suite: broker not ready after 10 s" >&2; exit 1; }
  printf 'bootstrap.servers=127.0.0.1:%s\n' "$port" > "$run_dir/test.conf"
}
stop_broker() { [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null; broker_pid=""; }
trap stop_broker EXIT
start_broker

# --- the tests.
entries=()
if [ -n "$list" ]; then
  while read -r name rest; do
    [ -z "$name" ] && continue
    case "$name" in \#*) continue ;; esac
    entries+=("$name $rest")
  done < "$list"
fi
for n in "${names[@]}"; do entries+=("$n 300"); done

table=$run_dir/table.txt
printf '%-48s %-8s %8s  %s\n' test verdict seconds "first failure line" > "$table"
failed=0
for entry in "${entries[@]}"; do
  read -r name timeout_s rest <<< "$entry"
  if [ "$timeout_s" = skip ]; then
    printf '%-48s %-8s %8s  %s\n' "$name" skipped - "$rest" >> "$table"; continue
  fi
  read -r want subtests <<< "$rest"
  want=${want:-default}
  label=$name${subtests:+[$subtests]}
  if [ "$want" != "$scenario" ]; then scenario=$want; stop_broker; start_broker; fi
  log=$run_dir/logs/$label.log
  t0=$(date +%s.%N)
  set +e
  # The subshell's stderr is the log too: bash reports a runner killed by a signal there.
  (cd "$build/tests" && RDKAFKA_TEST_CONF=$run_dir/test.conf TESTS=$name TEST_SCENARIO=$(base_scenario) \
     SUBTESTS=${subtests:-} TEST_CONSUMER_GROUP_PROTOCOL=$(group_protocol) \
     TEST_KAFKA_VERSION=$kafka_version timeout -k 5 "$timeout_s" ./test-runner -p1 -L; echo "rc=$?") \
     > "$log" 2>&1
  set -e
  rc=$(sed -n 's/^rc=\([0-9]*\)$/\1/p' "$log" | tail -1)
  rc=${rc:-1}
  secs=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)")
  clean=$(sed 's/\x1b\[[0-9;]*m//g' "$log")
  verdict=passed; why=""
  if ! kill -0 "$broker_pid" 2>/dev/null; then
    verdict=FAILED; why="the broker died during this test: $(tail -1 "$run_dir/broker.$generation.log")"
    start_broker
  elif [ "$rc" -eq 124 ]; then
    verdict=FAILED; why="timed out after ${timeout_s}s"
  elif [ "$rc" -ne 0 ]; then
    # librdkafka prints `### Test "X" failed at file:line:function() at time: ###`, then why.
    verdict=FAILED
    why=$(grep -m1 -A1 '^### Test ' <<< "$clean" | tail -1 | cut -c1-160 || true)
    [ -n "$why" ] || why="exit status $rc: $(grep -v '^rc=' <<< "$clean" | tail -1 | cut -c1-140)"
  # The test asked for must have run and passed. The runner selects by the test's number, so
  # its siblings of the same number run too: those of another scenario are skipped (silently),
  # those that are local filtered out (`-L`); they are not this entry's verdict.
  elif ! grep -qE "^\| $name +\| +PASSED" <<< "$clean" || ! grep -q "ALL TESTS PASSED" <<< "$clean"; then
    verdict=FAILED; why="the runner skipped it or passed nothing: $(grep -m1 -i skip <<< "$clean" | cut -c1-120)"
  elif [ -n "$subtests" ] && ! grep -qE "^\[.*\[ [a-zA-Z_]+:[0-9]+: (.*: )?PASS \(" <<< "$clean"; then
    verdict=FAILED; why="no sub-test matching $subtests ran"
  fi
  [ "$verdict" = passed ] || failed=$((failed + 1))
  printf '%-48s %-8s %8s  %s\n' "$label" "$verdict" "$secs" "$why" >> "$table"
  tail -1 "$table"
done
echo
cat "$table"
[ -n "$report" ] && cp "$table" "$report"
echo "librdkafka-suite: $failed failed; logs in $run_dir/logs"
[ "$failed" -eq 0 ]
