# SPDX-License-Identifier: BSD-3-Clause
"""From raw.csv to medians, ratios, plots and docs/benchmarks.md.

The machine changes phase between rounds and within them (a cache line takes 0.03-0.06 us to
cross between the two cores in one phase and 0.2 us or more in another), so no figure is
compared with a figure of another round: every ratio is taken within a round, against that
round's best peer. Each measurement is preceded and followed by the flag probe and carries
both readings (columns `flag`, `flag_after`; raw files from before 2026-12-07 have only the
first); a measurement whose two readings fall in different classes straddled a change of
phase ("mixed"), and a ratio belongs to a class (CLASS_RULE) when every reading of every
measurement in it was taken in that class (every peer's of a ratio to the best peer: which
one is best depends on them all), to "mixed" otherwise. Ratios are then summarised
(median, range) per class.
"""
import csv
import datetime
import os
import platform
import shutil
import statistics

FAST_US = 0.1
CLASS_RULE = ("fast: the probe's cache-line ping-pong (one-way) took under %.1f us just before and just "
              "after the measurement; slow: %.1f us or more both times; mixed: one of each, the machine "
              "changed phase during the measurement" % (FAST_US, FAST_US))
# The rule for raw data that has only the probe before each measurement.
CLASS_RULE_BEFORE = ("fast: the probe's cache-line ping-pong (one-way) took under %.1f us just before the "
                     "measurement; slow: %.1f us or more" % (FAST_US, FAST_US))
FIELDS = ["round", "class", "flag", "flag_after", "system", "api", "mode", "threads", "resources", "workload", "size",
          "value", "unit", "mechanism", "stores", "ahead", "split"]


def class_of_flag(flag):
    return "fast" if flag < FAST_US else "slow"


def flags_of(r):
    """The flag probe's readings around a measurement: before, and after where recorded."""
    return tuple(float(r[k]) for k in ("flag", "flag_after") if r.get(k))


def class_of_flags(flags, default):
    """One class for the readings around a measurement (or several): mixed when they differ."""
    classes = {class_of_flag(f) for f in flags}
    return classes.pop() if len(classes) == 1 else "mixed" if classes else default

PEERS_MPI = ("mpich", "openmpi")


def key(r):
    return (r["system"], r["api"], r["mode"], str(r["threads"]), r["resources"], r["workload"], str(r["size"]))


