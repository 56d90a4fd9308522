#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Several hosts on one machine: three network namespaces on a bridge, each with its own
# address. MPICH's hydra starts jobs across them through a launcher that enters the
# namespace named by the host address (as ssh would log in to it). The launcher's process
# mapping tells Weft which ranks share a host; namespaces share the host name and /dev/shm,
# so nothing else could. Runs the scenarios over ofi/tcp, ucx/tcp and mixed (shared memory
# within a host, the network across), then kills one host's rank in the middle of traffic.
set -u
weftrun=$1 mp=$2 src=$3 build=$4
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/netns_common.sh"
command -v mpiexec.hydra >/dev/null || fail "mpiexec.hydra not installed (Debian package mpich)"
work=$(mktemp -d)
out=$work/out
before=$(shm_snapshot)
trap 'netns_cleanup; rm -rf "$work"' EXIT
netns_make
# What hydra calls instead of ssh: [options] host command...
cat >"$work/enter" <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
exec ip netns exec wns$netns_tag-\${host##*.} sh -c "\$*"
EOF
chmod +x "$work/enter"

hosts3=$net.1,$net.2,$net.3
hosts4=$net.1:2,$net.2,$net.3  # two ranks share the first host
hydra_cmd() {
  echo mpiexec.hydra -launcher ssh -launcher-exec "$work/enter" -iface "$br" -hosts "$1" -n "$2"
}
job() {  # hosts, nranks, expected passes, env assignments..., -- program args...
  local hosts=$1 n=$2 want=$3; shift 3
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  timeout 120 env FI_TCP_IFACE=eth0 UCX_NET_DEVICES=eth0 UCX_TLS=tcp "${envs[@]}" \
    $(hydra_cmd "$hosts" "$n") "$@" >"$out" 2>&1 </dev/null
  local rc=$?
  if [ $rc -ne 0 ] || ! each_rank_passed "$want"; then cat "$out"; return 1; fi
}

job "$hosts3" 3 3 WEFT_BACKEND=ofi WEFT_OFI_PROVIDER="tcp;ofi_rxm" WEFT_LOG_LEVEL=info -- "$mp" matrix ||
  fail "ofi/tcp: matrix on 3 hosts"
[ "$(grep -c "provider tcp;ofi_rxm.*domain eth0" "$out")" -eq 3 ] ||
  { cat "$out"; fail "ofi did not use each namespace's eth0"; }
grep -q "mixed\|shm context" "$out" && { cat "$out"; fail "WEFT_BACKEND=ofi also started shared memory"; }
# The three hosts are one machine: WEFT_YIELD=auto counts its ranks across them (one per
# host, the same boot id) against its CPUs, and yields when they outnumber them.
cpus=$(getconf _NPROCESSORS_ONLN)
yields=$(grep -cF "progress yields when idle: 3 ranks on this machine, $cpus CPUs (WEFT_YIELD=auto)" "$out")
[ "$yields" -eq $((cpus < 3 ? 3 : 0)) ] ||
  { cat "$out"; fail "WEFT_YIELD=auto: $yields of 3 ranks on 3 hosts of one $cpus-CPU machine said they yield"; }

scenarios=${NETNS_SCENARIOS:-"matrix order barrier errors rma graph lists runtimes"}
for s in $scenarios; do
  job "$hosts3" 3 3 WEFT_BACKEND=ofi WEFT_OFI_PROVIDER="tcp;ofi_rxm" -- "$mp" $s || fail "ofi/tcp: $s on 3 hosts"
done
pass "ofi/tcp across 3 hosts: $scenarios"

job "$hosts3" 3 3 WEFT_BACKEND=ucx WEFT_LOG_LEVEL=info -- "$mp" matrix || fail "ucx/tcp: matrix on 3 hosts"
[ "$(grep -c "ucx context 0: ucx: UCX [0-9.]*, transports tcp, peer failure detection on" "$out")" -eq 3 ] ||
  { cat "$out"; fail "ucx did not run on tcp with failure detection on every rank"; }
for s in $scenarios; do
  job "$hosts3" 3 3 WEFT_BACKEND=ucx -- "$mp" $s || fail "ucx/tcp: $s on 3 hosts"
done
pass "ucx/tcp across 3 hosts: $scenarios"

# Mixed by default: 4 ranks, two on the first host. The launcher's mapping, not the host
# name (the same in every namespace), decides.
for netb in ofi ucx; do
  job "$hosts4" 4 4 WEFT_NET_BACKEND=$netb WEFT_LOG_LEVEL=info -- "$mp" matrix || fail "mixed/$netb: matrix"
  [ "$(grep -c "mixed: shared memory to the 2 ranks of this host, $netb:" "$out")" -eq 2 ] &&
    [ "$(grep -c "mixed: shared memory to the 1 ranks of this host, $netb:" "$out")" -eq 2 ] ||
    { cat "$out"; fail "mixed/$netb: hosts not taken from the launcher's mapping"; }
  for s in order barrier rma graph lists; do
    job "$hosts4" 4 4 WEFT_NET_BACKEND=$netb -- "$mp" $s || fail "mixed/$netb: $s on 4 ranks, 3 hosts"
  done
  pass "mixed (shared memory + $netb/tcp), 4 ranks on 3 hosts: matrix order barrier rma graph lists"
done

# A host's rank dies in the middle of traffic and the others must keep running. Debian's
# hydra kills the survivors when a rank dies even under -disable-auto-cleanup (a 3-rank
# shell job shows it); the wrapper of netns_peer_death keeps them running.
# shellcheck disable=SC2046
netns_peer_death "hydra" $(hydra_cmd "$hosts3" 3)

# An unreachable peer: the third host's address has an "unreachable" route on the others
# and theirs on it (what a router answers for a host it has no path to). Every rank must
# say which peer it cannot reach, and the job must end with errors, not hang (ofi: each rank's
# first send fails; ucx: endpoint creation fails at start-up, where every error must be
# that one).
for i in 1 2; do ip -n "$(netns_name $i)" route add unreachable "$net.3/32"; done
for i in 1 2; do ip -n "$(netns_name 3)" route add unreachable "$net.$i/32"; done
job "$hosts3" 3 0 WEFT_BACKEND=ofi WEFT_OFI_PROVIDER="tcp;ofi_rxm" WEFT_PEER_TIMEOUT=10 -- "$mp" matrix &&
  { cat "$out"; fail "ofi: a job with an unreachable host succeeded"; }
for r in 0 1 2; do
  grep -q "weft\[$r\] warn: rank [0-2] is gone (the peer cannot be reached (No route to host))" "$out" ||
    { cat "$out"; fail "ofi: rank $r did not name an unreachable peer"; }
done
job "$hosts3" 3 0 WEFT_BACKEND=ucx -- "$mp" matrix &&
  { cat "$out"; fail "ucx: a job with an unreachable host succeeded"; }
unreachable=$(grep -c "endpoint to rank [0-2] = Destination is unreachable: ucp_ep_create failed: no transport reaches that rank" "$out")
[ "$unreachable" -ge 1 ] && [ "$unreachable" -eq "$(grep -c "fatal_error" "$out")" ] ||
  { cat "$out"; fail "ucx: the unreachable peer was not named"; }
for i in 1 2; do ip -n "$(netns_name $i)" route del unreachable "$net.3/32"; done
for i in 1 2; do ip -n "$(netns_name 3)" route del unreachable "$net.$i/32"; done
pass "an unreachable host: every rank names a peer it cannot reach (ofi/tcp, ucx/tcp), none hangs"

[ "$(shm_snapshot)" = "$before" ] || fail "shared-memory files left in /dev/shm: $(comm -13 <(echo "$before") <(shm_snapshot))"
pass "no shared-memory files left behind"
