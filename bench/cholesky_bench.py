#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The tiled Cholesky against tile size (docs/cholesky.md): weft-cholesky over the Weft
engine (with and without its progress and communication threads) and over the MPI engine
(MPICH and Open MPI, with and without its communication thread), and ScaLAPACK's pdpotrf
(MPICH and Open MPI builds), each on every grid of the ranks and every tile / block size
from large to small, interleaved rounds, each run between two flag probes. One BLAS thread
per rank for everyone (OPENBLAS_NUM_THREADS=1, one worker). A run factorizes --reps times
and reports the median; the residual is checked by the test suite (script.cholesky), not
here. The ceiling is the Weft program on one rank (no flows) times the cores the ranks have.
Writes bench/results/cholesky_raw.csv, bench/results/cholesky.md and docs/img/cholesky_*.png
(--quick: under build/cholesky-bench). --bind core has every launcher bind rank i to core i
(weftrun, hydra and mpirun alike) and writes cholesky_bound_* instead: with the engines'
threads and no binding the scheduler sometimes leaves both workers on one core.

  bench/cholesky_bench.py [--build build] [--rounds 3] [--n 4096] [--tiles 512,256,128,64]
                          [--reps 3] [--quick] [--bind none|core]
                          [--hosts A,B,C --enter SCRIPT --iface BRIDGE --subnet CIDR]

