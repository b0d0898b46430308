"""Memory analyses: HTA's raw-timeline ``MemoryAnalysis`` side by side, and the cost of the
Kineto memory views.

Each job runs in a fresh process (imports excluded), median of ``--repeat`` (the raw timeline:
the two libraries taking turns):

- *raw timeline*: ``hta_lite.MemoryAnalysis(path).memory_by_category()`` against
  ``hta.memory_analysis.MemoryAnalysis(path)._process_raw_events()`` (what its chart plots), on
  the raw memory timeline of HTA's tests (``../shared/memory_timeline``, 64 KB of gzip, 16,845
  entries), when ``--hta-python`` names a venv with traceinsight 0.6.1; with ``--tile N`` also
  on that timeline repeated N times one after another in time (its entries from before
  profiling kept once), written to a temporary file: a longer recording;
- *Kineto memory views*: ``get_memory_timeline``, ``get_memory_peaks``, ``get_memory_lifetimes``,
  ``get_memory_by_operator`` and ``get_memory_by_step`` on a loaded trace recorded with
  ``profile_memory=True`` (HTA has no equivalent).

    python benchmarks/bench_memory.py [--hta-python /path/to/refvenv/bin/python] [--repeat 5]
        [--tile 40]
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

HERE = Path(__file__).resolve().parent
RAW = HERE.parent / "tests" / "data" / "memory_timeline" / "memory_timeline.raw.gz"
KINETO = [HERE.parent / "sample_traces" / "memory_leak"]

OURS_RAW = """
import json, sys, time
from hta_lite import MemoryAnalysis
t = time.perf_counter()
rows = len(MemoryAnalysis(sys.argv[1]).memory_by_category())
print(json.dumps({"seconds": time.perf_counter() - t, "rows": rows}))
"""
HTA_RAW = """
import json, logging, sys, time
logging.disable(logging.CRITICAL)
from hta.memory_analysis import MemoryAnalysis
t = time.perf_counter()
times, sizes = MemoryAnalysis(sys.argv[1])._process_raw_events()
print(json.dumps({"seconds": time.perf_counter() - t, "rows": len(times)}))
"""
OURS_VIEWS = """
import json, sys, time
from hta_lite import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1], parallel=False, progress=False, cache=False)
t = time.perf_counter()
a.get_memory_timeline(); a.get_memory_peaks(); a.get_memory_lifetimes()
a.get_memory_by_operator(); a.get_memory_by_step()
events = len(a.get_memory_events())
print(json.dumps({"seconds": time.perf_counter() - t, "rows": events}))
"""


def run(python: str, code: str, path: Path) -> dict:
    out = subprocess.run(
        [python, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(runs: list[dict]) -> dict | None:
    """The median seconds of ``runs`` and their rows (None: no runs)."""
    if not runs:
        return None
    return {"seconds": statistics.median(r["seconds"] for r in runs), "rows": runs[0]["rows"]}


def median(python: str, code: str, path: Path, repeat: int) -> dict:
    return summary([run(python, code, path) for _ in range(repeat)])


def turns(
    ours_python: str, hta_python: str | None, repeat: int, path: Path
) -> tuple[dict, dict | None]:
    """The raw timeline read by each library in turn (the machine's speed drifts), medians; the
    reference's also gets ``turn_ratio``, the median of its time over ours within each turn."""
    ours, hta = [], []
    for _ in range(repeat):
        ours.append(run(ours_python, OURS_RAW, path))
        if hta_python:
            hta.append(run(hta_python, HTA_RAW, path))
    ref = summary(hta)
    if ref:
        ratios = [h["seconds"] / o["seconds"] for o, h in zip(ours, hta, strict=True)]
        ref["turn_ratio"] = statistics.median(ratios)
    return summary(ours), ref


def tiled(path: Path, times: int, out: Path) -> Path:
    """``path``'s entries ``times`` times, each copy after the previous one in time (the
    entries from before profiling, ts -1, once), gzipped into ``out``."""
    rows = json.loads(gzip.decompress(path.read_bytes()))
    real = [r[0] for r in rows if r[0] >= 0]
    span = max(real) - min(real) + 1
    copies = [
        [[r[0] + k * span, *r[1:]] if r[0] >= 0 else r for r in rows if k == 0 or r[0] >= 0]
        for k in range(times)
    ]
    out.write_bytes(gzip.compress(json.dumps([r for c in copies for r in c]).encode(), 6))
    return out


def raw_row(label: str, ours: dict, hta: dict | None) -> str:
    ref = "- | - | -"
    if hta:
        speedup = hta["seconds"] / ours["seconds"]
        ref = f"{hta['seconds']:.4f} | {speedup:.1f}x | {hta['turn_ratio']:.1f}x"
    return f"| {label} | {ours['rows']} | {ours['seconds']:.4f} | {ref} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hta-python", help="python of a venv with traceinsight 0.6.1")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tile", type=int, default=0, help="also the timeline N times over")
    args = parser.parse_args()
    if RAW.exists():
        print(
            "| raw timeline | rows | hta_lite s | HTA s | speedup (of the medians) |"
            " median speedup within a turn |\n|---|---|---|---|---|---|"
        )
        ours, hta = turns(sys.executable, args.hta_python, args.repeat, RAW)
        print(raw_row(RAW.name, ours, hta))
        if args.tile > 1:
            with tempfile.TemporaryDirectory() as folder:
                path = tiled(RAW, args.tile, Path(folder) / "tiled.raw.gz")
                ours, hta = turns(sys.executable, args.hta_python, args.repeat, path)
                print(raw_row(f"{RAW.name} x {args.tile}", ours, hta))
    print("\n| Kineto memory views | memory events | hta_lite s |\n|---|---|---|")
    for folder in KINETO:
        views = median(sys.executable, OURS_VIEWS, folder, args.repeat)
        print(f"| {folder.name} | {views['rows']} | {views['seconds']:.4f} |")


if __name__ == "__main__":
    main()
