#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs bench/scaling.py with what bench/device_pack.sh packed into .dev/, on a machine that
# has neither (its results go to $OUT, default /tmp/out). Extra arguments go to scaling.py;
# LIMIT (seconds, default 420) bounds the run, whose finished rounds are kept.
set -o pipefail
D=$PWD/.dev
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:$D/build PATH=$D/bin:$PATH UCX_MODULE_DIR=$D/lib/ucx PYTHONUNBUFFERED=1
export HWLOC_PLUGINS_PATH=$D/none
{ nproc; lscpu; ldd --version | head -1; head -2 /etc/os-release; } >"$OUT/machine.txt" 2>&1
if ! "$D/build/bench/weft-probe" flag --trials 1; then
  echo "weft-probe failed: trying Debian's libstdc++"
  export LD_LIBRARY_PATH=$D/compat:$LD_LIBRARY_PATH
fi
timeout 60 mpiexec.mpich -n 2 -bind-to none "$D/build/bench/bench_mpich" rate --mode am --iters 100000 ||
  echo "MPICH does not run here: it is left out"
timeout "${LIMIT:-420}" python3 bench/scaling.py --build "$D/build" --out "$OUT" --no-doc "$@" 2>&1 | tee "$OUT/log"