def read_raw(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def write_raw(path, raw):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for row in raw:
            w.writerow({k: row.get(k, "") for k in FIELDS})


def classify(raw):
    """round -> "fast" / "slow" (from its flag probe) or "unclassified" (no probe)."""
    flag = {r["round"]: float(r["value"]) for r in raw
            if r["system"] == "probe" and r["api"] == "flag"}
    rounds = sorted({r["round"] for r in raw}, key=int)
    return {rd: class_of_flag(flag[rd]) if rd in flag else "unclassified" for rd in rounds}


def by_round(raw):
    """round -> key -> (value, the flag readings around it)."""
    idx = {}
    for r in raw:
        idx.setdefault(r["round"], {})[key(r)] = (float(r["value"]), flags_of(r))
    return idx


class Round:
    """One round's figures, looked up by name; remembers the flag readings of those used."""

    def __init__(self, values, start_class="unclassified"):
        self.v = values
        self.start_class = start_class
        self.flags = []

    def peek(self, system, api, mode, threads, resources, workload, size=8):
        return self.v.get((system, api, mode, str(threads), resources, workload, str(size)))

    def get(self, *k):
        hit = self.peek(*k)
        if hit is None:
            return None
        self.flags.extend(hit[1])
        return hit[0]

    def best(self, cands, low=False):
        hits = [h for h in (self.peek(*c) for c in cands) if h is not None]
        if not hits:
            return None
        h = (min if low else max)(hits, key=lambda x: x[0])
        # Which peer is best depends on every candidate: one measured in the other phase
        # (UCX's rate at 3.7 M/s in a slow minute beside Open MPI's 12.0 in a fast one)
        # would crown another peer, so the ratio is of the phase of all of them.
        for other in hits:
            self.flags.extend(other[1])
        return h[0]

    def measure(self, fn):
        """fn(self) and the class of what it used: fast, slow, or mixed."""
        self.flags = []
        out = fn(self)
        return out, class_of_flags(self.flags, self.start_class)

    # The figures the ratio table uses.
    def lat(self, s, api="am"):
        return self.get(s, api, "process", 1, "dedicated", "latency")

    def own_lat(self, api="am"):
        """Weft's 8-byte latency of one process sending to itself: a message's path alone."""
        return self.get("weft", api, "loopback", 1, "dedicated", "latency")

    def rate(self, s, api="am"):
        return self.get(s, api, "process", 1, "dedicated", "rate")

    def bw(self, s, size, api="sr", workload="bandwidth"):
        return self.get(s, api, "process", 1, "dedicated", workload, size)

    def probe(self, api, workload, size=8):
        return self.get("probe", api, "process", 1, "-", workload, size)

    def peer_lat(self):
        return self.best([(s, "am", "process", 1, "dedicated", "latency") for s in PEERS_MPI] +
                         [("ucx", a, "process", 1, "dedicated", "latency") for a in ("tag", "am")], low=True)

    def peer_rate(self):
        return self.best([(s, "am", "process", 1, "dedicated", "rate") for s in PEERS_MPI] +
                         [("ucx", a, "process", 1, "dedicated", "rate") for a in ("tag", "am")])

    def peer_bw(self, size, workload="bandwidth"):
        # ucx_perftest moves every message from one buffer into one: only bandwidth_one
        # is its workload (peers.UCX_TESTS).
        return self.best([(s, "sr", "process", 1, "dedicated", workload, size)
                          for s in PEERS_MPI + (("ucx",) if workload == "bandwidth_one" else ())])

    def copy_probe(self, size, before=None):
        """The better copy probe: the pair run just before the measurement (`before`: "before"
        or "before_w1", see run.copy_probes_before) when there is one, else the round's."""
        for tag in ((before,) if before else ()) + ("-",):
            v = self.best([("probe", a, "process", 1, tag, "bandwidth", size) for a in ("pipe", "cma")])
            if v is not None:
                return v
        return None

    def threaded(self, s, mode, t, res="dedicated"):
        return self.get(s, "am", mode, t, res, "rate")

    def resource(self, name, t):
        return self.get("weft", "resource", "threads", t, name, "resource", 0)

    def instr(self, s, mode="loopback", api="am"):
        return self.get(s, api, mode, 1, "dedicated", "instructions")

    def peer_instr(self):
        """The fewest instructions of a peer across two processes."""
        return self.best([(s, "am", "process", 1, "dedicated", "instructions") for s in PEERS_MPI + ("ucx",)],
                         low=True)


def ratio_rows(threads):
    """(figure, target, fn(Round) -> (numerator, denominator, unit)). Targets from issue 21."""
    t2 = 2 if 2 in threads else max(threads)
    rows = [
        ("8 B one-way latency (AM), Weft / best peer", "<= 1", lambda r: (r.lat("weft"), r.peer_lat(), "us")),
        ("8 B latency (AM), Weft / flag probe", "<= 1.3", lambda r: (r.lat("weft"), r.probe("flag", "latency"), "us")),
        # What UCX's ucp_am_lat callback gets: the message where it arrived.
        ("8 B one-way latency (AM, lent in place to a handler), Weft / best peer", "<= 1",
         lambda r: (r.lat("weft", "am_in_place"), r.peer_lat(), "us")),
        ("8 B latency (AM, lent in place to a handler), Weft / flag probe", "<= 1.3",
         lambda r: (r.lat("weft", "am_in_place"), r.probe("flag", "latency"), "us")),
        # A one-way latency is at least a cache line's crossing (the flag probe) plus the
        # software path of a message, which one process sending to itself measures alone:
        # latency / flag probe >= 1 + this ratio, whatever the library.
        ("8 B latency (AM), one process to itself (no crossing), Weft / flag probe", "report",
         lambda r: (r.own_lat(), r.probe("flag", "latency"), "us")),
        ("8 B latency (AM, lent in place), one process to itself, Weft / flag probe", "report",
         lambda r: (r.own_lat("am_in_place"), r.probe("flag", "latency"), "us")),
        ("8 B put latency (notified), Weft put / Weft AM", "<= 2",
         lambda r: (r.lat("weft", "put_notify"), r.lat("weft"), "us")),
        # The same ping-pong loop and queue with active messages (bench_put_notify --am):
        # what the put costs beyond a message, like for like (shm.md, small notified puts).
        ("8 B put latency (notified) / active message through the same loop", "report",
         lambda r: (r.lat("weft", "put_notify"), r.lat("weft", "am_notify"), "us")),
        ("8 B message rate (AM, malloc'd buffers), Weft / best peer", ">= 1.5", lambda r: (r.rate("weft"), r.peer_rate(), "M/s")),
        ("8 B message rate (AM, packet delivery), Weft / best peer", ">= 1.5",
         lambda r: (r.rate("weft", "am_packet"), r.peer_rate(), "M/s")),
        ("8 B message rate (AM, lent in place to a handler), Weft / best peer", ">= 1.5",
         lambda r: (r.rate("weft", "am_in_place"), r.peer_rate(), "M/s")),
        ("8 B message rate (AM), Weft / ring probe", "report", lambda r: (r.rate("weft"), r.probe("ring", "rate"), "M/s")),
    ]
    for size, label in ((65536, "64 KiB"), (4194304, "4 MiB")):
        rows += [
            ("bandwidth %s, one buffer for every transfer (as ucx_perftest), Weft / best peer" % label, ">= 1",
             lambda r, s=size: (r.bw("weft", s, workload="bandwidth_one"), r.peer_bw(s, "bandwidth_one"), "GB/s")),
            ("bandwidth %s, a buffer per transfer in flight, Weft / best MPI" % label, ">= 1",
             lambda r, s=size: (r.bw("weft", s), r.peer_bw(s), "GB/s")),
            ("bandwidth %s, Weft / better copy probe (pipe, cma)" % label, ">= 0.8",
             lambda r, s=size: (r.bw("weft", s), r.copy_probe(s, "before"), "GB/s")),
        ]
    rows += [
        ("bandwidth 4 MiB, one in flight, Weft / best MPI", ">= 1",
         lambda r: (r.bw("weft", 4194304, workload="bandwidth_w1"), r.peer_bw(4194304, "bandwidth_w1"), "GB/s")),
        # The probes' working set (one 4 MiB buffer each side, 8 slots between); the windowed
        # row above keeps 4 of them in flight, 16 MiB a side, which no longer fits in cache.
        ("bandwidth 4 MiB, one in flight, Weft / better copy probe (same working set)", "report",
         lambda r: (r.bw("weft", 4194304, workload="bandwidth_w1"), r.copy_probe(4194304, "before_w1"),
                    "GB/s")),
        ("loopback %d threads / 1 thread (dedicated)" % t2, ">= 1.8",
         lambda r: (r.threaded("weft", "loopback", t2), r.threaded("weft", "loopback", 1), "M/s")),
        ("loopback %d threads, shared device / 1 thread" % t2, ">= 1.5",
         lambda r: (r.threaded("weft", "loopback", t2, "shared"), r.threaded("weft", "loopback", 1), "M/s")),
        ("loopback %d threads, Weft / best MPI" % t2, ">= 2",
         lambda r: (r.threaded("weft", "loopback", t2), r.best([(s, "am", "loopback", t2, "dedicated", "rate") for s in PEERS_MPI]), "M/s")),
        ("thread mode 2 ranks x %d threads, Weft / best MPI" % t2, ">= 2",
         lambda r: (r.threaded("weft", "thread", t2), r.best([(s, "am", "thread", t2, "dedicated", "rate") for s in PEERS_MPI]), "M/s")),
        ("completion queue push+pop, %d threads / fetch-and-add probe" % t2, ">= 0.7",
         lambda r: (r.resource("cq_push_pop", t2), r.probe("fadd", "rate"), "M ops/s")),
        ("completion queue push+pop, %d threads / 1 thread" % t2, "report",
         lambda r: (r.resource("cq_push_pop", t2), r.resource("cq_push_pop", 1), "M ops/s")),
        ("instructions per 8 B AM (loopback), Weft / MPICH", "< 1",
         lambda r: (r.instr("weft"), r.instr("mpich"), "instr")),
        ("instructions per 8 B AM (2 processes), Weft / best peer", "< 1",
         lambda r: (r.instr("weft", "process"), r.peer_instr(), "instr")),
        ("instructions per 8 B AM (2 processes, lent in place), Weft / best peer", "< 1",
         lambda r: (r.instr("weft", "process", "am_in_place"), r.peer_instr(), "instr")),
        ("machine: %d threads / 1 thread of pure arithmetic" % t2, "ceiling",
         lambda r: (r.resource("cpu_only", t2), r.resource("cpu_only", 1), "")),
    ]
    return rows


def met(ratio, target):
    for op, f in (("<=", lambda a, b: a <= b), (">=", lambda a, b: a >= b), ("<", lambda a, b: a < b)):
        if target.startswith(op):
            return "yes" if f(ratio, float(target[len(op):])) else "**no**"
    return ""


def fmt(v, digits=3):
    return "–" if v is None else ("%.*g" % (digits, v))


def summarise(rounds, fn, cls):
    """Ratios within each round, of the measurements of class `cls`, then median and range;
    medians of both sides."""
    ratios, nums, dens, unit = [], [], [], ""
    for r in rounds:
        (a, b, u), c = r.measure(fn)
        unit = u
        if c != cls:
            continue
        if a is not None:
            nums.append(a)
        if b is not None:
            dens.append(b)
        if a is not None and b:
            ratios.append(a / b)
    med = lambda xs: statistics.median(xs) if xs else None
    return ratios, med(nums), med(dens), unit


def ratio_table(rounds, threads, cls):
    lines = ["| figure | target | ratio: median | ratios | range | met | values (medians) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, target, fn in ratio_rows(threads):
        ratios, a, b, unit = summarise(rounds, fn, cls)
        if not ratios:
            lines.append("| %s | %s | – | 0 | | | none measured in this class |" % (name, target))
            continue
        m = statistics.median(ratios)
        rng = "%s .. %s" % (fmt(min(ratios)), fmt(max(ratios))) if len(ratios) > 1 else ""
        lines.append("| %s | %s | %s | %d | %s | %s | %s vs %s %s |" % (
            name, target, fmt(m), len(ratios), rng, met(m, target), fmt(a), fmt(b), unit))
    return lines


def latency_floor(rounds, cls):
    """What the flag-probe latency target asks of software in this class: a one-way message
    crosses between the cores at least once (the probe) and runs the library's path, which
    one process sending to itself measures without a crossing."""
    out = []
    for api, label in (("am", "malloc'd"), ("am_in_place", "lent in place")):
        fn = lambda r, a=api: (r.own_lat(a), r.probe("flag", "latency"), "us")
        ratios, path, probe, _ = summarise(rounds, fn, cls)
        if ratios:
            m = statistics.median(ratios)
            out.append("%s: the path alone %s us, %s of the flag probe's %s us, so a one-way latency "
                       "through it is at least %s probes" % (label, fmt(path), fmt(m), fmt(probe), fmt(1 + m)))
    if not out:
        return []
    return ["", "A one-way latency is a crossing between the cores (the flag probe) plus the library's path, "
            "which one process sending to itself runs without a crossing. In this class, " + "; ".join(out) +
            " (the target asks for 1.3)."]


def round_table(raw, classes, idx):
    """One line per round: its probes, its class, and Weft's headline figures."""
    mech = {}
    for r in raw:
        if r["system"] == "weft" and r["workload"] == "bandwidth" and r.get("mechanism"):
            how = r["mechanism"] + (", " + r["stores"] if r.get("stores") else "") + \
                (", ahead " + r["ahead"] if r.get("ahead") else "") + \
                (", split " + r["split"] if r.get("split") else "")
            mech[(r["round"], r["size"])] = how
    lines = ["| round | class | flag probe (us) | ring probe (M/s) | pipe / cma probe 64 KiB (GB/s) | pipe / cma probe 4 MiB | "
             "Weft AM latency (us) | Weft AM rate (M/s) | Weft 64 KiB (GB/s, mechanism, stores, data ahead, split) | Weft 4 MiB |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for rd in sorted(idx, key=int):
        r = Round(idx[rd], classes[rd])
        pp = lambda s: "%s / %s" % (fmt(r.probe("pipe", "bandwidth", s)), fmt(r.probe("cma", "bandwidth", s)))
        bw = lambda s: "%s (%s)" % (fmt(r.bw("weft", s)), mech.get((rd, str(s)), "–"))
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            rd, classes[rd], fmt(r.probe("flag", "latency")), fmt(r.probe("ring", "rate")), pp(65536), pp(4194304),
            fmt(r.lat("weft")), fmt(r.rate("weft")), bw(65536), bw(4194304)))
    return lines


def row_class(r, classes):
    """A measurement's class: from its own flag readings, else its round's."""
    return class_of_flags(flags_of(r), classes.get(r["round"], "unclassified"))


def medians(raw, classes):
    """key -> {class: (median, samples)}, each measurement in its own class."""
    groups = {}
    for r in raw:
        groups.setdefault(key(r), {}).setdefault(row_class(r, classes), []).append(float(r["value"]))
    return {k: {c: (statistics.median(v), len(v)) for c, v in d.items()} for k, d in groups.items()}


def write_medians_csv(path, med, classes_seen):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["class"] + FIELDS[FIELDS.index("system"):FIELDS.index("value")] + ["median", "samples"])
        for k in sorted(med):
            for c in classes_seen:
                if c in med[k]:
                    w.writerow([c] + list(k) + ["%.6g" % med[k][c][0], med[k][c][1]])


