#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Weft against MPI, side by side, on one host.

Runs every configuration once per round, round after round (the machine's speed drifts, so
only figures of the same run are compared), takes medians, and writes raw and median CSV,
PNG plots and docs/benchmarks.md with the ratios.

    bench/run.py [--quick] [--rounds N] [--build build] [--out bench/results]
"""
import argparse
import csv
import datetime
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def launcher(system, n, build, bind):
    if system == "weft":
        return [os.path.join(build, "weftrun"), "-n", str(n), "--timeout", "300"] + ([] if bind else ["--bind-to", "none"])
    if system == "mpich":
        return ["mpiexec.mpich", "-n", str(n), "-bind-to", "core" if bind else "none"]
    if system == "openmpi":
        return ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", str(n), "--bind-to", "core" if bind else "none"]
    raise ValueError(system)


def configurations(quick, threads=(1, 2)):
    it = 20000 if quick else 200000
    lat_it = 20000 if quick else 100000
    sizes = "8,1024,65536,4194304" if quick else "8,64,512,4096,32768,65536,262144,1048576,4194304"
    systems = ["weft", "mpich", "openmpi"]
    cfgs = []
    for s in systems:
        for api in ("am", "sr"):
            cfgs.append(dict(system=s, n=2, bind=True, args=["lat", "--mode", api, "--iters", str(lat_it)]))
            cfgs.append(dict(system=s, n=2, bind=True, args=["rate", "--mode", api, "--iters", str(it)]))
        cfgs.append(dict(system=s, n=2, bind=True, args=["bw", "--mode", "sr", "--sizes", sizes, "--iters", str(it // 2)]))
        # One 4 MiB transfer in flight: the pipeline probe's working set (one source and one
        # destination buffer), so that the ratio to the probe compares like with like.
        cfgs.append(dict(system=s, n=2, bind=True, args=["bw", "--mode", "sr", "--sizes", "4194304", "--window", "1", "--iters", str(it // 2)]))
    # Active messages delivered in packets handed back with put_upacket: Weft's counterpart of
    # MPI's ring of pre-posted receive buffers (no allocation per message on either side).
    cfgs.append(dict(system="weft", n=2, bind=True, args=["rate", "--mode", "am", "--am-buffer", "packet", "--iters", str(it)]))
    # Thread mode across processes: 2 ranks x t threads (4 threads on 2 cores at t=2), not bound.
    for t in threads:
        if t < 2:
            continue
        for res in ("dedicated", "shared", "shared_cq"):
            cfgs.append(dict(system="weft", n=2, bind=False, args=["rate", "--mode", "am", "--threads", str(t), "--resources", res, "--iters", str(it)]))
        cfgs.append(dict(system="weft", n=2, bind=False, args=["rate", "--mode", "sr", "--threads", str(t), "--resources", "dedicated", "--iters", str(it)]))
        for s in ("mpich", "openmpi"):
            cfgs.append(dict(system=s, n=2, bind=False, args=["rate", "--mode", "am", "--threads", str(t), "--resources", "dedicated", "--iters", str(it // 4)]))
    # One process, each thread exchanging with itself (loopback).
    for t in sorted(set(threads) | {1}):
        cfgs.append(dict(system="weft", n=1, bind=False, args=["rate", "--mode", "am", "--threads", str(t), "--resources", "dedicated", "--iters", str(it)]))
        cfgs.append(dict(system="mpich", n=1, bind=False, args=["rate", "--mode", "am", "--threads", str(t), "--resources", "dedicated", "--iters", str(it // 4)]))
        if t > 1:
            cfgs.append(dict(system="weft", n=1, bind=False, args=["rate", "--mode", "am", "--threads", str(t), "--resources", "shared", "--iters", str(it)]))
    return cfgs


RESULT = re.compile(r"RESULT (.*)")


def parse(out):
    rows = []
    for line in out.splitlines():
        m = RESULT.search(line)
        if m:
            rows.append(dict(kv.split("=", 1) for kv in m.group(1).split()))
    return rows


def run_probe(rounds_rows, probe):
    rows = []
    out = subprocess.run([probe, "lat", "500000", "1"], capture_output=True, text=True, timeout=120).stdout
    m = re.search(r"oneway_us=([0-9.]+)", out)
    if m:
        rows.append(dict(system="limit", api="probe", mode="process", threads="1", resources="-", workload="latency", size="8", value=m.group(1), unit="us"))
    out = subprocess.run([probe, "pipe", "1"], capture_output=True, text=True, timeout=300).stdout
    for m in re.finditer(r"size=(\d+) reps=\d+ GBps=([0-9.]+)", out):
        rows.append(dict(system="limit", api="pipe", mode="process", threads="1", resources="-", workload="bandwidth", size=m.group(1), value=m.group(2), unit="GB/s"))
    rounds_rows.extend(rows)


def key(r):
    return (r["system"], r["api"], r["mode"], r["threads"], r["resources"], r["workload"], r["size"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="one short round (about a minute)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks.md")
    ap.add_argument("--from-raw", action="store_true",
                    help="run nothing: recompute medians, plots and the document from OUT/raw.csv")
    ap.add_argument("--threads", default="1,2",
                    help="thread counts for the threaded runs, e.g. 1,2,4,8,16 on a machine with 16 cores (default 1,2)")
    a = ap.parse_args()
    threads = sorted({int(t) for t in a.threads.split(",")})
    rounds = a.rounds or (1 if a.quick else 5)
    bench_dir = os.path.join(a.build, "bench")
    systems = {"weft": os.path.join(bench_dir, "bench_weft"), "mpich": os.path.join(bench_dir, "bench_mpich"),
               "openmpi": os.path.join(bench_dir, "bench_openmpi")}
    missing = [s for s, p in systems.items() if not os.path.exists(p)]
    if missing:
        sys.exit("missing benchmark binaries for %s: build with cmake --build %s first" % (missing, a.build))
    probe = None
    probe_src = os.path.join(ROOT, "..", "shared", "tools", "shmlimit.c")
    if os.path.exists(probe_src) and not a.from_raw:
        probe = os.path.join(a.build, "shmlimit")
        subprocess.run(["gcc", "-O2", "-march=native", "-o", probe, probe_src], check=True)
    os.makedirs(a.out, exist_ok=True)
    cfgs = configurations(a.quick, threads)
    show = lambda cmd: " ".join(os.path.relpath(x, ROOT) if x.startswith(ROOT) else x for x in cmd)
    commands = [show(launcher(c["system"], c["n"], a.build, c["bind"]) + [systems[c["system"]]] + c["args"]) for c in cfgs]
    res_bin = os.path.join(bench_dir, "bench_resources")
    res_args = [str(os.cpu_count()), "200000" if a.quick else "2000000"]
    if os.path.exists(res_bin):
        commands.append(show([res_bin] + res_args))
    if shutil.which("valgrind") and not a.quick:
        commands.append("bench/callgrind.sh " + os.path.relpath(a.build, ROOT))
    raw = []
    if a.from_raw:
        with open(os.path.join(a.out, "raw.csv")) as f:
            raw = list(csv.DictReader(f))
        rounds = 1 + max(int(r["round"]) for r in raw)
    start = time.time()
    total = rounds * len(cfgs)
    done = 0
    for r in range(0 if a.from_raw else rounds):
        if probe:
            run_probe(raw, probe)
            for row in raw:
                row.setdefault("round", str(r))
        for c in cfgs:
            cmd = launcher(c["system"], c["n"], a.build, c["bind"]) + [systems[c["system"]]] + c["args"]
            done += 1
            eta = (time.time() - start) / done * (total - done)
            print("[round %d/%d] %3d/%d  %-8s %s  (about %ds left)" % (r + 1, rounds, done, total, c["system"], " ".join(c["args"][:1] + c["args"][1:6]), eta), flush=True)
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
            except subprocess.TimeoutExpired:
                print("  timed out", flush=True)
                continue
            rows = parse(p.stdout)
            if p.returncode != 0 or not rows:
                print("  FAILED (exit %d): %s" % (p.returncode, (p.stderr or p.stdout)[-500:]), flush=True)
                continue
            for row in rows:
                row["round"] = str(r)
            raw.extend(rows)
        if os.path.exists(res_bin):
            print("[round %d/%d] resource microbenchmarks" % (r + 1, rounds), flush=True)
            out = subprocess.run([res_bin] + res_args, capture_output=True, text=True, timeout=600).stdout
            for row in parse(out):
                raw.append(dict(round=str(r), system="weft", api="resource", mode="threads", threads=row["threads"], resources=row["resource"], workload="resource", size="0", value=row["value"], unit=row["unit"]))
    if shutil.which("valgrind") and not a.quick and not a.from_raw:
        print("instruction counts (callgrind, loopback)", flush=True)
        out = subprocess.run([os.path.join(ROOT, "bench", "callgrind.sh"), a.build], capture_output=True, text=True, timeout=1200).stdout
        for row in parse(out):
            row["round"] = "0"
            raw.append(row)
    fields = ["round", "system", "api", "mode", "threads", "resources", "workload", "size", "value", "unit"]
    with open(os.path.join(a.out, "raw.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for row in raw:
            w.writerow({k: row.get(k, "") for k in fields})
    groups = {}
    for row in raw:
        groups.setdefault(key(row), []).append(float(row["value"]))
    med = {k: statistics.median(v) for k, v in groups.items()}
    with open(os.path.join(a.out, "medians.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(fields[1:-2] + ["median", "samples"])
        for k in sorted(med):
            w.writerow(list(k) + ["%.6g" % med[k], len(groups[k])])
    plots = make_plots(med, a.out, threads)
    if not a.no_doc:
        write_doc(a.doc, med, groups, commands, rounds, a.quick, plots, a.out, threads)
    print("wrote %s, %s%s" % (os.path.join(a.out, "raw.csv"), os.path.join(a.out, "medians.csv"),
                               "" if a.no_doc else ", " + a.doc))


def get(med, system, api, mode, threads, resources, workload, size="8"):
    return med.get((system, api, mode, str(threads), resources, workload, str(size)))


def make_plots(med, out, threads=(1, 2)):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plots")
        return []
    files = []

    def save(fig, ax, name, xlabel, ylabel, title, legend=True):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        if legend:
            ax.legend(fontsize=8)
            ax.grid(alpha=0.3)
        path = os.path.join(out, name)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        files.append(path)
        plt.close(fig)

    # bandwidth against size
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system, style in (("weft", "o-"), ("mpich", "s--"), ("openmpi", "^--"), ("limit", "k:")):
        api = "pipe" if system == "limit" else "sr"
        pts = sorted((int(k[6]), v) for k, v in med.items() if k[0] == system and k[1] == api and k[5] == "bandwidth" and k[2] == "process")
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label="machine limit (two-process pipeline)" if system == "limit" else system)
    ax.set_xscale("log", base=2)
    save(fig, ax, "bandwidth.png", "message size (bytes)", "GB/s", "Send/receive bandwidth, 2 processes, shared memory")
    # latency bars
    fig, ax = plt.subplots(figsize=(7, 4))
    labels, vals = [], []
    for system in ("weft", "mpich", "openmpi"):
        for api in ("am", "sr"):
            v = get(med, system, api, "process", 1, "dedicated", "latency")
            if v is not None:
                labels.append("%s %s" % (system, api))
                vals.append(v)
    lim = get(med, "limit", "probe", "process", 1, "-", "latency")
    if lim is not None:
        labels.append("limit")
        vals.append(lim)
    ax.bar(labels, vals, color=["#2a6" if l.startswith("weft") else "#888" if l == "limit" else "#68c" for l in labels])
    ax.tick_params(axis="x", labelrotation=30)
    save(fig, ax, "latency.png", "", "one-way latency (us)", "8-byte ping-pong latency, 2 processes", legend=False)
    # message rate against threads
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system, res, mode, style in (("weft", "dedicated", "loopback", "o-"), ("weft", "shared", "loopback", "o:"),
                                     ("mpich", "dedicated", "loopback", "s--"),
                                     ("weft", "dedicated", "thread", "D-"), ("weft", "shared", "thread", "D:"),
                                     ("weft", "shared_cq", "thread", "x:"),
                                     ("mpich", "dedicated", "thread", "v--"), ("openmpi", "dedicated", "thread", "^--")):
        pts = []
        for t in sorted(set(threads) | {1}):
            m = mode if t > 1 or mode == "loopback" else "process"
            v = get(med, system, "am", m, t, res if t > 1 else "dedicated", "rate")
            if v is not None:
                pts.append((t, v))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label="%s %s (%s)" % (system, mode, res))
    ax.set_xticks(sorted(set(threads) | {1}))
    save(fig, ax, "rate_threads.png", "threads per process", "8-byte message rate (M/s)", "Message rate against threads")
    # resource throughput against threads
    fig, ax = plt.subplots(figsize=(7, 4.5))
    names = sorted({k[4] for k in med if k[5] == "resource"})
    for name in names:
        pts = sorted((int(k[3]), v) for k, v in med.items() if k[5] == "resource" and k[4] == name)
        base = pts[0][1] if pts else 1
        ax.plot([p[0] for p in pts], [p[1] / base for p in pts], "o-" if name != "cpu_only" else "k:", label=name)
    if names:
        save(fig, ax, "resources.png", "threads", "throughput relative to one thread",
             "Resource throughput against threads (cpu_only: the machine's own scaling)")
    else:
        plt.close(fig)
    return files


def fmt(v, digits=3):
    return "–" if v is None else ("%.*g" % (digits, v))


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def write_doc(path, med, groups, commands, rounds, quick, plots, out, threads=(1, 2)):
    g = lambda *k: get(med, *k)
    best_mpi = lambda f: (lambda xs: max(xs) if xs else None)([x for x in (f("mpich"), f("openmpi")) if x is not None])
    best_mpi_low = lambda f: (lambda xs: min(xs) if xs else None)([x for x in (f("mpich"), f("openmpi")) if x is not None])
    lat_w = g("weft", "am", "process", 1, "dedicated", "latency")
    lat_m = best_mpi_low(lambda s: g(s, "am", "process", 1, "dedicated", "latency"))
    lim = g("limit", "probe", "process", 1, "-", "latency")
    rate_w = g("weft", "am", "process", 1, "dedicated", "rate")
    rate_m = best_mpi(lambda s: g(s, "am", "process", 1, "dedicated", "rate"))
    rate_wp = g("weft", "am_packet", "process", 1, "dedicated", "rate")
    bw = lambda s, size: g(s, "sr", "process", 1, "dedicated", "bandwidth", size)
    pipe = lambda size: g("limit", "pipe", "process", 1, "-", "bandwidth", size)
    bw1 = lambda s: g(s, "sr", "process", 1, "dedicated", "bandwidth_w1", 4194304)
    bw64_m = best_mpi(lambda s: bw(s, 65536))
    bw4_m = best_mpi(lambda s: bw(s, 4194304))
    bw1_m = best_mpi(bw1)
    lb1 = g("weft", "am", "loopback", 1, "dedicated", "rate")
    lb2 = g("weft", "am", "loopback", 2, "dedicated", "rate")
    lb2s = g("weft", "am", "loopback", 2, "shared", "rate")
    mlb2 = g("mpich", "am", "loopback", 2, "dedicated", "rate")
    th_w = g("weft", "am", "thread", 2, "dedicated", "rate")
    th_m = g("mpich", "am", "thread", 2, "dedicated", "rate")
    rows = [
        ("8 B one-way latency (AM), Weft / best MPI", ratio(lat_w, lat_m), "<= 1", "%s us vs %s us" % (fmt(lat_w), fmt(lat_m))),
        ("8 B latency, Weft / machine limit", ratio(lat_w, lim), "aim 1.5", "%s us vs %s us" % (fmt(lat_w), fmt(lim))),
        ("8 B message rate (AM, buffers from malloc), Weft / best MPI", ratio(rate_w, rate_m), ">= 1.5", "%s vs %s M/s" % (fmt(rate_w), fmt(rate_m))),
        ("8 B message rate (AM, packet delivery), Weft / best MPI", ratio(rate_wp, rate_m), ">= 1.5", "%s vs %s M/s" % (fmt(rate_wp), fmt(rate_m))),
        ("bandwidth 64 KiB, Weft / best MPI", ratio(bw("weft", 65536), bw64_m), ">= 1.5", "%s vs %s GB/s" % (fmt(bw("weft", 65536)), fmt(bw64_m))),
        ("bandwidth 4 MiB (4 in flight), Weft / best MPI", ratio(bw("weft", 4194304), bw4_m), ">= 2", "%s vs %s GB/s" % (fmt(bw("weft", 4194304)), fmt(bw4_m))),
        ("bandwidth 4 MiB (1 in flight), Weft / best MPI", ratio(bw1("weft"), bw1_m), ">= 2", "%s vs %s GB/s" % (fmt(bw1("weft")), fmt(bw1_m))),
        ("bandwidth 4 MiB (1 in flight), Weft / pipeline probe at 4 MiB (same 8 MiB working set)", ratio(bw1("weft"), pipe(4194304)), ">= 0.6", "%s vs %s GB/s" % (fmt(bw1("weft")), fmt(pipe(4194304)))),
        ("bandwidth 4 MiB (4 in flight), Weft / pipeline probe at 4 MiB (32 vs 8 MiB working set)", ratio(bw("weft", 4194304), pipe(4194304)), "report", "%s vs %s GB/s" % (fmt(bw("weft", 4194304)), fmt(pipe(4194304)))),
        ("bandwidth 4 MiB (4 in flight), Weft / pipeline probe at 16 MiB (same 32 MiB working set)", ratio(bw("weft", 4194304), pipe(16777216)), "report", "%s vs %s GB/s" % (fmt(bw("weft", 4194304)), fmt(pipe(16777216)))),
        ("loopback 2 threads / 1 thread (dedicated)", ratio(lb2, lb1), ">= 1.8", "%s vs %s M/s" % (fmt(lb2), fmt(lb1))),
        ("loopback 2 threads shared device / 1 thread", ratio(lb2s, lb1), ">= 1.5", "%s vs %s M/s" % (fmt(lb2s), fmt(lb1))),
        ("loopback 2 threads, Weft / MPICH", ratio(lb2, mlb2), ">= 2", "%s vs %s M/s" % (fmt(lb2), fmt(mlb2))),
        ("thread mode 2x2, Weft / MPICH", ratio(th_w, th_m), ">= 2", "%s vs %s M/s" % (fmt(th_w), fmt(th_m))),
        ("thread mode 2x2, Weft / Weft one thread", ratio(th_w, rate_w), "report", "%s vs %s M/s" % (fmt(th_w), fmt(rate_w))),
        ("instructions per 8 B AM, Weft / MPICH (callgrind)", ratio(g("weft", "am", "loopback", 1, "dedicated", "instructions"), g("mpich", "am", "loopback", 1, "dedicated", "instructions")), "< 1",
         "%s vs %s" % (fmt(g("weft", "am", "loopback", 1, "dedicated", "instructions"), 4), fmt(g("mpich", "am", "loopback", 1, "dedicated", "instructions"), 4))),
        ("machine: 2 threads / 1 thread of pure arithmetic", ratio(g("weft", "resource", "threads", 2, "cpu_only", "resource", 0), g("weft", "resource", "threads", 1, "cpu_only", "resource", 0)), "ceiling", "bounds every thread-scaling figure above"),
    ]
    now = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# Benchmarks: Weft against MPI", "",
             "Generated by `bench/run.py%s` on %s: %s, %d cores (`%s`), %d interleaved round%s; medians. "
             "The machine's speed drifts by 2-5x over an hour, so only ratios within this run mean anything." % (
                 (" --quick" if quick else "") + ("" if list(threads) == [1, 2] else " --threads " + ",".join(map(str, threads))), now, platform.node() or "host", os.cpu_count(), platform.processor() or platform.machine(), rounds, "s" if rounds > 1 else ""),
             "", "## Ratios against the targets", "", "| figure | ratio | target | values |", "| --- | --- | --- | --- |"]
    for name, r, target, vals in rows:
        lines.append("| %s | %s | %s | %s |" % (name, fmt(r), target, vals))
    counts = sorted(set(threads) | {1})
    lines += ["", "## 8-byte message rate against threads (M/s)", "",
              "Loopback: one process, each thread exchanging with itself. Thread mode: 2 processes, each thread paired with a thread of the peer; "
              "at 1 thread it is process mode.", "",
              "| system | mode | resources | " + " | ".join("%d" % t for t in counts) + " |", "| --- | --- | --- | " + " | ".join("---" for _ in counts) + " |"]
    for system, mode, res in (("weft", "loopback", "dedicated"), ("weft", "loopback", "shared"), ("mpich", "loopback", "dedicated"),
                              ("weft", "thread", "dedicated"), ("weft", "thread", "shared"), ("weft", "thread", "shared_cq"),
                              ("mpich", "thread", "dedicated"), ("openmpi", "thread", "dedicated")):
        cells = []
        for t in counts:
            m = mode if t > 1 or mode == "loopback" else "process"
            cells.append(fmt(g(system, "am", m, t, res if t > 1 else "dedicated", "rate")))
        lines.append("| %s | %s | %s | %s |" % (system, mode, res, " | ".join(cells)))
    lines += ["", "## All medians", "", "| system | api | mode | threads | resources | workload | size | median | samples |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for k in sorted(med):
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %d |" % (k + (fmt(med[k], 4), len(groups[k]))))
    lines += ["", "## Plots", ""]
    docdir = os.path.dirname(path)
    for p in plots:
        dst = os.path.join(docdir, "img", os.path.basename(p))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(p, dst)
        lines.append("![%s](img/%s)" % (os.path.basename(p)[:-4], os.path.basename(p)))
        lines.append("")
    lines += ["## Commands", "", "Each round ran these once, in this order (`limit` is `../shared/tools/shmlimit.c lat` and `pipe`):", "", "```"] + commands + ["```", "",
              "Workloads (bench/bench_main.cpp, identical for every library): latency is an 8-byte ping-pong (one-way = round trip / 2); "
              "rate is windows of 64 eight-byte messages closed by an acknowledgment, timed after an untimed warm-up of a tenth as many (loopback: a thread sends its window to itself and consumes it); "
              "bandwidth is windowed send/receive with the same buffers every time, at most 16 MiB in flight (window 16 up to 1 MiB), "
              "each transfer in flight with its own source and destination buffer (workload `bandwidth_w1`: one 4 MiB transfer in flight, "
              "the working set of the pipeline probe, which moves one 4 MiB source buffer into one destination buffer; at 4 MiB the default window "
              "moves 32 MiB of source and destination a round, the L3 cache's size here, which the probe matches only at 16 MiB). "
              "Weft active messages go into a completion queue and are freed with `std::free` (api `am`), or arrive in packets of the pool returned with `put_upacket` "
              "(api `am_packet`: `register_rcomp_x(cq).packet_delivery(true)()`, the recycled buffers that are the counterpart of MPI's); "
              "MPI's active-message variant uses a ring of 128 pre-posted receives. "
              "Process mode binds one rank per core for every system; thread and loopback runs are not bound. "
              "Dedicated resources: a Weft device and completion queue per thread, `MPI_Comm_dup` per thread for MPI "
              "(Debian's MPICH has no per-VCI locks, so MPI gets no dedicated resources from it). "
              "Shared: one Weft device, a completion queue per thread; shared_cq: one device and one queue. "
              "When threads outnumber cores, every library's lane yields the processor after 16 fruitless polls in a row (the same code for all).", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
