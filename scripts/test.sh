#!/usr/bin/env bash
# Builds Weft with warnings as errors and runs every test; then the resource and
# threading tests again under ThreadSanitizer and AddressSanitizer; then the benchmark
# suite once in quick mode as a smoke test.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
echo "== build (warnings are errors)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_WERROR=ON >/dev/null
cmake --build build -j "$jobs"
echo "== all tests"
ctest --test-dir build --output-on-failure -j 2
for san in thread address; do
  echo "== resource and threading tests under -fsanitize=$san"
  cmake -S . -B "build-$san" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_WERROR=ON \
        -DWEFT_SANITIZE=$san >/dev/null
  cmake --build "build-$san" -j "$jobs" --target unit_tests mp_test weftrun
  ctest --test-dir "build-$san" --output-on-failure -j 2 -L "unit|threads"
done
echo "== benchmark smoke test: the whole comparison once in quick mode (figures, no thresholds)"
/usr/bin/python3 bench/run.py --quick --build build --out build/bench-smoke --no-doc
echo "== all test suites passed"
