#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Weft bootstrapped from MPI in an MPI program, with MPICH (under hydra) and Open MPI (under
# mpirun): the program is built with each MPI's own compiler wrapper; Weft links no MPI.
set -u
weftrun=$1 mp=$2 src=$3 build=$4
. "$(dirname "$0")/common.sh"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
before=$(shm_snapshot)
flags=(-std=c++20 -O1 -Wall -Wextra -Werror -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX -I"$src/include" -I"$build/include"
       "$src/tests/mpi/mpi_coexist.cpp" -L"$build" -lweft -Wl,-rpath,"$build")
mpicxx.mpich "${flags[@]}" -o "$work/mpich" 2>"$work/cc.log" || { cat "$work/cc.log"; fail "build with mpicxx.mpich"; }
mpicxx.openmpi "${flags[@]}" -o "$work/openmpi" 2>"$work/cc.log" || { cat "$work/cc.log"; fail "build with mpicxx.openmpi"; }
pass "an MPI program using <weft/mpi.hpp> builds with MPICH's and Open MPI's mpicxx"

timeout 120 mpiexec.hydra -n 3 "$work/mpich" >"$work/out" 2>&1 && [ "$(grep -c 'mpi_coexist: all' "$work/out")" -eq 3 ] ||
  { cat "$work/out"; fail "MPICH: Weft and MPI in one program on 3 ranks"; }
pass "MPICH: ranks, hosts, and Weft and MPI messages on the same peers and tags kept apart (3 ranks)"
timeout 120 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none -n 3 "$work/openmpi" >"$work/out" 2>&1 &&
  [ "$(grep -c 'mpi_coexist: all' "$work/out")" -eq 3 ] || { cat "$work/out"; fail "Open MPI: Weft and MPI in one program on 3 ranks"; }
pass "Open MPI: the same"
[ "$(shm_snapshot)" = "$before" ] || fail "shared-memory files left in /dev/shm"
pass "no shared-memory files left behind"
