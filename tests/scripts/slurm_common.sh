# SPDX-License-Identifier: BSD-3-Clause
# A private Slurm (munged, slurmctld, one slurmd per node, from Debian's packages) with its
# own socket, ports and state under $slurm_dir; sourced after common.sh.
#   slurm_start <controller address> <node>=<address>[@<network namespace>] ...
# Each slurmd enters only its node's network namespace (nsenter --net: ip netns exec would
# remount /sys and hide the cgroup file systems), and gets its own spool, log and PMIx
# directory, since all nodes share /tmp. slurm_stop stops the daemons and removes the files.
slurm_dir=""
slurm_check_installed() {
  local t
  for t in munged slurmctld slurmd srun; do
    command -v $t >/dev/null || [ -x /usr/sbin/$t ] || fail "$t not installed (Debian packages munge slurmctld slurmd slurm-client)"
  done
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: slurmd must run as root here"; exit 77; }
}
slurm_stop() {  # stop the daemons and wait for them, then remove their files
  [ -n "$slurm_dir" ] || return 0
  local pids="" p f i
  for f in "$slurm_dir"/*.pid; do [ -f "$f" ] && pids="$pids $(cat "$f")"; done
  for p in $pids; do kill "$p" 2>/dev/null; done
  for p in $pids; do
    for i in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  rm -rf "$slurm_dir"
  slurm_dir=""
}
slurm_start() {
  local ctl=$1 spec node addr ns port nodes=""
  shift
  slurm_dir=$(mktemp -d /tmp/weft-slurm.XXXXXX)
  mkdir -p "$slurm_dir/state"
  /usr/sbin/munged --force --socket="$slurm_dir/munge.sock" --pid-file="$slurm_dir/munged.pid" \
    --log-file="$slurm_dir/munged.log" --seed-file="$slurm_dir/munged.seed" || fail "munged did not start"
  port=$((20000 + RANDOM % 20000))
  cat >"$slurm_dir/slurm.conf" <<CONF
ClusterName=weft
SlurmctldHost=$(hostname)($ctl)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$slurm_dir/munge.sock
StateSaveLocation=$slurm_dir/state
SlurmdSpoolDir=$slurm_dir/%n/spool
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd-%n.pid
SlurmctldLogFile=$slurm_dir/slurmctld.log
SlurmdLogFile=$slurm_dir/slurmd-%n.log
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
CONF
  for spec in "$@"; do
    node=${spec%%=*} addr=${spec#*=}
    addr=${addr%@*}
    echo "NodeName=$node NodeAddr=$addr CPUs=$(nproc) RealMemory=1000 State=UNKNOWN" >>"$slurm_dir/slurm.conf"
    nodes="$nodes $node"
  done
  echo "PartitionName=weft Nodes=ALL Default=YES MaxTime=10 State=UP OverSubscribe=FORCE:8" >>"$slurm_dir/slurm.conf"
  export SLURM_CONF=$slurm_dir/slurm.conf
  /usr/sbin/slurmctld -i || { cat "$slurm_dir/slurmctld.log"; fail "slurmctld did not start"; }
  for spec in "$@"; do
    node=${spec%%=*} ns=""
    case "$spec" in *@*) ns=${spec##*@} ;; esac
    # Per node: the configuration read from a directory of its own, for an mpi.conf that
    # keeps its PMIx client directories apart from the other nodes'.
    mkdir -p "$slurm_dir/$node/spool" "$slurm_dir/$node/pmix"
    cp "$slurm_dir/slurm.conf" "$slurm_dir/$node/slurm.conf"
    echo "PMIxCliTmpDirBase=$slurm_dir/$node/pmix" >"$slurm_dir/$node/mpi.conf"
    if [ -n "$ns" ]; then
      nsenter --net="/var/run/netns/$ns" /usr/sbin/slurmd -N "$node" -f "$slurm_dir/$node/slurm.conf"
    else
      /usr/sbin/slurmd -N "$node" -f "$slurm_dir/$node/slurm.conf"
    fi || { cat "$slurm_dir/slurmd-$node.log"; fail "slurmd for $node did not start"; }
  done
  local want; want=$(echo $nodes | wc -w)
  for i in $(seq 100); do
    [ "$(sinfo -h -N -o %t 2>/dev/null | grep -c idle)" -eq "$want" ] && break
    sleep 0.2
  done
  [ "$(sinfo -h -N -o %t | grep -c idle)" -eq "$want" ] ||
    { sinfo -N; cat "$slurm_dir"/*.log; fail "not every node became idle"; }
  pass "a private Slurm runs: slurmctld at $ctl port $port, nodes$nodes"
}
