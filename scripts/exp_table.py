#!/usr/bin/env python3
"""Prints the constants of the AVX-512 exp kernel (include/tenferro/expr/ops/math.hpp): the table
of 2^(j/16) with each entry's relative rounding error, the coefficients of Q in
e^r - 1 = r + r^2 Q(r) on |r| <= ln2/32, the split of ln2/16, and the worst absolute error of
r^2 Q with the coefficients rounded to double.

Needs mpmath (Debian: python3-mpmath). Usage: /usr/bin/python3 scripts/exp_table.py
"""
import struct

import mpmath as mp

mp.mp.dps = 60
half_width = mp.log(2) / 32 * mp.mpf("1.0001")  # a little beyond the reduced range


def q(r):
    return mp.mpf(1) / 2 if abs(r) < mp.mpf("1e-30") else (mp.exp(r) - 1 - r) / r**2


poly = mp.chebyfit(q, [-half_width, half_width], 6)
coefficients = [float(c) for c in reversed(poly)]  # Q_0 ... Q_5
worst = max(abs(r**2 * (sum(mp.mpf(c) * r**i for i, c in enumerate(coefficients)) - q(r)))
            for r in (-half_width + 2 * half_width * i / 4000 for i in range(4001)))
print("Q:", ", ".join(c.hex() for c in coefficients))
print("worst |r^2 Q - (e^r - 1 - r)|: 2^%.1f" % float(mp.log(worst, 2)))
for j in range(16):
    exact = mp.mpf(2) ** (mp.mpf(j) / 16)
    table = float(exact)
    print("2^(%2d/16): %s, relative error %s" % (j, table.hex(), float((exact - table) / table).hex()))
ln2_16 = mp.log(2) / 16
bits = struct.unpack("<Q", struct.pack("<d", float(ln2_16)))[0] & ~((1 << 16) - 1)
hi = struct.unpack("<d", struct.pack("<Q", bits))[0]  # the low 16 bits of the mantissa cleared
print("ln2/16:", hi.hex(), "+", float(ln2_16 - hi).hex(), "; 16/ln2:", float(1 / ln2_16).hex())
