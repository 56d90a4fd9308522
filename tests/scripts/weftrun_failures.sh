#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# weftrun under failure: a crashing rank, a timeout, a missing program, Ctrl-C, keep-going.
set -u
weftrun=$1 mp=$2
. "$(dirname "$0")/common.sh"
out=$(mktemp); trap 'rm -f $out' EXIT
jobs=""
note_job() { jobs="$jobs $(sed -n 's/^weftrun: job \([0-9a-f]*\),.*/\1/p' "$out")"; }

# 1. A rank dies (SIGSEGV) while the others progress: the job ends, the rank is named.
start=$(date +%s)
"$weftrun" -v -n 3 --timeout 60 "$mp" crash >"$out" 2>&1; rc=$?
note_job
took=$(( $(date +%s) - start ))
[ $rc -eq 139 ] || fail "crash: exit code $rc, expected 139 (128+SIGSEGV)"
grep -q "rank 1 (pid [0-9]*) was killed by signal 11 (Segmentation fault); terminating the other ranks" "$out" || { cat "$out"; fail "crash: failed rank not named"; }
[ $took -lt 20 ] || fail "crash: took ${took}s to tear down"
pass "crashing rank named, job ended in ${took}s with 139"

# 2. Timeout: the job is killed and the still-running ranks are listed.
"$weftrun" -n 2 --timeout 1 sleep 30 >"$out" 2>&1; rc=$?
[ $rc -eq 124 ] || fail "timeout: exit code $rc"
grep -q "timed out after 1 s; ranks still running: 0 1" "$out" || { cat "$out"; fail "timeout message"; }
pass "timeout kills the job with 124"

# 3. First non-zero exit code is returned; a missing program is reported.
"$weftrun" -n 2 sh -c 'exit $((WEFT_RANK + 3))' >"$out" 2>&1; rc=$?
[ $rc -eq 3 ] || [ $rc -eq 4 ] || fail "exit code $rc, expected 3 or 4"
"$weftrun" -n 1 ./no-such-program >"$out" 2>&1; rc=$?
[ $rc -eq 127 ] && grep -q "cannot execute ./no-such-program" "$out" || fail "missing program: rc $rc"
pass "exit codes propagate"

# 4. Environment, rank variables and tagged output.
"$weftrun" -n 2 --tag-output sh -c 'echo "r=$WEFT_RANK n=$WEFT_SIZE x=$WEFTRUN_PASSTHROUGH_PROBE"' >"$out" 2>&1 \
  <<<"" || fail "env run"
WEFTRUN_PASSTHROUGH_PROBE=yes "$weftrun" -n 2 --tag-output sh -c 'echo "r=$WEFT_RANK n=$WEFT_SIZE x=$WEFTRUN_PASSTHROUGH_PROBE"' >"$out" 2>&1
grep -q "^\[1\] r=1 n=2 x=yes$" "$out" && grep -q "^\[0\] r=0 n=2 x=yes$" "$out" || { cat "$out"; fail "tagged output/env"; }
pass "environment passed through, output tagged"

# 5. Binding: each rank on its own core when there are enough cores.
ncores=$(nproc)
if [ "$ncores" -ge 2 ]; then
  "$weftrun" -n 2 --tag-output sh -c 'grep Cpus_allowed_list /proc/self/status' >"$out" 2>&1
  [ "$(grep -c 'Cpus_allowed_list:[[:space:]]*[0-9]*$' "$out")" -eq 2 ] || { cat "$out"; fail "binding"; }
  "$weftrun" -n 2 --bind-to none --tag-output sh -c 'grep Cpus_allowed_list /proc/self/status' >"$out" 2>&1
  grep -q "Cpus_allowed_list:.*[-,]" "$out" || { cat "$out"; fail "--bind-to none"; }
  pass "binding one core per rank, --bind-to none"
fi

# 6. SIGTERM to weftrun is forwarded; the job ends promptly.
# A duration no other test uses, so pgrep finds only these ranks; they get up to 3 s to go
# (the kernel reaps them after weftrun returns, and tests run side by side here).
"$weftrun" -n 2 sleep 29.417 >"$out" 2>&1 &
wpid=$!
sleep 0.5
kill -TERM $wpid
wait $wpid; rc=$?
[ $rc -eq 143 ] || fail "SIGTERM: rc $rc"
grep -q "got signal 15" "$out" || fail "SIGTERM not reported"
for _ in $(seq 30); do pgrep -f "sleep 29.417" >/dev/null || break; sleep 0.1; done
pgrep -f "sleep 29.417" >/dev/null && fail "ranks survived SIGTERM"
pass "SIGTERM forwarded"

