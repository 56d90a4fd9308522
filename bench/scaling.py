#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Message rate against threads, 1..N, on a machine with many cores: Weft beside the MPIs
that are installed there, in interleaved rounds, each measurement between two flag probes.

    bench/scaling.py [--threads 1,2,4,8,16] [--rounds 3] [--build build-bench]
                     [--out bench/results] [--doc docs/scaling.md] [--no-doc] [--from-raw]

Runs, per round: the machine probe; loopback (one process, each thread exchanging with
itself) at every thread count, for Weft with dedicated and shared resources and for each MPI;
thread mode (2 processes x t threads, each thread paired with one of the peer) at every t
with 2t <= cores, for Weft with dedicated, shared and shared_cq resources, Weft's
send/receive, and each MPI; the resource throughputs at the largest count. Writes
OUT/scaling_raw.csv, then (unless --no-doc) docs/scaling.md and its plots from it. An MPI
whose launcher or benchmark is missing is reported as not measured, never as a figure.
"""
import argparse
import os
import platform
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402
import run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHERS = {"mpich": "mpiexec.mpich", "openmpi": "mpirun.openmpi"}


def systems(build):
    """The MPIs that can run here, and a line for each one left out."""
    have, missing = [], []
    for s, launcher in LAUNCHERS.items():
        exe = os.path.join(build, "bench", "bench_" + s)
        if shutil.which(launcher) and os.path.exists(exe):
            have.append(s)
        else:
            missing.append("%s: not measured (%s or %s missing on this machine)" % (s, launcher, exe))
    return have, missing


def configurations(threads, mpis, cores, iters):
    bench = lambda s, n, args: dict(kind="bench", system=s, n=n, bind=False, bin="bench_" + s, args=args)
    rate = lambda t, res, mode="am": ["rate", "--mode", mode, "--threads", str(t), "--resources", res,
                                      "--iters", str(iters)]
    cfgs = [dict(kind="probe", system="probe", args=["all", "--trials", "1"])]
    for t in threads:
        cfgs.append(bench("weft", 1, rate(t, "dedicated")))
        if t > 1:
            cfgs.append(bench("weft", 1, rate(t, "shared")))
        cfgs += [bench(s, 1, rate(t, "dedicated")) for s in mpis]
    for t in (t for t in threads if 2 * t <= cores):
        for res in ("dedicated", "shared", "shared_cq") if t > 1 else ("dedicated",):
            cfgs.append(bench("weft", 2, rate(t, res)))
        cfgs.append(bench("weft", 2, rate(t, "dedicated", "sr")))
        cfgs += [bench(s, 2, rate(t, "dedicated")) for s in mpis]
    cfgs.append(dict(kind="resources", system="weft", args=[str(max(threads)), "2000000"]))
    return cfgs


def save_raw(path, raw):
    classes = report.classify(raw)
    for row in raw:
        row["class"] = classes.get(row["round"], "")
    report.write_raw(path, raw)


def run_rounds(cfgs, rounds, build, raw_path):
    """Every configuration once per round; the raw file is rewritten after each round, so a
    run cut short keeps its finished rounds."""
    raw, failed = [], []
    for r in range(rounds):
        for i, c in enumerate(cfgs):
            label = " ".join(c["args"][:8])
            print("[round %d/%d] %3d/%d  %-8s n=%s %s" % (r + 1, rounds, i + 1, len(cfgs), c["system"],
                                                        c.get("n", 1), label), flush=True)
            flag = run.flag_probe(build) if c["kind"] != "probe" else None
            rows = run.run_one(c, build)
            after = run.flag_probe(build) if c["kind"] != "probe" else None
            if rows is None:
                failed.append("round %d: %s n=%s %s" % (r + 1, c["system"], c.get("n", 1), label))
            for row in rows or []:
                row["flag"] = flag if flag is not None else run.row_flag(rows)
                row["flag_after"] = after if after is not None else row["flag"]
                row["round"] = str(r)
                raw.append(row)
        save_raw(raw_path, raw)
    return raw, failed


def machine():
    """The processor's model name and the core count, for the document."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return "%s, %d cores" % (model, os.cpu_count())


