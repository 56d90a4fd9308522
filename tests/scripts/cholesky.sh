#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# weft-cholesky (N = 2048, b = 128): the relative residual ||A - L L^T||_F / ||A||_F below
# 1e-12 on the Weft engine (2 and 3 ranks, 1 and 2 worker threads, two grids), on the MPI
# engine under MPICH and Open MPI (2 ranks, and 3 ranks with 2 threads each), and for the ScaLAPACK baseline,
# with the executor's idle policy (sleep when oversubscribed) and who drove the engine (the
# workers or the program's thread, each asked for and as auto decides); then --help and bad input
# (an indefinite matrix on both engines, N not a multiple of b, a grid that does not match);
# last, a rank killed mid-run: the survivors end with an error naming it.
set -u
weftrun=$1 src=$3 build=$4
. "$(dirname "$0")/common.sh"
dir=$build/apps/cholesky
[ -x "$dir/weft-cholesky" ] || fail "no $dir/weft-cholesky (libopenblas-dev, liblapacke-dev)"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
out=$work/out
export OPENBLAS_NUM_THREADS=1

# The job's status, every rank's own line, and rank 0's figures and residual.
check_run() {  # name, ranks, command...
  local name=$1 n=$2 r; shift 2
  timeout 120 "$@" >"$out" 2>&1 </dev/null || { cat "$out"; fail "$*: exit status $?"; }
  for r in $(seq 0 $((n - 1))); do
    grep -Eq "^rank $r: $name: ok$" "$out" || { cat "$out"; fail "rank $r printed no line: $*"; }
  done
  grep -Eq "^gflops [0-9.]+$" "$out" || { cat "$out"; fail "no GFLOP/s line: $*"; }
  local res
  res=$(sed -n 's/^residual \([0-9.e+-]*\)$/\1/p' "$out")
  [ -n "$res" ] || { cat "$out"; fail "no residual line: $*"; }
  awk -v r="$res" 'BEGIN { exit !(r > 0 && r < 1e-12) }' || fail "residual $res not in (0, 1e-12): $*"
  # The executor's idle threads sleep when the machine has fewer CPUs than ranks (the
  # engine's oversubscribed attribute, both engines), and yield otherwise.
  if [ "$name" = weft-cholesky ]; then
    local cpus want=yield
    cpus=$(getconf _NPROCESSORS_ONLN)
    [ "$n" -gt "$cpus" ] && want=sleep
    grep -Eq "^RESULT .* idle=$want( |$)" "$out" ||
      { cat "$out"; fail "idle is not $want with $n ranks on $cpus CPUs: $*"; }
    # Who drove the engine, where the caller says what it must be.
    [ -z "${want_drive:-}" ] || grep -Eq "^RESULT .* drive=$want_drive( |$)" "$out" ||
      { cat "$out"; fail "the engine was not driven by the $want_drive: $*"; }
  fi
  echo "$res"
}

for conf in "2 1 1x2" "2 2 2x1" "3 2 1x3"; do
  set -- $conf
  res=$(check_run weft-cholesky "$1" "$weftrun" --bind-to none -n "$1" "$dir/weft-cholesky" -n 2048 -b 128 --threads "$2" --grid "$3") || exit 1
  pass "weft engine, $1 ranks, $2 threads, grid $3: residual $res"
