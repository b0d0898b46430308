"""Worker start methods: a cold multi-rank load with workers started by fork, forkserver, spawn.

    python benchmarks/bench_start_method.py [--ranks 8] [--template TRACE.json.gz] [--repeat 3]

``TraceAnalysis`` forks its workers where that is safe and uses forkserver where it is not (a
notebook kernel, a process with other threads; hta_lite.load.workers.start_method). This measures
what that costs: each load runs in a fresh process (imports excluded), cache off, all cores,
median of ``--repeat`` runs per method, methods interleaved.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_TEMPLATE = HERE.parent / "sample_traces/two_ranks/sampled_rank-0.json.gz"

CHILD = r"""
import json, sys, time
from hta_lite import LoadOptions, TraceAnalysis
folder, method = sys.argv[1], sys.argv[2]
options = LoadOptions(cache=False, progress=False, start_method=method)
seconds = []
for _ in range(2):  # the first load starts the forkserver; a notebook's next loads reuse it
    t = time.perf_counter()
    TraceAnalysis(trace_dir=folder, options=options)
    seconds.append(time.perf_counter() - t)
print(json.dumps({"first": seconds[0], "next": seconds[1]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--template", type=Path, default=DEFAULT_TEMPLATE)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/hta_start_method"))
    args = parser.parse_args()
    from hta_lite.tools.synthetic import replicate_trace

    folder = args.workdir / f"{args.template.name}-{args.ranks}"
    if not folder.exists() or len(list(folder.iterdir())) != args.ranks:
        replicate_trace(args.template, folder, args.ranks)
    times: dict[str, list[dict]] = {"fork": [], "forkserver": [], "spawn": []}
    for _ in range(args.repeat):
        for method in times:
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(folder), method],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            times[method].append(json.loads(out.stdout.strip().splitlines()[-1]))
    size = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
    print(f"{args.ranks} ranks of {args.template.name} ({size:.1f} MB gzip), median of"
          f" {args.repeat}\n\n| start method | first load s | next load s | next vs fork |\n"
          "|---|---|---|---|")  # fmt: skip
    fork = statistics.median(r["next"] for r in times["fork"])
    for method, runs in times.items():
        first = statistics.median(r["first"] for r in runs)
        after = statistics.median(r["next"] for r in runs)
        print(f"| {method} | {first:.3f} | {after:.3f} | {after / fork:.2f}x |")


if __name__ == "__main__":
    main()
