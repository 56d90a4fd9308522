#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs a multi-process test and passes it only when the job ends with the expected exit
# status (0 unless --rc) AND every rank that must succeed printed its own success line. A
# crash, a hang killed by weftrun's --timeout, or a rank that finished without its line
# fails the test, whatever else the output shows.
#
# usage: expect_ranks.sh [options] NRANKS SCENARIO -- command...
#   each rank R of 0..NRANKS-1 must print "rank R: SCENARIO: all N checks passed", tagged
#   "[R] " by weftrun --tag-output (or untagged, for a process run alone)
#   --rc CODE          the exit status the job must end with (a job with a rank killed on
#                      purpose ends with 137)
#   --ranks "0 2"      only these ranks must print their line (the others die on purpose;
#                      "none": no rank prints it)
#   --each REGEX       the line each rank must print instead (extended regex, whole line;
#                      @R@ stands for the rank)
#   --log REGEX COUNT  the output must also have at least COUNT lines matching REGEX
#   --log-at-most REGEX COUNT   ... and at most COUNT such lines
set -u
want_rc=0 ranks="" each="" logs=() most=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rc) want_rc=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --each) each=$2; shift 2 ;;
    --log) logs+=("$2" "$3"); shift 3 ;;
    --log-at-most) most+=("$2" "$3"); shift 3 ;;
    *) break ;;
  esac
done
[ $# -ge 4 ] && [ "$3" = "--" ] || { echo "usage: expect_ranks.sh [options] NRANKS SCENARIO -- command..." >&2; exit 2; }
nranks=$1 scenario=$2
shift 3
[ -n "$ranks" ] || ranks=$(seq 0 $((nranks - 1)))
[ "$ranks" = none ] && ranks=""
[ -n "$each" ] || each="rank @R@: $scenario: all [0-9]+ checks passed"

out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1 </dev/null
rc=$?
cat "$out"
status=0
if [ "$rc" -ne "$want_rc" ]; then
  echo "expect_ranks: the job ended with exit status $rc, expected $want_rc" >&2
  status=1
fi
for r in $ranks; do
  line=${each//@R@/$r}
  if ! grep -Eq -- "^(\[$r\] )?$line\$" "$out"; then
    echo "expect_ranks: rank $r did not print its line: $line" >&2
    status=1
  fi
done
if grep -q "CHECK failed\|CHECK_EQ failed" "$out"; then
  echo "expect_ranks: a check failed" >&2
  status=1
fi
# Pairs of (regex, count): each must occur at least (-lt fails) or at most (-gt fails) count times.
count_lines() {  # -lt|-gt, "least"|"most", pattern count ...
  local cmp=$1 word=$2 got
  shift 2
  while [ $# -ge 2 ]; do
    got=$(grep -Ec -- "$1" "$out")
    if [ "$got" "$cmp" "$2" ]; then
      echo "expect_ranks: '$1' $got times, expected at $word $2" >&2
      status=1
    fi
    shift 2
  done
}
count_lines -lt least "${logs[@]+"${logs[@]}"}"
count_lines -gt most "${most[@]+"${most[@]}"}"
exit $status
