"""The executors of :func:`.batch.summarize_folder`: its jobs (one file, or the files of one rank)
run in this process, a local process pool or on Dask, each returning its result or its error."""

from __future__ import annotations

import os
from typing import Any

from ..errors import TraceError, TraceReadError
from ..load.loader import LoadOptions, progress_bar
from ..load.workers import job_file, map_in_processes


def run_jobs(work, jobs: list, executor: Any, options: LoadOptions) -> list:
    """``[work(job) for job in jobs]`` on the executor; ``work`` returns errors, never raises.
    A progress bar counts the jobs done (``options.progress``; default: with several jobs, not
    on Dask)."""
    show = options.progress if options.progress is not None else len(jobs) > 1
    if executor == "serial" or len(jobs) <= 1 and executor == "process":
        return list(progress_bar(map(work, jobs), len(jobs), show, "summarizing ranks"))
    if executor == "process":
        workers = min(len(jobs), options.max_workers or os.cpu_count() or 1)
        done = map_in_processes(work, jobs, workers, options.start_method)
        results = progress_bar(done, len(jobs), show, "summarizing ranks")
        return [(r, None) if isinstance(r, TraceError) else r for r in results]  # a worker died
    client = _dask_client(executor)
    results = [_dask_result(f) for f in client.map(work, jobs, pure=False)]
    for k, job in enumerate(jobs):  # lost with a worker: run alone, so only the culprit fails
        if isinstance(results[k], BaseException):
            again = _dask_result(client.submit(work, job, pure=False))
            results[k] = (_lost(job, again), None) if isinstance(again, BaseException) else again
    return results


def _dask_result(future):
    """A Dask task's result, or the exception of a task whose worker died (``KilledWorker``: out
    of memory, a crash, after Dask's retries) or that could not run: the tasks a dying worker
    held fail with it, so each is run again alone (the process pool does the same)."""
    try:
        return future.result()
    except Exception as exc:  # KilledWorker, CancelledError, a lost connection to the worker
        return exc


def _lost(job, exc: BaseException) -> TraceReadError:
    return TraceReadError(
        job_file(job),
        f"the Dask worker summarizing this file died ({type(exc).__name__}: out of memory, or a"
        " crash: try executor='serial' to see the error in this process)",
    )


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
