#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Weft under Open MPI's mpirun through PMIx (libpmix): the multi-process scenarios and the
# C API test on 3 ranks, detection, and PMIx environments that are wrong or half set.
set -u
weftrun=$1 mp=$2 src=$3 build=$4
. "$(dirname "$0")/common.sh"
command -v mpirun.openmpi >/dev/null || fail "mpirun.openmpi not installed (Debian package openmpi-bin)"
grep -q "PMIX_FOUND:INTERNAL=1" "$build/CMakeCache.txt" || fail "Weft was built without libpmix (install libpmix-dev)"
before=$(shm_snapshot)
out=$(mktemp); trap 'rm -f "$out"' EXIT
mpirun=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none)

for s in matrix order barrier runtimes rma graph lists; do
  timeout 120 "${mpirun[@]}" -n 3 "$mp" $s >"$out" 2>&1 && each_rank_passed 3 ||
    { cat "$out"; fail "PMIx: $s on 3 ranks"; }
done
timeout 120 "${mpirun[@]}" -n 3 "$build/tests/c_api_test" >"$out" 2>&1 && each_rank_passed 3 ||
  { cat "$out"; fail "PMIx: C API test"; }
pass "PMIx under mpirun: matrix, order, barrier, runtimes, rma, graph, lists and the C API on 3 ranks"

WEFT_LOG_LEVEL=info timeout 60 "${mpirun[@]}" -n 2 "$mp" matrix >"$out" 2>&1 || { cat "$out"; fail "detection run"; }
[ "$(grep -c 'bootstrap pmix: rank' "$out")" -eq 2 ] || { cat "$out"; fail "PMIx not chosen under mpirun"; }
pass "PMIX_RANK and PMIX_NAMESPACE select PMIx"

expect_error "PMIX_RANK is set but PMIX_NAMESPACE is not" env PMIX_RANK=0 "$mp" matrix
expect_error "cannot reach the launcher's PMIx server" env WEFT_BOOTSTRAP=pmix "$mp" matrix
expect_error "cannot reach the launcher's PMIx server" env PMIX_RANK=0 PMIX_NAMESPACE=nobody "$mp" matrix
pass "half-set or serverless PMIx environments are named errors"

[ "$(shm_snapshot)" = "$before" ] || fail "shared-memory files left in /dev/shm"
pass "no shared-memory files left behind"
