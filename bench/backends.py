#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Weft on each backend beside the transport's own benchmark on the same transport:
libfabric's fi_pingpong for ofi, UCX's ucx_perftest for ucx. Rounds are interleaved (every
configuration once per round) and medians compared, since this machine's speed drifts.

usage: bench/backends.py [--build build] [--rounds 3] [--doc docs/backends.md]
Writes bench/results/backends.csv and prints the table; with --doc, also replaces the table
between the markers of docs/backends.md's "Measured per backend" section (never edit it by
hand).
"""
import argparse
import csv
import datetime
import os
import random
import re
import statistics
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import peers  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--doc", default=None, help="the document whose table to replace")
args = ap.parse_args()
build, rounds = args.build, args.rounds
weftrun = os.path.join(build, "weftrun")
bench = os.path.join(build, "bench", "bench_weft")

# (label, environment for Weft, the transport's own tool or None)
configs = [
    ("shm", {"WEFT_BACKEND": "shm"}, None),
    ("ofi tcp;ofi_rxm", {"WEFT_BACKEND": "ofi", "WEFT_OFI_PROVIDER": "tcp;ofi_rxm"}, ("fi", "tcp;ofi_rxm")),
    ("ucx tcp", {"WEFT_BACKEND": "ucx", "UCX_TLS": "tcp"}, ("ucx", "tcp")),
    ("ucx sm", {"WEFT_BACKEND": "ucx", "UCX_TLS": "sm,self"}, ("ucx", "sm,self")),
]
SIZES = [65536, 1048576]


def run(cmd, env=None, timeout=300):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout).stdout


def weft(env, args):
    out = run([weftrun, "-n", "2", "--timeout", "240", bench] + args, env)
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"workload=\S+ size=(\d+) value=(\S+)", out)}


def with_server(server, client, env):
    e = dict(os.environ)
    e.update(env)
    srv = subprocess.Popen(server, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        return run(client, env, timeout=240)
    finally:
        srv.kill()
        srv.wait()


def fi_pingpong(prov, size, iters):
    port = str(random.randint(20000, 60000))
    base = ["fi_pingpong", "-p", prov, "-e", "rdm", "-B", port, "-I", str(iters), "-S", str(size)]
    out = with_server(base, ["fi_pingpong", "-p", prov, "-e", "rdm", "-P", port, "-I", str(iters),
                             "-S", str(size), "127.0.0.1"], {})
    label = {65536: "64k", 1048576: "1m"}.get(size, str(size))  # how fi_pingpong prints sizes
    for l in out.splitlines():
        f = l.split()
        if f and f[0] == label:
            return float(f[5]), float(f[6])  # MB/sec, usec/xfer
    return None


samples = {}


def add(key, v):
    if v is not None:
        samples.setdefault(key, []).append(v)


for r in range(rounds):
    for label, env, tool in configs:
        print(f"round {r + 1}/{rounds}: {label}", file=sys.stderr, flush=True)
        add((label, "weft", "lat"), weft(env, ["lat", "--mode", "am", "--iters", "20000"]).get(8))
        add((label, "weft", "rate"), weft(env, ["rate", "--mode", "am", "--iters", "100000"]).get(8))
        bw = weft(env, ["bw", "--mode", "sr", "--sizes", ",".join(map(str, SIZES)), "--iters", "200"])
        for s in SIZES:
            add((label, "weft", f"bw{s}"), bw.get(s))
        if tool and tool[0] == "ucx":
            for fig, test, size, iters, workload in (
                    [("lat", "ucp_am_lat", 8, 20000, "latency"), ("rate", "ucp_am_bw", 8, 200000, "rate")] +
                    [(f"bw{s}", "ucp_am_bw", s, 2000, "bandwidth") for s in SIZES]):
                r = peers.ucx_perftest(test, size, iters, tool[1])
                add((label, "tool", fig), r and peers.ucx_figure(r, workload)[0])
        elif tool:
            p = fi_pingpong(tool[1], 8, 5000)
            add((label, "tool", "lat"), p and p[1])
            for s in SIZES:
                p = fi_pingpong(tool[1], s, 500)
                add((label, "tool", f"bw{s}"), p and p[0] / 1000)  # MB/s -> GB/s

os.makedirs(os.path.join(here, "results"), exist_ok=True)
path = os.path.join(here, "results", "backends.csv")
with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["backend", "who", "figure", "median", "samples"])
    for (label, who, fig), v in sorted(samples.items()):
        w.writerow([label, who, fig, statistics.median(v), " ".join(f"{x:.4g}" for x in v)])

units = {"lat": "us", "rate": "M/s", **{f"bw{s}": "GB/s" for s in SIZES}}
names = {"lat": "8 B latency", "rate": "8 B message rate", **{f"bw{s}": f"bandwidth {s // 1024} KiB" for s in SIZES}}
table = ["| backend | figure | Weft | transport's own tool | Weft / tool |", "| --- | --- | --- | --- | --- |"]
for label, _, tool in configs:
    for fig in units:
        wv = samples.get((label, "weft", fig))
        tv = samples.get((label, "tool", fig))
        wm = statistics.median(wv) if wv else None
        tm = statistics.median(tv) if tv else None
        tool_name = "-" if not tool else ("fi_pingpong" if tool[0] == "fi" else "ucx_perftest")
        ratio = f"{wm / tm:.2f}" if wm and tm else "-"
        table.append(f"| {label} | {names[fig]} ({units[fig]}) | {wm:.3g} | "
                     f"{f'{tm:.3g} ({tool_name})' if tm else '-'} | {ratio} |" if wm else
                     f"| {label} | {names[fig]} ({units[fig]}) | - | - | - |")
print("\n".join(table))
print(f"\n{rounds} interleaved rounds, medians; CSV in {path}", file=sys.stderr)
if args.doc:
    begin, end = "<!-- measured: begin (bench/backends.py --doc) -->", "<!-- measured: end -->"
    text = open(args.doc).read()
    if begin not in text or end not in text:
        sys.exit(f"{args.doc} has no {begin} ... {end} markers")
    day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    block = [begin, "", f"Generated by `bench/backends.py --rounds {rounds} --doc {args.doc}` on {day}, "
             f"{os.cpu_count()} cores: {rounds} interleaved round{'s' if rounds != 1 else ''}, medians.", ""] + table + ["", end]
    head, rest = text.split(begin, 1)
    open(args.doc, "w").write(head + "\n".join(block) + rest.split(end, 1)[1])
    print(f"wrote the table into {args.doc}", file=sys.stderr)
