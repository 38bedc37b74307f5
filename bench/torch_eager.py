#!/usr/bin/python3
"""PyTorch eager timings for the workloads of bench_eager, as JSON on stdout.

Run with Debian's python3-torch (/usr/bin/python3). Each entry: name, n, threads, median
microseconds per iteration (and per op for the chains).
"""
import json

import torch

from side_by_side import timed

torch.manual_seed(0)


def chain(x):
    y = x
    for _ in range(25):
        y = torch.tanh(torch.sin(y) + 0.5) * x
    return y


results = []
torch.set_num_threads(1)
for n in (1, 1000):
    x = (torch.rand(n, dtype=torch.float64) * 2 - 1).requires_grad_()

    def forward():
        chain(x)

    def forward_backward():
        chain(x).sum().backward()
        x.grad = None

    results.append({"name": "chain_forward", "n": n, "threads": 1, "us": timed(forward) / 100})
    results.append({"name": "chain_forward_backward", "n": n, "threads": 1, "us": timed(forward_backward) / 100})

n = 1000000
x0 = torch.rand(n, dtype=torch.float64) * 2 - 1
y0 = torch.rand(n, dtype=torch.float64) * 2 - 1
for threads in (1, 2):
    torch.set_num_threads(threads)

    def sin_exp():
        x = x0.detach().requires_grad_()  # shares x0's buffer, like requires_grad_in
        y = y0.detach().requires_grad_()
        (torch.sin(x) * y + torch.exp(x * y)).sum().backward()

    results.append({"name": "sin_exp", "n": n, "threads": threads, "us": timed(sin_exp)})

torch.set_num_threads(1)
xn = torch.rand(n, dtype=torch.float64) * 4 - 2
mu0 = torch.tensor(0.3, dtype=torch.float64)
sigma0 = torch.tensor(1.7, dtype=torch.float64)


def normal():
    mu = mu0.detach().requires_grad_()
    sigma = sigma0.detach().requires_grad_()
    (-0.5 * torch.square((xn - mu) / sigma) - torch.log(sigma)).sum().backward()


def lse():
    x = x0.detach().requires_grad_()
    m = x.detach().max()
    (torch.log(torch.exp(x - m).sum()) + m).backward()


xi = torch.randint(-1000, 1001, (n,), dtype=torch.int64)
yi = torch.randint(-1000, 1001, (n,), dtype=torch.int64)
zc = torch.complex(x0, y0)
wc = torch.complex(y0, torch.full((n,), 0.5, dtype=torch.float64))


def c64_abs_backward():
    z = zc.detach().requires_grad_()
    torch.exp(z * wc).abs().sum().backward()


results.append({"name": "i64_mul_add", "n": n, "threads": 1, "us": timed(lambda: xi * yi + xi)})
results.append({"name": "f64_less", "n": n, "threads": 1, "us": timed(lambda: x0 < y0)})
results.append({"name": "c64_mul_exp", "n": n, "threads": 1, "us": timed(lambda: torch.exp(zc * wc))})
results.append({"name": "c64_abs_backward", "n": n, "threads": 1, "us": timed(c64_abs_backward)})
results.append({"name": "normal", "n": n, "threads": 1, "us": timed(normal)})
results.append({"name": "lse", "n": n, "threads": 1, "us": timed(lse)})

m = 1000
xm = torch.rand(m, m, dtype=torch.float64) * 2 - 1
ym = torch.rand(m, m, dtype=torch.float64) * 2 - 1
row = torch.rand(1, m, dtype=torch.float64) * 2 - 1
column = torch.rand(m, 1, dtype=torch.float64) * 2 - 1
xt_compact = xm.t().contiguous()
results.append({"name": "transposed_mul", "n": m, "threads": 1, "us": timed(lambda: xm.t() * ym)})
results.append({"name": "compact_mul", "n": m, "threads": 1, "us": timed(lambda: xt_compact * ym)})
results.append({"name": "row_broadcast_mul", "n": m, "threads": 1, "us": timed(lambda: xm * row)})
results.append({"name": "column_broadcast_mul", "n": m, "threads": 1, "us": timed(lambda: xm * column)})
for n, threads in ((64, 1), (256, 1), (1024, 1), (1024, 2)):
    torch.set_num_threads(threads)
    xa = torch.rand(n, n, dtype=torch.float64) * 2 - 1
    ya = torch.rand(n, n, dtype=torch.float64) * 2 - 1

    def matmul_backward():
        x = xa.detach().requires_grad_()
        y = ya.detach().requires_grad_()
        (x @ y).sum().backward()

    results.append({"name": "matmul_forward", "n": n, "threads": threads, "us": timed(lambda: xa @ ya)})
    results.append({"name": "matmul_backward", "n": n, "threads": threads, "us": timed(matmul_backward)})
print(json.dumps(results))
