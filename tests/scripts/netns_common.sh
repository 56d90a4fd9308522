# SPDX-License-Identifier: BSD-3-Clause
# Three "hosts" on one machine: network namespaces wns<tag>-1..3 with addresses $net.1..3
# on bridge $br ($net.254 on this side). Sourced after common.sh; netns_make exits 77
# (skip) where network devices cannot be created, netns_cleanup undoes everything.
netns_tag=$$
br=wbr$netns_tag
net=10.$((netns_tag % 200 + 20)).77
netns_name() { echo "wns$netns_tag-$1"; }
netns_cleanup() {
  local i
  for i in 1 2 3; do
    ip netns pids "$(netns_name $i)" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$(netns_name $i)" 2>/dev/null
  done
  ip link del "$br" 2>/dev/null
}
netns_make() {
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
  command -v ip >/dev/null || fail "ip not installed (Debian package iproute2)"
  local err i ns
  if ! err=$(ip link add "$br" type bridge 2>&1); then
    # A container without CAP_NET_ADMIN cannot make hosts: say so rather than fail.
    case "$err" in *"not permitted"*) echo "SKIP: cannot create network devices here: $err"; exit 77 ;; esac
    fail "cannot create a bridge: $err"
  fi
  ip addr add "$net.254/24" dev "$br"
  ip link set "$br" up
  for i in 1 2 3; do
    ns=$(netns_name $i)
    ip netns add "$ns" || fail "cannot create namespace $ns"
    ip link add "wv$netns_tag-$i" type veth peer name eth0 netns "$ns"
    ip link set "wv$netns_tag-$i" master "$br" up
    ip -n "$ns" addr add "$net.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
  pass "three namespaces on bridge $br: $net.1, $net.2, $net.3"
}
# Rank 1 of 3 dies in the middle of traffic (the peer_death scenario of $mp) under each
# backend configuration, started by the launcher whose words come as arguments; output in
# $out, the wrapper in $work. Survivors must see errors naming rank 1 within
# WEFT_PEER_TIMEOUT and finish among themselves. Each rank runs under a wrapper that reports
# how its process ended and keeps the launcher's PMI connection (inherited, so also held by
# the wrapper) open a while, since a launcher that sees it close without finalize ends the
# job.
netns_peer_death() {  # what, launcher words...
  local what=$1 cfg
  shift
  cat >"$work/survive" <<'EOF2'
#!/bin/sh
"$@"
rc=$?
echo "rank ${PMI_RANK:-$SLURM_PROCID}: process exited with $rc"
[ $rc -eq 0 ] || sleep 10
EOF2
  chmod +x "$work/survive"
  for cfg in "WEFT_BACKEND=ofi WEFT_OFI_PROVIDER=tcp;ofi_rxm" "WEFT_BACKEND=ucx" "WEFT_NET_BACKEND=ofi" "WEFT_NET_BACKEND=ucx"; do
    # shellcheck disable=SC2086
    timeout 120 env FI_TCP_IFACE=eth0 UCX_NET_DEVICES=eth0 UCX_TLS=tcp WEFT_PEER_TIMEOUT=3 $cfg \
      "$@" "$work/survive" "$mp" peer_death >"$out" 2>&1 </dev/null
    [ "$(grep -c "peer_death: all [0-9]* checks passed" "$out")" -eq 2 ] &&
      grep -q "rank 1: process exited with 137" "$out" ||
      { cat "$out"; fail "$what: peer death with $cfg"; }
    grep -q "rank 1 is gone" "$out" || { cat "$out"; fail "$what: no survivor named rank 1 ($cfg)"; }
    [ -n "${NETNS_VERBOSE:-}" ] && cat "$out"
  done
  pass "$what: a rank killed on its host; survivors get errors naming it and finish (ofi, ucx, mixed over each)"
}