With --hosts the ranks run one per host over tcp (bench/cholesky_hosts.sh makes the three
network-namespace hosts and passes these): the Weft engine over libfabric's tcp provider and
MPICH (UCX over tcp) through hydra, Open MPI through mpirun (its rsh agent entering the
hosts). The outputs are named cholesky_hosts*.
"""
import argparse
import csv
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import flag_probe  # noqa: E402
from kmer_bench import TCP_ENV, RunFailed, timed  # noqa: E402  (tcp settings; a run killed when hung)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NO_THREADS = {"WEFT_ENGINE_PROGRESS_THREAD": "0", "WEFT_ENGINE_COMM_THREAD": "0"}
THREADS = {"WEFT_ENGINE_PROGRESS_THREAD": "1", "WEFT_ENGINE_COMM_THREAD": "1"}  # explicit
# system -> (program, engine argument, environment, more arguments). Without the engine's
# threads the executor's workers drive the engine between their tasks (--drive auto, where
# the machine is not oversubscribed); the "driver" systems have the program's main thread
# drive it instead, as every run did before 2026-12-07.
SYSTEMS = {
    "weft-engine threads": ("weft-cholesky", "weft", THREADS, []),
    "weft-engine no threads": ("weft-cholesky", "weft", NO_THREADS, []),
    "weft-engine driver": ("weft-cholesky", "weft", NO_THREADS, ["--drive", "driver"]),
    "mpi-engine mpich thread": ("weft-cholesky-mpich", "mpi", THREADS, []),
    "mpi-engine mpich no thread": ("weft-cholesky-mpich", "mpi", NO_THREADS, []),
    "mpi-engine mpich driver": ("weft-cholesky-mpich", "mpi", NO_THREADS, ["--drive", "driver"]),
    "mpi-engine openmpi thread": ("weft-cholesky-openmpi", "mpi", THREADS, []),
    "mpi-engine openmpi no thread": ("weft-cholesky-openmpi", "mpi", NO_THREADS, []),
    "scalapack mpich": ("scalapack-cholesky-mpich", None, {}, []),
    "scalapack openmpi": ("scalapack-cholesky-openmpi", None, {}, []),
}
FAMILY = {"weft": "Weft engine", "mpi-engine": "MPI engine", "scalapack": "ScaLAPACK"}


def family(system):
    return FAMILY[system.split()[0].split("-")[0] if system.startswith("weft") else system.split()[0]]


def launch(system, ranks, a):
    program, engine, _, more = SYSTEMS[system]
    exe = os.path.join(a.build, "apps", "cholesky", program)
    hydra = ["mpiexec.hydra", "-launcher", "ssh", "-launcher-exec", a.enter or "", "-iface",
             a.iface or "", "-hosts", a.hosts or "", "-n", str(ranks)]
    if "openmpi" in system:
        cmd = ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--bind-to", a.bind]
        if a.hosts:
            # The namespace hosts share one hostname and /dev/shm: without ob1 over the tcp
            # BTL, Open MPI takes them for one node and moves the data by shared memory.
            cmd += ["--mca", "plm_rsh_agent", a.enter, "--host", a.hosts, "--mca",
                    "oob_tcp_if_include", a.subnet, "--mca", "btl_tcp_if_include", a.subnet,
                    "--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]
            cmd += [w for k in sorted(TCP_ENV) + ["OPENBLAS_NUM_THREADS", "WEFT_ENGINE_COMM_THREAD",
                                                  "WEFT_ENGINE_PROGRESS_THREAD"]
                    for w in ("-x", k)]
        cmd += ["-n", str(ranks)]
    elif a.hosts:
        cmd = hydra
    elif engine == "weft":
        cmd = [os.path.join(a.build, "weftrun"), "--bind-to", a.bind, "-n", str(ranks)]
    else:
        cmd = ["mpiexec.mpich", "-bind-to", a.bind, "-n", str(ranks)]
    return cmd + [exe] + (["--engine", engine] if engine else []) + more


def grids(ranks):
    return ["%dx%d" % (p, ranks // p) for p in range(1, ranks + 1) if ranks % p == 0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--tiles", default="512,256,128,64")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one round, N = 2048, two tile sizes")
    ap.add_argument("--run-timeout", type=float, default=300)
    ap.add_argument("--bind", default="none", choices=["none", "core"],
                    help="every launcher binds rank i to core i (core) or nothing (none)")
    ap.add_argument("--hosts", help="three host addresses A,B,C: one rank on each, over tcp")
    ap.add_argument("--enter", help="--hosts: the command that runs a command on a host (as ssh)")
    ap.add_argument("--iface", help="--hosts: hydra's interface towards the hosts")
    ap.add_argument("--subnet", help="--hosts: the hosts' subnet")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the summary and plots from the recorded raw CSV, running nothing")
    ap.add_argument("--ranks", type=int, help="ranks on this machine (default 2; 3 with --hosts; "
                    "--report-only reads them from the grids)")
    ap.add_argument("--grids", help="only these grids, comma-separated (default every grid)")
    ap.add_argument("--systems", help="only these, comma-separated (names as in the table)")
    ap.add_argument("--name", help="the outputs' name (default cholesky, cholesky_bound, ...)")
    ap.add_argument("--results", help="where the table, raw CSV and plots go (default "
                    "bench/results and docs/img)")
    a = ap.parse_args()
    name = a.name or ("cholesky_hosts" if a.hosts else "cholesky") + ("_bound" if a.bind == "core" else "")
    out_dir = a.results or os.path.join(a.build, "cholesky-bench")
    os.makedirs(out_dir, exist_ok=True)
    local = a.quick or a.results  # both from the option as given: the first line sets it
    a.results = out_dir if local else os.path.join(ROOT, "bench", "results")
    a.img = out_dir if local else os.path.join(ROOT, "docs", "img")
    if a.quick:
        a.rounds, a.n, a.tiles = 1, 2048, "256,128"
    ranks = 3 if a.hosts else a.ranks or 2
    tiles = [int(t) for t in a.tiles.split(",")]
    if a.report_only:
        return report_from_csv(a, name)
    wanted = a.systems.split(",") if a.systems else list(SYSTEMS)
    unknown = [s for s in wanted if s not in SYSTEMS]
    if unknown:
        ap.error("--systems: unknown %s (known: %s)" % (", ".join(unknown), ", ".join(SYSTEMS)))
    systems = [s for s in SYSTEMS if s in wanted and
               os.path.exists(os.path.join(a.build, "apps", "cholesky", SYSTEMS[s][0]))]
    a.grid_list = a.grids.split(",") if a.grids else grids(ranks)
    # "one rank": the Weft engine's program on a single rank (no flows), whose GFLOP/s times
    # the cores the ranks have is the ceiling a perfect engine would reach.
    plan = [(r, s, g, b) for r in range(1, a.rounds + 1) for b in tiles
            for s, g in [(s, g) for g in a.grid_list for s in systems] +
            ([] if a.hosts else [("one rank", "1x1")])]
    raw, start = [], time.time()
    for i, (r, system, grid, b) in enumerate(plan):
        flag = float(flag_probe(a.build))
        print("[%d/%d] round %d %-28s grid %s b %4d (flag probe %.3f us, %.1f min)" %
              (i + 1, len(plan), r, system, grid, b, flag, (time.time() - start) / 60), flush=True)
        if system == "one rank":
            env = dict(OPENBLAS_NUM_THREADS="1")
            cmd = [os.path.join(a.build, "weftrun"), "-n", "1",
                   os.path.join(a.build, "apps", "cholesky", "weft-cholesky")]
        else:
            env = dict(SYSTEMS[system][2], OPENBLAS_NUM_THREADS="1", **(TCP_ENV if a.hosts else {}))
            cmd = launch(system, ranks, a)
        cmd += ["-n", str(a.n), "-b", str(b), "--grid", grid, "--reps", str(a.reps), "--no-check"]
        row = {"round": r, "system": system, "grid": grid, "n": a.n, "b": b, "seconds": "",
               "gflops": "", "latency_p50_us": "", "latency_p99_us": "", "flag_us": flag,
               "flag_after_us": "", "hung": 0, "failed": 0, "cores": os.cpu_count()}
        try:
            secs, stdout = timed(cmd, env, a.run_timeout)
        except RunFailed as e:
            # One launch that fails (Open MPI once could not make its session directory on
            # the namespace hosts, which share /tmp) is recorded and left out, not the end
            # of the sweep.
            row["failed"] = 1
            print("  failed with exit status %d; its last output:\n%s" %
                  (e.code, "\n".join(e.output.splitlines()[-5:])), flush=True)
            secs, stdout = 0.0, ""
        row["flag_after_us"] = float(flag_probe(a.build))
        res = [dict(f.split("=", 1) for f in line.split()[1:]) for line in stdout.splitlines()
               if line.startswith("RESULT")]
        if secs is None:
            # A job can finish the factorization, print its figures, then hang on its way out
            # (MPICH over UCX's tcp in MPI_Finalize across the namespace hosts): its figures
            # count, and the hang is reported beside them.
            row["hung"] = 1
            print("  hung: killed after %.0f s (%s); its last output:\n%s" %
                  (a.run_timeout, "after its figures" if res else "no figures",
                   "\n".join(stdout.splitlines()[-5:])), flush=True)
        elif len(res) != 1 and not row["failed"]:
            raise RuntimeError("%s printed no RESULT line:\n%s" % (" ".join(cmd), stdout))
        if len(res) == 1:
            for k in ("seconds", "gflops", "latency_p50_us", "latency_p99_us"):
                row[k] = float(res[0].get(k, "nan"))
        raw.append(row)
        # Rewritten after every run: a run cut short by its time limit keeps its rows.
        with open(os.path.join(a.results, name + "_raw.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(raw[0].keys()))
            w.writeheader()
            w.writerows(raw)
    report(raw, a, time.time() - start, name, systems, tiles, ranks)


def report_from_csv(a, name):
    """The summary and plots again from <name>_raw.csv; the flags in the first line are the
    recorded run's only where given again here."""
    with open(os.path.join(a.results, name + "_raw.csv")) as f:
        raw = list(csv.DictReader(f))
    for x in raw:
        x.setdefault("cores", 2)  # rows from before the column: this 2-core machine
        x.setdefault("failed", 0)  # ... and before this one: no run failed
        for k in ("round", "n", "b", "hung", "failed", "cores"):
            x[k] = int(x[k])
        x.setdefault("flag_after_us", x["flag_us"])  # rows from before the probe after each run
        for k in ("seconds", "gflops", "latency_p50_us", "latency_p99_us", "flag_us", "flag_after_us"):
            x[k] = float(x[k]) if x[k] != "" else ""
    tiles = sorted({x["b"] for x in raw}, reverse=True)
    a.tiles = ",".join(str(t) for t in tiles)
    a.rounds, a.n = max(x["round"] for x in raw), raw[0]["n"]
    p, q = next(x["grid"] for x in raw if x["system"] != "one rank").split("x")
    ranks = int(p) * int(q)  # every grid of a run covers its ranks
    systems = [s for s in SYSTEMS if any(x["system"] == s for x in raw)]
    a.when = os.path.getmtime(os.path.join(a.results, name + "_raw.csv"))
    report(raw, a, 0, name, systems, tiles, ranks)