PLOTS = ("bandwidth", "latency", "rate_threads", "resources")


def make_plots(med, cls, out, threads, which=PLOTS, prefix=""):
    """PNG plots (those named in `which`, files prefixed by `prefix`) of one class's medians;
    returns the files written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plots")
        return []
    g = lambda *k: med.get(tuple(str(x) for x in k), {}).get(cls, (None,))[0]
    files = []

    def save(fig, ax, name, xlabel, ylabel, title, legend=True):
        if name not in which:
            plt.close(fig)
            return
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title("%s (%s measurements)" % (title, cls), fontsize=10)
        if legend:
            ax.legend(fontsize=8)
            ax.grid(alpha=0.3)
        path = os.path.join(out, "%s%s_%s.png" % (prefix, name, cls))
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        files.append(path)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system, api, work, style, label in (
            ("weft", "sr", "bandwidth", "o-", "weft"), ("mpich", "sr", "bandwidth", "s--", "mpich"),
            ("openmpi", "sr", "bandwidth", "^--", "openmpi"),
            ("weft", "sr", "bandwidth_one", "o", "weft (one buffer)"),
            ("ucx", "sr", "bandwidth_one", "v", "ucx (tag; one buffer)"),
            ("probe", "pipe", "bandwidth", "k:", "probe: two-process copy"),
            ("probe", "cma", "bandwidth", "k-.", "probe: cross-memory attach")):
        pts = sorted((int(k[6]), v[cls][0]) for k, v in med.items()
                     if k[0] == system and k[1] == api and k[5] == work and cls in v)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
    ax.set_xscale("log", base=2)
    save(fig, ax, "bandwidth", "message size (bytes)", "GB/s", "Bandwidth, 2 processes, shared memory")

    fig, ax = plt.subplots(figsize=(7, 4))
    labels, vals = [], []
    for system, api in (("weft", "am"), ("weft", "sr"), ("weft", "put_notify"), ("mpich", "am"), ("mpich", "sr"),
                        ("openmpi", "am"), ("openmpi", "sr"), ("ucx", "tag"), ("ucx", "am")):
        v = g(system, api, "process", 1, "dedicated", "latency", 8)
        if v is not None:
            labels.append("%s %s" % (system, api))
            vals.append(v)
    v = g("probe", "flag", "process", 1, "-", "latency", 8)
    if v is not None:
        labels.append("flag probe")
        vals.append(v)
    ax.bar(labels, vals, color=["#2a6" if l.startswith("weft") else "#888" if "probe" in l else "#68c" for l in labels])
    ax.tick_params(axis="x", labelrotation=35)
    save(fig, ax, "latency", "", "one-way latency (us)", "8-byte ping-pong latency, 2 processes", legend=False)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    counts = sorted(set(threads) | {1})
    for system, res, mode, style in (("weft", "dedicated", "loopback", "o-"), ("weft", "shared", "loopback", "o:"),
                                     ("mpich", "dedicated", "loopback", "s--"), ("openmpi", "dedicated", "loopback", "^--"),
                                     ("weft", "dedicated", "thread", "D-"), ("weft", "shared", "thread", "D:"),
                                     ("weft", "shared_cq", "thread", "x:"),
                                     ("mpich", "dedicated", "thread", "v--"), ("openmpi", "dedicated", "thread", "<--")):
        pts = []
        for t in counts:
            m = mode if t > 1 or mode == "loopback" else "process"
            v = g(system, "am", m, t, res if t > 1 else "dedicated", "rate", 8)
            if v is not None:
                pts.append((t, v))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label="%s %s (%s)" % (system, mode, res))
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(t) for t in counts])
    save(fig, ax, "rate_threads", "threads per process", "8-byte message rate (M/s)", "Message rate against threads")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    names = sorted({k[4] for k in med if k[5] == "resource"})
    for name in names:
        pts = sorted((int(k[3]), v[cls][0]) for k, v in med.items() if k[5] == "resource" and k[4] == name and cls in v)
        if pts:
            base = pts[0][1] or 1
            ax.plot([p[0] for p in pts], [p[1] / base for p in pts], "o-" if name != "cpu_only" else "k:", label=name)
    if names:
        save(fig, ax, "resources", "threads", "throughput relative to one thread",
             "Resource throughput (cpu_only: the machine's own scaling)")
    else:
        plt.close(fig)
    return files


def publish_plots(files, doc):
    """Copies the plots next to `doc` (its img/ folder); returns their markdown lines."""
    lines = []
    for p in files:
        dst = os.path.join(os.path.dirname(doc), "img", os.path.basename(p))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(p, dst)
        lines += ["![%s](img/%s)" % (os.path.basename(p)[:-4], os.path.basename(p)), ""]
    return lines


def thread_table(med, cls, threads):
    counts = sorted(set(threads) | {1})
    g = lambda *k: med.get(tuple(str(x) for x in k), {}).get(cls, (None,))[0]
    lines = ["| system | mode | resources | " + " | ".join("%d" % t for t in counts) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in counts) + " |"]
    for system, mode, res in (("weft", "loopback", "dedicated"), ("weft", "loopback", "shared"),
                              ("mpich", "loopback", "dedicated"), ("openmpi", "loopback", "dedicated"),
                              ("weft", "thread", "dedicated"), ("weft", "thread", "shared"), ("weft", "thread", "shared_cq"),
                              ("mpich", "thread", "dedicated"), ("openmpi", "thread", "dedicated")):
        cells = []
        for t in counts:
            m = mode if t > 1 or mode == "loopback" else "process"
            cells.append(fmt(g(system, "am", m, t, res if t > 1 else "dedicated", "rate", 8)))
        lines.append("| %s | %s | %s | %s |" % (system, mode, res, " | ".join(cells)))
    return lines


def write_doc(path, raw, commands, quick, threads, out, seconds):
    classes = classify(raw)
    idx = by_round(raw)
    counts = {}
    for r in raw:
        c = row_class(r, classes)
        counts[c] = counts.get(c, 0) + 1
    seen = [c for c in ("fast", "slow", "mixed", "unclassified") if c in counts]
    after = any(r.get("flag_after") for r in raw)  # raw data from before 2026-12-07 has none
    plotted = [c for c in seen if c != "mixed"]  # a phase change mid-run: counted, not plotted
    med = medians(raw, classes)
    write_medians_csv(os.path.join(out, "medians.csv"), med, seen)
    # Rewritten from raw data (--from-raw): the run's own time, that of its raw file.
    stamp = os.path.getmtime(os.path.join(out, "raw.csv")) if not seconds else None
    now = datetime.datetime.fromtimestamp(stamp or datetime.datetime.now().timestamp(),
                                          datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    nrounds = len(idx)
    lines = ["# Benchmarks: Weft against MPICH, Open MPI and UCX", "",
             "Generated by `scripts/bench.sh%s` (`bench/run.py`) on %s: %s, %d cores (`%s`), %d interleaved round%s%s. "
             "Every system ran the same iterations. The machine drifts between phases within minutes, so each ratio is "
             "taken within one round, and every measurement is %s by the flag probe of "
             "`weft-probe` (`bench/machine_probe.cpp`) and classed by it, %s; a ratio is summarised in a class when all its "
             "measurements fell in that class, those of every peer a best peer was chosen from included "
             "(\"mixed\" when they straddle a change)%s. The copy speed drifts on its "
             "own too, so Weft's bandwidth runs are each preceded by the two copy probes as well, and the ratios to "
             "the probes take those (when the raw data has them). Measurements in this run: %s." % (
                 " --quick" if quick else "", now, platform.node() or "host", os.cpu_count(),
                 platform.processor() or platform.machine(), nrounds, "s" if nrounds != 1 else "",
                 ", %.0f minutes" % (seconds / 60) if seconds else "",
                 "preceded and followed" if after else "preceded", CLASS_RULE if after else CLASS_RULE_BEFORE,
                 "; every system's run of one figure follows the others' at once" if after else "",
                 ", ".join("%d %s" % (counts[c], c) for c in seen)),
             "", "Two cores: the multithreaded figures show contention, not scale. Message rate against "
             "1 to 16 threads on a 16-core machine: [scaling.md](scaling.md)."]
    rounds = [Round(idx[rd], classes[rd]) for rd in sorted(idx, key=int)]
    for c in ("fast", "slow", "mixed", "unclassified"):
        table = ratio_table(rounds, threads, c)
        if all("| 0 |" in l for l in table[2:]):
            continue
        lines += ["", "## Ratios, %s" % ("measurements straddling a change of phase" if c == "mixed" else c + " measurements"),
                  ""] + table + (latency_floor(rounds, c) if c != "mixed" else [])
    lines += ["", "## Every round", "",
              "The probes and Weft's headline figures round by round, with the mechanism Weft's shared-memory "
              "backend used for the bandwidth runs (`WEFT_SHM_PUT=auto`: pipelined copy or cross-memory attach, "
              "chosen per peer and size by measured throughput) and how the target stored the pipelined bytes "
              "(`WEFT_SHM_STORES=auto`: cached or streaming, chosen the same way; see shm.md), whether its data "
              "went ahead of the clear-to-send, and whether the bytes by cross-memory attach were split between "
              "both ends (`WEFT_SHM_SPLIT`).", ""] + round_table(raw, classes, idx)
    for c in plotted:
        lines += ["", "## 8-byte message rate against threads, %s measurements (M/s)" % c, "",
                  "Loopback: one process, each thread exchanging with itself. Thread mode: 2 processes, each thread "
                  "paired with a thread of the peer; at 1 thread it is process mode.", ""] + thread_table(med, c, threads)
    lines += ["", "## All medians", "", "| system | api | mode | threads | resources | workload | size | " +
              " | ".join("%s median (n)" % c for c in seen) + " |", "| --- " * (7 + len(seen)) + "|"]
    for k in sorted(med):
        lines.append("| %s | " % " | ".join(k) + " | ".join(
            "%s (%d)" % (fmt(med[k][c][0], 4), med[k][c][1]) if c in med[k] else "–" for c in seen) + " |")
    lines += ["", "## Plots", ""]
    for c in plotted:
        lines += publish_plots(make_plots(med, c, out, threads), path)
    lines += ["## Commands", "", "Each round ran these once, in this order:", "", "```"] + commands + ["```", "", WORKLOADS, "",
              ] + tasks() + continuations() + kmer() + cholesky()
    with open(path, "w") as f:
        f.write("\n".join(lines))


TASKS = ("The communication engine's task benchmarks (windowed ping-pong and overlap on the dataflow executor, "
         "the Weft engine against the MPI engine on MPICH and Open MPI, as the seed's Figures 2 and 3) have "
         "their own script and page: `bench/taskbench.py` (shared memory) and `bench/taskbench_hosts.sh` (two "
         "namespace hosts over tcp), [engine.md](engine.md#measured). Their plots (the seed's Figures 2 and 3: "
         "bandwidth against fragment size, then GFLOP/s against fragment size with the roofline and no-overlap "
         "lines; then the same ping-pong across two hosts over tcp):\n\n"
         "![task ping-pong bandwidth](img/engine_pingpong_bandwidth.png)\n\n"
         "![task overlap](img/engine_overlap.png)\n\n"
         "![task ping-pong across hosts](img/engine_hosts_bandwidth.png)")

def tasks():
    """The task benchmarks' paragraph, and a pointer to the 16-core run with its ratio."""
    out = [TASKS, ""]
    ratio = bold_figure("taskbench_device", "Ratio of the 80% fragment sizes")
    if ratio:
        out += ["On the lent 16-core machine, the ranks unbound so that every engine thread can have a core "
                "(`bench/device_run.sh taskbench`, `bench/results/taskbench_device.md`): the issue's ratio of the "
                "80%% fragment sizes, best MPI engine / best Weft engine, %s over three runs together: "
                "[engine.md](engine.md#on-16-cores-the-lent-machine)." % ratio, "",
                "![task ping-pong bandwidth on 16 cores](img/engine_pingpong_bandwidth_16.png)", ""]
    return out


