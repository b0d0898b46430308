"""``get_findings()`` on a real-size trace and on a many-rank job, and where its time goes.

Each folder is loaded first (not timed); then, median of ``--repeat``, on a fresh analysis each
time (nothing cached from the run before):

- ``job path``: ``get_job_critical_path()`` (the segments every finding's replay rests on);
- ``findings``: ``get_findings()`` after it (the views they read, every kind's cut, the
  replays and the cumulative replays).

Folders: ``--ranks`` generated ranks of ``--template`` (the straggler generator, one rank late),
and the recorded ``long_run`` sample (2 ranks x 40 steps).

    python benchmarks/bench_findings.py [--template tests/data/nccl_parser_config/nccl_data.json.gz]
        [--ranks 16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

from hta_lite import TraceAnalysis
from hta_lite.tools.synthetic import make_straggler_folder

ROOT = Path(__file__).resolve().parent.parent


def measure(folder: str, repeat: int) -> tuple[float, float, int]:
    """(median s of the job path, median s of the findings after it, findings found)."""
    paths, finds, found = [], [], 0
    loaded = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    for _ in range(repeat):
        job = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
        job.traces = loaded.traces  # the same parsed ranks, none of the analyses' caches
        start = time.perf_counter()
        job.get_job_critical_path()
        paths.append(time.perf_counter() - start)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = len(job.get_findings())
        finds.append(time.perf_counter() - start)
    return statistics.median(paths), statistics.median(finds), found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--template", default=ROOT / "tests/data/nccl_parser_config/nccl_data.json.gz"
    )
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        make_straggler_folder(args.template, folder, args.ranks, 5, "host", 30_000.0, seed=1)
        cases = [
            (f"{args.ranks} ranks of {Path(args.template).name}", folder),
            ("long_run (2 ranks x 40 steps)", str(ROOT / "sample_traces/long_run")),
        ]
        for label, path in cases:
            job_path, findings, found = measure(path, args.repeat)
            print(f"{label}: job path {job_path:.2f} s, findings after it {findings:.2f} s"
                  f" ({found} findings)")  # fmt: skip


if __name__ == "__main__":
    main()
