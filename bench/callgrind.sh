#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Instructions per 8-byte active message in steady state: one process sending to itself
# (loopback), counted by callgrind for two run lengths; the difference divided by the extra
# messages removes start-up and shutdown. Prints RESULT lines.
#   bench/callgrind.sh <build dir>
set -euo pipefail
build=${1:-build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
count() {  # binary, iterations
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$@" >/dev/null 2>"$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/log"
}
for sys in weft mpich; do
  bin="$build/bench/bench_$sys"
  [ -x "$bin" ] || continue
  short=32000 long=96000
  a=$(count "$bin" rate --mode am --iters $short)
  b=$(count "$bin" rate --mode am --iters $long)
  # Each run sends an untimed warm-up of a tenth as many first (bench_main.cpp, rate).
  extra=$(( (long + long / 10) - (short + short / 10) ))
  echo "RESULT system=$sys api=am mode=loopback threads=1 resources=dedicated workload=instructions size=8 value=$(( (b - a) / extra )) unit=instr/msg"
done
