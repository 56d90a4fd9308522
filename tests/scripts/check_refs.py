# SPDX-License-Identifier: BSD-3-Clause
# Every public function in weft.hpp and weft.h has a reference comment right above it.
# Usage: check_refs.py <source dir>; prints what lacks one, exit 1 if anything does.
import re, sys
bad = []
def check(path, start_re, is_comment):
    lines = open(path).read().split('\n')
    for i, l in enumerate(lines):
        m = start_re.match(l)
        if not m: continue
        prev = lines[i-1] if i else ''
        if not is_comment(prev):
            bad.append('%s:%d: %s has no reference comment' % (path, i+1, m.group(1)))
src = sys.argv[1]
check(src + '/include/weft/weft.h', re.compile(r'^WEFT_C_API [^(]*?\b(weft_[a-z0-9_]+)\('),
      lambda p: p.rstrip().endswith('*/') and not p.startswith('WEFT_C_API'))
check(src + '/include/weft/weft.hpp',
      re.compile(r'^(?:inline |WEFT_API |\[\[nodiscard\]\] WEFT_API )[^(]*?\b([a-z_0-9]+)\('),
      lambda p: p.lstrip().startswith('//'))
for b in bad: print(b)
sys.exit(1 if bad else 0)
