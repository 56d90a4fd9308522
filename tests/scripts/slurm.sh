#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Weft under Slurm's srun on a private single-host Slurm (munged, slurmctld and slurmd from
# Debian's packages, started here with their own socket, ports and state directory, stopped
# on exit): the multi-process scenarios through the pmi2 and the pmix plugins.
set -u
weftrun=$1 mp=$2 src=$3 build=$4
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/slurm_common.sh"
slurm_check_installed
out=$(mktemp)
trap 'slurm_stop; rm -f "$out"' EXIT
before=$(shm_snapshot)
slurm_start 127.0.0.1 "$(hostname)=127.0.0.1"

for plugin in pmi2 pmix; do
  for s in matrix barrier rma graph; do
    WEFT_LOG_LEVEL=info timeout 120 srun --mpi=$plugin -n 3 --overcommit -t 2 "$mp" $s >"$out" 2>&1 &&
      each_rank_passed 3 || { cat "$out"; fail "srun --mpi=$plugin: $s on 3 ranks"; }
  done
  want=$plugin; [ $plugin = pmix ] || want=pmi2
  [ "$(grep -c "bootstrap $want: rank" "$out")" -eq 3 ] || { cat "$out"; fail "srun --mpi=$plugin did not select the $want bootstrap"; }
  timeout 120 srun --mpi=$plugin -n 3 --overcommit -t 2 "$build/tests/c_api_test" >"$out" 2>&1 &&
    each_rank_passed 3 || { cat "$out"; fail "srun --mpi=$plugin: C API test"; }
  pass "srun --mpi=$plugin: matrix, barrier, rma, graph and the C API on 3 ranks, bootstrap $want"
done
[ "$(shm_snapshot)" = "$before" ] || fail "shared-memory files left in /dev/shm"
pass "no shared-memory files left behind"
