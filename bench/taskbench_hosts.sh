#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The task benchmarks across two hosts over tcp (bench/on_hosts.sh makes them): one rank on
# each, every engine over tcp.
#   bench/taskbench_hosts.sh [--build build] [taskbench.py options...]
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build
if [ "${1:-}" = "--build" ]; then build=$(cd "$2" && pwd); shift 2; fi
exec "$src/bench/on_hosts.sh" --build "$build" 2 "$src/bench/taskbench.py" \
  --out "$build/taskbench_hosts" "$@"