def med(raw, key="gflops", **kw):
    v = [x[key] for x in raw if all(x[k] == want for k, want in kw.items()) and x[key] != ""]
    return statistics.median(v) if v else float("nan")


def best_config(raw, systems, b):
    """For tile size b: {system: (GFLOP/s, grid)} at the system's best grid (median over rounds)."""
    out = {}
    for s in systems:
        got = [(med(raw, system=s, grid=g, b=b), g) for g in sorted({x["grid"] for x in raw})]
        got = [x for x in got if x[0] == x[0]]
        if got:
            out[s] = max(got)
    return out


def report(raw, a, seconds, name, systems, tiles, ranks):
    flags = [x[k] for x in raw for k in ("flag_us", "flag_after_us") if x.get(k) != ""]
    a.cores = int(raw[0]["cores"])
    used = sorted({x["grid"] for x in raw if x["system"] != "one rank"})
    hung = sum(1 for x in raw if x["gflops"] == "" and not x["failed"])
    failed = [x["system"] for x in raw if x["failed"]]
    hung_after = sum(1 for x in raw if x["hung"] and x["gflops"] != "")
    took = "in %.1f min" % (seconds / 60) if seconds else "(this summary rewritten by --report-only)"
    lines = ["Generated by `bench/cholesky_bench.py --rounds %d --n %d --tiles %s --reps %d%s%s%s` on %s "
             "%s; flag probe median %.3f us (range %.3f .. %.3f). GFLOP/s of the median of "
             "%d factorizations per run, medians over rounds, each system at its best grid for the "
             "tile size (grids %s). %d ranks, one worker / one BLAS thread per rank%s.%s" %
             (a.rounds, a.n, a.tiles, a.reps, " --hosts (3 namespace hosts over tcp)" if a.hosts else "",
              " --ranks %d --grids %s" % (ranks, ",".join(used)) if ranks != (3 if a.hosts else 2) else "",
              " --bind core" if getattr(a, "bind", "none") == "core" else "",
              time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(getattr(a, "when", None))), took,
              statistics.median(flags), min(flags), max(flags), a.reps, ", ".join(used), ranks,
              " (the hosts share this machine's 2 cores)" if a.hosts else " on %d cores" % a.cores,
              (" %d runs hung before their figures (killed, left out)." % hung if hung else "") +
              (" %d runs printed their figures, then hung on the way out (killed; figures kept): %s." %
               (hung_after, ", ".join(sorted({x["system"] for x in raw if x["hung"] and x["gflops"] != ""})))
               if hung_after else "") +
              (" %d runs failed (a non-zero exit, left out): %s." %
               (len(failed), ", ".join(sorted(set(failed)))) if failed else "")), "",
             "| tile / block size | " + " | ".join(systems) + " |", "| --- " * (len(systems) + 1) + "|"]
    per_b = {b: best_config(raw, systems, b) for b in tiles}
    cores = min(ranks, a.cores)
    ceiling = {b: cores * med(raw, system="one rank", b=b) for b in tiles}
    if not a.hosts:
        lines[-2] += " ceiling (%d x one rank) |" % cores
        lines[-1] += " --- |"
    for b in tiles:
        lines.append("| %d | " % b + " | ".join(
            "%.1f (%s)" % per_b[b][s] if s in per_b[b] else "hung" for s in systems) + " |" +
            ("" if a.hosts else " %.1f |" % ceiling[b]))
    best = {}  # family -> (GFLOP/s, system, tile, grid)
    for b in tiles:
        for s, (gf, g) in per_b[b].items():
            f = family(s)
            if f not in best or gf > best[f][0]:
                best[f] = (gf, s, b, g)
    lines += ["", "Best of each (its best tile size, grid and thread setting):", "",
              "| | GFLOP/s | time (s) | system | tile | grid |", "| --- | --- | --- | --- | --- | --- |"]
    if not a.hosts:
        lines[-2] = "| | GFLOP/s | time (s) | system | tile | grid | of the highest ceiling |"
        lines[-1] += " --- |"
    for f, (gf, s, b, g) in sorted(best.items(), key=lambda x: -x[1][0]):
        lines.append("| %s | %.1f | %.3f | %s | %d | %s |" %
                     (f, gf, med(raw, "seconds", system=s, grid=g, b=b), s, b, g) +
                     ("" if a.hosts else " %.0f%% |" % (100 * gf / max(ceiling.values()))))
    w = best.get("Weft engine")
    for other in ("MPI engine", "ScaLAPACK"):
        if w and other in best:
            lines.append("")
            lines.append("Weft engine / %s at the best tile size of each: **%.2f** (target > 1)." %
                         (other, w[0] / best[other][0]))
    lat = [s for s in systems if not s.startswith("scalapack")]
    lines += ["", "Tile flow latency (ACTIVATE sent -> data arrived), p50 / p99 in us, at each "
              "system's best grid:", "", "| tile | " + " | ".join(lat) + " |", "| --- " * (len(lat) + 1) + "|"]
    for b in tiles:
        cells = []
        for s in lat:
            g = per_b[b].get(s, (0, used[0]))[1]
            cells.append("%.0f / %.0f" % (med(raw, "latency_p50_us", system=s, grid=g, b=b),
                                          med(raw, "latency_p99_us", system=s, grid=g, b=b)))
        lines.append("| %d | " % b + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.results, name + ".md"), "w") as f:
        f.write(text)
    print(text)
    plot(raw, a, name, systems, tiles, per_b, lat, None if a.hosts else ceiling, ranks, used)