# 7. --keep-going: survivors see errors naming the dead rank and finish their own traffic.
"$weftrun" -v -n 3 --keep-going --timeout 60 --tag-output "$mp" peer_death >"$out" 2>&1; rc=$?
note_job
grep -q "rank 1 (pid [0-9]*) was killed by signal 9 (Killed); the other ranks keep running" "$out" || { cat "$out"; fail "keep-going message"; }
grep -q "^\[0\] rank 0: peer_death: all" "$out" && grep -q "^\[2\] rank 2: peer_death: all" "$out" || { cat "$out"; fail "survivors did not pass"; }
[ $rc -eq 137 ] || fail "keep-going: rc $rc, expected 137 from the killed rank"
pass "survivors get error_peer_dead and finish"

# 7b. Survivors that exit with 42 once they see a rank killed: weftrun reports the killed
# rank (137), the first failure in time, every time.
for i in 1 2 3; do
  "$weftrun" -n 3 --keep-going --timeout 60 --tag-output "$mp" exit_on_death >"$out" 2>&1; rc=$?
  [ $rc -eq 137 ] || { cat "$out"; fail "exit_on_death run $i: rc $rc, expected 137 from the killed rank"; }
done
pass "the killed rank's status (137) wins over the survivors' own (42), 3 runs of 3"

# 7c. weftrun itself killed (SIGKILL): ranks that progress notice and end with an error
# saying so, and the next weftrun removes the job's directory.
"$weftrun" -v -n 2 --timeout 60 "$mp" idle >"$out" 2>&1 &
wpid=$!
for _ in $(seq 100); do [ "$(pgrep -c -f "$mp idle")" -ge 2 ] && break; sleep 0.05; done
sleep 0.5
job_dir=$(ls -d /tmp/weftrun-* 2>/dev/null | while read -r d; do
  grep -q "^weftrun $wpid\$" "$d/record" 2>/dev/null && echo "$d"; done)
[ -n "$job_dir" ] || fail "orphans: no record of weftrun $wpid in /tmp/weftrun-*"
kill -KILL $wpid
wait $wpid 2>/dev/null
for _ in $(seq 100); do pgrep -f "$mp idle" >/dev/null || break; sleep 0.1; done
pgrep -f "$mp idle" >/dev/null && { pkill -KILL -f "$mp idle"; fail "ranks kept running after weftrun was killed"; }
[ "$(grep -c "the launcher has died" "$out")" -eq 2 ] || { cat "$out"; fail "orphans: each rank must say the launcher died"; }
[ -d "$job_dir" ] || fail "orphans: $job_dir vanished before the next weftrun"
"$weftrun" -n 1 true >"$out" 2>&1 || { cat "$out"; fail "the weftrun after the killed one failed"; }
grep -q "removed $job_dir, left by job [0-9a-f]* whose weftrun (pid $wpid) was killed" "$out" || { cat "$out"; fail "stale job directory not reported"; }
[ -d "$job_dir" ] && fail "$job_dir left behind"
pass "ranks of a killed weftrun end with an error; the next weftrun removes $job_dir"

# Only this script's jobs are checked: tests running beside it have segments of their own
# for the milliseconds between creating and unlinking them.
[ "$(echo $jobs | wc -w)" -eq 2 ] || fail "job ids not found in weftrun -v output: '$jobs'"
for j in $jobs; do
  left=$(ls /dev/shm | grep "^weft-$j" || true)
  [ -z "$left" ] || fail "shared-memory files of job $j left behind: $left"
done
pass "no /dev/shm file left behind by the crashed or killed jobs ($jobs)"

# 8. libfabric's shm provider names its files by process id and leaves them when a process is
# killed: weftrun removes those of its ranks. And mixed jobs' per-host segments.
if [ -x "$(dirname "$mp")/../weftrun" ] && grep -q "OFI_FOUND:INTERNAL=1" "$(dirname "$mp")/../CMakeCache.txt" 2>/dev/null; then
  WEFT_BACKEND=ofi WEFT_OFI_PROVIDER=shm WEFT_PEER_TIMEOUT=2 "$weftrun" -v -n 3 --keep-going --timeout 60 \
    --tag-output "$mp" peer_death >"$out" 2>&1
  dead=$(sed -n 's/.*rank 1 (pid \([0-9]*\)) was killed.*/\1/p' "$out" | head -1)
  [ -n "$dead" ] || { cat "$out"; fail "ofi shm: no killed rank reported"; }
  grep -q "^\[0\] rank 0: peer_death: all" "$out" || { cat "$out"; fail "ofi shm: survivors did not pass"; }
  left=$(ls /dev/shm | grep "^$dead:" || true)
  [ -z "$left" ] || fail "libfabric shm files of the killed rank left behind: $left"
  pass "libfabric shm provider's files of a killed rank ($dead) removed"
fi
