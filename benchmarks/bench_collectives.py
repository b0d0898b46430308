"""Collectives across ranks: what matching and the straggler views cost, in-process and through
the executors, on generated folders (``make_straggler_folder``, the generator's defaults).

For each (template, ranks), in fresh processes (imports excluded), median of ``--repeat``:

- *load*: ``TraceAnalysis`` cold (cache off, process pool);
- *calls + match*: ``get_collectives()`` on the loaded ranks (per-rank calls, then matching);
- *summaries + stragglers*: both summaries, ``get_straggler_report()`` and
  ``get_potential_stragglers()``;
- *batch*: ``summarize_folder(executor="process")`` (every per-rank table in the workers, the
  collectives matched in the driver from the workers' ``collective_calls``), and the driver's
  peak RSS.

    python benchmarks/bench_collectives.py [--ranks 16 64] [--repeat 3]
        [--template tests/data/nccl_parser_config/nccl_data.json.gz ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATES = [
    HERE.parent / "tests/data/nccl_parser_config/nccl_data.json.gz",
    HERE.parent.parent / "shared/traces/hta/diff_test/test.json.gz",
]

CHILD = r"""
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
from hta_lite import TraceAnalysis
from hta_lite.tools.batch import summarize_folder
folder, mode = sys.argv[1], sys.argv[2]
out = {}
if mode == "analysis":
    t0 = time.perf_counter()
    a = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    t1 = time.perf_counter()
    m = a.get_collectives()
    t2 = time.perf_counter()
    a.get_collective_summary(); a.get_collective_summary("rank")
    report = a.get_straggler_report(); finder = a.get_potential_stragglers(num_candidates=1)
    t3 = time.perf_counter()
    out = {"load": t1 - t0, "match": t2 - t1, "views": t3 - t2, "calls": len(m.calls),
           "instances": len(m.instances), "found": report.stragglers, "finder": finder}
else:
    t0 = time.perf_counter()
    summary = summarize_folder(folder, executor="process", cache=False)
    out = {"batch": time.perf_counter() - t0,
           "driver_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "last": int(summary["collectives_by_rank"].iloc[0]["rank"])}
print(json.dumps(out))
"""


def child(folder: Path, mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), mode], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--template", type=Path, nargs="+", default=TEMPLATES)
    args = parser.parse_args()
    from hta_lite.tools.synthetic import make_straggler_folder

    print(
        "| template | ranks | calls | instances | load s | calls + match s | summaries +"
        " stragglers s | batch s | batch driver peak RSS MB | straggler found |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for template in args.template:
        if not template.exists():
            print(f"skipping {template}: not found", file=sys.stderr)
            continue
        for n in args.ranks:
            straggler = n // 3
            with tempfile.TemporaryDirectory() as tmp:
                folder = make_straggler_folder(template, tmp, n, straggler, "host", seed=3)
                runs = [child(folder, "analysis") for _ in range(args.repeat)]
                batch = [child(folder, "batch") for _ in range(args.repeat)]

            def med(key, rows):
                return statistics.median(r[key] for r in rows)

            found = runs[0]["found"] == [straggler] and runs[0]["finder"] == [straggler]
            found = found and batch[0]["last"] == straggler
            print(
                f"| {template.parent.name} | {n} | {runs[0]['calls']:,} |"
                f" {runs[0]['instances']:,} | {med('load', runs):.2f} | {med('match', runs):.3f} |"
                f" {med('views', runs):.3f} | {med('batch', batch):.2f} |"
                f" {med('driver_rss_mb', batch):.0f} | {'yes' if found else 'NO'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
