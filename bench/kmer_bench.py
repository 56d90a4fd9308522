#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""k-mer counting throughput (docs/kmer.md): weft-kmer against mpi-kmer (MPICH and Open MPI,
each with MPI_THREAD_MULTIPLE and MPI_THREAD_FUNNELED) and jellyfish (count -C, the same
total thread count), on 1 and 2 ranks x 1 and 2 threads, exact mode, interleaved rounds each
after the flag probe; then the aggregation buffer swept 1-64 KiB on 2 ranks x 1 thread. Every
run's histogram is compared with jellyfish's (a mismatch stops the script). Throughput is the
input's k-mers over the whole command's wall time (launch, mapping, both passes, gathering),
so that jellyfish, which is timed the same way, compares fairly. The input is generated once
by kmer-gen-reads (its arguments are in the summary). Writes bench/results/kmer_raw.csv,
bench/results/kmer.md and docs/img/kmer_*.png (--quick: under build/kmer-bench).

  bench/kmer_bench.py [--build build] [--rounds 3] [--bytes 256e6] [--k 21] [--quick]
                      [--large] [--yield-when-idle]
                      [--hosts A,B,C --enter SCRIPT --iface BRIDGE --subnet CIDR]
                      [--configs 1x16,2x8,4x4,16x1 [--sweep-at 2x8] --name kmer_16 --results DIR]
                      [--from-raw CSV]

--configs runs other ranks x threads (on a machine with more cores, without the sweep unless
--sweep-at RxT names where); --name and --results name the outputs and put them all in one
folder (bench/device_run.sh); --from-raw CSV makes the table and plots of a raw CSV (written
after every run, so a run cut short by a time limit keeps what it measured).

