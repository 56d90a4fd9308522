#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Weft under MPICH's hydra (mpiexec.hydra) through its own PMI-1 and PMI-2 clients: the
# multi-process scenarios and the C API test on 3 ranks, detection, and launcher
# environments that are wrong or half set.
set -u
weftrun=$1 mp=$2 src=$3 build=$4
. "$(dirname "$0")/common.sh"
command -v mpiexec.hydra >/dev/null || fail "mpiexec.hydra not installed (Debian package mpich)"
before=$(shm_snapshot)
out=$(mktemp); trap 'rm -f "$out"' EXIT

run3() {  # expected passes, env..., program args...
  local want=$1; shift
  timeout 120 env "$@" >"$out" 2>&1
  local rc=$?
  if [ $rc -ne 0 ] || ! each_rank_passed "$want"; then cat "$out"; return 1; fi
}

for v in 1 2; do
  for s in matrix order barrier runtimes rma graph lists; do
    run3 3 WEFT_PMI_VERSION=$v mpiexec.hydra -n 3 "$mp" $s || fail "PMI-$v: $s on 3 ranks"
  done
  run3 3 WEFT_PMI_VERSION=$v mpiexec.hydra -n 3 "$build/tests/c_api_test" || fail "PMI-$v: C API test"
  pass "PMI-$v under hydra: matrix, order, barrier, runtimes, rma, graph, lists and the C API on 3 ranks"
done

# Detection: PMI_FD picks PMI, version 2 by default; WEFT_BOOTSTRAP forces version 1.
WEFT_LOG_LEVEL=info timeout 60 mpiexec.hydra -n 2 "$mp" matrix >"$out" 2>&1 || { cat "$out"; fail "detection run"; }
[ "$(grep -c 'bootstrap pmi2: rank' "$out")" -eq 2 ] || { cat "$out"; fail "PMI-2 not chosen by default"; }
WEFT_BOOTSTRAP=pmi1 WEFT_LOG_LEVEL=info timeout 60 mpiexec.hydra -n 2 "$mp" matrix >"$out" 2>&1 || { cat "$out"; fail "pmi1 run"; }
[ "$(grep -c 'bootstrap pmi1: rank' "$out")" -eq 2 ] || { cat "$out"; fail "WEFT_BOOTSTRAP=pmi1 not honoured"; }
pass "PMI_FD selects PMI-2; WEFT_BOOTSTRAP=pmi1 selects PMI-1"

expect_error "PMI_RANK is set but PMI_FD is not" env PMI_RANK=0 PMI_SIZE=2 "$mp" matrix
expect_error "PMI_FD = <unset>" env WEFT_BOOTSTRAP=pmi1 PMI_RANK=0 PMI_SIZE=2 "$mp" matrix
expect_error "PMI_FD = 0: is not a socket" env WEFT_BOOTSTRAP=pmi2 PMI_FD=0 PMI_RANK=0 PMI_SIZE=2 "$mp" matrix
expect_error "PMI_RANK = 5: is not below PMI_SIZE = 2" env WEFT_BOOTSTRAP=pmi2 PMI_FD=0 PMI_RANK=5 PMI_SIZE=2 "$mp" matrix
expect_error "PMI_SIZE = <unset>" env WEFT_BOOTSTRAP=pmi2 PMI_FD=0 PMI_RANK=0 "$mp" matrix
expect_error "WEFT_PMI_VERSION = 7: must be 1 or 2" env WEFT_PMI_VERSION=7 mpiexec.hydra -n 1 "$mp" matrix
expect_error "WEFT_BOOTSTRAP = pmix3: must be auto, weftrun, pmix, pmi, pmi1, pmi2 or singleton" env WEFT_BOOTSTRAP=pmix3 "$mp" matrix
pass "half-set or wrong launcher environments are named errors"

[ "$(shm_snapshot)" = "$before" ] || fail "shared-memory files left in /dev/shm: $(comm -13 <(echo "$before") <(shm_snapshot))"
pass "no shared-memory files left behind"
