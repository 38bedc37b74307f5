#!/usr/bin/python3
"""Runs tenferro's random eager programs in PyTorch (float64) and compares the loss and gradients.

The programs, with tenferro's loss and gradients, come from the differential tester:

    TENFERRO_RANDOM_DUMP=/tmp/programs.jsonl TENFERRO_RANDOM_PROGRAMS=2000 build/tests/test_random_programs
    /usr/bin/python3 scripts/differential_torch.py /tmp/programs.jsonl

Needs Debian's python3-torch (apt-get install python3-torch), which serves /usr/bin/python3. Not part
of the test suite. Exits 1 when a program differs, printing its seed (rerun it with
TENFERRO_RANDOM_SEED=<seed> TENFERRO_RANDOM_PROGRAMS=1 for its C++ repro).

tenferro stores tensors column-major: a flat list of values of shape s is, in PyTorch, the row-major
tensor of the reversed shape, permuted back (`from_col_major`); reshape is column-major too.
"""
import json
import sys

import torch


def from_col_major(values, shape):
    rank = len(shape)
    t = torch.tensor(values, dtype=torch.float64).reshape(list(reversed(shape)) if rank else [])
    return t.permute(*reversed(range(rank))) if rank else t


def to_col_major(t):
    rank = t.dim()
    return (t.permute(*reversed(range(rank))) if rank else t).reshape(-1).tolist()


def reshape_col_major(t, shape):
    rank = t.dim()
    flipped = t.permute(*reversed(range(rank))) if rank else t
    out = flipped.reshape(list(reversed(shape)))
    return out.permute(*reversed(range(len(shape)))) if shape else out


def positive(t):
    return t.square() + 0.5


def reduce(t, ins, f):
    if ins["all_axes"]:
        return f(t, None)
    axes = ins["axes"]
    if not axes:
        return t
    return f(t, axes)


def prod(t, axes):
    if axes is None:
        return t.prod()
    for a in sorted(axes, reverse=True):
        t = t.prod(dim=a)
    return t


def run(program):
    leaves = [from_col_major(l["values"], l["shape"]).requires_grad_() for l in program["leaves"]]
    regs = list(leaves)
    for ins in program["code"]:
        a, b, op, c = regs[ins["a"]], regs[ins["b"]], ins["op"], ins["number"]
        unary = {"neg": torch.neg, "abs": torch.abs, "sign": torch.sign, "exp": torch.exp, "sin": torch.sin,
                 "cos": torch.cos, "tanh": torch.tanh, "expm1": torch.expm1, "square": torch.square,
                 "sigmoid": torch.sigmoid}
        if op in unary:
            v = unary[op](a)
        elif op in ("log", "sqrt", "rsqrt", "log1p"):
            v = getattr(torch, op)(positive(a))
        elif op == "add":
            v = a + b
        elif op == "sub":
            v = a - b
        elif op == "mul":
            v = a * b
        elif op == "div":
            v = a / positive(b)
        elif op == "pow":
            v = torch.pow(positive(a), b)
        elif op == "maximum":
            v = torch.maximum(a, b)
        elif op == "minimum":
            v = torch.minimum(a, b)
        elif op == "scale":
            v = a * c
        elif op == "add_scalar":
            v = a + c
        elif op == "rsub_scalar":
            v = c - a
        elif op == "rdiv_scalar":
            v = c / positive(a)
        elif op == "reduce_sum":
            v = reduce(a, ins, lambda t, d: t.sum() if d is None else t.sum(dim=d))
        elif op == "reduce_mean":
            v = reduce(a, ins, lambda t, d: t.mean() if d is None else t.mean(dim=d))
        elif op == "reduce_max":
            v = reduce(a, ins, lambda t, d: t.amax() if d is None else t.amax(dim=d))
        elif op == "reduce_min":
            v = reduce(a, ins, lambda t, d: t.amin() if d is None else t.amin(dim=d))
        elif op == "reduce_prod":
            v = reduce(a, ins, prod)
        elif op in ("reshape_merge", "reshape_split"):
            v = reshape_col_major(a, ins["shape"])
        elif op == "transpose":
            v = a.permute(*ins["axes"]) if ins["axes"] else a
        elif op == "matmul":
            k = a.shape[1]
            v = a @ from_col_major(ins["matrix"], [k, 2])
        elif op == "broadcast_to":
            v = a.expand(*program["base"]) if program["base"] else a
        elif op == "sum_to":
            v = a.sum_to_size(*program["leaves"][ins["leaf"]]["shape"]) if program["leaves"][ins["leaf"]]["shape"] else a.sum()
        else:
            raise ValueError("unknown op " + op)
        regs.append(v)
    out = regs[-1]
    w = from_col_major(program["weights"], list(out.shape))
    loss = (out * w).sum()
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return loss.item(), [to_col_major(g) if g is not None else [0.0] * len(l["values"])
                         for g, l in zip(grads, program["leaves"])]


def close(a, b, tol):
    return abs(a - b) <= tol * (1 + abs(b)) or (a != a and b != b)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/programs.jsonl"
    bad = total = 0
    with open(path) as f:
        for line in f:
            program = json.loads(line)
            total += 1
            loss, grads = run(program)
            problems = []
            if not close(program["loss"], loss, 1e-9):
                problems.append("loss %r, PyTorch %r" % (program["loss"], loss))
            for k, (g, want) in enumerate(zip(program["grads"], grads)):
                for i, (x, y) in enumerate(zip(g, want)):
                    if not close(x, y, 1e-9):
                        problems.append("leaf %d element %d: gradient %r, PyTorch %r" % (k, i, x, y))
                        break
            if problems:
                bad += 1
                print("seed %d: %s" % (program["seed"], "; ".join(problems)))
    print("%d programs, %d differ from PyTorch 1.13 (float64)" % (total, bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
