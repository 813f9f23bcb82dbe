#!/usr/bin/env bash
# The Debian packages the tests need, installed when missing and running as root (CI is);
# elsewhere it names what is missing and what will not run. Called by .ci/run before anything
# is built, and by scripts/test.sh.
#
# - e2fsprogs, util-linux, mount: crates/mirrorlog/tests/disk_full.rs loop-mounts a small ext4
#   image (mkfs.ext4, fallocate, mount);
# - kcat, curl: the broker's client tests and the README walk-through;
# - gcc, g++, make, pkg-config, zlib1g-dev, rapidjson-dev: librdkafka, built by the
#   rdkafka-sys crate (the bench and the broker's tests) and reused by
#   scripts/librdkafka-suite.sh for its test runner, whose statistics tests need RapidJSON:
#   present before the first cargo build, so that build has it.
set -euo pipefail
missing=()
command -v mkfs.ext4 >/dev/null 2>&1 || missing+=(e2fsprogs)
command -v fallocate >/dev/null 2>&1 || missing+=(util-linux)
command -v mount >/dev/null 2>&1 || missing+=(mount)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v curl >/dev/null 2>&1 || missing+=(curl)
for c in gcc g++ make pkg-config; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
[ -e /usr/include/zlib.h ] || missing+=(zlib1g-dev)
[ -e /usr/include/rapidjson/document.h ] || missing+=(rapidjson-dev)
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "scripts/packages.sh: installing ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
else
  echo "scripts/packages.sh: ${missing[*]} missing and not root: tests/disk_full.rs will not run, the broker's kcat tests and librdkafka's suite fail" >&2
fi
