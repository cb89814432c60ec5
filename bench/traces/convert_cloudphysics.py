"""Converts libCacheSim's sample block I/O trace into ``cloudphysics.npz``.

Usage: ``python convert_cloudphysics.py cloudPhysicsIO.csv cloudphysics.npz``

The input is the CSV form of the sample (``version,time,op,size,lbn``, one row per SCSI
request). The output keeps, in request order, what a miss-ratio replay needs: the first
logical block number of each request (``lbn``, uint32) and its length in 512-byte sectors
(``sectors``, uint16). Timestamps and the read/write opcode are dropped: the benchmark
replays every request as a get, then a set on a miss, as libCacheSim does.
"""

from __future__ import annotations

import csv
import sys

import numpy as np


def main(src: str, dst: str) -> None:
    lbn: list[int] = []
    sectors: list[int] = []
    with open(src, newline="") as f:
        for row in csv.DictReader(f):
            lbn.append(int(row["lbn"]))
            sectors.append((int(row["size"]) + 511) // 512)
    a = np.array(lbn, dtype=np.uint64)
    s = np.array(sectors, dtype=np.uint64)
    if a.max() >= 2**32 or s.max() >= 2**16:
        raise SystemExit("values do not fit the compact dtypes")
    np.savez_compressed(dst, lbn=a.astype(np.uint32), sectors=s.astype(np.uint16))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
