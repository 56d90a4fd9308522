#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs a command in a private network namespace (loopback only) whose TCP connections start
# with a receive buffer of `bytes` (net.ipv4.tcp_rmem's middle value): 1 MiB is what the
# libfabric sockets provider needs under load (docs/backends.md, "Known gaps"). Exits 77
# (skip) where namespaces cannot be made.
#   sockets_rmem.sh bytes command...
set -u
bytes=$1
shift
[ "$(id -u)" -eq 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
command -v ip >/dev/null || { echo "FAIL: ip not installed (Debian package iproute2)" >&2; exit 1; }
ns=wsk$$
cleanup() {
  ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$ns" 2>/dev/null
}
trap cleanup EXIT
if ! err=$(ip netns add "$ns" 2>&1); then
  case "$err" in *"not permitted"*) echo "SKIP: cannot create a network namespace: $err"; exit 77 ;; esac
  echo "FAIL: cannot create namespace $ns: $err" >&2
  exit 1
fi
ip -n "$ns" link set lo up
ip netns exec "$ns" sysctl -qw net.ipv4.tcp_rmem="4096 $bytes 33554432" ||
  { echo "FAIL: cannot set net.ipv4.tcp_rmem in $ns" >&2; exit 1; }
ip netns exec "$ns" "$@"
