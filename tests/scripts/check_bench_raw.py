# SPDX-License-Identifier: BSD-3-Clause
# The raw data of bench/run.py, as the page's classes need it: every timed measurement
# carries the flag probe's reading before and after it (columns flag, flag_after), and in
# every round the systems' runs of one figure follow each other, so every system's 8-byte
# latency and rate were measured before any bandwidth run of that round.
# Usage: check_bench_raw.py <raw.csv>; prints what is wrong, exit 1 if anything is.
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bad = []
# Instruction counts (callgrind, after the rounds) are not timed: no probe around them.
measured = [(i, r) for i, r in enumerate(rows) if r["system"] != "probe" and r["workload"] != "instructions"]
for i, r in measured:
    for k in ("flag", "flag_after"):
        try:
            float(r.get(k) or "")
        except ValueError:
            bad.append("row %d (%s %s %s): no probe reading in %s" % (i + 2, r["system"], r["api"], r["workload"], k))
for rd in sorted({r["round"] for _, r in measured}, key=int):
    mine = [(i, r) for i, r in measured if r["round"] == rd]
    first_bw = min((i for i, r in mine if r["workload"].startswith("bandwidth")), default=None)
    small = [(i, r) for i, r in mine if r["mode"] == "process" and r["size"] == "8"
             and r["workload"] in ("latency", "rate")]
    systems = sorted({r["system"] for _, r in small})
    if len(systems) < 3:
        bad.append("round %s: 8-byte figures of %s only, not of Weft and the MPIs" % (rd, systems))
    for s in systems:
        last = max(i for i, r in small if r["system"] == s)
        if first_bw is not None and last > first_bw:
            bad.append("round %s: %s's 8-byte latency or rate ran after its first bandwidth run (rows %d, %d)"
                       % (rd, s, last + 2, first_bw + 2))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
