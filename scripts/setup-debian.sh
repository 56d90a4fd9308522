#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs what Weft needs to build and test on Debian 12 (run as root or with sudo).
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
pkgs="build-essential cmake ninja-build pkg-config libgtest-dev binutils procps mpich libmpich-dev openmpi-bin libopenmpi-dev python3-matplotlib valgrind libpmix-dev libfabric-dev libfabric-bin libucx-dev ucx-utils iproute2 munge slurmctld slurmd slurm-client clang libclang-rt-14-dev llvm-14 jellyfish bowtie2-examples libopenblas-dev liblapacke-dev libscalapack-mpich-dev libscalapack-openmpi-dev"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq $missing >/dev/null
fi
echo "setup: build dependencies present"
