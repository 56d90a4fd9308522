#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds Weft with warnings as errors (and the fault-injection hooks of test builds) and
# runs every test; then the resource and threading tests and the network backends' threaded
# scenarios again under ThreadSanitizer and AddressSanitizer; then the benchmark suite once
# in quick mode as a smoke test. Prints passed, failed and skipped counts apart, and fails
# when a test family that this machine should run was skipped or not registered. The whole
# test output stays in build/last-test.log.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
log=$(mktemp)
# The whole ctest output (with every failing test's own output) outlives the run: a rare
# failure must not be lost to the next run's Testing/ directories.
trap 'cp "$log" build/last-test.log 2>/dev/null || true; rm -f "$log"' EXIT
run_ctest() {  # build dir, ctest arguments...
  local dir=$1
  shift
  ctest --test-dir "$dir" --output-on-failure -j 2 "$@" | tee -a "$log"
}
start=$SECONDS
echo "== build (warnings are errors)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_WERROR=ON -DWEFT_BUILD_TESTS=ON \
      -DWEFT_TEST_HOOKS=ON >/dev/null
cmake --build build -j "$jobs"
echo "== all tests"
status=0
run_ctest build || status=1

# UCX's memory hooks (libucm) and its signal handlers fight the sanitizers' interceptors
# (every process linked with UCX crashed under ThreadSanitizer with them on): UCX's own
# settings turn them off, and then both sanitizers run UCX too.
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no \
       UCX_HANDLE_ERRORS=none UCX_ERROR_SIGNALS=
# A leak inside libfabric at shutdown, not Weft's (tests/lsan.supp says which).
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
for san in thread address; do
  echo "== resource, threading and network tests under -fsanitize=$san"
  cmake -S . -B "build-$san" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_WERROR=ON \
        -DWEFT_SANITIZE=$san -DWEFT_TEST_HOOKS=ON >/dev/null
  cmake --build "build-$san" -j "$jobs" --target unit_tests mp_test engine_test weftrun weft-soak
  run_ctest "build-$san" -L "unit|threads|san" || status=1
done

echo "== fuzzing: every decoder's libFuzzer target 20 s on the committed corpus (clang)"
if command -v clang++ >/dev/null; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DWEFT_WERROR=ON -DWEFT_FUZZ=ON -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_BENCH=OFF \
        -DWEFT_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build build-fuzz -j "$jobs" --target fuzz_wire fuzz_shm fuzz_regions fuzz_kvs fuzz_pmi
  run_ctest build-fuzz -L fuzz || status=1
fi

echo "== benchmark smoke test: the whole comparison once in quick mode (figures, no thresholds)"
/usr/bin/python3 bench/run.py --quick --build build --out build/bench-smoke --no-doc || status=1
# ... whose raw data has a probe reading before and after each run, figure by figure.
/usr/bin/python3 tests/scripts/check_bench_raw.py build/bench-smoke/raw.csv || status=1
echo "== thread-scaling smoke test: bench/scaling.py, 1 round, 1 and 2 threads, and its page"
/usr/bin/python3 bench/scaling.py --threads 1,2 --rounds 1 --iters 100000 --build build \
  --out build/scaling-smoke --doc build/scaling-smoke/scaling.md || status=1

# The warning for a set WEFT_* variable that no setting has stays silent on every correct
# run: no test's output (kept whole in each build's LastTest.log) may carry it.
for d in build build-thread build-address; do
  if grep -q "Weft has no such setting" "$d/Testing/Temporary/LastTest.log" 2>/dev/null; then
    grep -B2 "Weft has no such setting" "$d/Testing/Temporary/LastTest.log" | head -20 || true
    echo "a test run warned of an unknown WEFT_ variable ($d)"
    status=1
  fi
done

# Every test line of the three runs: "N/M Test #K: name ....   Passed|***Failed|***Skipped".
passed=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed' "$log" || true)
failed=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*(Failed|Timeout|Exception)' "$log" || true)
skipped=$(grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*(\*\*\*Skipped|Not Run)' "$log" |
          sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/\1/' || true)
nskipped=$(printf '%s' "$skipped" | grep -c . || true)

# The families this machine must run, by how it is set up: the root-only ones (network
# namespaces, Slurm, the sockets provider's private namespace, a small /dev/shm), and the
# network backends whose libraries are installed. Each must be registered and not skipped.
missing=""
need() {  # what, name regex
  local names
  names=$(ctest --test-dir build -N -R "$2" | sed -nE 's/^ *Test +#[0-9]+: //p')
  if [ -z "$names" ]; then
    missing="$missing\n  $1: no test matches $2"
    return
  fi
  local n
  for n in $names; do
    if grep -qx -- "$n" <<<"$skipped"; then missing="$missing\n  $1: $n was skipped"; fi
  done
}
if pkg-config --exists libfabric; then
  need "libfabric (ofi)" '^mp\..*\.ofi_(tcp|shm)'
  need "mixed over ofi" '^mp\..*\.mixed_ofi'
  need "a stopped rank over ofi" '^soak\.stop_ofi$'
fi
if pkg-config --exists ucx; then
  need "UCX" '^mp\..*\.ucx_(tcp|sm)'
  need "mixed over UCX" '^mp\..*\.mixed_ucx'
fi
need "fault injection (test hooks)" '^mp\.hole\.n3$'
need "the house rules and the settings table" '^script\.(house|settings)$'
need "job isolation" '^mp\.foreign(_rmr)?\.shm$'
need "the soak tool" '^soak\.(shm_kill|mixed_shared|inject_(drop|dup|corrupt))$'
need "MPI launchers" '^script\.(hydra|openmpi|mpi)$'
need "the Weft communication engine" '^engine\.weft\.'
command -v mpicc.mpich >/dev/null && need "the MPI engine on MPICH" '^engine\.mpi_mpich\.'
command -v mpicc.openmpi >/dev/null && need "the MPI engine on Open MPI" '^engine\.mpi_openmpi\.'
# The listing is read whole before it is searched: `ctest | grep -q` under pipefail
# fails when grep stops reading first and ctest dies of SIGPIPE (it did on CI).
fuzz_list=""
[ -d build-fuzz ] && fuzz_list=$(ctest --test-dir build-fuzz -N -L fuzz 2>/dev/null || true)
if grep -q "fuzz.pmi" <<<"$fuzz_list"; then
  for t in wire shm regions kvs pmi; do
    if grep -qx "fuzz.$t" <<<"$skipped"; then missing="$missing\n  fuzzing: fuzz.$t was skipped"; fi
  done
else
  missing="$missing\n  fuzzing: no fuzz targets (clang and libclang-rt-14-dev not installed?)"
fi
if [ "$(id -u)" -eq 0 ]; then
  need "network namespaces" '^script\.netns$'
  need "Slurm" '^script\.(slurm|netns_slurm)$'
  need "sockets provider" '^mp\..*\.ofi_sockets$'
  need "a full /dev/shm" '^script\.shm_full$'
  need "isolation from other users" '^script\.isolation$'
fi

echo "== $passed passed, $failed failed, $nskipped skipped ($(( (SECONDS - start) / 60 )) min)"
if [ "$nskipped" -gt 0 ]; then
  echo "skipped:"
  printf '%s\n' "$skipped" | sed 's/^/  /'
fi
if [ -n "$missing" ]; then
  printf "test families this machine should run but did not:%b\n" "$missing" >&2
  exit 1
fi
[ "$failed" -eq 0 ] && [ "$status" -eq 0 ] || exit 1
echo "== all test suites passed"
