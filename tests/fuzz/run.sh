#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs the libFuzzer targets of tests/fuzz (docs/fuzzing.md).
#   run.sh short BUILD SECONDS [TARGET...]
#                                  each target (default all) SECONDS on a copy of the
#                                  committed corpus (the test suite's run); fails on a finding
#   run.sh long BUILD RUNS         each target for RUNS inputs (at least a million for the
#                                  documented run), new inputs merged into the corpus
#   run.sh coverage BUILD_COV [TARGET...]
#                                  the committed corpus through a coverage build
#                                  (WEFT_FUZZ_COVERAGE=ON): line coverage of each target's
#                                  decoder, per file and per decoding function
# BUILD is a build directory configured with CC=clang CXX=clang++ -DWEFT_FUZZ=ON.
set -u
mode=$1 build=$2 arg=${3:-}
shift 3 2>/dev/null || shift $#
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
corpus=$here/corpus
targets=${*:-wire shm regions kvs pmi}
[ "$mode" = coverage ] && [ -n "$arg" ] && targets="$arg $*"
# A target's decoder: the files it exercises, and the functions that decode.
files_of() {
  case $1 in
    wire) echo "src/core/progress.cpp" ;;
    shm) echo "src/net/shm/shm_backend.cpp src/net/shm/shm_rma.cpp src/net/shm/shm_split.cpp src/core/progress.cpp" ;;
    regions) echo "src/net/shm/regions.cpp" ;;
    kvs) echo "tools/weftrun/kvs_server.cpp src/bootstrap/kvs_wire.cpp" ;;
    pmi) echo "src/bootstrap/pmi_wire.cpp" ;;
  esac
}
functions_of() {
  case $1 in
    wire) echo "on_message|on_other_message|on_remote_notify|arrive_rts|arrive_send|deliver_am|refuse_am" ;;
    shm) echo "handle_other_cell|take_get|serve_get|expects_data|on_split_read|on_split_done" ;;
    regions) echo "acquire|search|outside|named" ;;
    kvs) echo "on_line|parse_kvs_request|hex_decode" ;;
    pmi) echo "parse_pmi1_line|parse_pmi2_length|parse_pmi2_body|parse_process_mapping" ;;
  esac
}
export WEFT_LOG_LEVEL=none
status=0
case $mode in
  short | long)
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    for t in $targets; do
      bin=$build/tests/fuzz/fuzz_$t
      [ -x "$bin" ] || { echo "FAIL: $bin not built"; exit 1; }
      mkdir -p "$work/$t"
      cp "$corpus/$t"/* "$work/$t"/
      if [ "$mode" = short ]; then
        limit=(-max_total_time="$arg")
      else
        limit=(-runs="$arg")
      fi
      # -detect_leaks=0: wire and shm keep a runtime across inputs (held rendezvous buffers,
      # made anew every 1000 inputs), which libFuzzer's per-input check takes for leaks; the
      # check at exit still runs.
      start=$SECONDS
      "$bin" "${limit[@]}" -max_len=4096 -detect_leaks=0 -artifact_prefix="$work/$t-" \
        -print_final_stats=1 "$work/$t" >"$work/$t.log" 2>&1
      rc=$?
      runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
      cov=$(grep -E 'DONE +cov:' "$work/$t.log" | tail -1 | sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+) corp: ([0-9]+).*/edges \1, features \2, corpus \3/')
      if [ $rc -ne 0 ] || grep -q "ERROR: \|deadly signal" "$work/$t.log"; then
        grep -v '^#' "$work/$t.log" | tail -40
        ls "$work/$t-"* 2>/dev/null
        echo "FAIL: fuzz_$t found a problem after ${runs:-?} inputs (rc $rc)"
        status=1
        continue
      fi
      echo "PASS: fuzz_$t: ${runs:-?} inputs in $((SECONDS - start)) s, nothing found (${cov:-?})"
      if [ "$mode" = long ]; then  # keep what reached new code, minimized
        "$bin" -merge=1 -max_len=4096 "$corpus/$t" "$work/$t" >/dev/null 2>&1
      fi
    done
    ;;
  coverage)
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    prof=$(command -v llvm-profdata-14 || command -v llvm-profdata)
    cov=$(command -v llvm-cov-14 || command -v llvm-cov)
    [ -n "$prof" ] && [ -n "$cov" ] || { echo "FAIL: llvm-profdata/llvm-cov not found (Debian: llvm-14)"; exit 1; }
    for t in $targets; do
      bin=$build/tests/fuzz/fuzz_$t
      LLVM_PROFILE_FILE="$work/$t.profraw" "$bin" -runs=0 "$corpus/$t" >"$work/$t.log" 2>&1 ||
        { tail -20 "$work/$t.log"; echo "FAIL: fuzz_$t on its corpus"; status=1; continue; }
      "$prof" merge -sparse "$work/$t.profraw" -o "$work/$t.profdata"
      n=$(ls "$corpus/$t" | wc -l)
      echo "== fuzz_$t: $n corpus inputs"
      srcs=()
      for f in $(files_of $t); do srcs+=("$root/$f"); done
      "$cov" report "$bin" -instr-profile="$work/$t.profdata" "${srcs[@]}" |
        grep -vE '^-+$|^$' | sed "s|$root/||" | awk '{ printf "   %s\n", $0 }'
      # Per decoding function (names come mangled): lines, missed lines, line coverage.
      "$cov" report "$bin" -instr-profile="$work/$t.profdata" -show-functions "${srcs[@]}" |
        grep -E "^_Z" | while read -r name _ _ _ lines miss cover _; do
          plain=$(echo "$name" | c++filt)
          echo "$plain" | grep -qE "::($(functions_of $t))\(" || continue
          printf "   %-60.60s lines %4s, %4s missed, %s covered\n" "${plain%%(*}" "$lines" "$miss" "$cover"
        done
    done
    ;;
  *)
    echo "usage: run.sh short|long|coverage BUILD [SECONDS|RUNS]" >&2
    exit 2
    ;;
esac
exit $status
