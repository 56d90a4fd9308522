#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Instructions per 8-byte active message in steady state, counted by callgrind for two run
# lengths; the difference divided by the extra messages removes start-up and shutdown.
#   loopback: one process sending to itself (Weft, MPICH): the library's own path.
#   process:  two processes, both counted and summed (Weft, MPICH, Open MPI, UCX's
#             ucp_am_bw; Weft also with its messages lent in place to a handler, api
#             am_in_place). This includes what each side spends polling while it waits,
#             which depends on how fast the other side is: read it as the cost of the
#             whole exchange, not of the path alone. It moves by a third from one run to
#             the next (UCX 605-780, Weft 566-1075 on 2026-11-27), so each system's figure
#             is the median of three runs (RUNS=n sets how many).
# Prints RESULT lines.
#   bench/callgrind.sh <build dir>
set -euo pipefail
build=${1:-build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
vg=(valgrind --tool=callgrind)
total() {  # the instructions of every callgrind output file in $tmp, summed; then removed
  local sum=0 v
  for f in "$tmp"/cg.*; do
    v=$(sed -n 's/^totals: \([0-9]*\).*/\1/p' "$f")
    sum=$((sum + ${v:-0}))
  done
  rm -f "$tmp"/cg.*
  echo "$sum"
}
count() {  # command... : instructions of the whole run
  "$@" >"$tmp/out" 2>"$tmp/log" || { cat "$tmp/log" "$tmp/out" >&2; exit 1; }
  total
}
result() {  # system mode value [api]
  echo "RESULT system=$1 api=${4:-am} mode=$2 threads=1 resources=dedicated workload=instructions size=8 value=$3 unit=instr/msg"
}
median() {  # numbers... : the middle one (the lower middle of an even count)
  printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"
}
runs=${RUNS:-3}
short=32000 long=96000
# bench_main's rate workload sends an untimed warm-up of a tenth as many first.
extra=$(( (long + long / 10) - (short + short / 10) ))
out="--callgrind-out-file=$tmp/cg.%p"
for sys in weft mpich; do
  bin="$build/bench/bench_$sys"
  [ -x "$bin" ] || continue
  a=$(count "${vg[@]}" "$out" "$bin" rate --mode am --iters $short)
  b=$(count "${vg[@]}" "$out" "$bin" rate --mode am --iters $long)
  result "$sys" loopback $(( (b - a) / extra ))
done
two() {  # system, iterations: the launcher's command line for two ranks under callgrind
  case $1 in
    weft) echo "$build/weftrun -n 2 --timeout 600 --bind-to none ${vg[*]} $out $build/bench/bench_weft" ;;
    mpich) echo "mpiexec.mpich -n 2 -bind-to none ${vg[*]} $out $build/bench/bench_mpich" ;;
    openmpi) echo "mpirun.openmpi --allow-run-as-root --oversubscribe -n 2 --bind-to none ${vg[*]} $out $build/bench/bench_openmpi" ;;
  esac
}
process() {  # system [bench arguments...]: the median over $runs of the per-message count
  local sys=$1 v=() a b
  shift
  for ((i = 0; i < runs; ++i)); do
    a=$(count $(two $sys) rate --mode am "$@" --iters $short)
    b=$(count $(two $sys) rate --mode am "$@" --iters $long)
    v+=($(( (b - a) / extra )))
  done
  median "${v[@]}"
}
for sys in weft mpich openmpi; do
  [ -x "$build/bench/bench_$sys" ] || continue
  result "$sys" process "$(process $sys)"
done
# Weft's active messages lent in place to a handler: what ucp_am_bw's callback gets.
if [ -x "$build/bench/bench_weft" ]; then
  result weft process "$(process weft --am-buffer in_place)" am_in_place
fi
if command -v ucx_perftest >/dev/null; then
  ucx() {  # iterations: server and client of ucp_am_bw at 8 bytes, both under callgrind
    local port=$((20000 + RANDOM % 30000))
    UCX_TLS=sm,self "${vg[@]}" "$out" ucx_perftest -t ucp_am_bw -s 8 -n "$1" -w 0 -p $port >/dev/null 2>&1 &
    local srv=$!
    sleep 2
    UCX_TLS=sm,self "${vg[@]}" "$out" ucx_perftest 127.0.0.1 -t ucp_am_bw -s 8 -n "$1" -w 0 -p $port >"$tmp/out" 2>&1 ||
      { cat "$tmp/out" >&2; exit 1; }
    wait $srv
    total
  }
  v=()
  for ((i = 0; i < runs; ++i)); do
    a=$(ucx $short)
    b=$(ucx $long)
    v+=($(( (b - a) / (long - short) )))
  done
  result ucx process "$(median "${v[@]}")"
fi
