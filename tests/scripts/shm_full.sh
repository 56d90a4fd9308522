#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A /dev/shm too small for the job (Docker's default is 64 MiB): start-up fails with an
# error that names the size and the settings that lower it, instead of a SIGBUS in the
# middle of traffic; and those settings make the job fit. Root only (a private mount).
set -u
weftrun=$1 mp=$2
. "$(dirname "$0")/common.sh"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: mounting a small /dev/shm needs root"; exit 77; }
command -v unshare >/dev/null || fail "unshare not installed (Debian package util-linux)"
out=$(mktemp); trap 'rm -f $out' EXIT
# Runs a command with a 2 MiB /dev/shm of its own (before segments were reserved, matrix
# died there of SIGBUS).
small_shm() { unshare -m sh -c 'mount -t tmpfs -o size=2m tmpfs /dev/shm && exec "$@"' sh "$@"; }

small_shm timeout 100 "$weftrun" -n 2 --timeout 60 --tag-output "$mp" matrix >"$out" 2>&1; rc=$?
[ $rc -ne 0 ] || { cat "$out"; fail "a job that cannot fit in /dev/shm succeeded"; }
[ $rc -ne 135 ] && ! grep -q "Bus error\|signal 7" "$out" || { cat "$out"; fail "SIGBUS instead of an error at start-up"; }
grep -q "shm segment: size = [0-9.]* MiB ([0-9]* bytes): cannot reserve it in /dev/shm" "$out" &&
  grep -q "lower it with WEFT_INBOX_DEPTH and WEFT_SHM_LANES" "$out" ||
  { cat "$out"; fail "the error does not name the size and the settings"; }
pass "a full /dev/shm is an error at start-up naming the size and the settings (rc $rc)"

WEFT_INBOX_DEPTH=16 WEFT_SHM_LANES=1 WEFT_SHM_CHANNELS=1 WEFT_SHM_SLOTS=2 WEFT_SHM_CHUNK=4096 \
  WEFT_SHM_REGIONS=64 \
  small_shm timeout 100 "$weftrun" -n 2 --timeout 60 --tag-output "$mp" barrier >"$out" 2>&1; rc=$?
[ $rc -eq 0 ] && each_rank_passed 2 ||
  { cat "$out"; fail "with the settings lowered the job still does not fit (rc $rc)"; }
pass "with the settings the error names lowered, the job fits in 2 MiB"

# The default device's extra lanes (WEFT_SHM_LANES unset, as on a 64-thread host here) give
# way to a /dev/shm without room for them: 4 lanes, a warning, and the job runs. Lanes set
# by the user are never shrunk: the error above instead.
small_shm_of() { unshare -m sh -c 'mount -t tmpfs -o size="$0" tmpfs /dev/shm && exec "$@"' "$@"; }
WEFT_TEST_HW_THREADS=64 small_shm_of 24m timeout 100 "$weftrun" -n 2 --timeout 60 --tag-output "$mp" matrix >"$out" 2>&1; rc=$?
[ $rc -eq 0 ] && each_rank_passed 2 ||
  { cat "$out"; fail "the default device's lanes did not give way to a small /dev/shm (rc $rc)"; }
[ "$(grep -c "has no room for device 0's 32 inbox lanes; it has 4" "$out")" -eq 2 ] ||
  { cat "$out"; fail "no warning from each rank that its lanes gave way"; }
pass "the default device's 32 lanes give way to 4 in a 24 MiB /dev/shm, with a warning"
WEFT_SHM_LANES=32 small_shm_of 24m timeout 100 "$weftrun" -n 2 --timeout 60 --tag-output "$mp" matrix >"$out" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "cannot reserve it in /dev/shm" "$out" ||
  { cat "$out"; fail "lanes the user set were shrunk instead of refused (rc $rc)"; }
pass "lanes the user set are not shrunk: the error names the settings"
