#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The benchmark scripts' tables made again from recorded raw data, as a session does with a
# lent machine's CSV (bench/kmer_bench.py --from-raw, bench/cholesky_bench.py --report-only,
# bench/taskbench.py --report-only): each must reproduce the rows and ratios recorded in
# bench/results.
#   bench_reports.sh WEFTRUN MP_TEST SOURCE_DIR BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
src=$3
build=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3  # Debian's, with matplotlib
has() {  # file, exact line
  grep -qxF -- "$2" "$1" || { cat "$1"; fail "$(basename "$1"): no line '$2'"; }
}

"$py" "$src/bench/kmer_bench.py" --from-raw "$src/bench/results/kmer_device_1128_raw.csv" \
  --name k --results "$tmp" --build "$build" >"$tmp/k.out" 2>&1 ||
  { cat "$tmp/k.out"; fail "kmer_bench.py --from-raw failed"; }
has "$tmp/k.md" "| 16 x 1 | 121.9 | 97.1 | 99.5 | 30.0 | 1.22 | 4.07 |"
has "$tmp/k.md" "| 1 | 94.4 | 27.0 | 53.3 |"
grep -qF "16 x 1 1.24, 1.22, 1.11 (ahead in 3 of 3)" "$tmp/k.md" || { cat "$tmp/k.md"; fail "k-mer: no ratios per round"; }
grep -qF "16 x 1: mpich funneled 1.24 (3 of 3), mpich multiple 1.22 (3 of 3)" "$tmp/k.md" ||
  { cat "$tmp/k.md"; fail "k-mer: no ratios against each MPI version"; }
pass "kmer_bench.py --from-raw: the 16-core table, its ratios per round and per MPI version"

cp "$src/bench/results/cholesky_device_raw.csv" "$tmp/c_raw.csv"
"$py" "$src/bench/cholesky_bench.py" --report-only --results "$tmp" --name c --ranks 16 --reps 2 \
  --bind core --build "$build" >"$tmp/c.out" 2>&1 ||
  { cat "$tmp/c.out"; fail "cholesky_bench.py --report-only failed"; }
has "$tmp/c.md" "| 64 | 285.6 (4x4) | 240.5 (4x4) | 221.0 (4x4) | 279.3 (4x4) | 560.3 |"
has "$tmp/c.md" "Weft engine / MPI engine at the best tile size of each: **0.96** (target > 1)."
grep -qF "16 ranks, one worker / one BLAS thread per rank on 16 cores" "$tmp/c.md" ||
  { cat "$tmp/c.md"; fail "Cholesky: the machine's ranks and cores are not stated"; }
pass "cholesky_bench.py --report-only: the 16-core table, its ceiling and ratios"

mkdir "$tmp/t"
cp "$src/bench/results/taskbench_device_raw.csv" "$tmp/t/raw.csv"
"$py" "$src/bench/taskbench.py" --report-only --out "$tmp/t" --bind none >"$tmp/t.out" 2>&1 ||
  { cat "$tmp/t.out"; fail "taskbench.py --report-only failed"; }
has "$tmp/t/summary.md" "| weft-engine no threads | 5.16 | 9.52 | 23.7 | 59.7 | 7.88 | 1.73 | 1632 |"
has "$tmp/t/summary.md" "| mpi-engine mpich thread | 4.99 | 5.54 | 88.3 | 136.9 | 3.46 | 0.84 | 2365 |"
grep -qF "best MPI engine / best Weft engine: **3.88** (target >= 2.8)." "$tmp/t/summary.md" ||
  { cat "$tmp/t/summary.md"; fail "taskbench: not the recorded 16-core ratio"; }
grep -qF "2 ranks on 16 cores (shared memory, every rank unbound)" "$tmp/t/summary.md" ||
  { cat "$tmp/t/summary.md"; fail "taskbench: the machine's cores are not stated"; }
pass "taskbench.py --report-only: the 16-core table and the 80% ratio"

# Ratios are classed by every probe reading of every measurement they use, the best peer's
# competitors included: round 0 below is fast throughout, in round 1 Weft's run ends in the
# slow phase, in round 2 UCX's run (not the best peer) is slow. Only round 0's ratio may
# count as fast.
mkdir "$tmp/b"
cat >"$tmp/b/raw.csv" <<'CSV'
round,class,flag,flag_after,system,api,mode,threads,resources,workload,size,value,unit,mechanism,stores,ahead,split
0,fast,0.05,,probe,flag,process,1,-,latency,8,0.05,us,,,,
0,fast,0.05,0.05,weft,am,process,1,dedicated,rate,8,20,Mmsg/s,,,,
0,fast,0.05,0.05,openmpi,am,process,1,dedicated,rate,8,10,Mmsg/s,,,,
0,fast,0.05,0.05,ucx,tag,process,1,dedicated,rate,8,8,Mmsg/s,,,,
1,fast,0.05,,probe,flag,process,1,-,latency,8,0.05,us,,,,
1,fast,0.05,0.25,weft,am,process,1,dedicated,rate,8,21,Mmsg/s,,,,
1,fast,0.05,0.05,openmpi,am,process,1,dedicated,rate,8,10,Mmsg/s,,,,
1,fast,0.05,0.05,ucx,tag,process,1,dedicated,rate,8,8,Mmsg/s,,,,
2,fast,0.05,,probe,flag,process,1,-,latency,8,0.05,us,,,,
2,fast,0.05,0.05,weft,am,process,1,dedicated,rate,8,22,Mmsg/s,,,,
2,fast,0.05,0.05,openmpi,am,process,1,dedicated,rate,8,10,Mmsg/s,,,,
2,fast,0.25,0.25,ucx,tag,process,1,dedicated,rate,8,3,Mmsg/s,,,,
CSV
"$py" "$src/bench/run.py" --from-raw --out "$tmp/b" --doc "$tmp/b/b.md" --build "$build" \
  >"$tmp/b.out" 2>&1 || { cat "$tmp/b.out"; fail "run.py --from-raw failed"; }
section() {  # the ratio table of one class: its line of the malloc'd rate
  sed -n "/^## Ratios, $1/,/^## /p" "$tmp/b/b.md" | grep -F "8 B message rate (AM, malloc'd buffers)"
}
section "fast" | grep -qF "| >= 1.5 | 2 | 1 |" ||
  { section "fast"; fail "run.py: the fast ratio is not round 0's alone"; }
section "measurements straddling" | grep -qF "| >= 1.5 | 2.15 | 2 | 2.1 .. 2.2 |" ||
  { section "measurements straddling"; fail "run.py: rounds 1 and 2 are not counted as mixed"; }
grep -qF "preceded and followed by the flag probe" "$tmp/b/b.md" ||
  fail "run.py: the page does not say that each measurement is followed by a probe"
pass "run.py --from-raw: a ratio is fast or slow only when all its runs, peers included, were"
