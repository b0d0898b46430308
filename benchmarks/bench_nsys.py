"""Nsight Systems reader speed: a synthetic export of N kernels (each with its launching
``cudaLaunchKernel_v7000`` call, one copy every 20 kernels, an NVTX range every 100) built with the
real schema's columns, read by hta_lite (``readers.nsys.read``: the tables of the contract, and
``parse_parts``: with the finishing step) against ``pandas.read_sql`` of the same nsys tables
(kernels, runtime calls, copies, NVTX, strings: what a reader must read, before any work).

    python benchmarks/bench_nsys.py [--kernels 2000000] [--repeat 3]

Prints one JSON line per measurement (seconds, median of the repeats; ns per event), then the
peak RSS of a fresh process reading the export (``readers.nsys.read``), of its imports alone, and
what the read adds per event.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hta_lite.load.rank_trace import parse_parts
from hta_lite.load.readers import nsys

# the columns hta_lite reads, as nsys 2025.1 declares them (../shared/nsys/SCHEMA_DUMP_*.sql)
SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
  shortName INTEGER NOT NULL, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL,
  gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
  blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL,
  dynamicSharedMemory INTEGER NOT NULL, graphNodeId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
  eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
  returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL,
  srcKind INTEGER, dstKind INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
  rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
  endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
"""
PID, TID = 4242, 4242
GLOBAL_PID = PID << 24
GLOBAL_TID = GLOBAL_PID | TID


def build(path: Path, kernels: int) -> int:
    """The export; returns its event count (kernels, calls, copies, ranges)."""
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    names = [f"void kernel_{i}<float>(float*, int)" for i in range(50)] + ["cudaLaunchKernel_v7000",
             "cudaMemcpyAsync_v3020"]  # fmt: skip
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", enumerate(names))
    con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '', '')")
    i = np.arange(kernels, dtype=np.int64)
    launch = 1_000 + i * 10_000
    start = launch + 5_000
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES"
        " (?,?,0,1,7,?,?,?,?,32,128,1,1,256,1,1,0,0,NULL)",
        zip(start.tolist(), (start + 4_000).tolist(), i.tolist(), [GLOBAL_PID] * kernels,
            (i % 50).tolist(), (i % 50).tolist()),
    )  # fmt: skip
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,0,?,?,50,0,NULL)",
        zip(launch.tolist(), (launch + 2_000).tolist(), [GLOBAL_TID] * kernels, i.tolist()),
    )  # fmt: skip
    copies = i[::20]
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,0,1,8,?,?,1048576,1,0,2)",
        zip((start[::20] + 4_500).tolist(), (start[::20] + 4_900).tolist(),
            (kernels + copies).tolist(), [GLOBAL_PID] * len(copies)),
    )  # fmt: skip
    ranges = i[::100]
    con.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?,?,59,?,?)",
        zip(launch[::100].tolist(), (launch[::100] + 999_000).tolist(),
            ["layer"] * len(ranges), [GLOBAL_TID] * len(ranges)),
    )  # fmt: skip
    con.commit()
    con.close()
    return 2 * kernels + len(copies) + len(ranges)


def read_sql(path: Path) -> None:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    for table in ("StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
                  "CUPTI_ACTIVITY_KIND_MEMCPY", "NVTX_EVENTS"):  # fmt: skip
        pd.read_sql(f"SELECT * FROM {table}", con)
    con.close()


PEAK = """
import sys
from pathlib import Path
from hta_lite.load.readers import nsys
def hwm():  # this process's peak RSS in kB (VmHWM: not the parent's, unlike ru_maxrss after a fork)
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
base = hwm()
if sys.argv[1] == "read":
    nsys.read(Path(sys.argv[2]))
print(base, hwm())
"""


def peak_rss_mb(path: Path) -> tuple[float, float]:
    """(peak RSS of the imports, of the imports and a read) in MB, each in a fresh process."""
    runs = [
        subprocess.run([sys.executable, "-c", PEAK, job, str(path)], capture_output=True, text=True,
                       check=True).stdout.split()
        for job in ("imports", "read")
    ]  # fmt: skip
    return int(runs[0][1]) / 1024, int(runs[1][1]) / 1024


def timed(work, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        work()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kernels", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "report.sqlite"
        events = build(path, args.kernels)
        results = {
            "pandas.read_sql (the nsys tables)": timed(lambda: read_sql(path), args.repeat),
            "hta_lite reader (contract tables)": timed(lambda: nsys.read(path), args.repeat),
            "hta_lite parse_parts (+ finishing step)": timed(
                lambda: parse_parts(path), args.repeat
            ),
        }
        imports, peak = peak_rss_mb(path)
        size = path.stat().st_size
    for name, seconds in results.items():
        print(json.dumps({"kernels": args.kernels, "events": events, "what": name,
                          "seconds": round(seconds, 3),
                          "ns_per_event": round(1e9 * seconds / events)}))  # fmt: skip
    print(json.dumps({"kernels": args.kernels, "events": events, "export_mb": round(size / 2**20),
                      "peak_rss_mb": round(peak), "imports_rss_mb": round(imports),
                      "bytes_per_event_above_imports":
                          round((peak - imports) * 2**20 / events)}))  # fmt: skip


if __name__ == "__main__":
    main()