done
# The engine's threads asked for (their auto leaves them off where 3 ranks oversubscribe
# the cores, and the executor's driver drives the engine in weft_engine_progress_wait).
res=$(WEFT_ENGINE_PROGRESS_THREAD=1 WEFT_ENGINE_COMM_THREAD=1 check_run weft-cholesky 3 "$weftrun" --bind-to none -n 3 "$dir/weft-cholesky" -n 2048 -b 128 --grid 1x3) || exit 1
pass "weft engine with its threads asked for, 3 ranks, grid 1x3: residual $res"
# Who drives the engine: the workers between their tasks (taking turns, with 2 workers) or
# the program's thread; auto picks the workers when the engine runs no thread of its own
# on a machine that is not oversubscribed (2 ranks on 2 cores or more), the driver otherwise.
auto_drive=workers
[ "$(getconf _NPROCESSORS_ONLN)" -lt 2 ] && auto_drive=driver
for conf in "auto 1 $auto_drive" "workers 2 workers" "driver 1 driver"; do
  set -- $conf
  res=$(WEFT_ENGINE_PROGRESS_THREAD=0 WEFT_ENGINE_COMM_THREAD=0 want_drive=$3 check_run weft-cholesky 2 "$weftrun" --bind-to none -n 2 "$dir/weft-cholesky" -n 2048 -b 128 --threads "$2" --drive "$1") || exit 1
  pass "weft engine without its threads, --drive $1, $2 workers: driven by the $3, residual $res"
done
res=$(want_drive=driver check_run weft-cholesky 3 "$weftrun" --bind-to none -n 3 "$dir/weft-cholesky" -n 2048 -b 128 --grid 1x3) || exit 1
pass "weft engine, 3 ranks on fewer cores: driven by the driver, residual $res"
res=$(WEFT_ENGINE_PROGRESS_THREAD=0 WEFT_ENGINE_COMM_THREAD=0 want_drive=workers check_run weft-cholesky 2 mpiexec.mpich -bind-to none -n 2 "$dir/weft-cholesky-mpich" -n 2048 -b 128 --engine mpi --threads 2 --drive workers) || exit 1
pass "MPI engine on mpich, 2 workers driving it: residual $res"
for flavour in mpich openmpi; do
  if [ $flavour = mpich ]; then launch="mpiexec.mpich -bind-to none"; else
    launch="mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none"; fi
  exe=$dir/weft-cholesky-$flavour
  [ -x "$exe" ] || fail "no $exe"
  res=$(check_run weft-cholesky 2 $launch -n 2 "$exe" -n 2048 -b 128 --engine mpi) || exit 1
  pass "MPI engine on $flavour, 2 ranks: residual $res"
  res=$(check_run weft-cholesky 3 $launch -n 3 "$exe" -n 2048 -b 128 --engine mpi --grid 3x1 --threads 2) || exit 1
  pass "MPI engine on $flavour, 3 ranks, grid 3x1, 2 threads: residual $res"
  exe=$dir/scalapack-cholesky-$flavour
  [ -x "$exe" ] || fail "no $exe (libscalapack-$flavour-dev)"
  res=$(check_run scalapack-cholesky 2 $launch -n 2 "$exe" -n 2048 -b 128) || exit 1
  pass "ScaLAPACK pdpotrf on $flavour, 2 ranks: residual $res"
done

"$dir/weft-cholesky" --help >"$out" 2>&1 || fail "--help: exit status $?"
grep -q "usage: weft-cholesky -n N -b B" "$out" || fail "--help printed no usage"
expect_error "not positive definite: its leading minor of order 1025 is not positive" \
  "$weftrun" -n 2 "$dir/weft-cholesky" -n 2048 -b 128 --matrix indefinite
expect_error "not positive definite: its leading minor of order 1025" \
  mpiexec.mpich -n 2 "$dir/weft-cholesky-mpich" -n 2048 -b 128 --engine mpi --matrix indefinite
expect_error "not positive definite: pdpotrf info 1025" \
  mpiexec.mpich -n 2 "$dir/scalapack-cholesky-mpich" -n 2048 -b 128 --matrix indefinite
expect_error "weft-cholesky: -n 2000: not a multiple of the block size 128" \
  "$weftrun" -n 2 "$dir/weft-cholesky" -n 2000 -b 128
expect_error "weft-cholesky: --grid 2x2: 4 processes, but 2 ranks are running" \
  "$weftrun" -n 2 "$dir/weft-cholesky" -n 512 -b 128 --grid 2x2
expect_error "weft-cholesky: --engine mpi: this build has no MPI engine" \
  "$weftrun" -n 1 "$dir/weft-cholesky" -n 512 -b 128 --engine mpi
