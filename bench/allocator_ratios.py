#!/usr/bin/env python3
"""Tensor buffers from tenferro's buffer cache against oneTBB's scalable allocator: bench_eager and
bench_expr (the benchmarks that allocate), each run alternately with TENFERRO_ALLOCATOR unset and
=tbb, ROUNDS times, so that a change in the machine's load falls on both alike. Prints the median
of the rounds' medians and their ratio. Both run with glibc's default malloc settings, as a
program does (no GLIBC_TUNABLES, unlike bench/ratios.py and bench/eager_ratios.py).

Usage: bench/allocator_ratios.py [BUILD_DIR] [ROUNDS]  (defaults: build, 3).
"""
import os
import statistics
import sys

from side_by_side import run_benchmark

build = sys.argv[1] if len(sys.argv) > 1 else "build"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
programs = [("bench_eager", "--benchmark_filter=^(buffer_churn|chain_forward|sin_exp|normal|lse|transposed|compact|row_|column_|i64|f64|c64)"),
            ("bench_expr", "--benchmark_filter=value_and_grad|_value/")]
samples = {}
for _ in range(rounds):
    for allocator in ["cache", "tbb"]:
        env = {"TENFERRO_ALLOCATOR": allocator, "GLIBC_TUNABLES": ""}
        for program, filt in programs:
            times = run_benchmark(os.path.join(build, "bench", program), 0.1, 3, [filt], env)
            for key, us in times.items():
                samples.setdefault((program,) + key, {}).setdefault(allocator, []).append(us)

print("| benchmark | N | threads | tenferro's allocator µs | oneTBB µs | oneTBB / tenferro's |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for (program, name, n, threads), by in sorted(samples.items()):
    cache, tbb = statistics.median(by["cache"]), statistics.median(by["tbb"])
    print(f"| {program} {name} | {n} | {threads} | {cache:.1f} | {tbb:.1f} | {tbb / cache:.2f} |")
