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
bench/results/kmer.md and docs/img/kmer_*.png.

  bench/kmer_bench.py [--build build] [--rounds 3] [--bytes 256e6] [--k 21] [--quick]
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cont_bench import results  # noqa: E402  (the flag probe's runner)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = ["--genome", "20e6", "--length", "150", "--error", "0.01", "--n-rate", "0.0005", "--seed", "1"]


def launch(system, ranks, build):
    if system == "weft":
        return [os.path.join(build, "weftrun"), "--bind-to", "none", "-n", str(ranks),
                os.path.join(build, "apps", "kmer", "weft-kmer")]
    flavour, mode = system.split()[0], system.split()[1]
    exe = os.path.join(build, "apps", "kmer", "mpi-kmer-" + flavour)
    if flavour == "mpich":
        cmd = ["mpiexec.mpich", "-bind-to", "none", "-n", str(ranks), exe]
    else:
        cmd = ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
               "-n", str(ranks), exe]
    return cmd + ["--mpi", mode]


def timed(cmd):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    secs = time.time() - t0
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s%s" % (" ".join(cmd), r.returncode, r.stdout[-3000:],
                                                      r.stderr[-3000:]))
    return secs, r.stdout


def kmers_of(stdout):
    return sum(int(line.split()[5]) for line in stdout.splitlines() if "-kmer: " in line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bytes", default="256e6")
    ap.add_argument("--k", type=int, default=21)
    ap.add_argument("--quick", action="store_true", help="one round, 32 MB, no sweep")
    a = ap.parse_args()
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
    subprocess.run(["jellyfish", "count", "-C", "-m", str(a.k), "-s", "100M", "-t", "2", "-o", jf,
                    reads], check=True)
    with open(truth, "w") as f:
        subprocess.run(["jellyfish", "histo", "-h", "100000000", jf], stdout=f, check=True)
    total = None
    systems = ["weft"] + ["%s %s" % (fl, m) for fl in ("mpich", "openmpi")
                          for m in ("multiple", "funneled")
                          if os.path.exists(os.path.join(a.build, "apps", "kmer", "mpi-kmer-" + fl))]
    configs = [(1, 1), (1, 2), (2, 1), (2, 2)]
    plan = [(r, s, ranks, th, 8192) for r in range(1, a.rounds + 1) for ranks, th in configs
            for s in systems + ["jellyfish"]]
    if not a.quick:  # the buffer sweep, one round
        plan += [(1, s, 2, 1, b * 1024) for b in (1, 2, 4, 8, 16, 32, 64) for s in systems]
    raw, start = [], time.time()
    for i, (r, system, ranks, th, buf) in enumerate(plan):
        flag = float(results([os.path.join(a.build, "bench", "weft-probe"), "flag", "--trials",
                              "1"])[0]["value"])
        print("[%d/%d] round %d %-16s %dx%d buffer %5d (flag probe %.3f us, %.1f min)" %
              (i + 1, len(plan), r, system, ranks, th, buf, flag, (time.time() - start) / 60),
              flush=True)
        out = os.path.join(work, "out.histo")
        if system == "jellyfish":
            secs, _ = timed(["jellyfish", "count", "-C", "-m", str(a.k), "-s", "100M", "-t",
                             str(ranks * th), "-o", os.path.join(work, "jx.jf"), reads])
            kmers = total
        else:
            secs, stdout = timed(launch(system, ranks, a.build) +
                                 ["-k", str(a.k), "--exact", "--threads", str(th), "--buffer",
                                  str(buf), "--histo", out, reads])
            kmers = kmers_of(stdout)
            total = total or kmers
            if open(out).read() != open(truth).read():
                raise RuntimeError("%s %dx%d: the histogram differs from jellyfish's" % (system, ranks, th))
        raw.append({"round": r, "system": system, "ranks": ranks, "threads": th, "buffer": buf,
                    "seconds": round(secs, 3), "kmers": kmers, "mkmers_per_s": round(kmers / secs / 1e6, 3),
                    "flag_us": flag})
    with open(os.path.join(ROOT, "bench", "results", "kmer_raw.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(raw[0].keys()))
        w.writeheader()
        w.writerows(raw)
    report(raw, a, time.time() - start)


def med(raw, **kw):
    v = [x["mkmers_per_s"] for x in raw if all(x[k] == want for k, want in kw.items())]
    return statistics.median(v) if v else float("nan")


def report(raw, a, seconds):
    systems = sorted({x["system"] for x in raw}, key=lambda s: (s != "weft", s == "jellyfish", s))
    configs = sorted({(x["ranks"], x["threads"]) for x in raw if x["buffer"] == 8192})
    flags = [x["flag_us"] for x in raw]
    lines = ["Generated by `bench/kmer_bench.py --rounds %d --bytes %s --k %d` on %s in %.1f min; "
             "flag probe median %.3f us (range %.3f .. %.3f). Input: `kmer-gen-reads %s --bytes %s` "
             "(%d k-mers). Millions of k-mers per second (the input's k-mers over the command's wall "
             "time), medians over rounds, exact counting, every histogram equal to jellyfish's. "
             "2 cores: 2 ranks x 2 threads oversubscribe them." %
             (a.rounds, a.bytes, a.k, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), seconds / 60,
              statistics.median(flags), min(flags), max(flags), " ".join(GEN), a.bytes,
              max(x["kmers"] or 0 for x in raw)), "",
             "| ranks x threads | " + " | ".join(systems) + " | Weft / best MPI | Weft / jellyfish |",
             "| --- " * (len(systems) + 3) + "|"]
    for ranks, th in configs:
        vals = {s: med(raw, system=s, ranks=ranks, threads=th, buffer=8192) for s in systems}
        mpi = [v for s, v in vals.items() if s not in ("weft", "jellyfish")]
        lines.append("| %d x %d | " % (ranks, th) + " | ".join("%.1f" % vals[s] for s in systems) +
                     " | %.2f | %.2f |" % (vals["weft"] / max(mpi) if mpi else float("nan"),
                                           vals["weft"] / vals["jellyfish"]))
    sweep = sorted({x["buffer"] for x in raw if x["buffer"] != 8192 or x["round"] == 1})
    if len(sweep) > 1:
        ss = [s for s in systems if s != "jellyfish"]
        lines += ["", "Aggregation buffer swept, 2 ranks x 1 thread (one round):", "",
                  "| buffer (KiB) | " + " | ".join(ss) + " |", "| --- " * (len(ss) + 1) + "|"]
        for b in sweep:
            lines.append("| %d | " % (b // 1024) + " | ".join(
                "%.1f" % med(raw, system=s, ranks=2, threads=1, buffer=b, round=1) for s in ss) + " |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(ROOT, "bench", "results", "kmer.md"), "w") as f:
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
    ax.set_xlabel("ranks x threads (2 cores)")
    ax.set_ylabel("million k-mers / s")
    ax.set_title("k-mer counting, k = %d, exact" % a.k)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(ROOT, "docs", "img", "kmer_throughput.png"), dpi=110)
    if len(sweep) > 1:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for s in [s for s in systems if s != "jellyfish"]:
            ax.plot([b / 1024 for b in sweep], [med(raw, system=s, ranks=2, threads=1, buffer=b, round=1)
                                                for b in sweep], marker="o", label=s)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("aggregation buffer (KiB)")
        ax.set_ylabel("million k-mers / s")
        ax.set_title("k-mer counting, 2 ranks x 1 thread")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(ROOT, "docs", "img", "kmer_buffer.png"), dpi=110)


if __name__ == "__main__":
    main()
