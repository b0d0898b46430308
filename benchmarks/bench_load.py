"""Load benchmark: hta_lite (cold, without C, warm) vs the reference (traceinsight) vs the floor
(gunzip + orjson.loads).

Cold and the reference: load + ``get_temporal_breakdown`` (the first analysis); warm: the same
from the cache, against the reference's load alone.

Each measurement runs in a fresh process (imports excluded from the time); the jobs of one
trace take turns, ``--repeat`` rounds, so that each sees the same machine load; the table
shows medians. Peak RSS is the child's ru_maxrss. *cold* uses the C decoder when it is built;
*no C* is the same load through the pure-Python (msgspec) decoder (``HTA_LITE_NO_C=1``).

    python benchmarks/bench_load.py --ref-python /path/to/refvenv/bin/python [--min-mb 10]

The reference venv: ``python -m venv refvenv && refvenv/bin/pip install traceinsight "pandas<3"``.
Traces: every folder of ../shared/traces holding one file of at least ``--min-mb`` MB uncompressed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_TRACES = HERE.parent.parent / "shared" / "traces"


def run_once(python: str, job: str, folder: Path, env: dict | None = None) -> dict:
    target = (
        folder
        if job != "floor"
        else next(p for p in folder.iterdir() if p.name.endswith((".json", ".gz")))
    )
    out = subprocess.run(
        [python, str(HERE / "_measure.py"), job, str(target)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_interleaved(jobs: dict[str, tuple], folder: Path, repeat: int) -> dict[str, dict]:
    """Run every job once per round, ``repeat`` rounds, so that all see the same machine load;
    returns the median seconds and peak RSS of each."""
    runs: dict[str, list] = {name: [] for name in jobs}
    for _ in range(repeat):
        for name, (python, job, env) in jobs.items():
            runs[name].append(run_once(python, job, folder, env))
    return {
        name: {
            "seconds": statistics.median(r["seconds"] for r in rs),
            "with_first_call": statistics.median(r["seconds"] + r.get("first_call", 0) for r in rs),
            "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in rs),
            # what the load itself adds: the imports' RSS depends on the machine's kernel (one
            # that maps a shared library's pages a large folio at a time counts far more)
            "above_imports_mb": statistics.median(
                r["peak_rss_mb"] - r.get("import_rss_mb", 0.0) for r in rs
            ),
            "runs": rs,
        }
        for name, rs in runs.items()
    }


def uncompressed_mb(folder: Path) -> float:
    total = 0
    for p in folder.iterdir():
        if p.name.endswith(".gz"):
            with gzip.open(p) as f:
                total += len(f.read())
        elif p.name.endswith(".json"):
            total += p.stat().st_size
    return total / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--ref-python", help="python of a venv with traceinsight + pandas<3")
    parser.add_argument("--min-mb", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args()
    folders = [
        f for f in sorted(args.traces.glob("*/*")) if f.is_dir() and len(list(f.iterdir())) == 1
    ]
    folders = [(f, uncompressed_mb(f)) for f in folders]
    folders = [(f, mb) for f, mb in folders if mb >= args.min_mb]
    results = {}
    print(
        "| trace | MB (json) | cold s | no C s | warm s | reference load s | reference s | floor s"
        " | cold speedup | no C speedup | warm speedup | RSS hta_lite MB | RSS ref MB | RSS ratio |"
        " above imports: hta_lite / ref MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    speedups: dict[str, list] = {"cold": [], "warm": [], "rss": []}
    with tempfile.TemporaryDirectory() as cache_dir:
        for folder, mb in folders:
            warm_env = {"HTA_LITE_CACHE_DIR": cache_dir}
            run_once(sys.executable, "ours_warm", folder, warm_env)  # fills the cache
            jobs = {
                "ours": (sys.executable, "ours", None),
                "no_c": (sys.executable, "ours", {"HTA_LITE_NO_C": "1"}),
                "warm": (sys.executable, "ours_warm", warm_env),
                "floor": (sys.executable, "floor", None),
            }
            if args.ref_python:
                jobs["reference"] = (args.ref_python, "reference", None)
            measured = measure_interleaved(jobs, folder, args.repeat)
            ours, no_c, warm, floor, ref = (
                measured["ours"],
                measured["no_c"],
                measured["warm"],
                measured["floor"],
                measured.get("reference"),
            )
            results[folder.name] = {"mb": mb, **measured}
            cold_s, no_c_s, warm_s = (
                m["with_first_call"] for m in (ours, no_c, warm)
            )  # load + get_temporal_breakdown
            cells = ["-"] * 7
            if ref:
                ref_s = ref["with_first_call"]
                speedups["cold"].append(ref_s / cold_s)
                speedups["warm"].append(ref["seconds"] / warm_s)  # against the reference's load
                speedups["rss"].append(ours["peak_rss_mb"] / ref["peak_rss_mb"])
                cells = [
                    f"{ref['seconds']:.3f}", f"{ref_s:.3f}", f"{ref_s / cold_s:.1f}x",
                    f"{ref_s / no_c_s:.1f}x", f"{ref['seconds'] / warm_s:.0f}x",
                    f"{ref['peak_rss_mb']:.0f}", f"{ref['above_imports_mb']:.0f}",
                ]  # fmt: skip
            print(
                f"| {folder.name} | {mb:.1f} | {cold_s:.3f} | {no_c_s:.3f} | {warm_s:.4f}"
                f" | {cells[0]} | {cells[1]} | {floor['seconds']:.3f} | {cells[2]} | {cells[3]}"
                f" | {cells[4]} | {ours['peak_rss_mb']:.0f} | {cells[5]}"
                f" | {speedups['rss'][-1] if ref else 0:.2f}"
                f" | {ours['above_imports_mb']:.0f} / {cells[6]} |",
                flush=True,
            )
    if speedups["cold"]:
        print(
            f"median: cold {statistics.median(speedups['cold']):.1f}x,"
            f" warm {statistics.median(speedups['warm']):.0f}x,"
            f" peak RSS {statistics.median(speedups['rss']):.2f} of the reference's"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
