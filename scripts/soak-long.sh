#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The long soak: weft-soak jobs back to back for MINUTES (default 30), each job
# JOB_SECONDS of traffic (default 300), cycling through shared memory with a rank killed,
# the mixed backend (two pretend hosts of two ranks) with shared devices, shared memory
# with a rank stopped for a while, and libfabric (tcp) with a rank stopped past
# WEFT_PEER_TIMEOUT (taken for dead, expelled); every job judged by tests/scripts/soak.sh. Prints
# one line per job and the totals (operations, checks, bytes, kills survived), and fails
# when any job failed.
#   scripts/soak-long.sh [MINUTES] [JOB_SECONDS]     (build first: ./scripts/test.sh or
#                                                     cmake --build build)
set -u
cd "$(dirname "$0")/.."
minutes=${1:-30} job=${2:-300}
build=${BUILD:-build}
weftrun=$build/weftrun soak=$build/tools/soak/weft-soak
[ -x "$weftrun" ] && [ -x "$soak" ] || { echo "build $build first (weftrun and weft-soak)"; exit 2; }
end=$((SECONDS + minutes * 60))
ops=0 checks=0 bytes=0 kills=0 stops=0 jobs=0 failed=0
# environment | expectation | ranks | arguments
modes=("-|death|4|--seconds $job --threads 2 --kill"
       "-|clean|4|--ranks-per-host 2 -- --seconds $job --threads 2 --resources shared"
       "-|clean|3|--seconds $job --threads 2 --stop 20"
       "WEFT_BACKEND=ofi WEFT_PEER_TIMEOUT=10|clean|3|--seconds $job --threads 2 --stop 20")
i=0
while [ $SECONDS -lt $end ]; do
  IFS='|' read -r envs expect n args <<<"${modes[$((i % ${#modes[@]}))]}"
  [ "$envs" = - ] && envs=""
  i=$((i + 1))
  log=$(mktemp)
  # shellcheck disable=SC2086
  env $envs bash tests/scripts/soak.sh "$weftrun" "$soak" "$n" "$expect" $args --report-every 0 \
    >"$log" 2>&1
  rc=$?
  jobs=$((jobs + 1))
  line=$(grep -E '^PASS|^FAIL' "$log" | tail -1)
  echo "job $jobs ($(date -u +%H:%M), ${envs:+$envs, }$expect, $n ranks, $args): ${line:-no verdict}"
  if [ $rc -ne 0 ]; then
    failed=$((failed + 1))
    tail -30 "$log"
  else
    read -r o c <<<"$(sed -nE 's/^soak: operations ([0-9]+) verified ([0-9]+) .*/\1 \2/p' "$log" | head -1)"
    gb=$(sed -nE 's/^soak: .* ([0-9.]+) GB moved.*/\1/p' "$log" | head -1)
    ops=$((ops + o)) checks=$((checks + c))
    bytes=$(awk -v a="$bytes" -v b="${gb:-0}" 'BEGIN { printf "%.3f", a + b }')
    grep -q "was killed by signal 9" "$log" && kills=$((kills + 1))
    grep -q "will be stopped" "$log" && stops=$((stops + 1))
  fi
  rm -f "$log"
done
echo "soak-long: $jobs jobs in $((SECONDS / 60)) min, $failed failed; operations $ops checks $checks, $bytes GB, kills survived $kills, stops survived $stops"
[ $failed -eq 0 ]