def plot(raw, a, name, systems, tiles, per_b, lat, ceiling, ranks, used):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    where = ", 3 hosts over tcp" if a.hosts else ", %d ranks on %d cores" % (ranks, a.cores)

    def figure(curves, extra, ylabel, title, log_y, out):
        """One plot against tile size, large to small as the seed's Figure 4: `curves` maps a
        system to its values per tile; `extra` draws on the axes first."""
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        for s, ys in curves.items():
            ax.plot(tiles, ys, marker="o", label=s, linestyle="--" if "no thread" in s else "-")
        extra(ax)
        ax.set_xscale("log", base=2)
        if log_y:
            ax.set_yscale("log")
        ax.invert_xaxis()
        ax.set_xlabel("tile / block size (large to small)")
        ax.set_ylabel(ylabel)
        ax.set_title(title + where)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(a.img, name + out), dpi=110)

    def draw_ceiling(ax):
        if ceiling:
            ax.plot(tiles, [ceiling[b] for b in tiles], color="black", linestyle=":",
                    label="ceiling: %d x one rank" % min(ranks, a.cores))

    figure({s: [per_b[b].get(s, (float("nan"),))[0] for b in tiles] for s in systems},
           draw_ceiling, "GFLOP/s (best grid)", "Cholesky, N = %d" % a.n, False, "_gflops.png")
    figure({s: [med(raw, "latency_p50_us", system=s, b=b,
                    grid=per_b[b].get(s, (0, used[0]))[1]) for b in tiles]
            for s in lat}, lambda ax: None, "tile flow latency p50 (us)",
           "ACTIVATE sent -> tile arrived, N = %d" % a.n, True, "_latency.png")

if __name__ == "__main__":
    main()
