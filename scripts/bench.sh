#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The benchmark comparison against MPICH, Open MPI and UCX, with the machine probe in every
# round, ratios within rounds by phase class, and plots:
#   scripts/bench.sh               full run: as many interleaved rounds as fit in 25 minutes
#                                  (2 to 7), then callgrind's instruction counts
#   scripts/bench.sh --minutes 15  another budget;  --rounds N: a fixed number of rounds
#   scripts/bench.sh --quick       one short round (about two minutes)
# Writes bench/results/{raw,medians}.csv, PNG plots, and docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
need=""
for p in mpich libmpich-dev openmpi-bin libopenmpi-dev ucx-utils python3-matplotlib valgrind; do
  dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
  echo "bench: installing$need"
  $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
fi
# Without the fault-injection hooks of test builds (scripts/test.sh turns them on here).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_TEST_HOOKS=OFF >/dev/null
cmake --build build --target weftrun bench_weft bench_resources bench_put_notify weft-probe \
  build_bench_mpich build_bench_openmpi
exec /usr/bin/python3 bench/run.py "$@"
