#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs a benchmark with what bench/device_pack.sh packed into .dev/ (or .dev.tar.xz), on a
# machine that has neither Weft's build nor an MPI (results go to $OUT, default /tmp/out):
#   bash bench/device_run.sh scaling [bench/scaling.py arguments]
#   bash bench/device_run.sh kmer [bench/kmer_bench.py arguments, e.g. --configs 1x16,16x1]
#   bash bench/device_run.sh cholesky [bench/cholesky_bench.py arguments, e.g. --ranks 16]
#   bash bench/device_run.sh taskbench [bench/taskbench.py arguments, e.g. --rounds 3]
#   bash bench/device_run.sh overlap [bench/taskbench.py arguments]: --mode overlap, its model
#     lines from the ping-pong's $OUT/raw.csv (run taskbench first), into $OUT/overlap
# LIMIT (seconds, default 420) bounds the run; scaling.py keeps its finished rounds.
set -o pipefail
what=${1:-scaling}
shift
D=$PWD/.dev
# What bench/device_pack.sh packed, carried compressed: unpacked afresh on every call.
if [ -f .dev.tar.xz ]; then rm -rf "$D" && tar xJf .dev.tar.xz || exit 1; fi
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
case $what in
  scaling) cmd=(python3 bench/scaling.py --build "$D/build" --out "$OUT" --no-doc) ;;
  kmer) cmd=(python3 bench/kmer_bench.py --build "$D/build" --results "$OUT" --name kmer_device) ;;
  cholesky) cmd=(python3 bench/cholesky_bench.py --build "$D/build" --results "$OUT" --name cholesky_device) ;;
  # Unbound ranks: each rank's progress, communication and worker threads find cores of their own.
  taskbench) cmd=(python3 bench/taskbench.py --build "$D/build" --out "$OUT" --bind none) ;;
  overlap) cmd=(python3 bench/taskbench.py --build "$D/build" --out "$OUT/overlap" --bind none --mode overlap
    --bandwidth-csv "$OUT/raw.csv") ;;
  *) echo "usage: bench/device_run.sh scaling|kmer|cholesky|taskbench|overlap [arguments]"; exit 2 ;;
esac
timeout "${LIMIT:-420}" "${cmd[@]}" "$@" 2>&1 | tee "$OUT/log_$what"
