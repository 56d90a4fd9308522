#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds Weft and runs the active-message ping-pong under weftrun on shared memory.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=OFF -DWEFT_TEST_HOOKS=OFF >/dev/null
cmake --build build --target weftrun hello pingpong_am
echo "== hello world on 3 ranks"
./build/weftrun -n 3 --timeout 60 ./build/examples/hello | sort
echo "== active-message ping-pong between 2 ranks"
./build/weftrun -n 2 --timeout 120 ./build/examples/pingpong_am 200000 --bw
