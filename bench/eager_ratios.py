#!/usr/bin/env python3
"""Runs bench_eager (and, when Debian's python3-torch is installed, torch_eager.py) and prints the
eager table of docs/benchmarks.md.

Usage: bench/eager_ratios.py [BUILD_DIR]  (default: build). Uses only the standard library. Both
sides run with the same glibc malloc settings (bench/side_by_side.py).
"""
import os
import sys

from side_by_side import run_benchmark, run_torch

build = sys.argv[1] if len(sys.argv) > 1 else "build"
ours = run_benchmark(os.path.join(build, "bench", "bench_eager"), 0.3)
torch = run_torch("torch_eager.py")

print("| chain of 100 ops | N | tenferro µs/op | PyTorch µs/op | tenferro / PyTorch |")
print("| --- | ---: | ---: | ---: | ---: |")
for name in ["chain_forward", "chain_forward_backward"]:
    for n in [1, 1000]:
        us = ours[(name, n, 1)] / 100
        pt = torch.get((name, n, 1))
        print(f"| {name} | {n} | {us:.2f} | {pt:.2f} | {us / pt:.2f} |" if pt else f"| {name} | {n} | {us:.2f} | - | - |")
print()
print("| sum(sin(x)*y + exp(x*y)), N = 1e6 | threads | µs | / engine value_and_grad | / PyTorch |")
print("| --- | ---: | ---: | ---: | ---: |")
for threads in [1, 2]:
    engine = ours[("sin_exp_engine", 1000000, threads)]
    pt = torch.get(("sin_exp", 1000000, threads))
    for name in ["sin_exp_op_by_op", "sin_exp_apply", "sin_exp_engine"]:
        us = ours[(name, 1000000, threads)]
        vs_pt = f"{us / pt:.2f}" if pt else "-"
        print(f"| {name} | {threads} | {us:.0f} | {us / engine:.2f} | {vs_pt} |")
    if pt:
        print(f"| PyTorch forward+backward | {threads} | {pt:.0f} | {pt / engine:.2f} | 1.00 |")
print()
print("| one thread, N = 1e6, forward + backward | µs | / engine, arrays | / engine, numbers | / PyTorch |")
print("| --- | ---: | ---: | ---: | ---: |")
for workload, names in [("normal", ["normal_op_by_op", "normal_apply", "normal_apply_scalars", "normal_engine",
                                    "normal_engine_numbers"]),
                        ("lse", ["lse_op_by_op", "lse_engine"])]:
    engine = ours[(f"{workload}_engine", 1000000, 1)]
    numbers = ours.get((f"{workload}_engine_numbers", 1000000, 1))
    pt = torch.get((workload, 1000000, 1))
    for name in names:
        us = ours[(name, 1000000, 1)]
        vs_pt = f"{us / pt:.2f}" if pt else "-"
        vs_numbers = f"{us / numbers:.2f}" if numbers else "-"
        print(f"| {name} | {us:.0f} | {us / engine:.2f} | {vs_numbers} | {vs_pt} |")
    if pt:
        print(f"| PyTorch {workload} | {pt:.0f} | {pt / engine:.2f} | {pt / numbers:.2f} | 1.00 |" if numbers
              else f"| PyTorch {workload} | {pt:.0f} | {pt / engine:.2f} | - | 1.00 |")
print()
print("| other dtypes, one thread, N = 1e6 | tenferro µs | PyTorch µs | tenferro / PyTorch |")
print("| --- | ---: | ---: | ---: |")
for name, label in [("i64_mul_add", "i64 `x * y + x`"), ("f64_less", "f64 `x < y` to bool"),
                    ("c64_mul_exp", "c64 `exp(z * w)`"), ("c64_abs_backward", "c64 `sum(abs(exp(z * w)))` + backward")]:
    us = ours[(name, 1000000, 1)]
    pt = torch.get((name, 1000000, 1))
    print(f"| {label} | {us:.0f} | {pt:.0f} | {us / pt:.2f} |" if pt else f"| {label} | {us:.0f} | - | - |")
print()
print("| one thread, 1000 x 1000 f64, forward | tenferro µs | PyTorch µs | tenferro / PyTorch |")
print("| --- | ---: | ---: | ---: |")
for name, label in [("transposed_mul", "`x.T * y`, `x.T` a view"), ("compact_mul", "`x.T * y`, `x.T` compacted before"),
                    ("row_broadcast_mul", "`x * row`, row `[1, n]`"),
                    ("column_broadcast_mul", "`x * column`, column `[n, 1]`")]:
    us = ours[(name, 1000, 1)]
    pt = torch.get((name, 1000, 1))
    print(f"| {label} | {us:.0f} | {pt:.0f} | {us / pt:.2f} |" if pt else f"| {label} | {us:.0f} | - | - |")
print()
print("| n x n f64 | threads | forward µs | / dgemm | / PyTorch | forward + backward µs | vjp / forward | / PyTorch |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for n, threads in [(64, 1), (256, 1), (1024, 1), (1024, 2)]:
    fwd, both = ours[("matmul_forward", n, threads)], ours[("matmul_backward", n, threads)]
    blas = ours.get(("matmul_blas", n, threads))
    pf, pb = torch.get(("matmul_forward", n, threads)), torch.get(("matmul_backward", n, threads))
    cols = [f"{fwd:.0f}", f"{fwd / blas:.2f}" if blas else "-", f"{fwd / pf:.2f}" if pf else "-",
            f"{both:.0f}", f"{(both - fwd) / fwd:.2f}", f"{both / pb:.2f}" if pb else "-"]
    print(f"| {n} | {threads} | " + " | ".join(cols) + " |")
