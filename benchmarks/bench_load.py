"""Cold-load benchmark: hta_lite vs the reference (traceinsight) vs the floor (gunzip +
orjson.loads).

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
            "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in rs),
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
        "| trace | MB (json) | hta_lite cold s | no C s | hta_lite warm s | reference s | floor s"
        " | cold speedup | no C speedup | warm speedup | cold vs floor | RSS hta_lite MB"
        " | RSS ref MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
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
            ref_s = f"{ref['seconds']:.3f}" if ref else "-"
            speedup = f"{ref['seconds'] / ours['seconds']:.1f}x" if ref else "-"
            no_c_speedup = f"{ref['seconds'] / no_c['seconds']:.1f}x" if ref else "-"
            warm_speedup = f"{ref['seconds'] / warm['seconds']:.0f}x" if ref else "-"
            ref_rss = f"{ref['peak_rss_mb']:.0f}" if ref else "-"
            print(
                f"| {folder.name} | {mb:.1f} | {ours['seconds']:.3f} | {no_c['seconds']:.3f}"
                f" | {warm['seconds']:.3f} | {ref_s} | {floor['seconds']:.3f} | {speedup}"
                f" | {no_c_speedup} | {warm_speedup} | {ours['seconds'] / floor['seconds']:.2f}x"
                f" | {ours['peak_rss_mb']:.0f} | {ref_rss} |",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
