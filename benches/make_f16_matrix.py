#!/usr/bin/env python3
"""Writes a random float16 matrix as a `<f2` .npy (Python standard library
only), for the accuracy table of docs/guarantees.md (issue 19 item 2):
N(0, 0.02^2) entries, column j scaled by 10^(-j/(cols-1)) (condition about
30 at 2048 x 600), seed 7.

    benches/make_f16_matrix.py ROWS COLS OUT.npy
    specbound svd OUT.npy --precision f64 --json    # max_relative_radius
"""
import random
import struct
import sys


def main():
    rows, cols, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rng = random.Random(7)
    sc = [10 ** (-j / (cols - 1)) for j in range(cols)]
    vals = [rng.gauss(0, 0.02) * sc[j] for _ in range(rows) for j in range(cols)]
    hdr = "{'descr': '<f2', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    hdr += " " * (64 - (10 + len(hdr) + 1) % 64) + "\n"
    with open(out, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%de" % len(vals), *vals))


if __name__ == "__main__":
    main()
