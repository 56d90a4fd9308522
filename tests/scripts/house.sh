#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The house rules, checked against the code (docs/architecture.md):
# - every folder of src/ and tools/ has a row in the layer table, and every row a folder;
# - no file of a layer includes from a layer above it;
# - every source file has its SPDX line, every header a header comment;
# - every public function in weft.hpp and weft.h has a reference comment;
# - the LICENSE is there;
# - the documents name only files, links and WEFT_ names that exist.
# Arguments: weftrun mp_test source-dir build-dir.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
src=$3
doc=$src/docs/architecture.md
cd "$src" || fail "no source dir $src"

declare -A level
while IFS='|' read -r _ folder lvl _; do
  folder=$(echo "$folder" | tr -d ' `'); lvl=$(echo "$lvl" | tr -d ' ')
  [[ $folder == src/* || $folder == tools/* ]] && [[ $lvl =~ ^[0-9]+$ ]] && level[$folder]=$lvl
done <"$doc"
[ ${#level[@]} -gt 10 ] || fail "no layer table in docs/architecture.md"
for f in "${!level[@]}"; do [ -d "$f" ] || fail "architecture.md lists $f, which does not exist"; done
for d in $(find src tools -mindepth 1 -maxdepth 2 -type d | sort); do
  [ -n "${level[$d]:-}" ] || fail "$d is not in architecture.md's layer table"
done
pass "architecture.md lists every folder of src/ and tools/ (${#level[@]}), and only those"

# The layer of a file: its folder's, or its parent's (src/net/shm/x.cpp -> src/net/shm).
layer_of() { local d; d=$(dirname "$1"); while [ -z "${level[$d]:-}" ] && [ "$d" != . ]; do d=$(dirname "$d"); done; echo "$d"; }
bad=0
for f in $(git ls-files 'src/*.cpp' 'src/*.hpp'); do
  mine=$(layer_of "$f"); lv=${level[$mine]}
  # Only the folder of each quoted include (a comment after it is not a folder).
  for inc in $(sed -nE 's/^#include "([a-z_]+(\/[a-z_]+)?)\/[a-z_]+\.hpp".*/\1/p' "$f"); do
    [ "$inc" = weft ] && continue
    target=src/$inc; [ -n "${level[$target]:-}" ] || target=src/${inc%%/*}
    tl=${level[$target]:-}
    [ -n "$tl" ] || { echo "$f includes from unknown layer $inc"; bad=1; continue; }
    if [ "$tl" -gt "$lv" ] || { [ "$tl" -eq "$lv" ] && [ "${target#$mine}" = "$target" ] && [ "${mine#$target}" = "$mine" ]; }; then
      echo "$f (level $lv) includes from $target (level $tl)"; bad=1
    fi
  done
done
[ $bad = 0 ] || fail "a layer includes from a layer above or beside it"
pass "every include goes downward"

missing=$(git ls-files '*.cpp' '*.hpp' '*.h' '*.c' '*.def' '*.sh' '*.py' 'CMakeLists.txt' '*/CMakeLists.txt' \
  | grep -v corpus | while read -r f; do head -3 "$f" | grep -q "SPDX-License-Identifier: BSD-3-Clause" || echo "$f"; done)
[ -z "$missing" ] || fail "no SPDX line in: $missing"
grep -q "BSD 3-Clause License" LICENSE || fail "LICENSE is not the BSD-3-Clause text"
pass "LICENSE and an SPDX line in every source file"

for f in $(git ls-files 'src/*.hpp' 'tools/*.hpp' 'include/weft/*.hpp'); do
  sed -n 2p "$f" | grep -q '^//' || fail "$f has no header comment on its concept"
done
for f in $(git ls-files 'src/*.cpp'); do
  l2=$(sed -n 2p "$f")
  [[ $l2 == //* ]] || [[ $l2 == "#include \"${f#src/}"* ]] || [[ $l2 == "#include \"${f%.cpp}.hpp\""* ]] \
    || [[ $l2 == "#include \"$(echo "${f#src/}" | sed 's/\.cpp$/.hpp/')\"" ]] \
    || fail "$f starts with neither a comment nor its own header"
done
pass "every header says its concept; every source file says it or includes its header"

python3 "$here/check_refs.py" "$src" || fail "public functions without a reference comment"
pass "every public function in weft.hpp and weft.h has a reference comment"

python3 "$here/check_docs.py" "$src" || fail "a document names a file, link or WEFT_ name that does not exist"
pass "every link, path and WEFT_ name in the documents exists"