expect_error "weft-cholesky: --grid 2y2: PxQ with P, Q >= 1" "$dir/weft-cholesky" --grid 2y2
expect_error "weft-cholesky: --drive everyone: auto, workers or driver" "$dir/weft-cholesky" --drive everyone
# A bad engine setting refuses the engine (both engines), naming the variable and value.
bad="WEFT_ENGINE_COMM_THREAD = bogus: expected auto, or 1/0"
WEFT_ENGINE_COMM_THREAD=bogus expect_error "weft-cholesky: weft: environment: $bad" \
  "$weftrun" -n 2 "$dir/weft-cholesky" -n 512 -b 128
WEFT_ENGINE_COMM_THREAD=bogus expect_error "weft-cholesky: weft: environment: $bad" \
  mpiexec.mpich -n 2 "$dir/weft-cholesky-mpich" -n 512 -b 128 --engine mpi
pass "--help, and clear errors for an indefinite matrix (both engines, ScaLAPACK), N not a multiple of b, a grid that does not match the ranks, an engine not built in, a malformed grid, an unknown --drive, a bad engine setting (both engines)"

# A rank killed in the middle of the factorizations (weftrun --keep-going, so the job is
# not ended for the survivors): each survivor's run ends with an error naming the dead
# rank and a non-zero exit, long before the 400 factorizations it was asked for, however
# the engine is driven. The executor watches its peers during a run; nothing waits on
# rank 1 at the engine's level, so without that the survivors waited for its flows forever.
pid_of_rank() {  # rank: the pid of the weft-cholesky process that runs it
  local p
  for p in $(pgrep -f "$dir/weft-cholesky -n 2048 -b 128 --grid 1x3 --reps 400"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "WEFT_RANK=$1" && { echo "$p"; return 0; }
  done
  return 1
}
for drive in workers driver; do
  start=$(date +%s)
  WEFT_ENGINE_PROGRESS_THREAD=0 WEFT_ENGINE_COMM_THREAD=0 timeout 60 "$weftrun" --keep-going \
    --bind-to none -n 3 "$dir/weft-cholesky" -n 2048 -b 128 --grid 1x3 --reps 400 --no-check \
    --drive "$drive" >"$out" 2>&1 </dev/null &
  job=$!
  victim=""
  for _ in $(seq 50); do  # the ranks start and factorize for a second
    sleep 0.1
    victim=$(pid_of_rank 1) && break
  done
  [ -n "$victim" ] || { kill "$job"; wait "$job"; cat "$out"; fail "rank 1 never started"; }
  sleep 1
  kill -KILL "$victim"
  wait "$job" && { cat "$out"; fail "the job succeeded although rank 1 was killed (--drive $drive)"; }
  took=$(($(date +%s) - start))
  [ "$took" -lt 30 ] || { cat "$out"; fail "the survivors took ${took} s to give up (--drive $drive)"; }
  # Each survivor names a dead peer: rank 1, or the other survivor once that one has
  # exited after its own report; the first to notice can only have seen rank 1 dead.
  grep -Eq "^rank [02]: weft-cholesky: weft::exec: rank 1: the peer died" "$out" ||
    { cat "$out"; fail "no survivor reported rank 1's death (--drive $drive)"; }
  for r in 0 2; do
    grep -Eq "^rank $r: weft-cholesky: weft::exec: rank [0-2]: the peer died" "$out" ||
      { cat "$out"; fail "rank $r did not report a peer's death (--drive $drive)"; }
    grep -q "rank $r (pid [0-9]*) exited with code 1" "$out" ||
      { cat "$out"; fail "rank $r did not exit with code 1 (--drive $drive)"; }
    ! grep -q "^rank $r: weft-cholesky: ok" "$out" || fail "rank $r printed ok (--drive $drive)"
  done
  pass "rank 1 killed mid-run, engine driven by the $drive: ranks 0 and 2 exit with code 1 naming a dead peer, after ${took} s"
done