def ratio_lines(raw, threads, mpis):
    """Weft's rate over the best MPI's, taken within each round, per mode and thread count."""
    idx = report.by_round(raw)
    lines = ["| mode | threads | Weft / best MPI: median | rounds | range | Weft (M/s) | best MPI (M/s) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for mode in ("loopback", "thread"):
        for t in threads:
            m = mode if t > 1 or mode == "loopback" else "process"
            ratios, ws, ps = [], [], []
            for rd in idx.values():
                r = report.Round(rd)
                w = r.get("weft", "am", m, t, "dedicated", "rate")
                p = r.best([(s, "am", m, t, "dedicated", "rate") for s in mpis])
                if w and p:
                    ratios.append(w / p)
                    ws.append(w)
                    ps.append(p)
            if ratios:
                lines.append("| %s | %d | %s | %d | %s .. %s | %s | %s |" % (
                    mode, t, report.fmt(statistics.median(ratios)), len(ratios), report.fmt(min(ratios)),
                    report.fmt(max(ratios)), report.fmt(statistics.median(ws)), report.fmt(statistics.median(ps))))
    return lines


def speedup_lines(med, cls, threads):
    """Each Weft row's rate at t threads over its rate at 1 thread, beside the machine's own."""
    g = lambda *k: med.get(tuple(str(x) for x in k), {}).get(cls, (None,))[0]
    lines = ["| row | " + " | ".join(str(t) for t in threads) + " |", "| --- " * (len(threads) + 1) + "|"]
    rows = [("weft loopback dedicated", lambda t: g("weft", "am", "loopback", t, "dedicated", "rate", 8)),
            ("weft thread dedicated", lambda t: g("weft", "am", "thread" if t > 1 else "process", t, "dedicated", "rate", 8)),
            ("machine: pure arithmetic (cpu_only)", lambda t: g("weft", "resource", "threads", t, "cpu_only", "resource", 0))]
    for name, fn in rows:
        base = fn(1)
        lines.append("| %s | %s |" % (name, " | ".join(
            report.fmt(fn(t) / base) if base and fn(t) else "–" for t in threads)))
    return lines


def probe_lines(raw):
    """The machine probe of each round: the flag, ring, copy and fetch-and-add figures."""
    idx = report.by_round(raw)
    lines = ["| round | flag (us) | ring (M/s) | pipe / cma 64 KiB (GB/s) | pipe / cma 4 MiB (GB/s) | fetch-and-add (M/s) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for rd in sorted(idx, key=int):
        r = report.Round(idx[rd])
        cp = lambda s: "%s / %s" % (report.fmt(r.probe("pipe", "bandwidth", s)), report.fmt(r.probe("cma", "bandwidth", s)))
        lines.append("| %s | %s | %s | %s | %s | %s |" % (rd, report.fmt(r.probe("flag", "latency")), report.fmt(
            r.probe("ring", "rate")), cp(65536), cp(4194304), report.fmt(r.probe("fadd", "rate"))))
    return lines


def write_doc(path, raw, threads, mpis, missing, where, commands, out):
    # One class for all: on a many-core machine the flag probe's reading depends on which two
    # cores it lands on, not on a phase of the machine; the ratios are still taken per round.
    med = report.medians([dict(r, flag="") for r in raw], {r["round"]: "all" for r in raw})
    lines = ["# Message rate against threads, 1 to %d" % max(threads), "",
             "Generated by `bench/scaling.py` (`--from-raw` of `%s`) on %s: %d interleaved rounds. Every "
             "system ran the same messages per thread. Systems: Weft and %s.%s Medians are over all rounds; "
             "ratios are taken within each round, then summarised." % (
                 os.path.relpath(os.path.join(out, "scaling_raw.csv"), ROOT), where, len({r["round"] for r in raw}),
                 ", ".join(mpis) or "no MPI", "".join(" " + m.split(" (")[0] + "." for m in missing)),
             "", "Loopback: one process, each thread exchanging 8-byte active messages with itself. Thread "
             "mode: 2 processes, each thread paired with a thread of the peer (at 1 thread it is process "
             "mode). `dedicated`: a device per thread; `shared`: one device for all threads of a process; "
             "`shared_cq`: dedicated devices, one completion queue. Threads are not bound.", "",
             "## The machine probe, round by round", ""] + probe_lines(raw) + [
             "", "## Weft against the best MPI, within each round", ""] + ratio_lines(raw, threads, mpis)
    lines += ["", "## Median rate (M/s)", ""] + report.thread_table(med, "all", threads)
    lines += ["", "## Speed-up over one thread", ""] + speedup_lines(med, "all", threads)
    lines += [""] + report.publish_plots(
        report.make_plots(med, "all", out, threads, ("rate_threads", "resources"), "scaling_"), path)
    notes = os.path.join(out, "scaling_notes.md")  # written by hand after a run: its findings
    if os.path.exists(notes):
        lines += ["", open(notes).read().rstrip()]
    lines += ["", "## Commands", "", "Each round ran these once, in this order (on a machine without "
              "Weft's build or an MPI: `bench/device_pack.sh` here, then `bench/device_run.sh` there):",
              "", "```"] + commands + ["```", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=1000000, help="messages per thread (default 1000000)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build-bench"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "scaling.md"))
    ap.add_argument("--where", default="", help="the machine, for the document (default: this one)")
    ap.add_argument("--no-doc", action="store_true")
    ap.add_argument("--from-raw", action="store_true", help="run nothing: write the document from OUT/scaling_raw.csv")
    a = ap.parse_args()
    threads = sorted({int(t) for t in a.threads.split(",")} | {1})
    mpis, missing = systems(a.build)
    raw_path = os.path.join(a.out, "scaling_raw.csv")
    if a.from_raw:
        raw = report.read_raw(raw_path)
        mpis = sorted({r["system"] for r in raw} & set(LAUNCHERS))
        missing = ["%s: not measured" % s for s in sorted(set(LAUNCHERS) - set(mpis))]
    cfgs = configurations(threads, mpis, os.cpu_count(), a.iters)
    commands = [run.show(run.command(c, a.build)[0]) for c in cfgs]
    failed = []
    if not a.from_raw:
        print("\n".join(missing), flush=True)
        start = time.time()
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "scaling_machine.txt"), "w") as f:
            f.write(machine() + "\n")
        raw, failed = run_rounds(cfgs, a.rounds, a.build, raw_path)
        print("wrote %s (%.1f minutes)" % (raw_path, (time.time() - start) / 60), flush=True)
    if not a.no_doc:
        where = a.where
        if not where and os.path.exists(os.path.join(a.out, "scaling_machine.txt")):
            where = open(os.path.join(a.out, "scaling_machine.txt")).read().strip()
        write_doc(a.doc, raw, threads, mpis, missing, where or machine(), commands, a.out)
        print("wrote " + a.doc, flush=True)
    if failed:
        print("%d runs failed:\n  %s" % (len(failed), "\n  ".join(failed)), flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
