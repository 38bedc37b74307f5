#!/usr/bin/env python3
"""Runs bench_expr (and, when Debian's python3-torch is installed, torch_expr.py) and prints the
ratio table of docs/benchmarks.md.

Usage: bench/ratios.py [BUILD_DIR]  (default: build). Uses only the standard library.
Both programs run with the same glibc malloc settings (large blocks stay in the heap), so that
page faults from fresh allocations do not dominate the large sizes for either side.
"""
import json
import os
import subprocess
import sys

build = sys.argv[1] if len(sys.argv) > 1 else "build"
here = os.path.dirname(os.path.abspath(__file__))
env = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824")

out = subprocess.run([os.path.join(build, "bench", "bench_expr"), "--benchmark_format=json",
                      "--benchmark_min_time=0.2", "--benchmark_repetitions=3",
                      "--benchmark_report_aggregates_only=true"],
                     env=env, check=True, capture_output=True, text=True).stdout
ours = {}
for b in json.loads(out)["benchmarks"]:
    if b.get("aggregate_name") != "median":
        continue
    name, n, threads = b["run_name"].split("/")[:3]
    ours[(name, int(n), int(threads))] = b["real_time"]  # microseconds, median of 3

torch = {}
if os.path.exists("/usr/bin/python3"):
    probe = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True)
    if probe.returncode == 0:
        out = subprocess.run(["/usr/bin/python3", os.path.join(here, "torch_expr.py")], env=env, check=True,
                             capture_output=True, text=True).stdout
        for r in json.loads(out):
            torch[(r["name"], r["n"], r["threads"])] = r["us"]

print("| workload | N | threads | value_and_grad µs | value µs | hand-written µs | PyTorch µs |"
      " v&g / hand | v&g / value | PyTorch / v&g |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for workload in ["sum_square", "sin_exp", "lse", "normal"]:
    for (n, threads) in [(1000, 1), (100000, 1), (1000000, 1), (10000000, 1), (10000000, 2)]:
        vg = ours[(workload + "_value_and_grad", n, threads)]
        value = ours[(workload + "_value", n, threads)]
        hand = ours[(workload + "_handwritten", n, threads)]
        pt = torch.get((workload, n, threads))
        pt_text = f"{pt:.1f}" if pt else "-"
        ratio = f"{pt / vg:.1f}" if pt else "-"
        print(f"| {workload} | {n:.0e} | {threads} | {vg:.1f} | {value:.1f} | {hand:.1f} | {pt_text} |"
              f" {vg / hand:.2f} | {vg / value:.2f} | {ratio} |")