CONT_INTRO = ("Per-operation cost of continuations ([continuations.md](continuations.md)) against Weft's plain "
              "handler completion, from `bench/cont_bench.py` (its own script: the table below is "
              "`bench/results/cont.md`, copied here when this page is generated; what it says: "
              "[continuations.md](continuations.md#cost)). Target: at most 1.2x the handler's cost per "
              "operation.")


def recorded(title, intro, name, extra=()):
    """A section from a script of its own: bench/results/<name>.md under `title`, when that
    script wrote it, then `extra` lines (its plots)."""
    lines = result_lines(name)
    return ["## " + title, "", intro, "", "\n".join(lines).rstrip("\n"), ""] + list(extra) if lines else []


def continuations():
    """The Continuations section: bench/results/cont.md, when bench/cont_bench.py wrote it."""
    return recorded("Continuations", CONT_INTRO, "cont")


KMER_INTRO = ("The k-mer counting application ([kmer.md](kmer.md)): `weft-kmer` against its MPI baseline "
              "(MPICH and Open MPI, `MPI_THREAD_MULTIPLE` and `MPI_THREAD_FUNNELED`) and jellyfish, from "
              "`bench/kmer_bench.py` (its own script: the table below is `bench/results/kmer.md`, copied here "
              "when this page is generated; what it says: [kmer.md](kmer.md#measured)).")


