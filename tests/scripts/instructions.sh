#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Instruction budgets of the eager paths, counted by callgrind: one process sending 8-byte
# messages to itself (bench_weft rate), the difference of two run lengths divided by the
# extra messages, so that start-up and shutdown cancel. A count is deterministic for one
# build, so a budget catches a cost that creeps in unnoticed (a receive that walked every
# posted receive before it cost 1600 instructions a message, not 1112). Budgets: the counts
# of 2026-11-25 (744, 723, 1114; 522 lent in place, 2026-11-27) and 5% for compiler and C
# library differences.
# Arguments: weftrun mp_test source-dir build-dir.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
build=$4
bench=$build/bench/bench_weft
[ -x "$bench" ] || fail "$bench is not built"
command -v valgrind >/dev/null || fail "valgrind is not installed (scripts/setup-debian.sh installs it)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

count() {  # iterations, bench arguments...: the run's instructions
  local n=$1
  shift
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$bench" rate --iters "$n" "$@" \
    >"$tmp/out" 2>"$tmp/log" || { cat "$tmp/log" "$tmp/out"; fail "bench_weft rate $* failed"; }
  grep -q "RESULT system=weft" "$tmp/out" || { cat "$tmp/out"; fail "bench_weft rate $*: no result"; }
  sed -n 's/^totals: \([0-9]*\).*/\1/p' "$tmp/cg"
}

check() {  # name, budget, bench arguments...
  local name=$1 budget=$2
  shift 2
  local a b per
  a=$(count 32000 "$@")
  b=$(count 96000 "$@")
  [ -n "$a" ] && [ -n "$b" ] || fail "$name: callgrind wrote no totals"
  # bench_main sends an untimed warm-up of a tenth as many first.
  per=$(((b - a) / (96000 + 9600 - 32000 - 3200)))
  [ "$per" -le "$budget" ] || fail "$name: $per instructions per message, over the budget of $budget"
  pass "$name: $per instructions per message (budget $budget)"
}

check "active message, malloc'd delivery" 780 --mode am
check "active message, packet delivery" 760 --mode am --am-buffer packet
check "active message, lent in place to a handler" 548 --mode am --am-buffer in_place
check "send and receive, 64 receives posted" 1170 --mode sr
