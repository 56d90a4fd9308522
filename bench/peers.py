# SPDX-License-Identifier: BSD-3-Clause
"""The peers a user would pick instead of Weft, run as the benchmarks run them: how to start
each system's benchmark (bench_weft, bench_mpich, bench_openmpi, ucx_perftest), the machine
probe, and parsers that turn what they print into rows of the one format of raw.csv:

    system api mode threads resources workload size value unit
"""
import os
import random
import re
import subprocess
import time

RESULT = re.compile(r"RESULT (.*)")


def parse(out):
    """RESULT key=value ... lines (bench_*, weft-probe, bench_resources) as dicts."""
    rows = []
    for line in out.splitlines():
        m = RESULT.search(line)
        if m:
            rows.append(dict(kv.split("=", 1) for kv in m.group(1).split() if "=" in kv))
    return rows


def launcher(system, n, build, bind):
    if system == "weft":
        return [os.path.join(build, "weftrun"), "-n", str(n), "--timeout", "300"] + ([] if bind else ["--bind-to", "none"])
    if system == "mpich":
        return ["mpiexec.mpich", "-n", str(n), "-bind-to", "core" if bind else "none"]
    if system == "openmpi":
        return ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", str(n), "--bind-to", "core" if bind else "none"]
    raise ValueError(system)


# ucx_perftest tests as rows: (test, size, api, workload). UCP tag matching is UCX's
# send/receive; ucp_am is its active messages. Latency is one-way (half the round trip).
# Its bandwidth test sends every message from one buffer into one buffer (run_stream_uni in
# ucx_perftest's ucp_tests.cc), the others' `bw --buffers one`: bandwidth_one.
UCX_TESTS = [
    ("tag_lat", 8, "tag", "latency"),
    ("ucp_am_lat", 8, "am", "latency"),
    ("tag_bw", 8, "tag", "rate"),
    ("ucp_am_bw", 8, "am", "rate"),
    ("tag_bw", 65536, "sr", "bandwidth_one"),
    ("tag_bw", 4194304, "sr", "bandwidth_one"),
]


def ucx_command(test, size, iters, tls="sm,self"):
    """The server and client command lines of one ucx_perftest run, pinned to cores 1 and 0
    as the other systems' ranks are (shown in the document's command list)."""
    port = str(random.randint(20000, 60000))
    common = ["-t", test, "-s", str(size), "-n", str(iters), "-f", "-v", "-p", port]
    return (["ucx_perftest"] + common + ["-c", "1"],
            ["ucx_perftest", "127.0.0.1"] + common + ["-c", "0"], {"UCX_TLS": tls})


def ucx_perftest(test, size, iters, tls="sm,self", timeout=300):
    """One run; the client's final CSV line as a dict (iterations, 50.0_percentile_lat,
    avg_lat, overall_lat (us), avg_bw, overall_bw (MiB/s), avg_mr, overall_mr (msg/s)),
    or None when it failed."""
    server, client, env = ucx_command(test, size, iters, tls)
    e = dict(os.environ, **env)
    srv = subprocess.Popen(server, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        out = ""
        for _ in range(20):  # the server may not listen yet
            p = subprocess.run(client, env=e, capture_output=True, text=True, timeout=timeout)
            out = p.stdout
            if p.returncode == 0 and "iterations" in out:
                break
            time.sleep(0.2)
        lines = [l for l in out.splitlines() if l.strip()]
        for i, l in enumerate(lines):
            if l.startswith("iterations,") and i + 1 < len(lines):
                return dict(zip(l.split(","), (float(x) for x in lines[i + 1].split(","))))
        return None
    finally:
        try:
            srv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def ucx_iters(workload, size, lat_iters, rate_iters, bw_bytes):
    """The same amount of work the other systems get: ping-pongs, messages, bytes."""
    if workload == "latency":
        return lat_iters
    if workload == "rate":
        return rate_iters
    return max(64, bw_bytes // size)


def ucx_figure(r, workload):
    """(value, unit) of one ucx_perftest result for a workload, in raw.csv's units."""
    if workload == "latency":
        return r["overall_lat"], "us"
    if workload == "rate":
        return r["overall_mr"] / 1e6, "Mmsg/s"
    return r["overall_bw"] * 1048576 / 1e9, "GB/s"  # MiB/s
