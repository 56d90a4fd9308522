#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The benchmark comparison against MPICH and Open MPI, with plots:
#   scripts/bench.sh            full run (5 interleaved rounds; about 10 minutes here)
#   scripts/bench.sh --quick    one short round (about a minute)
# Writes bench/results/{raw,medians}.csv, PNG plots, and docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
need=""
for p in mpich libmpich-dev openmpi-bin libopenmpi-dev python3-matplotlib valgrind; do
  dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
  echo "bench: installing$need"
  $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
fi
# Without the fault-injection hooks of test builds (scripts/test.sh turns them on here).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_TEST_HOOKS=OFF >/dev/null
cmake --build build --target weftrun bench_weft bench_resources build_bench_mpich build_bench_openmpi
exec /usr/bin/python3 bench/run.py "$@"
