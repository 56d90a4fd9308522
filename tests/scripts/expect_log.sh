#!/usr/bin/env bash
# Runs a command, shows its output, and passes only if it succeeds and its output has a line
# matching `pattern` at least `count` times: for tests that must show which mechanism ran.
# usage: expect_log.sh pattern count command...
set -u
pattern=$1 count=$2
shift 2
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] || exit $rc
got=$(printf '%s\n' "$out" | grep -c -- "$pattern")
[ "$got" -ge "$count" ] || { echo "expect_log: '$pattern' $got times, expected $count" >&2; exit 1; }
