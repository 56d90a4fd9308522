#!/usr/bin/env bash
# Builds Weft with warnings as errors and runs every test; then the resource and
# threading tests again under ThreadSanitizer and AddressSanitizer; then the benchmark
# suite once in quick mode as a smoke test.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
run_ctest() {  # build dir, ctest arguments...
  local dir=$1
  shift
  ctest --test-dir "$dir" --output-on-failure -j 2 "$@" | tee -a "$summary"
}
echo "== build (warnings are errors)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_WERROR=ON -DWEFT_BUILD_TESTS=ON >/dev/null
cmake --build build -j "$jobs"
echo "== all tests"
run_ctest build
for san in thread address; do
  echo "== resource and threading tests under -fsanitize=$san"
  # Without UCX: its memory hooks (libucm) and crash handlers fight the sanitizers'
  # interceptors, and every process linked with it crashed under ThreadSanitizer.
  cmake -S . -B "build-$san" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_WERROR=ON \
        -DWEFT_SANITIZE=$san -DWEFT_WITH_UCX=OFF >/dev/null
  cmake --build "build-$san" -j "$jobs" --target unit_tests mp_test weftrun
  run_ctest "build-$san" -L "unit|threads"
done
echo "== benchmark smoke test: the whole comparison once in quick mode (figures, no thresholds)"
/usr/bin/python3 bench/run.py --quick --build build --out build/bench-smoke --no-doc
total=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\)/\2/p' "$summary" | awk '{s += $1} END {print s}')
echo "== all test suites passed"
echo "$total passed, 0 failed"
