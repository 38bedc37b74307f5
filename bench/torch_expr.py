#!/usr/bin/python3
"""PyTorch eager forward+backward for the workloads of bench_expr, as JSON on stdout.

Run with Debian's python3-torch (/usr/bin/python3). Arguments: none; the sizes and thread
counts match bench_expr's. Each entry: name, n, threads, median microseconds per iteration.
"""
import json
import math
import sys

import torch

from side_by_side import timed

torch.manual_seed(0)


def workloads(n):
    x0 = torch.rand(n, dtype=torch.float64) * 2 - 1
    y0 = torch.rand(n, dtype=torch.float64) * 2 - 1
    z0 = torch.rand(n, dtype=torch.float64) * 10 - 5
    d0 = torch.rand(n, dtype=torch.float64) * 6 - 3

    def sum_square():
        x = x0.clone().requires_grad_()
        (x * x).sum().backward()

    def sin_exp():
        x = x0.clone().requires_grad_()
        y = y0.clone().requires_grad_()
        (torch.sin(x) * y + torch.exp(x * y)).sum().backward()

    def lse():
        x = z0.clone().requires_grad_()
        torch.logsumexp(x, 0).backward()

    def normal():
        x = d0.clone().requires_grad_()
        mu = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
        sigma = torch.tensor(1.7, dtype=torch.float64, requires_grad=True)
        (-0.5 * ((x - mu) / sigma) ** 2 - torch.log(sigma)).sum().backward()

    return {"sum_square": sum_square, "sin_exp": sin_exp, "lse": lse, "normal": normal}


def main():
    results = []
    for n, threads in [(1000, 1), (100000, 1), (1000000, 1), (10000000, 1), (10000000, 2)]:
        torch.set_num_threads(threads)
        for name, fn in workloads(n).items():
            results.append({"name": name, "n": n, "threads": threads, "us": timed(fn)})
            print(f"{name}/{n}/{threads}: {results[-1]['us']:.1f} us", file=sys.stderr)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
