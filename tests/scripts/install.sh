#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# cmake --install, then an outside project builds against the installed tree two ways.
set -u
weftrun=$1 mp=$2 src=$3 build=$4
. "$(dirname "$0")/common.sh"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install"; }
for f in include/weft/weft.hpp include/weft/weft.h include/weft/graph.hpp include/weft/version.hpp lib/libweft.a lib/pkgconfig/weft.pc \
         lib/cmake/weft/weftConfig.cmake bin/weftrun; do
  [ -e "$prefix/$f" ] || fail "installed tree lacks $f"
done
ls "$prefix"/lib/libweft.so.0* >/dev/null 2>&1 || fail "no SOVERSION'd libweft.so.0"
# Only the public API is exported.
if nm -D --defined-only "$prefix"/lib/libweft.so | grep -q ' T .*detail.*device_impl.*on_message'; then
  fail "internal symbols exported"
fi
nm -D --defined-only -C "$prefix"/lib/libweft.so | grep -q "weft::g_runtime_fina()" || fail "public symbol missing"
pass "installed tree complete, internals hidden"

cmake -S "$src/tests/install" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cm.log" 2>&1 || { cat "$work/cm.log"; fail "find_package(weft)"; }
cmake --build "$work/cm" >"$work/cmb.log" 2>&1 || { cat "$work/cmb.log"; fail "build with find_package"; }
# Each run's exit status is checked, then its output (a pipe into grep would hide the first).
runs() {  # what, expected count of "message ok", command...
  local what=$1 count=$2 rc got
  shift 2
  "$@" >"$work/run.log" 2>&1; rc=$?
  [ $rc -eq 0 ] || { cat "$work/run.log"; fail "$what: exit status $rc"; }
  got=$(grep -c "message ok" "$work/run.log")
  [ "$got" -eq "$count" ] || { cat "$work/run.log"; fail "$what: 'message ok' $got times, expected $count"; }
}
runs "CMake consumer (shared)" 1 env LD_LIBRARY_PATH="$prefix/lib" "$work/cm/consumer"
runs "CMake consumer (static)" 1 "$work/cm/consumer_static"
pass "find_package(weft) consumer builds and runs, shared and static"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
c++ -std=c++17 -DEXPECT_CXX17 -Wall -Wextra -Wpedantic -Werror -o "$work/pc" \
  "$src/tests/install/consumer.cpp" $(pkg-config --cflags --libs weft) 2>"$work/pc.log" || { cat "$work/pc.log"; fail "pkg-config build"; }
runs "pkg-config consumer" 1 env LD_LIBRARY_PATH="$prefix/lib" "$work/pc"
runs "installed weftrun" 2 "$prefix/bin/weftrun" -n 2 env LD_LIBRARY_PATH="$prefix/lib" "$work/pc"
pass "pkg-config consumer builds as C++17 with a plain compiler call and runs under the installed weftrun"

# A C99 program against the installed C API (pkg-config weft-c), with the C compiler alone.
cc -std=c99 -pedantic -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -o "$work/c_dht" "$src/examples/c_dht.c" \
  $(pkg-config --cflags --libs weft-c) 2>"$work/cc.log" || { cat "$work/cc.log"; fail "C99 build against weft.h"; }
"$prefix/bin/weftrun" -n 2 env LD_LIBRARY_PATH="$prefix/lib" "$work/c_dht" 100 >"$work/dht.log" 2>&1; rc=$?
[ $rc -eq 0 ] || { cat "$work/dht.log"; fail "C consumer: exit status $rc"; }
[ "$(grep -c "100 correct" "$work/dht.log")" -eq 2 ] || { cat "$work/dht.log"; fail "C consumer"; }
pass "a C99 program builds with cc against the installed weft.h and runs"

