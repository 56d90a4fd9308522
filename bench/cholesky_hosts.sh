#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The tiled Cholesky on the three network-namespace hosts over tcp (bench/on_hosts.sh makes
# them): weft-cholesky on the Weft engine and on the MPI engine (MPICH), and ScaLAPACK
# (MPICH), one rank per host.
#   bench/cholesky_hosts.sh [--build build] [cholesky_bench.py options...]
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build
if [ "${1:-}" = "--build" ]; then build=$(cd "$2" && pwd); shift 2; fi
exec "$src/bench/on_hosts.sh" --build "$build" 3 "$src/bench/cholesky_bench.py" "$@"
