"""Long runs: ``get_step_anomalies`` + ``get_step_periodicity`` (+ ``get_job_step_anomalies`` on
several ranks) on generated runs, after the load, in this process, median of ``--repeat``:

- one rank of ``--steps`` steps (default 10,000) in one file;
- the same rank profiled in ``--files`` windows (default 100 files of 100 steps: a long run
  profiled with ``schedule(..., repeat=100)``), loaded as one series (load included: the files
  are joined at the load);
- ``--ranks`` ranks (default 64) of ``--rank-steps`` steps (default 200).

Each step is a ProfilerStep holding ``data-loading``, ``forward`` and ``backward`` annotations and
one kernel launched in ``forward``; every 50th step stalls in ``data-loading``.

    python benchmarks/bench_steps.py [--steps 10000] [--files 100] [--ranks 64] [--rank-steps 200]
                                     [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import tempfile
import time
from pathlib import Path

from hta_lite import TraceAnalysis


def write_rank(folder: Path, rank: int, world: int, steps: int, files: int = 1) -> None:
    """``steps`` kept steps of ``rank`` in ``files`` files (windows 5 ms apart)."""
    ts, corr, first = 0.0, 0, 0
    for _ in range(files):
        per_file = steps // files
        ts, corr = write_window(folder, rank, world, first, per_file, ts, corr, files > 1)
        first += per_file + 1
        ts += 5000.0


def write_window(folder, rank, world, first, steps, ts, corr, several) -> tuple[float, int]:
    events = []
    for step in range(first, first + steps + 1):  # the last one is dropped, as in HTA
        load = 300.0 + (2000.0 if step % 50 == 7 else 0.0) + (rank % 3)
        dur = load + 900.0
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "pid": 1, "tid": 1, "ts": ts, "dur": dur})  # fmt: skip
        for name, start, length in (("data-loading", 1, load - 2), ("forward", load, 500),
                                    ("backward", load + 510, 380)):  # fmt: skip
            events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1,
                           "tid": 1, "ts": ts + start, "dur": length})  # fmt: skip
        corr += 1
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                       "tid": 1, "ts": ts + load + 10, "dur": 5,
                       "args": {"correlation": corr}})  # fmt: skip
        events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7,
                       "ts": ts + load + 20, "dur": 400,
                       "args": {"correlation": corr, "stream": 7, "device": 0}})  # fmt: skip
        ts += dur
    doc = {"distributedInfo": {"rank": rank, "world_size": world}, "traceEvents": events}
    name = f"rank-{rank}.{first:06d}.json.gz" if several else f"rank-{rank}.json.gz"
    (folder / name).write_bytes(gzip.compress(json.dumps(doc).encode()))
    return ts, corr


def timed(analysis: TraceAnalysis, repeat: int, job: bool) -> float:
    times = []
    for _ in range(repeat):
        analysis.__dict__.pop("_scored_cache", None)  # each turn computes, as a first call
        t = time.perf_counter()
        analysis.get_step_anomalies()
        analysis.get_step_periodicity()
        if job:
            analysis.get_job_step_anomalies()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--rank-steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        one, windows, many = Path(tmp) / "one", Path(tmp) / "windows", Path(tmp) / "many"
        one.mkdir(), windows.mkdir(), many.mkdir()
        write_rank(one, 0, 1, args.steps)
        write_rank(windows, 0, 1, args.steps, args.files)
        for rank in range(args.ranks):
            write_rank(many, rank, args.ranks, args.rank_steps)
        for folder, label, job in (
            (one, f"1 rank x {args.steps} steps", False),
            (windows, f"1 rank x {args.steps} steps in {args.files} files", False),
            (many, f"{args.ranks} ranks x {args.rank_steps} steps", True),
        ):
            t = time.perf_counter()
            analysis = TraceAnalysis(folder, cache=False, progress=False)
            load = time.perf_counter() - t
            seconds = timed(analysis, args.repeat, job)
            what = "anomalies + periodicity" + (" + job" if job else "")
            print(f"{label}: load {load:.2f} s, {what} {seconds:.2f} s")


if __name__ == "__main__":
    main()
