#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Settings that must agree across ranks are checked at start-up; a mismatch names both.
set -u
weftrun=$1 mp=$2
. "$(dirname "$0")/common.sh"
out=$(mktemp); trap 'rm -f $out' EXIT
# A refusal is an error exit of the job, not a crash (128+signal) or a hang (124).
refused() {  # exit status, what
  [ "$1" -ne 0 ] || fail "$2 was not detected"
  [ "$1" -lt 124 ] || { cat "$out"; fail "$2: exit status $1 (a crash or a hang, not an error)"; }
}
"$weftrun" -n 2 --timeout 30 sh -c 'if [ "$WEFT_RANK" = 1 ]; then export WEFT_PACKET_SIZE=4096; fi; exec "$0" matrix' "$mp" >"$out" 2>&1; rc=$?
refused $rc "a packet-size mismatch"
grep -q "settings differ between ranks: rank 0 has packet_size=8192, rank 1 has packet_size=4096" "$out" || { cat "$out"; fail "message does not name both values and ranks"; }
pass "packet-size mismatch reported with both values and ranks"
"$weftrun" -n 2 --timeout 30 sh -c 'if [ "$WEFT_RANK" = 0 ]; then export WEFT_EAGER_SIZE=1000; fi; exec "$0" matrix' "$mp" >"$out" 2>&1; rc=$?
refused $rc "an eager-size mismatch"
grep -q "rank 0 has eager_size=1000, rank 1 has eager_size=8160" "$out" || { cat "$out"; fail "eager mismatch"; }
pass "eager-size mismatch reported"
# A half-set launcher environment
WEFT_RANK=0 "$mp" matrix >"$out" 2>&1; refused $? "a half-set environment"
grep -q "WEFT_SIZE = <unset>" "$out" || { cat "$out"; fail "half-set environment message"; }
pass "half-set launcher environment refused"
WEFT_BOOTSTRAP=pmi9 "$mp" matrix >"$out" 2>&1; refused $? "an unknown bootstrap"
grep -q "WEFT_BOOTSTRAP = pmi9" "$out" || { cat "$out"; fail "unknown bootstrap message"; }
pass "unknown bootstrap refused"
"$weftrun" -n 2 --timeout 30 sh -c 'if [ "$WEFT_RANK" = 1 ]; then export WEFT_SHM_CHANNELS=2; fi; exec "$0" matrix' "$mp" >"$out" 2>&1; rc=$?
refused $rc "a put-channels mismatch"
grep -q "rank 0 has channels=4, rank 1 has channels=2" "$out" || { cat "$out"; fail "channels mismatch message"; }
pass "put-channels mismatch refused"
# Inbox lanes need not agree: each rank sizes its own inbox, and senders read it from the
# segment's header (the default device's lanes depend on the host).
"$weftrun" -n 2 --timeout 60 --tag-output sh -c 'if [ "$WEFT_RANK" = 1 ]; then export WEFT_SHM_LANES=1; else export WEFT_SHM_LANES=64; fi; exec "$0" matrix' "$mp" >"$out" 2>&1; rc=$?
[ $rc -eq 0 ] && each_rank_passed 2 || { cat "$out"; fail "ranks with 64 and 1 inbox lanes (rc $rc)"; }
pass "ranks with different inbox lanes exchange messages"
WEFT_SHM_LANES=0 "$mp" matrix >"$out" 2>&1; refused $? "WEFT_SHM_LANES=0"
grep -q "WEFT_SHM_LANES = 0.*must be 1..64" "$out" || { cat "$out"; fail "WEFT_SHM_LANES=0 message"; }
pass "WEFT_SHM_LANES=0 refused"
WEFT_BACKEND=carrier-pigeon "$mp" matrix >"$out" 2>&1; refused $? "an unknown backend"
grep -q "WEFT_BACKEND = carrier-pigeon: must be auto, shm, mixed, ofi or ucx" "$out" || { cat "$out"; fail "unknown backend message"; }
pass "unknown backend refused"
if grep -q "OFI_FOUND:INTERNAL=1" "$4/CMakeCache.txt" 2>/dev/null; then
  WEFT_BACKEND=ofi WEFT_OFI_PROVIDER=nosuchprovider "$mp" matrix >"$out" 2>&1; refused $? "an unknown provider"
  grep -q "WEFT_OFI_PROVIDER = nosuchprovider: no provider offers reliable datagrams" "$out" || { cat "$out"; fail "unknown provider message"; }
  pass "unknown libfabric provider refused"
fi
# Ranks that would build different backends: named before either builds one.
"$weftrun" -n 2 --timeout 30 sh -c 'if [ "$WEFT_RANK" = 1 ]; then export WEFT_BACKEND=ofi; fi; exec "$0" matrix' "$mp" >"$out" 2>&1; rc=$?
refused $rc "a backend mismatch"
grep -q "settings differ between ranks: rank 0 has backend=auto, rank 1 has backend=ofi" "$out" || { cat "$out"; fail "backend mismatch message"; }
pass "backend mismatch reported with both values and ranks"
WEFT_NET_BACKEND=shm "$weftrun" -n 2 --ranks-per-host 1 --timeout 30 "$mp" matrix >"$out" 2>&1; refused $? "WEFT_NET_BACKEND=shm"
grep -q "WEFT_NET_BACKEND = shm: must be ofi or ucx" "$out" || { cat "$out"; fail "network backend message"; }
pass "a network backend that is not one refused"
if grep -q "UCX_FOUND:INTERNAL=1" "$4/CMakeCache.txt" 2>/dev/null; then
  WEFT_BACKEND=ucx UCX_TLS=nosuchtransport "$mp" matrix >"$out" 2>&1; refused $? "an unknown UCX transport"
  grep -q "ucx backend: UCX_TLS = nosuchtransport: ucp_init failed" "$out" || { cat "$out"; fail "unknown UCX transport message"; }
  pass "unknown UCX transport refused"
fi