--large measures an input of a few GiB (2e9 bytes unless --bytes says otherwise) with the
Bloom filter on (counting exactly, the table of every distinct k-mer would not fit beside
jellyfish's in this machine's memory): 2 ranks x 1 thread, jellyfish counting exactly with 2
threads; each histogram must keep the filter's rule against jellyfish's (every bin from 2 up
equal, bin 1 at most jellyfish's). The outputs are named kmer_large*.

With --hosts the ranks run one per host over tcp (bench/kmer_hosts.sh makes the three
network-namespace hosts and passes these): weft-kmer over libfabric's tcp provider through
hydra, mpi-kmer-mpich (UCX over tcp) through hydra, mpi-kmer-openmpi through mpirun; 3 ranks
x 1 and 2 threads, no sweep; the outputs are named kmer_hosts*.
"""
import argparse
import csv
import os
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cont_bench import results  # noqa: E402  (the flag probe's runner)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = ["--genome", "20e6", "--length", "150", "--error", "0.01", "--n-rate", "0.0005", "--seed", "1"]


TCP_ENV = {"FI_TCP_IFACE": "eth0", "UCX_NET_DEVICES": "eth0", "UCX_TLS": "tcp",
           "WEFT_BACKEND": "ofi", "WEFT_OFI_PROVIDER": "tcp;ofi_rxm"}


def launch(system, ranks, build, a):
    """The command that runs `system` on `ranks` ranks, here or one per host (--hosts)."""
    flavour = system.split()[0]
    hydra = ["mpiexec.hydra", "-launcher", "ssh", "-launcher-exec", a.enter or "", "-iface",
             a.iface or "", "-hosts", a.hosts or "", "-n", str(ranks)]
    if system.startswith("weft"):
        exe = os.path.join(build, "apps", "kmer", "weft-kmer")
        return (hydra if a.hosts else [os.path.join(build, "weftrun"), "--bind-to", "none", "-n",
                                       str(ranks)]) + [exe]
    exe = os.path.join(build, "apps", "kmer", "mpi-kmer-" + flavour)
    if flavour == "mpich":
        cmd = hydra if a.hosts else ["mpiexec.mpich", "-bind-to", "none", "-n", str(ranks)]
    else:
        cmd = ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
        if a.hosts:
            cmd += ["--mca", "plm_rsh_agent", a.enter, "--host", a.hosts, "--mca",
                    "oob_tcp_if_include", a.subnet, "--mca", "btl_tcp_if_include", a.subnet,
                    # one hostname and /dev/shm for all the namespace hosts: without ob1 over
                    # tcp Open MPI would take them for one node and use shared memory
                    "--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]
            cmd += [w for k in sorted(TCP_ENV) for w in ("-x", k)]
        if a.yield_when_idle:
            cmd += ["--mca", "mpi_yield_when_idle", "1"]
        cmd += ["-n", str(ranks)]
    return cmd + [exe, "--mpi", system.split()[1]]


def env_of(system, a):
    """The environment of a run: across hosts every system over tcp, "weft ucx" over UCX's;
    --yield-when-idle: Weft's progress yields the core when it finds nothing (WEFT_YIELD=on)."""
    env = dict(TCP_ENV) if a.hosts else {}
    if system == "weft ucx":
        env["WEFT_BACKEND"] = "ucx"
    if a.yield_when_idle and system.startswith("weft"):
        env["WEFT_YIELD"] = "on"
    return env


class RunFailed(RuntimeError):
    """A run that exited with an error: its exit status and the end of its output."""

    def __init__(self, cmd, code, out, err):
        super().__init__("%s failed (%d):\n%s%s" % (" ".join(cmd), code, out[-3000:], err[-3000:]))
        self.code, self.output = code, out + err


def timed(cmd, env=None, limit=1800):
    """(seconds, stdout), or (None, output) when the run outlived `limit` (killed, whole group);
    RunFailed when it exited with an error."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, **(env or {})), start_new_session=True)
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return None, out + err
    secs = time.time() - t0
    if p.returncode != 0:
        raise RunFailed(cmd, p.returncode, out, err)
    return secs, out


def kmers_of(stdout):
    return sum(int(line.split()[5]) for line in stdout.splitlines() if "-kmer: " in line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bytes", default=None, help="input size (256e6; 2e9 with --large)")
    ap.add_argument("--k", type=int, default=21)
    ap.add_argument("--quick", action="store_true", help="one round, 32 MB, no sweep")
    ap.add_argument("--run-timeout", type=float, default=600,
                    help="seconds a run may take; one that outlives it is killed and reported hung")
    ap.add_argument("--large", action="store_true",
                    help="a few GiB (--bytes, default 2e9) with the Bloom filter, 2 ranks x 1 thread")
    ap.add_argument("--yield-when-idle", action="store_true",
                    help="idle polling yields the core: WEFT_YIELD=on, Open MPI's "
                         "mpi_yield_when_idle 1 (MPICH has no such setting); outputs *_yield")
    ap.add_argument("--hosts", help="three host addresses A,B,C: one rank on each, over tcp")
    ap.add_argument("--enter", help="--hosts: the command that runs a command on a host (as ssh)")
    ap.add_argument("--iface", help="--hosts: hydra's interface towards the hosts")
    ap.add_argument("--subnet", help="--hosts: the hosts' subnet (Open MPI's interface choice)")
    ap.add_argument("--configs", help="ranks x threads to run, e.g. 1x16,2x8,4x4,16x1 (a machine "
                    "with more cores; no buffer sweep); default 1x1,1x2,2x1,2x2 and the sweep")
    ap.add_argument("--sweep-at", metavar="RxT",
                    help="sweep the buffer on these ranks x threads (default 2x1; with --configs, "
                         "no sweep unless given)")
    ap.add_argument("--buffers", default="1,2,4,8,16,32,64", help="the sweep's buffers (KiB)")
    ap.add_argument("--systems", help="only these, comma-separated (e.g. 'weft,mpich multiple'; "
                    "jellyfish is one; default all)")
    ap.add_argument("--name", help="the outputs' name (default kmer, kmer_hosts, kmer_large)")
    ap.add_argument("--results", help="where the table and raw CSV go (default bench/results)")
    ap.add_argument("--from-raw", metavar="CSV", help="run nothing: the table and plots from a raw "
                    "CSV this script wrote (a borrowed machine's, or one cut short by its time limit)")
    a = ap.parse_args()
    a.bytes = a.bytes or ("2e9" if a.large else "256e6")
    name = a.name or ("kmer_hosts" if a.hosts else "kmer_large" if a.large else "kmer") + \
        ("_yield" if a.yield_when_idle else "")
    # --quick is a smoke run: its outputs stay in the build tree, never over the recorded ones;
    # --results keeps table, raw CSV and plots together (a borrowed machine's $OUT).
    smoke = os.path.join(a.build, "kmer-bench")
    a.img = a.results or (smoke if a.quick else os.path.join(ROOT, "docs", "img"))
    a.results = a.results or (smoke if a.quick else os.path.join(ROOT, "bench", "results"))
    os.makedirs(a.results, exist_ok=True)
    if a.from_raw:
        raw = read_raw(a.from_raw)
        a.rounds = max(x["round"] for x in raw if x["buffer"] == 8192)  # the recorded run's
        return report(raw, a, None, name)
    if a.quick:
        a.rounds, a.bytes = 1, "32e6"
    work = os.path.join(a.build, "kmer-bench")
    os.makedirs(work, exist_ok=True)
    reads = os.path.join(work, "reads_%s.fq" % a.bytes)
    if not os.path.exists(reads):
        print("generating %s bytes of reads ..." % a.bytes, flush=True)
        with open(reads, "w") as f:
            subprocess.run([os.path.join(a.build, "apps", "kmer", "kmer-gen-reads")] + GEN +
                           ["--bytes", a.bytes], stdout=f, check=True)
    jf, truth = os.path.join(work, "j.jf"), os.path.join(work, "truth.histo")
    subprocess.run(["jellyfish", "count", "-C", "-m", str(a.k), "-s", "100M", "-t",
                    str(max(2, os.cpu_count() or 2)), "-o", jf, reads], check=True)
    with open(truth, "w") as f:
        subprocess.run(["jellyfish", "histo", "-h", "100000000", jf], stdout=f, check=True)
    total = None
    # Across hosts Weft runs over both network backends: libfabric's tcp (the default) and UCX's.
    mpis = ["%s %s" % (fl, m) for fl in ("mpich", "openmpi") for m in ("multiple", "funneled")
            if os.path.exists(os.path.join(a.build, "apps", "kmer", "mpi-kmer-" + fl))]
    systems = ["weft"] + (["weft ucx"] if a.hosts else []) + mpis
    only = set(a.systems.split(",")) if a.systems else None
    if only:
        systems = [s for s in systems if s in only]
    configs = ([tuple(int(x) for x in c.split("x")) for c in a.configs.split(",")] if a.configs
               else [(3, 1), (3, 2)] if a.hosts else [(2, 1)] if a.large
               else [(1, 1), (1, 2), (2, 1), (2, 2)])
    plan = [(r, s, ranks, th, 8192) for r in range(1, a.rounds + 1) for ranks, th in configs
            for s in systems + (["jellyfish"] if not only or "jellyfish" in only else [])]
    if a.sweep_at or not (a.quick or a.hosts or a.large or a.configs):  # the sweep, one round
        sr, st = (int(x) for x in (a.sweep_at or "2x1").split("x"))
        plan += [(1, s, sr, st, int(b) * 1024) for b in a.buffers.split(",") for s in systems]
    raw, start = [], time.time()
    raw_csv = os.path.join(a.results, name + "_raw.csv")

    def record(row):
        """Keeps a row, and rewrites the raw CSV: a run cut short by a time limit keeps its rows
        (--from-raw makes the table of them)."""
        raw.append(dict(row, cores=os.cpu_count(),
                        utc=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                        minutes=round((time.time() - start) / 60, 2)))
        with open(raw_csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(raw[0].keys()))
            w.writeheader()
            w.writerows(raw)

    def app(system, ranks, th, buf, out):
        return (launch(system, ranks, a.build, a) + ["-k", str(a.k)] +
                ([] if a.large else ["--exact"]) +
                ["--threads", str(th), "--buffer", str(buf), "--histo", out, reads])

    for i, (r, system, ranks, th, buf) in enumerate(plan):
        if system != "jellyfish" and (i == 0 or plan[i - 1][1] == "jellyfish" or
                                      plan[i - 1][2:4] != (ranks, th)):
            # Untimed: in this virtual machine the first process after a pause that touches
            # gigabytes of fresh memory pays the host's first touch of those pages (4.4 s of
            # system time instead of 2.5 s on a 500 MB input, whichever system ran first),
            # and that would always be Weft, the first after jellyfish's small table or, with
            # jellyfish left out (--systems), the first of each ranks x threads (2 x 1 after
            # 1 x 2: 24-26 s in 2 rounds of 4 against 16 s, the MPIs after it 16 s).
            print("[round %d] warm-up run, untimed" % r, flush=True)
            timed(app(systems[0], ranks, th, buf, os.path.join(work, "warm.histo")),
                  env_of(systems[0], a), a.run_timeout)
        flag = float(results([os.path.join(a.build, "bench", "weft-probe"), "flag", "--trials",
                              "1"])[0]["value"])
        print("[%d/%d] round %d %-16s %dx%d buffer %5d (flag probe %.3f us, %.1f min)" %
              (i + 1, len(plan), r, system, ranks, th, buf, flag, (time.time() - start) / 60),
              flush=True)
        out = os.path.join(work, "out.histo")
        if system == "jellyfish":
            secs, _ = timed(["jellyfish", "count", "-C", "-m", str(a.k), "-s", "100M", "-t",
                             str(ranks * th), "-o", os.path.join(work, "jx.jf"), reads],
                            limit=a.run_timeout)
            kmers = total
        else:
            try:
                secs, stdout = timed(app(system, ranks, th, buf, out), env_of(system, a),
                                     a.run_timeout)
                status = "ok" if secs is not None else "hung"
            except RunFailed as e:  # a launcher's crash (Open MPI's orted in hwloc, once)
                secs, stdout, status = None, e.output, "exit %d" % e.code
            if secs is None:  # hung or failed: reported as such, the others go on
                print("  %s: %s; its last output:\n%s" %
                      (status, "killed after %.0f s" % a.run_timeout if status == "hung"
                       else "not counted", "\n".join(stdout.splitlines()[-5:])), flush=True)
                record({"round": r, "system": system, "ranks": ranks, "threads": th,
                            "buffer": buf, "seconds": "", "kmers": "", "mkmers_per_s": "",
                            "flag_us": flag, "status": status})
                continue
            kmers = kmers_of(stdout)
            total = total or kmers
            if a.large:
                why = bloom_rule_broken(out, truth)
                if why:
                    raise RuntimeError("%s %dx%d: %s" % (system, ranks, th, why))
            elif open(out).read() != open(truth).read():
                raise RuntimeError("%s %dx%d: the histogram differs from jellyfish's" % (system, ranks, th))
        record({"round": r, "system": system, "ranks": ranks, "threads": th, "buffer": buf,
                    "seconds": round(secs, 3), "kmers": kmers, "mkmers_per_s": round(kmers / secs / 1e6, 3),
                    "flag_us": flag, "status": "ok"})
    report(raw, a, time.time() - start, name)


def read_raw(path):
    """The rows of a raw CSV, typed as main() keeps them ('' for a run that did not finish)."""
    rows = []
    with open(path) as f:
        for x in csv.DictReader(f):
            for k in ("round", "ranks", "threads", "buffer", "kmers", "cores"):
                x[k] = int(x[k]) if x.get(k) else x.get(k, "")
            for k in ("seconds", "mkmers_per_s", "flag_us", "minutes"):
                x[k] = float(x[k]) if x.get(k) else x.get(k, "")
            rows.append(x)
    return rows


def histogram(path):
    with open(path) as f:
        return {int(c): int(n) for c, n in (line.split() for line in f if line.strip())}


def bloom_rule_broken(out, truth):
    """Why a Bloom-filter histogram breaks the rule against the exact one (docs/kmer.md):
    every bin from 2 up equal, bin 1 at most the exact one; None when it keeps it."""
    got, want = histogram(out), histogram(truth)
    for c in sorted(set(got) | set(want)):
        if c >= 2 and got.get(c, 0) != want.get(c, 0):
            return "bin %d holds %d k-mers, jellyfish's %d" % (c, got.get(c, 0), want.get(c, 0))
    if got.get(1, 0) > want.get(1, 0):
        return "bin 1 holds %d k-mers, more than jellyfish's %d" % (got.get(1, 0), want.get(1, 0))
    return None


def med(raw, **kw):
    """The median over the matching runs that finished; nan when none did (all hung)."""
    v = [x["mkmers_per_s"] for x in raw
         if all(x[k] == want for k, want in kw.items()) and x["mkmers_per_s"] != ""]
    return statistics.median(v) if v else float("nan")


def unfinished(raw, **kw):
    """The matching runs that did not finish, as ' (1 hung, 1 failed)'; '' when all did."""
    rows = [x for x in raw if all(x[k] == want for k, want in kw.items()) and x["mkmers_per_s"] == ""]
    hung = sum(1 for x in rows if x.get("status", "hung") == "hung")
    parts = (["%d hung" % hung] if hung else []) + (["%d failed" % (len(rows) - hung)]
                                                     if len(rows) > hung else [])
    return " (%s)" % ", ".join(parts) if parts else ""


def per_round(raw, configs):
    """{(ranks, threads): [Weft / the best MPI version, per round]} at the default buffer,
    for the rounds that have both (the machine's phase can change between two rounds)."""
    out = {}
    for ranks, th in configs:
        rows = [x for x in raw if x["ranks"] == ranks and x["threads"] == th and
                x["buffer"] == 8192 and x["mkmers_per_s"] != ""]
        vs = []
        for r in sorted({x["round"] for x in rows}):
            w = [x["mkmers_per_s"] for x in rows if x["round"] == r and x["system"] == "weft"]
            m = [x["mkmers_per_s"] for x in rows if x["round"] == r and
                 not x["system"].startswith("weft") and x["system"] != "jellyfish"]
            if w and m:
                vs.append(w[0] / max(m))
        if vs:
            out[(ranks, th)] = vs
    return out


def per_version(raw, configs):
    """{(ranks, threads): {MPI version: [Weft / that version, per round]}} at the default
    buffer. Against each version alone: the per-round best of several versions is the best
    of several draws of a noisy machine, which beats any one program most of the time even
    when all run the same code (the 1 x 1 row)."""
    out = {}
    for ranks, th in configs:
        rows = [x for x in raw if x["ranks"] == ranks and x["threads"] == th and
                x["buffer"] == 8192 and x["mkmers_per_s"] != ""]
        by = {}
        for r in sorted({x["round"] for x in rows}):
            got = {x["system"]: x["mkmers_per_s"] for x in rows if x["round"] == r}
            for s, v in got.items():
                if "weft" in got and not s.startswith("weft") and s != "jellyfish":
                    by.setdefault(s, []).append(got["weft"] / v)
        if by:
            out[(ranks, th)] = by
    return out


def report(raw, a, seconds, name):
    """The table (NAME.md) and plots; `seconds` None: from a raw CSV (its cores, date, length)."""
    cores = raw[0].get("cores") or os.cpu_count()
    when = raw[-1]["utc"] if seconds is None else time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if seconds is None:
        seconds = 60 * max(x["minutes"] or 0 for x in raw)
    systems = sorted({x["system"] for x in raw},
                     key=lambda s: (not s.startswith("weft"), s == "jellyfish", s))
    configs = sorted({(x["ranks"], x["threads"]) for x in raw if x["buffer"] == 8192})
    ucx = int("weft ucx" in systems)
    jelly = int("jellyfish" in systems)
    flags = [x["flag_us"] for x in raw]
    lines = ["Generated by `bench/kmer_bench.py --rounds %d --bytes %s --k %d%s%s` on %s in %.1f min; "
             "flag probe median %.3f us (range %.3f .. %.3f). Input: `kmer-gen-reads %s --bytes %s` "
             "(%d k-mers). Millions of k-mers per second (the input's k-mers over the command's wall "
             "time), medians over rounds, %s. "
             "%d cores: more threads than %d oversubscribe them." %
             (a.rounds, a.bytes, a.k, " --hosts (3 namespace hosts over tcp)" if a.hosts else "",
              (" --large" if a.large else "") + (" --yield-when-idle" if a.yield_when_idle else "") +
              (" --configs %s" % a.configs if a.configs else "") +
              (" --systems '%s'" % a.systems if a.systems else ""),
              when, seconds / 60,
              statistics.median(flags), min(flags), max(flags), " ".join(GEN), a.bytes,
              max(x["kmers"] or 0 for x in raw),
              "the Bloom filter on (two passes over the input) for weft-kmer and mpi-kmer, every "
              "histogram keeping its rule against jellyfish's exact one (bins from 2 up equal, bin 1 "
              "at most jellyfish's); jellyfish counting exactly" if a.large else
              "exact counting, every histogram equal to jellyfish's", cores,
              cores) + " An untimed warm-up "
             "run precedes the first timed run after jellyfish and of each ranks x threads "
             "(the first process to touch "
             "gigabytes of fresh memory pays the virtual machine's first touch of them)." +
             " A run that outlived the run timeout was killed and is counted as hung, one that "
             "exited with an error (a launcher's crash) as failed; the median is over the others.",
             "",
             "| ranks x threads | " + " | ".join(systems) + " | Weft / best MPI |" +
             (" Weft / jellyfish |" if jelly else "") + (" Weft ucx / best MPI |" if ucx else ""),
             "| --- " * (len(systems) + 2 + jelly + ucx) + "|"]
    for ranks, th in configs:
        vals = {s: med(raw, system=s, ranks=ranks, threads=th, buffer=8192) for s in systems}
        mpi = [v for s, v in vals.items() if not s.startswith("weft") and s != "jellyfish" and v == v]
        cell = lambda s: "%.1f" % vals[s] + unfinished(raw, system=s, ranks=ranks, threads=th,
                                                        buffer=8192)
        lines.append("| %d x %d | " % (ranks, th) + " | ".join(cell(s) for s in systems) +
                     " | %.2f |" % (vals["weft"] / max(mpi) if mpi else float("nan")) +
                     (" %.2f |" % (vals["weft"] / vals["jellyfish"]) if jelly else "") +
                     (" %.2f |" % (vals["weft ucx"] / max(mpi) if mpi else float("nan")) if ucx else ""))
    rounds = per_round(raw, configs)
    if rounds:
        lines += ["", "Weft / the best MPI version of the same round, round by round: " + "; ".join(
            "%d x %d %s (ahead in %d of %d)" % (r, t, ", ".join("%.2f" % v for v in vs),
                                               sum(v > 1 for v in vs), len(vs))
            for (r, t), vs in rounds.items()) + "."]
    versions = per_version(raw, configs)
    if versions and max(len(vs) for by in versions.values() for vs in by.values()) > 1:
        lines += ["", "Weft / each MPI version alone, the median of the per-round ratios (rounds "
                  "ahead): " + "; ".join(
                      "%d x %d: %s" % (r, t, ", ".join(
                          "%s %.2f (%d of %d)" % (s, statistics.median(vs), sum(v > 1 for v in vs),
                                                  len(vs)) for s, vs in sorted(by.items())))
                      for (r, t), by in versions.items()) + "."]
    swept = [(x["ranks"], x["threads"]) for x in raw if x["buffer"] != 8192]
    sr, st = swept[0] if swept else (2, 1)
    sweep = sorted({x["buffer"] for x in raw if x["ranks"] == sr and x["threads"] == st and
                    (x["buffer"] != 8192 or x["round"] == 1)})
    if len(sweep) > 1:
        ss = [s for s in systems if s != "jellyfish"]
        lines += ["", "Aggregation buffer swept, %d ranks x %d thread%s (one round):" %
                  (sr, st, "s" if st > 1 else ""), "",
                  "| buffer (KiB) | " + " | ".join(ss) + " |", "| --- " * (len(ss) + 1) + "|"]
        for b in sweep:
            lines.append("| %d | " % (b // 1024) + " | ".join(
                "%.1f" % med(raw, system=s, ranks=sr, threads=st, buffer=b, round=1) for s in ss) + " |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.results, name + ".md"), "w") as f:
        f.write(text)
    print(text)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(7, 4.2))
    width = 0.8 / len(systems)
    for i, s in enumerate(systems):
        ax.bar([c + i * width for c in range(len(configs))],
               [med(raw, system=s, ranks=r, threads=t, buffer=8192) for r, t in configs], width, label=s)
    ax.set_xticks([c + 0.4 - width / 2 for c in range(len(configs))])
    ax.set_xticklabels(["%d x %d" % c for c in configs])
    ax.set_xlabel("ranks x threads (%d cores)" % cores)
    ax.set_ylabel("million k-mers / s")
    ax.set_title("k-mer counting, k = %d, %s%s" % (a.k, "%s bytes, Bloom filter" % a.bytes if a.large
                                                   else "exact", ", 3 hosts over tcp" if a.hosts else ""))
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(a.img, name + "_throughput.png"), dpi=110)
    if len(sweep) > 1:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for s in [s for s in systems if s != "jellyfish"]:
            ax.plot([b / 1024 for b in sweep], [med(raw, system=s, ranks=sr, threads=st, buffer=b,
                                                    round=1) for b in sweep], marker="o", label=s)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("aggregation buffer (KiB)")
        ax.set_ylabel("million k-mers / s")
        ax.set_title("k-mer counting, %d ranks x %d thread%s (%d cores)" %
                     (sr, st, "s" if st > 1 else "", cores))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(a.img, name + "_buffer.png"), dpi=110)


if __name__ == "__main__":
    main()
