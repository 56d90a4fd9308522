#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Interleaved measurement of Weft on shared memory beside the machine's limits
# (bench/machine_probe.cpp, built as build/bench/weft-probe): R rounds, each running every
# configuration once; medians.
#   scripts/measure-shm.sh [rounds]      (after scripts/demo.sh or a build in ./build)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
out=$(mktemp -d)
[ -x build/weftrun ] || { echo "build first: scripts/demo.sh"; exit 1; }
cmake --build build --target weft-probe >/dev/null
probe=build/bench/weft-probe
for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds" >&2
  "$probe" all --trials 1 | awk '/^RESULT/ {for(i=2;i<=NF;i++){split($i,kv,"="); f[kv[1]]=kv[2]}
    print "probe_" f["api"] "_" f["unit"] (f["workload"]=="bandwidth" ? "_" f["size"] : ""), f["value"]}' | tr '/' 'p' >>"$out/res"
  for mode in auto pipeline cma; do
    WEFT_SHM_PUT=$mode ./build/weftrun -n 2 --timeout 300 ./build/examples/pingpong_am 200000 --bw >"$out/pp" 2>&1
    awk -v m=$mode '/one-way latency/ {print "weft_lat_us_" m, $6; print "weft_rate_Mps_" m, $10}
                    /bandwidth +65536 B/ {print "weft_bw_GBps_65536_" m, $5}
                    /bandwidth +4194304 B/ {print "weft_bw_GBps_4194304_" m, $5}' "$out/pp" >>"$out/res"
  done
done
echo "median of $rounds interleaved rounds ($(date -u +%Y-%m-%d), $(nproc) cores):"
sort -k1,1 -s "$out/res" | awk '{v[$1]=v[$1] " " $2} END {for (k in v) print k, v[k]}' | sort |
  while read -r key vals; do
    med=$(echo $vals | tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
    printf "  %-30s %10s   (%s)\n" "$key" "$med" "$vals"
  done
rm -rf "$out"
