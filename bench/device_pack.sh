#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Packs what bench/scaling.py, bench/kmer_bench.py, bench/cholesky_bench.py and
# bench/taskbench.py need on a borrowed many-core machine that has neither Weft's build nor
# an MPI (the lent device machine): Weft's benchmark, task-benchmark, k-mer and Cholesky
# binaries from a build, Debian's MPICH with its hydra launcher and UCX, OpenBLAS, ScaLAPACK
# and jellyfish, into .dev/ (ignored by git; about 105 MiB), and that folder compressed into
# .dev.tar.xz (about 20 MiB, under the 64 MiB a device call carries). Carry .dev.tar.xz;
# there, from the repository root, bash bench/device_run.sh
# scaling|kmer|cholesky|taskbench|overlap [that script's arguments] unpacks it first.
#   bench/device_pack.sh [build-bench]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-bench}
dev=$root/.dev
for p in /.dev/ /.dev.tar.xz; do
  grep -qx "$p" "$root/.git/info/exclude" 2>/dev/null || { mkdir -p "$root/.git/info"; echo "$p" >>"$root/.git/info/exclude"; }
done
rm -rf "$dev"
mkdir -p "$dev/build/bench" "$dev/build/apps/kmer" "$dev/build/apps/cholesky" "$dev/bin" "$dev/lib/ucx" \
  "$dev/compat"
cp "$build/weftrun" "$dev/build/"
cp -L "$build/libweft.so.0" "$dev/build/"
for b in bench_weft bench_mpich bench_resources weft-probe weft-taskbench taskbench_mpich taskbench_mpich_cont; do cp "$build/bench/$b" "$dev/build/bench/"; done
for b in weft-kmer mpi-kmer-mpich kmer-gen-reads; do cp "$build/apps/kmer/$b" "$dev/build/apps/kmer/"; done
for b in weft-cholesky weft-cholesky-mpich scalapack-cholesky-mpich; do
  cp "$build/apps/cholesky/$b" "$dev/build/apps/cholesky/"
done
cp /usr/bin/jellyfish "$dev/bin/"
cp /usr/bin/mpiexec.hydra "$dev/bin/mpiexec.mpich"
cp /usr/bin/hydra_pmi_proxy "$dev/bin/"
cp -L /usr/lib/x86_64-linux-gnu/ucx/libuct_cma.so.0 "$dev/lib/ucx/"
# Every shared library these need, except the C library's own (the other machine's is newer).
skip='libc\.so|libm\.so|libresolv|libpthread|libdl\.so|librt\.so|libstdc\+\+|libgcc_s|ld-linux'
deps() { ldd "$@" | awk '$3 ~ /^\// {print $3}' | sort -u | grep -Ev "$skip" || true; }
for l in $(deps "$build/bench/bench_mpich" /usr/bin/mpiexec.hydra /usr/bin/hydra_pmi_proxy \
  "$dev/lib/ucx/"* /usr/bin/jellyfish "$build/apps/kmer/mpi-kmer-mpich" "$dev/build/apps/cholesky/"* \
  "$dev/build/bench/"taskbench_mpich*); do
  cp -L "$l" "$dev/lib/"
done
for l in $(deps "$dev/lib/"*.so*); do [ -e "$dev/lib/$(basename "$l")" ] || cp -L "$l" "$dev/lib/"; done
# Debian's C++ runtime, used only when the other machine's is older.
cp -L /usr/lib/x86_64-linux-gnu/libstdc++.so.6 /usr/lib/x86_64-linux-gnu/libgcc_s.so.1 "$dev/compat/"
strip --strip-debug "$dev/lib/"*.so* "$dev/lib/ucx/"* "$dev/build/libweft.so.0" "$dev/build/bench/"* \
  "$dev/build/apps/kmer/"* "$dev/build/apps/cholesky/"* "$dev/build/weftrun"
du -sh "$dev"
tar cJf "$root/.dev.tar.xz" -C "$root" .dev
ls -lh "$root/.dev.tar.xz"
