#!/usr/bin/env python3
"""Runs bench_expr (and, when Debian's python3-torch is installed, torch_expr.py) and prints the
ratio table of docs/benchmarks.md.

Usage: bench/ratios.py [BUILD_DIR]  (default: build). Uses only the standard library.
Both programs run with the same glibc malloc settings (bench/side_by_side.py).
"""
import os
import sys

from side_by_side import run_benchmark, run_torch

build = sys.argv[1] if len(sys.argv) > 1 else "build"
ours = run_benchmark(os.path.join(build, "bench", "bench_expr"), 0.2)
torch = run_torch("torch_expr.py")

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

print()
print("| workload | N | `value_and_grad_into` µs | hand-written into µs | `value_and_grad` µs | into / hand |"
      " v&g / hand |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for workload in ["sum_square", "sin_exp", "lse", "normal"]:
    for n in [1, 16, 1000, 10000, 100000, 1000000, 10000000]:
        into = ours[(workload + "_into", n, 1)]
        hand = ours[(workload + "_handwritten_into", n, 1)]
        vg = ours[(workload + "_value_and_grad", n, 1)]
        print(f"| {workload} | {n:g} | {into:.3f} | {hand:.3f} | {vg:.3f} | {into / hand:.2f} | {vg / hand:.2f} |")

print()
print("| SIMD math, 4096 doubles in [-3, 3] | xsimd ns/element | tenferro ns/element | tenferro / xsimd |")
print("| --- | ---: | ---: | ---: |")
for fn in ["exp", "sin", "cos", "sincos", "pow"]:
    xs = ours[(f"math_{fn}_xsimd", 0, 1)] / 4096  # the math benchmarks report ns
    tf = ours[(f"math_{fn}_tenferro", 0, 1)] / 4096
    print(f"| {fn} | {xs:.3f} | {tf:.3f} | {tf / xs:.2f} |")
