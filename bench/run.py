#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Weft against MPICH, Open MPI and UCX, side by side, on one host.

Runs every configuration once per round, round after round, each round starting with the
machine probe; writes raw CSV (with each round's class), medians per class, PNG plots and
docs/benchmarks.md with the ratios taken within each round (bench/report.py).

    bench/run.py [--quick] [--rounds N | --minutes M] [--threads 1,2,...] [--build build]
                 [--out bench/results] [--from-raw] [--no-doc]

Without --rounds, the number of rounds comes from a time budget (--minutes, default 25):
the first round is timed and as many more run as fit (at least 2 rounds in all, at most 7).
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402
import report  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAILED = []  # configurations that failed: the run ends with status 1


def configurations(quick, threads):
    """Every run of a round, the same iterations for every system."""
    it = 20000 if quick else 200000
    lat_it = 20000 if quick else 100000
    # Message rates: a million messages per lane (about 0.06 s at Weft's rate, 0.4 s at the
    # slowest MPI row). At 200 000 a run lasted 11 ms, and one pause of the VM of a few ms
    # in either thread of a two-thread run (the figure is messages over the slower thread's
    # time) cut it by a third: the loopback 2-thread rows read 23-35 M/s from run to run
    # where a million messages read 32-35.
    rate_it = 100000 if quick else 1000000
    sizes = "8,1024,65536,4194304" if quick else "8,64,512,4096,32768,65536,262144,1048576,4194304"
    bench = lambda s, n, bind, args: dict(kind="bench", system=s, n=n, bind=bind, bin="bench_" + s, args=args)
    cfgs = [dict(kind="probe", system="probe", args=["all", "--trials", "1"])]
    for s in ("weft", "mpich", "openmpi"):
        for api in ("am", "sr"):
            cfgs.append(bench(s, 2, True, ["lat", "--mode", api, "--iters", str(lat_it)]))
            cfgs.append(bench(s, 2, True, ["rate", "--mode", api, "--iters", str(rate_it)]))
        cfgs.append(bench(s, 2, True, ["bw", "--mode", "sr", "--sizes", sizes, "--iters", str(it // 2)]))
        # One 4 MiB transfer in flight: the copy probes' working set.
        cfgs.append(bench(s, 2, True, ["bw", "--mode", "sr", "--sizes", "4194304", "--window", "1", "--iters", str(it // 2)]))
        # Every transfer in flight from and into one buffer, as ucx_perftest and osu_bw do
        # (bandwidth_one): the workload UCX's figure is compared on.
        cfgs.append(bench(s, 2, True, ["bw", "--mode", "sr", "--sizes", "65536,4194304", "--buffers", "one",
                                       "--iters", str(it // 2)]))
    # UCX's own benchmark: as many ping-pongs and messages, and as many bytes per size, as
    # the others (bench_main.cpp moves about 1 GiB per size at it // 2 = 100000).
    bw_bytes = (1 << 30) * (it // 2) // 100000
    for test, size, api, workload in peers.UCX_TESTS:
        cfgs.append(dict(kind="ucx", system="ucx", test=test, size=size, api=api, workload=workload,
                         iters=peers.ucx_iters(workload, size, lat_it, rate_it, bw_bytes)))
    for how in ("packet", "in_place"):
        cfgs.append(bench("weft", 2, True, ["rate", "--mode", "am", "--am-buffer", how, "--iters", str(rate_it)]))
    cfgs.append(bench("weft", 2, True, ["lat", "--mode", "am", "--am-buffer", "in_place", "--iters", str(lat_it)]))
    # One process sending to itself: a message's whole software path without a crossing
    # between cores, the part of a one-way latency that the flag probe does not measure.
    for how in ("malloc", "in_place"):
        cfgs.append(bench("weft", 1, True, ["lat", "--mode", "am", "--am-buffer", how, "--iters", str(lat_it)]))
    cfgs.append(dict(kind="bench", system="weft", n=2, bind=True, bin="bench_put_notify",
                     args=["--sizes", "8", "--iters", str(lat_it)]))
    cfgs.append(dict(kind="bench", system="weft", n=2, bind=True, bin="bench_put_notify",
                     args=["--am", "--sizes", "8", "--iters", str(lat_it)]))
    # Thread mode across processes: 2 ranks x t threads, not bound.
    for t in threads:
        if t < 2:
            continue
        for res in ("dedicated", "shared", "shared_cq"):
            cfgs.append(bench("weft", 2, False, ["rate", "--mode", "am", "--threads", str(t), "--resources", res, "--iters", str(rate_it)]))
        cfgs.append(bench("weft", 2, False, ["rate", "--mode", "sr", "--threads", str(t), "--resources", "dedicated", "--iters", str(rate_it)]))
        for s in ("mpich", "openmpi"):
            cfgs.append(bench(s, 2, False, ["rate", "--mode", "am", "--threads", str(t), "--resources", "dedicated", "--iters", str(rate_it)]))
    # One process, each thread exchanging with itself (loopback).
    for t in sorted(set(threads) | {1}):
        for s in ("weft", "mpich", "openmpi"):
            cfgs.append(bench(s, 1, False, ["rate", "--mode", "am", "--threads", str(t), "--resources", "dedicated", "--iters", str(rate_it)]))
        if t > 1:
            cfgs.append(bench("weft", 1, False, ["rate", "--mode", "am", "--threads", str(t), "--resources", "shared", "--iters", str(rate_it)]))
    cfgs.append(dict(kind="resources", system="weft", args=[str(max(threads)), "200000" if quick else "2000000"]))
    return by_figure(cfgs)


# The figures, in the order a round measures them; every system's run of one figure follows
# the others' at once. The machine changes phase every minute or two, and with each system's
# whole suite in turn (3-4 minutes a round) the peers of a ratio were measured minutes apart:
# on 2026-12-07 a quarter of the measurements straddled a change, and UCX's 8-byte rate fell
# in the slow phase beside Weft's and Open MPI's in the fast one.
FIGURES = ("probe", "latency", "rate", "bandwidth", "bandwidth_w1", "bandwidth_one", "thread", "loopback",
           "resources")


def figure_of(c):
    """Which figure of FIGURES a configuration measures."""
    if c["kind"] in ("probe", "resources"):
        return c["kind"]
    if c["kind"] == "ucx":
        return c["workload"]  # named as the figures are (FIGURES.index refuses any other)
    args = c["args"]
    if c["bin"] == "bench_put_notify":
        return "latency"
    if c["n"] == 1:
        return "latency" if args[0] == "lat" else "loopback"
    if "--threads" in args:
        return "thread"
    if args[0] == "bw":
        return "bandwidth_w1" if "--window" in args else "bandwidth_one" if "--buffers" in args else "bandwidth"
    return {"lat": "latency", "rate": "rate"}[args[0]]


def by_figure(cfgs):
    """cfgs grouped by figure (FIGURES' order), each group in its original order."""
    return sorted(cfgs, key=lambda c: FIGURES.index(figure_of(c)))


def command(c, build):
    """The command line (and extra environment) of one configuration."""
    bench_dir = os.path.join(build, "bench")
    if c["kind"] == "probe":
        return [os.path.join(bench_dir, "weft-probe")] + c["args"], {}
    if c["kind"] == "resources":
        return [os.path.join(bench_dir, "bench_resources")] + c["args"], {}
    if c["kind"] == "ucx":
        server, client, env = peers.ucx_command(c["test"], c["size"], c["iters"])
        return server + ["&"] + client, env
    return peers.launcher(c["system"], c["n"], build, c["bind"]) + [os.path.join(bench_dir, c["bin"])] + c["args"], {}


def run_one(c, build):
    """Rows of one configuration, or None when it failed."""
    if c["kind"] == "ucx":
        r = peers.ucx_perftest(c["test"], c["size"], c["iters"])
        if not r:
            return None
        v = peers.ucx_figure(r, c["workload"])
        return [dict(system="ucx", api=c["api"], mode="process", threads="1", resources="dedicated",
                     workload=c["workload"], size=str(c["size"]), value="%.6g" % v[0], unit=v[1])]
    cmd, _ = command(c, build)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        print("  timed out", flush=True)
        return None
    rows = peers.parse(p.stdout)
    if p.returncode != 0 or not rows:
        print("  FAILED (exit %d): %s" % (p.returncode, (p.stderr or p.stdout)[-500:]), flush=True)
        return None
    if c["kind"] == "resources":
        rows = [dict(system="weft", api="resource", mode="threads", threads=r["threads"], resources=r["resource"],
                     workload="resource", size="0", value=r["value"], unit=r["unit"]) for r in rows]
    return rows


def flag_probe(build):
    """The flag probe's one-way latency now (us; one short trial), or "" when it fails."""
    p = subprocess.run([os.path.join(build, "bench", "weft-probe"), "flag", "--trials", "1"],
                       capture_output=True, text=True, timeout=60)
    rows = peers.parse(p.stdout)
    return rows[0]["value"] if rows else ""


def copy_probes_before(c, build):
    """Before Weft's bandwidth runs, the two copy probes again: the machine's copy speed
    drifts on its own (Weft at 64 KiB read 43 GB/s in one round and 21 in the next while the
    round's first probe said the same), so the ratio to the probes takes these, measured a
    second before, not the round's first. Rows tagged resources=before (before_w1 ahead of
    the one-in-flight run); [] for every other configuration."""
    if c["kind"] != "bench" or c["system"] != "weft" or c["args"][0] != "bw" or c["n"] != 2:
        return []
    tag = "before_w1" if "--window" in c["args"] else "before"
    rows = []
    for mode in ("pipe", "cma"):
        p = subprocess.run([os.path.join(build, "bench", "weft-probe"), mode, "--trials", "1"],
                           capture_output=True, text=True, timeout=120)
        rows += [dict(r, resources=tag) for r in peers.parse(p.stdout)]
    return rows


def row_flag(rows):
    """The probe's own rows carry the flag reading they measured."""
    for r in rows:
        if r.get("api") == "flag":
            return r["value"]
    return ""


def show(cmd):
    return " ".join(os.path.relpath(x, ROOT) if x.startswith(ROOT) else x for x in cmd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="one short round (about two minutes)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--minutes", type=float, default=25, help="time budget when --rounds is not given (default 25)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks.md")
    ap.add_argument("--from-raw", action="store_true", help="run nothing: rewrite medians, plots and the document from OUT/raw.csv")
    ap.add_argument("--threads", default="1,2", help="thread counts for the threaded runs, e.g. 1,2,4,8,16 (default 1,2)")
    a = ap.parse_args()
    threads = sorted({int(t) for t in a.threads.split(",")})
    os.makedirs(a.out, exist_ok=True)
    cfgs = configurations(a.quick, threads)
    if not shutil.which("ucx_perftest"):
        print("ucx_perftest not found (apt-get install ucx-utils): UCX is left out", flush=True)
        cfgs = [c for c in cfgs if c["kind"] != "ucx"]
    commands = []
    for c in cfgs:
        cmd, env = command(c, a.build)
        commands.append(" ".join("%s=%s" % kv for kv in env.items()) + (" " if env else "") + show(cmd))
    for c in cfgs:
        if c["kind"] == "bench" and not os.path.exists(command(c, a.build)[0][-len(c["args"]) - 1]):
            sys.exit("missing %s: build with scripts/bench.sh first" % c["bin"])
    callgrind = shutil.which("valgrind") and not a.quick
    if callgrind:
        commands.append("bench/callgrind.sh " + os.path.relpath(a.build, ROOT))
    raw_path = os.path.join(a.out, "raw.csv")
    start = time.time()
    if a.from_raw:
        raw = report.read_raw(raw_path)
    else:
        raw = run_rounds(cfgs, a, callgrind)
        if callgrind:
            print("instruction counts (callgrind)", flush=True)
            out = subprocess.run([os.path.join(ROOT, "bench", "callgrind.sh"), a.build], capture_output=True, text=True, timeout=1800).stdout
            for row in peers.parse(out):
                row["round"] = "0"
                raw.append(row)
        classes = report.classify(raw)
        for row in raw:
            row["class"] = classes.get(row["round"], "")
        report.write_raw(raw_path, raw)
    if not a.no_doc:
        report.write_doc(a.doc, raw, commands, a.quick, threads, a.out, 0 if a.from_raw else time.time() - start)
    print("wrote %s%s (%.1f minutes)" % (raw_path, "" if a.no_doc else ", " + a.doc, (time.time() - start) / 60), flush=True)
    if FAILED:
        print("%d runs failed:\n  %s" % (len(FAILED), "\n  ".join(FAILED)), flush=True)
        sys.exit(1)


def run_rounds(cfgs, a, callgrind):
    raw = []
    rounds = a.rounds or (1 if a.quick else None)
    start = time.time()
    r = 0
    while rounds is None or r < rounds:
        t0 = time.time()
        for i, c in enumerate(cfgs):
            label = c.get("test") or " ".join(c["args"][:6])
            print("[round %d/%s] %3d/%d  %-8s %s" % (r + 1, rounds or "?", i + 1, len(cfgs), c["system"], label), flush=True)
            flag = flag_probe(a.build) if c["kind"] != "probe" else None
            before = copy_probes_before(c, a.build)
            rows = run_one(c, a.build)
            if rows is not None:
                rows = before + rows
            # The phase the machine was in just before and just after: it changes within a
            # run too (an 8-byte rate run read 9.5 M/s after a fast probe, the slow phase's
            # figure), and such a run must not count in either class.
            after = flag_probe(a.build) if c["kind"] != "probe" else None
            for row in rows or []:
                row["flag"] = flag if flag is not None else row_flag(rows)
                row["flag_after"] = after if after is not None else ""
            if rows is None:
                FAILED.append("round %d: %s %s" % (r + 1, c["system"], label))
            for row in rows or []:
                row["round"] = str(r)
                raw.append(row)
        r += 1
        if rounds is None:  # from the budget, once the first round is timed
            per_round = time.time() - t0
            left = a.minutes * 60 - (time.time() - start) - (90 if callgrind else 0)
            rounds = max(2, min(7, r + int(left // per_round)))
            print("a round takes %.0f s: %d rounds in %.0f minutes" % (per_round, rounds, a.minutes), flush=True)
    return raw


if __name__ == "__main__":
    main()
