#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# mpirun.openmpi with a session directory of the job's own, for tests that ctest runs side
# by side:   openmpi_launch.sh mpirun-arguments...
# Open MPI 4's jobs on one host share $TMPDIR/ompi.<host>.<uid>: one that ends can remove it
# while another starts, which then fails at once creating its own directories (reported
# for CTest-driven suites, open-mpi/ompi#8510). Under ctest -j2 beside busy processes one
# engine test failed so, in 0.1 s; orte_tmpdir_base gives each job a tree apart.
set -u
base=$(mktemp -d /tmp/weft-ompi.XXXXXX) || exit 1
trap 'rm -rf "$base"' EXIT
OMPI_MCA_orte_tmpdir_base=$base mpirun.openmpi --allow-run-as-root --oversubscribe "$@"
