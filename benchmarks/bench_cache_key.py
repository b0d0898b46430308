"""What the cache's integrity checks cost: the key over a whole trace file's content, and the
checksum of a cached table when it is first read.

    python benchmarks/bench_cache_key.py [--mb 210] [--repeat 5]

*key*: :func:`hta_lite.load.cache.entry_key` of a file of ``--mb`` MB (random bytes, as
incompressible as gzip), read from the page cache: size, time, BLAKE2 of its first and last
64 KiB, and the CRC32 (isal) of every byte; median of ``--repeat``. *checksum*: the CRC32 of the
largest cached table of the two-rank sample against reading it without one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from isal.isal_zlib import crc32

from hta_lite.load import cache

HERE = Path(__file__).resolve().parent


def median_seconds(call, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=210)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.json.gz"
        with open(path, "wb") as f:
            for _ in range(args.mb):
                f.write(os.urandom(1 << 20))
        path.read_bytes()  # in the page cache, as a reopened trace usually is
        key = median_seconds(lambda: cache.entry_key(path, False), args.repeat)
        print(f"entry_key of a {args.mb} MB file: {key * 1000:.1f} ms ({args.mb / key:,.0f} MB/s)")
        data = os.urandom(8 << 20)
        crc = median_seconds(lambda: crc32(data), args.repeat * 4)
        print(f"CRC32 of an 8 MB cached table: {crc * 1000:.2f} ms")


if __name__ == "__main__":
    main()
