"""Scale: summarize a generated N-rank folder with bounded memory, and cold vs warm (cache) load.

    python benchmarks/bench_scale.py --ranks 64
        [--template ../shared/traces/hta/diff_control/control.json.gz]
        [--generator copies|straggler] [--executor process|serial|dask|analysis]
        [--workdir /tmp/hta_scale]

Generates the folder once — byte-for-byte copies of a real trace with distinct ranks, or with
``--generator straggler`` the straggler generator's folder (``make_straggler_folder``: rank N // 3
late by 5 ms at each step's last long collective, clocks jittered) — then in fresh processes:
``summarize_folder`` cold (cache off), and again with the cache (first run fills it, second is
warm). Reports wall time, the parent's peak RSS, the largest worker's peak RSS, the
stragglers the batch's cross-rank tables name (from the workers' partials), and the time and
size of the batch's report.html (written after the summary: not in ``seconds``, but in the
peak RSS). ``--executor
analysis`` runs ``TraceAnalysis`` (process pool) + ``get_temporal_breakdown`` instead: the
driver of a multi-rank load.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_TEMPLATE = HERE.parent.parent / "shared/traces/hta/diff_control/control.json.gz"

CHILD = r"""
import json, os, resource, sys, time
folder, executor, cache = sys.argv[1], sys.argv[2], sys.argv[3]
cache = False if cache == "off" else cache
t = time.perf_counter()
if executor == "analysis":  # TraceAnalysis (process pool) + its first analysis
    from hta_lite import TraceAnalysis
    a = TraceAnalysis(trace_dir=folder, cache=cache, progress=False)
    out = {"temporal_breakdown": a.get_temporal_breakdown(visualize=False)}
else:
    from hta_lite.tools.batch import summarize_folder
    out = summarize_folder(folder, executor=executor, cache=cache)
seconds = time.perf_counter() - t
report = {}
if executor != "analysis":  # the batch's report.html (hta-lite batch -o)
    import tempfile
    from hta_lite.views.batch_report import write_batch_report
    t = time.perf_counter()
    page = write_batch_report(out, os.path.join(tempfile.mkdtemp(), "report.html"))
    report = {"report_seconds": time.perf_counter() - t, "report_mb": page.stat().st_size / 1e6}
causes = out.get("straggler_causes")
print(json.dumps({
    "seconds": seconds,
    "ranks": len(out["temporal_breakdown"]),
    "parent_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "worker_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    "stragglers": [] if causes is None else [int(r) for r in causes.get("rank", [])],
    **report,
}))
"""


def run(folder: Path, executor: str, cache: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), executor, cache],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--template", type=Path, default=DEFAULT_TEMPLATE)
    parser.add_argument("--generator", choices=("copies", "straggler"), default="copies")
    parser.add_argument("--executor", default="process")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/hta_scale"))
    args = parser.parse_args()
    from hta_lite.tools.synthetic import make_straggler_folder, replicate_trace

    folder = args.workdir / f"{args.generator}-{args.template.parent.name}-{args.ranks}"
    if not folder.exists() or len(list(folder.iterdir())) != args.ranks:
        t = time.perf_counter()
        if args.generator == "straggler":
            late = args.ranks // 3
            make_straggler_folder(args.template, folder, args.ranks, late, "host", seed=3)
        else:
            replicate_trace(args.template, folder, args.ranks)
        print(f"generated in {time.perf_counter() - t:.0f} s")
    gz_mb = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
    cache_dir = args.workdir / "cache"
    shutil.rmtree(cache_dir, ignore_errors=True)
    rows = [
        ("cold, cache off", run(folder, args.executor, "off")),
        ("cold, filling the cache", run(folder, args.executor, str(cache_dir))),
        ("warm, from the cache", run(folder, args.executor, str(cache_dir))),
    ]
    print(
        f"{args.ranks} ranks of {args.template.name} ({gz_mb:.0f} MB gzip),"
        f" executor={args.executor}"
    )
    print(
        "| run | seconds | parent peak RSS MB | largest worker peak RSS MB | stragglers named"
        " | report.html s, MB |\n|---|---|---|---|---|---|"
    )
    for name, r in rows:
        page = f"{r['report_seconds']:.1f}, {r['report_mb']:.1f}" if "report_mb" in r else "-"
        print(
            f"| {name} | {r['seconds']:.1f} | {r['parent_peak_rss_mb']:.0f}"
            f" | {r['worker_peak_rss_mb']:.0f} | {r['stragglers']} | {page} |"
        )


if __name__ == "__main__":
    main()
