#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Slurm across hosts: three network namespaces (netns_common.sh), a slurmd in each as nodes
# wn1..wn3, slurmctld on the bridge. srun places ranks on the nodes, and its pmi2 and pmix
# plugins tell Weft which ranks share a node (the namespaces share the host name and
# /dev/shm). Runs scenarios over ofi/tcp, ucx/tcp and mixed, then kills a rank on one node.
set -u
weftrun=$1 mp=$2 src=$3 build=$4
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/netns_common.sh"
. "$(dirname "$0")/slurm_common.sh"
slurm_check_installed
work=$(mktemp -d)
out=$work/out
before=$(shm_snapshot)
trap 'slurm_stop; netns_cleanup; rm -rf "$work"' EXIT
netns_make
slurm_start "$net.254" "wn1=$net.1@$(netns_name 1)" "wn2=$net.2@$(netns_name 2)" "wn3=$net.3@$(netns_name 3)"

job() {  # plugin, nranks, env assignments..., -- program args...
  local plugin=$1 n=$2 t0=$SECONDS; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  timeout 120 srun --mpi="$plugin" -N 3 -n "$n" --overcommit -t 2 \
    env FI_TCP_IFACE=eth0 UCX_NET_DEVICES=eth0 UCX_TLS=tcp "${envs[@]}" "$@" >"$out" 2>&1 </dev/null
  local rc=$?
  [ -n "${NETNS_VERBOSE:-}" ] && echo "srun --mpi=$plugin -n $n ${envs[*]} $*: $((SECONDS - t0)) s"
  if [ $rc -ne 0 ] || ! each_rank_passed "$n"; then cat "$out"; return 1; fi
}

# The whole set under pmi2; pmix (the same hosts, another bootstrap) runs the first two.
scenarios=${NETNS_SCENARIOS:-"matrix rma barrier rma_notes graph lists"}
for plugin in pmi2 pmix; do
  [ $plugin = pmix ] && scenarios=$(echo $scenarios | cut -d' ' -f1-2)
  job $plugin 3 WEFT_BACKEND=ofi WEFT_OFI_PROVIDER="tcp;ofi_rxm" WEFT_LOG_LEVEL=info -- "$mp" matrix ||
    fail "srun --mpi=$plugin, ofi/tcp: matrix on 3 nodes"
  [ "$(grep -c "provider tcp;ofi_rxm, fabric $net.0/24, domain eth0" "$out")" -eq 3 ] ||
    { cat "$out"; fail "srun --mpi=$plugin: ofi did not use each namespace's eth0"; }
  for s in $scenarios; do
    job $plugin 3 WEFT_BACKEND=ofi WEFT_OFI_PROVIDER="tcp;ofi_rxm" -- "$mp" $s ||
      fail "srun --mpi=$plugin, ofi/tcp: $s on 3 nodes"
    job $plugin 3 WEFT_BACKEND=ucx -- "$mp" $s || fail "srun --mpi=$plugin, ucx/tcp: $s on 3 nodes"
  done
  pass "srun --mpi=$plugin across 3 nodes, ofi/tcp and ucx/tcp: $scenarios"

  # Mixed by default: 4 ranks on 3 nodes, so one node has two (block distribution).
  for netb in ofi ucx; do
    job $plugin 4 WEFT_NET_BACKEND=$netb WEFT_LOG_LEVEL=info -- "$mp" matrix ||
      fail "srun --mpi=$plugin, mixed/$netb: matrix"
    [ "$(grep -c "mixed: shared memory to the 2 ranks of this host, $netb:" "$out")" -eq 2 ] &&
      [ "$(grep -c "mixed: shared memory to the 1 ranks of this host, $netb:" "$out")" -eq 2 ] ||
      { cat "$out"; fail "srun --mpi=$plugin, mixed/$netb: hosts not taken from Slurm's mapping"; }
    for s in rma; do
      job $plugin 4 WEFT_NET_BACKEND=$netb -- "$mp" $s || fail "srun --mpi=$plugin, mixed/$netb: $s"
    done
  done
  pass "srun --mpi=$plugin, mixed (shared memory + ofi or ucx), 4 ranks on 3 nodes: matrix rma"
done

# A rank killed on its node while the others go on. Under pmi2 the wrapper holds the PMI
# connection (a descriptor the process inherited); Slurm's pmix plugin ends the step as
# soon as a process dies without finalize, which no wrapper can prevent, so pmi2 only.
netns_peer_death "srun --mpi=pmi2" srun --mpi=pmi2 -N 3 -n 3 --overcommit -t 2

[ "$(shm_snapshot)" = "$before" ] || fail "shared-memory files left in /dev/shm: $(comm -13 <(echo "$before") <(shm_snapshot))"
pass "no shared-memory files left behind"
