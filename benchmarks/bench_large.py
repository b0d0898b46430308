"""One large trace: load time and peak RSS per GB of JSON.

    python benchmarks/bench_large.py [--gb 1.0] [--template TRACE.json.gz] [--repeat 3]

The template's events are repeated, each copy shifted past the previous one in time, until the
JSON text is about ``--gb`` GB; written gzip-compressed (level 1) to a temporary folder. Each
load runs in a fresh process with the cache off: ``TraceAnalysis`` (the C decoder reading the
file in pieces, two threads where a second CPU is free) and ``get_temporal_breakdown``; the
child's peak RSS (ru_maxrss) and its imports' RSS are reported, median of ``--repeat``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE.parent / "sample_traces" / "two_ranks" / "sampled_rank-0.json.gz"

CHILD = r"""
import json, resource, sys, time
from hta_lite import TraceAnalysis
import pandas, pyarrow  # the imports' share of the peak
imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
start = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1], cache=False, progress=False)
analysis.get_temporal_breakdown(visualize=False)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak, "imports_mb": imports}))
"""


def make(template: Path, gb: float, folder: Path) -> int:
    """Write the tiled trace; returns its JSON size in bytes."""
    doc = json.loads(gzip.decompress(template.read_bytes()))
    events = doc.pop("traceEvents")
    stamped = [e for e in events if "ts" in e]
    span = max(float(e["ts"]) + float(e.get("dur", 0) or 0) for e in stamped) - min(
        float(e["ts"]) for e in stamped
    )
    one = len(msgspec.json.encode(events))
    copies = max(1, int(gb * 1e9 / one))
    head = msgspec.json.encode(doc)[:-1] + b', "traceEvents": ['
    written = 0
    with gzip.open(folder / "rank-0.json.gz", "wb", compresslevel=1) as out:
        out.write(head)
        for copy in range(copies):
            shift = copy * (span + 1000.0)
            moved = [{**e, "ts": float(e["ts"]) + shift} if "ts" in e else e for e in events]
            text = msgspec.json.encode(moved)[1:-1]
            out.write((b"," if copy else b"") + text)
            written += len(text)
        out.write(b"]}")
    return written + len(head)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--template", type=Path, default=TEMPLATE)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        size = make(args.template, args.gb, folder)
        gz = (folder / "rank-0.json.gz").stat().st_size
        runs = []
        for _ in range(args.repeat):
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(folder)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        seconds = statistics.median(r["seconds"] for r in runs)
        peak = statistics.median(r["peak_mb"] for r in runs)
        imports = statistics.median(r["imports_mb"] for r in runs)
        gb = size / 1e9
        print(
            f"JSON {gb:.2f} GB ({gz / 1e6:.0f} MB gzip): load + temporal breakdown {seconds:.1f} s"
        )
        print(
            f"peak RSS {peak:,.0f} MB (imports {imports:,.0f} MB):"
            f" {(peak - imports) / 1e3 / gb:.2f} GB per GB of JSON above the imports"
        )


if __name__ == "__main__":
    main()
