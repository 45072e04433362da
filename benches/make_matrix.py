#!/usr/bin/env python3
"""Writes a test matrix A = U diag(s) V^T as a float64 .npy (Python standard
library only), for benches/auto_cost.sh.

    benches/make_matrix.py KIND ROWS COLS OUT.npy

KIND: `cluster` (singular values graded from 1 down to 1e-5, then a tight
near-cluster of 8 values 3e-6 (1 + k 1e-13)), or `graded` (1 down to 1e-5).
U and V are orthonormal columns from Gram-Schmidt (twice) on seeded Gaussian
vectors; the entries are rounded to float64, so the exact singular values are
close to, not equal to, s.
"""
import math
import random
import struct
import sys


def write_npy(path, rows, cols, data):
    hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    hdr += " " * (64 - (10 + len(hdr) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%dd" % len(data), *data))


def orthonormal(m, n, rng):
    cols = []
    for _ in range(n):
        v = [rng.gauss(0, 1) for _ in range(m)]
        for _ in range(2):
            for c in cols:
                d = sum(a * b for a, b in zip(v, c))
                v = [a - d * b for a, b in zip(v, c)]
        nv = math.sqrt(sum(a * a for a in v))
        cols.append([a / nv for a in v])
    return cols


def main():
    kind, m, n, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    if kind == "cluster":
        s = [10 ** (-5 * k / (n - 1)) for k in range(n - 8)]
        s += [3e-6 * (1 + 1e-13 * k) for k in range(8)]
    elif kind == "graded":
        s = [10 ** (-5 * k / (n - 1)) for k in range(n)]
    else:
        sys.exit(f"unknown kind {kind}")
    s.sort(reverse=True)
    rng = random.Random(42)
    u, v = orthonormal(m, n, rng), orthonormal(n, n, rng)
    data = [sum(u[k][i] * s[k] * v[k][j] for k in range(n)) for i in range(m) for j in range(n)]
    write_npy(out, m, n, data)


main()
