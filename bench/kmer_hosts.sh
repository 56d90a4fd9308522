#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# k-mer counting on the three network-namespace hosts over tcp (bench/on_hosts.sh makes
# them): weft-kmer, mpi-kmer on both MPIs and jellyfish, one rank per host.
#   bench/kmer_hosts.sh [--build build] [kmer_bench.py options...]
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build
if [ "${1:-}" = "--build" ]; then build=$(cd "$2" && pwd); shift 2; fi
exec "$src/bench/on_hosts.sh" --build "$build" 3 "$src/bench/kmer_bench.py" "$@"
