#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Two jobs at once on this host: the "owner" job publishes a registration's handle in a file,
# the "user" job tries it against its own ranks (mp_test foreign_rmr). Passes only when both
# jobs pass: every rank's exit status and its own success line (expect_ranks.sh), so the
# user's put and get were refused and the owner's memory is untouched.
# usage: foreign_rmr.sh WEFTRUN MP_TEST   (the backend comes from the environment)
set -uo pipefail
weftrun=$1 mp_test=$2
here=$(dirname "$0")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export MP_TEST_RMR_FILE=$dir/rmr
job() {  # role
  MP_TEST_RMR_ROLE=$1 bash "$here/expect_ranks.sh" 2 foreign_rmr -- \
    "$weftrun" --timeout 90 --tag-output -n 2 "$mp_test" foreign_rmr 2>&1 | sed "s/^/[$1] /"
  return "${PIPESTATUS[0]}"
}
job owner & owner=$!
job user & user=$!
wait $owner; rc_owner=$?
wait $user; rc_user=$?
echo "foreign_rmr: owner job exit $rc_owner, user job exit $rc_user"
[ "$rc_owner" -eq 0 ] && [ "$rc_user" -eq 0 ]
