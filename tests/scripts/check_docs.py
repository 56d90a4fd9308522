# SPDX-License-Identifier: BSD-3-Clause
# The documents agree with the tree, in the ways that can be checked without reading
# prose: every relative link and every file path they name in backticks exists, and every
# WEFT_* name they use is a setting, a macro of the public headers, or a CMake option.
# Usage: check_docs.py <source dir>; prints each stale reference, exit 1 if any.
import os, re, sys, glob

src = sys.argv[1]
docs = glob.glob(os.path.join(src, 'docs', '*.md')) + [os.path.join(src, 'README.md')]
known = set()
for f in glob.glob(os.path.join(src, 'include', 'weft', '*')) + [os.path.join(src, 'CMakeLists.txt')] \
        + glob.glob(os.path.join(src, '*', 'CMakeLists.txt')):
    known |= set(re.findall(r'WEFT_[A-Z0-9_]+', open(f).read()))
# The counters' C names are made by the preprocessor (WEFT_COUNTER_##NAME).
for row in re.findall(r'^WEFT_COUNTER\(\w+, (\w+),', open(os.path.join(src, 'include', 'weft', 'counters.def')).read(), re.M):
    known.add('WEFT_COUNTER_' + row)
bad = []
for d in docs:
    text = open(d).read()
    rel = os.path.relpath(d, src)
    for link in re.findall(r'\]\(([^)#\s]+)(?:#[^)]*)?\)', text):
        if re.match(r'[a-z]+://', link) or link.startswith('mailto:'):
            continue
        if not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(d), link))):
            bad.append('%s: link to %s, which does not exist' % (rel, link))
    for path in re.findall(r'`((?:src|tools|include|tests|scripts|bench|examples|cmake|docs)/[A-Za-z0-9_./-]+)`', text):
        if '*' in path or '<' in path:
            continue
        if not os.path.exists(os.path.join(src, path.rstrip('/'))):
            bad.append('%s: names %s, which does not exist' % (rel, path))
    # A misspelling shown on purpose, in the warning it draws.
    shown = set(re.findall(r'(WEFT_[A-Z0-9_]+) is set but Weft has no such setting', text))
    for name in set(re.findall(r'\bWEFT_[A-Z0-9_]+\b', text)) - shown:
        base = name.rstrip('_')
        if name not in known and not any(k.startswith(base) for k in known if name.endswith('_')):
            bad.append('%s: names %s, which is no setting, macro or option' % (rel, name))
for b in sorted(bad):
    print(b)
sys.exit(1 if bad else 0)
