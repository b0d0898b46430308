"""Summaries of large folders with bounded memory, on one machine or a Dask cluster.

Each rank is parsed (or read from the cache) and summarized where it is loaded; only the small
per-rank summary tables travel back, so memory does not grow with the number of ranks.

Executors: ``"serial"`` (this process), ``"process"`` (local process pool, the default), ``"dask"``
(the current ``dask.distributed`` client, or a new local one) or a ``dask.distributed.Client``.
All give the same tables.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from . import cache
from .analyses import counters, idle, kernels, overlap, steps, temporal
from .errors import TraceError
from .health import health_summary
from .loader import _assign_ranks, _parse_job, discover, process_pool

SUMMARY_TABLES = (
    "temporal_breakdown",
    "comm_comp_overlap",
    "idle_time_breakdown",
    "kernel_type_breakdown",
    "queue_length_summary",
    "step_breakdown",
    "health_summary",
)


def summarize_rank(trace) -> dict[str, pd.DataFrame]:
    """The per-rank summary tables (small: a few rows per rank)."""
    one = {trace.rank: trace}
    type_df, _ = kernels.gpu_kernel_breakdown(one)
    queue = counters.queue_length_summary(counters.queue_length_time_series(one))
    return {
        "temporal_breakdown": temporal.temporal_breakdown(one),
        "comm_comp_overlap": overlap.comm_comp_overlap(one),
        "idle_time_breakdown": idle.idle_time_breakdown(one)[0],
        "kernel_type_breakdown": type_df.assign(rank=trace.rank),
        "queue_length_summary": queue.reset_index() if queue is not None else pd.DataFrame(),
        "step_breakdown": steps.step_breakdown(one),
        "health_summary": health_summary(one),
    }


def _job(args: tuple) -> tuple[Any, Any]:
    """Parse + summarize one file; returns ``(rank_trace_stub, tables)`` or ``(error, None)``."""
    result = _parse_job(args)
    if isinstance(result, TraceError):
        return result, None
    tables = summarize_rank(result)
    # keep only what rank assignment needs; the tables stay in the worker
    for name in ("gpu", "cpu", "gpu_annotations", "instants", "flows", "counters", "meta_events"):
        setattr(result, name, getattr(result, name).iloc[:0])
    return result, tables


def summarize_folder(
    trace_dir: str | Path,
    executor: Any = "process",
    max_workers: int | None = None,
    include_last_profiler_step: bool = False,
    use_cache: bool | str | Path | None = None,
) -> dict[str, pd.DataFrame]:
    """Summary tables of every rank of ``trace_dir`` (see ``SUMMARY_TABLES``), ranks in order."""
    paths = discover(trace_dir)
    root = cache.cache_dir(use_cache) if cache.enabled(use_cache) else None
    tasks = [(p, None, include_last_profiler_step, root) for p in paths]
    results = _run(tasks, executor, max_workers)
    errors = [r for r, _ in results if isinstance(r, TraceError)]
    if errors:
        raise errors[0]
    stubs = [r for r, _ in results]
    by_path = {s.path: tables for (s, tables) in results}
    ranked = _assign_ranks(stubs, lambda msg: None)
    out = {}
    for name in SUMMARY_TABLES:
        parts = []
        for rank, stub in ranked.items():
            table = by_path[stub.path][name]
            if "rank" in table.columns:
                table = table.assign(rank=rank)
            parts.append(table)
        out[name] = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return out


def _run(tasks: list[tuple], executor: Any, max_workers: int | None) -> list[tuple]:
    if executor == "serial" or len(tasks) <= 1 and executor == "process":
        return [_job(t) for t in tasks]
    if executor == "process":
        workers = min(len(tasks), max_workers or os.cpu_count() or 1)
        with process_pool(workers) as pool:
            return list(pool.map(_job, tasks))
    client = _dask_client(executor)
    futures = client.map(_job, tasks, pure=False)
    return client.gather(futures)


def _dask_client(executor: Any):
    try:
        from dask.distributed import Client, default_client
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError(
            "executor='dask' needs the optional extra: pip install 'hta_lite[dask]'"
        ) from exc
    if executor == "dask":
        try:
            return default_client()
        except ValueError:
            return Client(processes=False)
    if isinstance(executor, Client):
        return executor
    raise ValueError("executor must be 'serial', 'process', 'dask' or a dask.distributed.Client")
