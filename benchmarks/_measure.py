"""Child process of the benchmarks: run one job, print JSON with seconds and peak RSS.

Usage: python _measure.py JOB PATH
    JOB: ours | ours_warm | reference | floor | analyses_ours | analyses_reference | imports
``ours`` runs with the cache off; ``ours_warm`` with the cache in $HTA_LITE_CACHE_DIR (filled by
the caller beforehand). Loads print ``seconds`` (the load) and ``first_call`` (then
``get_temporal_breakdown``, which builds the tables it reads).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    job, path = sys.argv[1], Path(sys.argv[2])
    result: dict = {}
    if job == "imports":  # hta_lite's imports only (what a load costs beyond them)
        from hta_lite import TraceAnalysis  # noqa: F401
    elif job == "floor":
        import gzip

        import orjson

        t = time.perf_counter()
        data = path.read_bytes()
        data = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        orjson.loads(data)
        result["seconds"] = time.perf_counter() - t
    elif job in ("ours", "ours_warm", "analyses_ours"):
        from hta_lite import TraceAnalysis

        if job != "ours_warm":
            os.environ["HTA_LITE_CACHE"] = "off"

        base = rss_mb()
        t = time.perf_counter()
        analysis = TraceAnalysis(trace_dir=path, parallel=False, progress=False)
        result["seconds"] = time.perf_counter() - t
        result["import_rss_mb"] = base
        first = analysis.ranks[0]
        t = time.perf_counter()
        analysis.get_temporal_breakdown(visualize=False)  # the first analysis
        result["first_call"] = time.perf_counter() - t
        if job == "analyses_ours":
            result["calls"] = time_calls(suite(analysis, first))
    elif job in ("reference", "analyses_reference"):
        import logging

        logging.disable(logging.CRITICAL)
        from hta.trace_analysis import TraceAnalysis

        base = rss_mb()
        t = time.perf_counter()
        analysis = TraceAnalysis(trace_dir=str(path))
        result["seconds"] = time.perf_counter() - t
        first = sorted(analysis.t.traces)[0]
        result["import_rss_mb"] = base
        t = time.perf_counter()
        analysis.get_temporal_breakdown(visualize=False)
        result["first_call"] = time.perf_counter() - t
        if job == "analyses_reference":
            result["calls"] = time_calls(suite(analysis, first))
    else:
        raise SystemExit(f"unknown job {job}")
    result["peak_rss_mb"] = rss_mb()
    print(json.dumps(result))


def suite(analysis, first: int) -> dict:
    """The same calls on either library (both share these method names); per-rank calls on the
    first rank, the reference's default."""
    return {
        "temporal_breakdown": lambda: analysis.get_temporal_breakdown(visualize=False),
        "comm_comp_overlap": lambda: analysis.get_comm_comp_overlap(visualize=False),
        "idle_time_breakdown": lambda: analysis.get_idle_time_breakdown(
            ranks=[first], visualize=False
        ),
        "kernel_breakdown": lambda: analysis.get_gpu_kernel_breakdown(visualize=False),
        "queue_length_summary": lambda: analysis.get_queue_length_summary(ranks=[first]),
        "memory_bw_summary": lambda: analysis.get_memory_bw_summary(ranks=[first]),
    }


def time_calls(calls: dict) -> dict:
    out = {}
    for name, call in calls.items():
        best = None
        for _ in range(3):
            t = time.perf_counter()
            try:
                call()
            except Exception as exc:  # the reference fails on some traces
                out[name] = f"error: {type(exc).__name__}"
                break
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
        else:
            out[name] = best
    return out


if __name__ == "__main__":
    main()
