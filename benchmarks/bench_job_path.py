"""The job critical path of one step over many ranks of a real-size trace.

The straggler generator writes ``--ranks`` copies of ``--template`` (one rank late at each
step's last collective); each rank is loaded first (not timed), then, median of ``--repeat``:

- ``in memory``: ``get_job_critical_path(step=first)`` in this process (every rank's segments,
  one after another, then the walk), the ranks loaded with the cache off;
- ``facade, workers``: the same with the ranks reopened from the cache: each rank's segments in
  the loader's worker processes (they read the rank's tables from the cache's files), then the
  walk here;
- ``per rank``: one rank's segments (what a worker computes for its rank);
- ``walk``: the driver's part alone, over the segments and the matched collectives;
- ``workers``: ``summarize_folder`` with the process pool (every summary table; the job path is
  part of it), for the whole folder including the load, with the cache off (no findings:
  they reopen the ranks from the cache), then from the warm cache with and without findings.

    python benchmarks/bench_job_path.py [--template tests/data/nccl_parser_config/nccl_data.json.gz]
        [--ranks 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

from hta_lite import TraceAnalysis
from hta_lite.analyses.job_path import job_critical_path, segments
from hta_lite.tools.batch import summarize_folder
from hta_lite.tools.synthetic import make_straggler_folder

ROOT = Path(__file__).resolve().parent.parent


def timed(work, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--template", default=ROOT / "tests/data/nccl_parser_config/nccl_data.json.gz"
    )
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        make_straggler_folder(args.template, folder, args.ranks, 5, "host", 30_000.0, seed=1)
        job = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
        step = job.get_profiler_steps()[0]
        first = job.trace(job.ranks[0])
        print(f"{args.ranks} ranks of {Path(args.template).name}: {len(first.cpu):,} CPU and"
              f" {len(first.gpu):,} GPU events per rank; step {step}")  # fmt: skip
        job.get_collectives()  # matched once, as every cross-rank view shares it

        def in_memory():
            job.memo.job_path_parts.clear()  # each rank's segments again
            return job.get_job_critical_path(step=step)

        cached = TraceAnalysis(trace_dir=folder, cache=Path(folder) / ".cache", progress=False)
        cached.get_collectives()

        def in_workers():
            cached.memo.job_path_parts.clear()
            return cached.get_job_critical_path(step=step)

        path = in_memory()
        pd.testing.assert_frame_equal(in_workers().path(), path.path())
        print(f"path: {len(path.path())} rows, {len(path.hops())} hop(s), ends on rank"
              f" {path.steps()['end_rank'].iloc[0]}")  # fmt: skip
        parts = [segments(job.trace(r), None, [step]) for r in job.ranks]
        tables = {k: pd.concat([p[k] for p in parts], ignore_index=True)
                  for k in ("segments", "events", "gaps")}  # fmt: skip
        m = job.get_collectives()
        rows = [
            ("in memory (all ranks, 1 process)", timed(in_memory, args.repeat)),
            ("facade, workers (ranks from the cache)", timed(in_workers, args.repeat)),
            (
                "per rank (one worker's part)",
                timed(lambda: segments(first, None, [step]), args.repeat),
            ),  # fmt: skip
            (
                "walk (the driver's part)",
                timed(
                    lambda: job_critical_path(
                        tables["segments"],
                        tables["events"],
                        m.calls,
                        m.instances,
                        job.ranks,
                        [step],
                        gaps=tables["gaps"],
                    ),
                    args.repeat,
                ),
            ),  # fmt: skip
            (
                "workers: summarize_folder, load included",
                timed(lambda: summarize_folder(folder, cache=False), 1),
            ),  # fmt: skip
            (
                "the same from the warm cache, with findings",
                timed(lambda: summarize_folder(folder, cache=Path(folder) / ".cache"), 1),
            ),  # fmt: skip
            (
                "the same without findings (findings=False)",
                timed(
                    lambda: summarize_folder(folder, cache=Path(folder) / ".cache", findings=False),
                    1,
                ),
            ),  # fmt: skip
        ]
        for name, seconds in rows:
            print(f"{name:45s} {seconds:8.3f} s")


if __name__ == "__main__":
    main()
