#!/usr/bin/env bash
# Weft under Slurm's srun on a private single-host Slurm (munged, slurmctld and slurmd from
# Debian's packages, started here with their own socket, ports and state directory, stopped
# on exit): the multi-process scenarios through the pmi2 and the pmix plugins.
set -u
weftrun=$1 mp=$2 src=$3 build=$4
. "$(dirname "$0")/common.sh"
for t in munged slurmctld slurmd srun; do
  command -v $t >/dev/null || [ -x /usr/sbin/$t ] || fail "$t not installed (Debian packages munge slurmctld slurmd slurm-client)"
done
[ "$(id -u)" -eq 0 ] || { echo "SKIP: slurmd must run as root here"; exit 77; }
dir=$(mktemp -d /tmp/weft-slurm.XXXXXX)
out=$dir/out
cleanup() {  # stop the daemons and wait for them, then remove their files
  local pids="" p
  for p in slurmd slurmctld munged; do [ -f "$dir/$p.pid" ] && pids="$pids $(cat "$dir/$p.pid")"; done
  for p in $pids; do kill "$p" 2>/dev/null; done
  for p in $pids; do
    for i in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  rm -rf "$dir"
}
trap cleanup EXIT
before=$(shm_snapshot)
mkdir -p "$dir/state" "$dir/spool"
/usr/sbin/munged --force --socket="$dir/munge.sock" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" || fail "munged did not start"
port=$((20000 + RANDOM % 20000))
host=$(hostname)
cat >"$dir/slurm.conf" <<CONF
ClusterName=weft
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldPort=$port
SlurmdPort=$((port + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/linear
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=weft Nodes=ALL Default=YES MaxTime=10 State=UP OverSubscribe=FORCE:8
CONF
export SLURM_CONF=$dir/slurm.conf
/usr/sbin/slurmctld -i || { cat "$dir/slurmctld.log"; fail "slurmctld did not start"; }
/usr/sbin/slurmd || { cat "$dir/slurmd.log"; fail "slurmd did not start"; }
for i in $(seq 50); do sinfo -h -o %t 2>/dev/null | grep -q idle && break; sleep 0.2; done
sinfo -h -o %t | grep -q idle || { cat "$dir/slurmctld.log" "$dir/slurmd.log"; fail "the node never became idle"; }
pass "a private Slurm runs (slurmctld and slurmd on port $port)"

for plugin in pmi2 pmix; do
  for s in matrix barrier rma graph; do
    WEFT_LOG_LEVEL=info timeout 120 srun --mpi=$plugin -n 3 --overcommit -t 2 "$mp" $s >"$out" 2>&1 &&
      [ "$(grep -c 'checks passed' "$out")" -eq 3 ] || { cat "$out"; fail "srun --mpi=$plugin: $s on 3 ranks"; }
  done
  want=$plugin; [ $plugin = pmix ] || want=pmi2
  [ "$(grep -c "bootstrap $want: rank" "$out")" -eq 3 ] || { cat "$out"; fail "srun --mpi=$plugin did not select the $want bootstrap"; }
  timeout 120 srun --mpi=$plugin -n 3 --overcommit -t 2 "$build/tests/c_api_test" >"$out" 2>&1 &&
    [ "$(grep -c 'checks passed' "$out")" -eq 3 ] || { cat "$out"; fail "srun --mpi=$plugin: C API test"; }
  pass "srun --mpi=$plugin: matrix, barrier, rma, graph and the C API on 3 ranks, bootstrap $want"
done
[ "$(shm_snapshot)" = "$before" ] || fail "shared-memory files left in /dev/shm"
pass "no shared-memory files left behind"