def result_lines(name):
    """The lines of bench/results/<name>.md ([] when its script has not written it)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", name + ".md")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return f.read().splitlines()


def column_range(name, header):
    """'lo-hi' of a column of the first table in bench/results/<name>.md, None without one."""
    rows = [[c.strip() for c in x.strip("|").split("|")] for x in result_lines(name) if x.startswith("|")]
    if not rows or header not in rows[0]:
        return None
    i = rows[0].index(header)
    v = [float(r[i]) for r in rows[2:] if i < len(r) and r[i].replace(".", "", 1).isdigit()]
    return "%.2f-%.2f" % (min(v), max(v)) if v else None


def bold_figure(name, prefix):
    """The **figure** of the line of bench/results/<name>.md that starts with `prefix`."""
    for x in result_lines(name):
        if x.startswith(prefix) and "**" in x:
            return x.split("**")[1]
    return None


def kmer():
    """The k-mer counting section: bench/results/kmer.md, when bench/kmer_bench.py wrote it,
    and pointers to the 16-core and eight-round runs with their ratios."""
    extra = ["![k-mer counting throughput](img/kmer_throughput.png)", "",
             "![aggregation buffer](img/kmer_buffer.png)", ""]
    mpi, jelly = (column_range("kmer_device_1128", h) for h in ("Weft / best MPI", "Weft / jellyfish"))
    comm = column_range("kmer_comm_1128c", "Weft / best MPI")
    if mpi and jelly:
        extra += ["On the lent 16-core machine (`bench/device_run.sh kmer`, `bench/results/kmer_device_1128.md`): "
                  "Weft %sx the better MPI version, %sx jellyfish: "
                  "[kmer.md](kmer.md#on-16-cores-the-lent-machine)." % (mpi, jelly), ""]
    if comm:
        extra += ["The communicating rows here over eight rounds (`bench/results/kmer_comm_1128c.md`): Weft %sx "
                  "the best MPI version by the medians (the lowest on 1 x 2, one rank, where neither program "
                  "sends a batch); what that says: "
                  "[kmer.md](kmer.md#the-communicating-rows-eight-rounds-with-the-cheaper-table-2026-11-28)."
                  % comm, ""]
    return recorded("k-mer counting", KMER_INTRO, "kmer", extra)


CHOLESKY_INTRO = ("The tiled Cholesky ([cholesky.md](cholesky.md)): `weft-cholesky` over the Weft engine and the MPI "
                  "engine (MPICH, Open MPI) against ScaLAPACK's `pdpotrf`, against tile size, from "
                  "`bench/cholesky_bench.py` (its own script: the table below is `bench/results/cholesky.md`, "
                  "copied here when this page is generated; what it says: [cholesky.md](cholesky.md#measured)).")


def cholesky():
    """The Cholesky section: bench/results/cholesky.md, when bench/cholesky_bench.py wrote it,
    and a pointer to the 16-core run with its ratios."""
    extra = ["![Cholesky GFLOP/s against tile size](img/cholesky_gflops.png)", ""]
    ratios = [bold_figure("cholesky_device", "Weft engine / %s" % o) for o in ("MPI engine", "ScaLAPACK")]
    if all(ratios):
        extra += ["On the lent 16-core machine (`bench/device_run.sh cholesky`, `bench/results/cholesky_device.md`), "
                  "at the best tile size of each: the Weft engine %sx the MPI engine, %sx ScaLAPACK: "
                  "[cholesky.md](cholesky.md#on-16-cores-the-lent-machine)." % tuple(ratios), ""]
    return recorded("Tiled Cholesky", CHOLESKY_INTRO, "cholesky", extra)

WORKLOADS = (
    "Workloads (`bench/bench_main.cpp`, the same code for Weft, MPICH and Open MPI): latency is an 8-byte ping-pong "
    "(one-way = round trip / 2); rate is windows of 64 eight-byte messages closed by an acknowledgment, timed after an "
    "untimed warm-up of a tenth as many (loopback: a thread sends its window to itself and consumes it); bandwidth is "
    "windowed send/receive with the same buffers every time, at most 16 MiB in flight (window 16 up to 1 MiB), each "
    "transfer with its own source and destination buffer (`bandwidth_w1`: one transfer in flight; `bandwidth_one`: "
    "every transfer from one source buffer into one destination buffer, as `ucx_perftest` and `osu_bw` do, at 64 KiB "
    "and 4 MiB). UCX runs its own "
    "`ucx_perftest` with `UCX_TLS=sm,self`, server and client pinned to cores 1 and 0: `tag_lat` and `ucp_am_lat` for "
    "latency, `tag_bw` and `ucp_am_bw` at 8 bytes for message rate, `tag_bw` for bandwidth (the same number of "
    "ping-pongs and messages, and the same bytes, as the others; its bandwidth is compared with the others' "
    "`bandwidth_one`, its own buffer convention). Weft active messages go into a completion queue and "
    "are freed with `std::free` (api `am`), or arrive in packets of the pool returned with `put_upacket` (api "
    "`am_packet`), or are lent where they arrived to a handler that reads and counts them (api `am_in_place`, "
    "`register_rcomp_x(h).in_place(true)`: what `ucp_am_bw`'s callback gets); MPI's active-message variant uses a ring of 128 pre-posted receives. `put_notify` is "
    "`bench_put_notify`: 8-byte puts with a notification, ping-pong (`am_notify`: the same loop with 8-byte active messages). Process mode binds one rank per core for every "
    "system; thread and loopback runs are not bound. Dedicated resources: a Weft device and completion queue per "
    "thread, `MPI_Comm_dup` per thread for MPI. Shared: one Weft device, a completion queue per thread; shared_cq: one "
    "device and one queue. When threads outnumber cores, every library's lane yields the processor after 16 fruitless "
    "polls in a row (the same code for all). The probe rows: `flag` (cache-line ping-pong, one-way), `ring` (8-byte "
    "messages through a single-producer ring), `pipe` (two-process copy through 8 staging slots of 64 KiB), `cma` "
    "(`process_vm_readv` from the other process), `fadd` (two threads incrementing one shared counter); the resource "
    "rows are `bench_resources` (one shared completion queue, matching engine or packet pool per thread count). "
    "Instruction counts are callgrind's, over two run lengths so that start-up cancels.")