# The MPIX_Continue library of each MPI flavour built here: its test program, compiled
# with that MPI's wrapper against the installed header and library (pkg-config), runs.
for flavour in mpich openmpi; do
  [ -e "$build/mpix/libweft-mpix-$flavour.so" ] || continue
  for f in "lib/libweft-mpix-$flavour.so" include/weft/mpix_continue.h \
           "lib/pkgconfig/weft-mpix-$flavour.pc" lib/cmake/weft-mpix/weft-mpixConfig.cmake; do
    [ -e "$prefix/$f" ] || fail "installed tree lacks $f"
  done
  mpicc.$flavour -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -o "$work/mpix_$flavour" \
    "$src/tests/mpix/mpix_test.c" $(pkg-config --cflags --libs "weft-mpix-$flavour") 2>"$work/mx.log" ||
    { cat "$work/mx.log"; fail "MPIX_Continue consumer ($flavour)"; }
  if [ "$flavour" = mpich ]; then launch="mpiexec.mpich -n 2"; else
    launch="mpirun.openmpi --allow-run-as-root --oversubscribe -n 2"; fi
  timeout 100 $launch "$work/mpix_$flavour" >"$work/mx.log" 2>&1; rc=$?
  [ $rc -eq 0 ] && [ "$(grep -c "mpix: all [0-9]* checks passed" "$work/mx.log")" -eq 2 ] ||
    { cat "$work/mx.log"; fail "installed MPIX_Continue ($flavour): exit status $rc"; }
  cmake -S "$src/tests/install_mpix" -B "$work/mxc_$flavour" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="mpicc.$flavour" -DFLAVOUR="$flavour" \
    -DMPIX_TEST_SOURCE="$src/tests/mpix/mpix_test.c" >"$work/mxc.log" 2>&1 &&
    cmake --build "$work/mxc_$flavour" >>"$work/mxc.log" 2>&1 ||
    { cat "$work/mxc.log"; fail "find_package(weft-mpix) consumer ($flavour)"; }
  timeout 100 $launch "$work/mxc_$flavour/mpix_consumer" >"$work/mx.log" 2>&1; rc=$?
  [ $rc -eq 0 ] && [ "$(grep -c "mpix: all [0-9]* checks passed" "$work/mx.log")" -eq 2 ] ||
    { cat "$work/mx.log"; fail "find_package(weft-mpix) consumer ($flavour): exit status $rc"; }
  pass "MPIX_Continue for $flavour: header, library, pkg-config file and CMake package installed; built through pkg-config and through find_package, its test passes both ways"
done

# The installed Cholesky programs run from the installed tree: weft-cholesky under the
# installed weftrun, weft-cholesky-mpich on the MPI engine through its $ORIGIN/../lib path.
if [ -x "$build/apps/cholesky/weft-cholesky" ]; then
  "$prefix/bin/weftrun" -n 2 env LD_LIBRARY_PATH="$prefix/lib" OPENBLAS_NUM_THREADS=1 \
    "$prefix/bin/weft-cholesky" -n 512 -b 128 >"$work/chol.log" 2>&1; rc=$?
  [ $rc -eq 0 ] && grep -q "^rank 0: weft-cholesky: ok" "$work/chol.log" && grep -q "^rank 1: weft-cholesky: ok" "$work/chol.log" ||
    { cat "$work/chol.log"; fail "installed weft-cholesky: exit status $rc"; }
  if [ -x "$build/apps/cholesky/weft-cholesky-mpich" ]; then
    timeout 100 mpiexec.mpich -n 2 env OPENBLAS_NUM_THREADS=1 "$prefix/bin/weft-cholesky-mpich" -n 512 -b 128 \
      --engine mpi >"$work/chol.log" 2>&1; rc=$?
    [ $rc -eq 0 ] && grep -q "^rank 0: weft-cholesky: ok" "$work/chol.log" && grep -q "^rank 1: weft-cholesky: ok" "$work/chol.log" ||
      { cat "$work/chol.log"; fail "installed weft-cholesky-mpich: exit status $rc"; }
    ldd "$prefix/bin/weft-cholesky-mpich" | grep -q "$prefix/bin/../lib/libweft-engine-mpi-mpich.so" ||
      { ldd "$prefix/bin/weft-cholesky-mpich"; fail "installed weft-cholesky-mpich does not use the installed MPI engine"; }
  fi
  pass "installed weft-cholesky runs on the Weft engine, weft-cholesky-mpich on the installed MPI engine"
fi
