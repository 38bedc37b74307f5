"""What bench/ratios.py and bench/eager_ratios.py share: running a Google Benchmark program and a
PyTorch script under the same glibc malloc settings (large blocks stay in the heap, so page
faults from fresh allocations do not dominate the large sizes for either side)."""
import json
import os
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824")


def run_benchmark(program, min_time, repetitions=9, extra=(), env=None):
    """Median real time in microseconds by (name, N, threads) (threads 1 when not an argument).

    The repetitions of all benchmarks run in a random interleaved order, so a change in the load
    of this shared machine falls on every benchmark alike and ratios of medians stay fair. `extra`:
    more arguments (e.g. --benchmark_filter=...); `env`: more environment variables."""
    out = subprocess.run([program, "--benchmark_format=json", f"--benchmark_min_time={min_time}",
                          f"--benchmark_repetitions={repetitions}", "--benchmark_enable_random_interleaving=true",
                          "--benchmark_report_aggregates_only=true", *extra],
                         env=dict(ENV, **(env or {})), check=True, capture_output=True, text=True).stdout
    times = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        parts = b["run_name"].split("/")
        n = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0  # 0: no size argument
        threads = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else 1
        threads = next((int(p[8:]) for p in parts if p.startswith("threads:")), threads)  # ->Threads(n)
        times[(parts[0], n, threads)] = b["real_time"]
    return times


def run_torch(script):
    """The script's JSON list (name, n, threads, us) by (name, n, threads); empty without PyTorch."""
    probe = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True)
    if probe.returncode != 0:
        return {}
    out = subprocess.run(["/usr/bin/python3", os.path.join(HERE, script)], env=ENV, check=True,
                         capture_output=True, text=True).stdout
    return {(r["name"], r["n"], r["threads"]): r["us"] for r in json.loads(out)}


def timed(fn):
    """Microseconds per call of fn: enough repetitions for about 0.06 s per round, at least 3;
    the median of 5 rounds, after one warm-up call (used by the PyTorch scripts)."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    reps = max(3, int(0.06 / once))
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        rounds.append((time.perf_counter() - start) / reps * 1e6)
    return statistics.median(rounds)
