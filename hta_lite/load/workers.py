"""Worker processes: a pool that maps hta_lite's per-file work (load, summarize) over files.

The start method is chosen per platform and process (:func:`start_method`); the user's script is
never re-run in a worker (:func:`main_script_hidden`), so no ``if __name__ == "__main__":``
guard is needed; a worker that dies is retried alone so that the file that killed it is named.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack, contextmanager

from ..errors import TraceReadError
from . import stream


def map_in_processes(
    work: Callable, jobs: list, workers: int, method: str | None = None
) -> Iterator:
    """``map(work, jobs)`` in a process pool, results in job order. ``work`` returns errors
    rather than raising them; if a worker dies (a crash, the out-of-memory killer), the jobs
    without a result are run again, each alone in a fresh process, so the one that kills its
    process is found and reported as a :class:`TraceReadError` naming its file.

    The workers are started and every job submitted before this returns, so that the start
    method is chosen while no progress bar's thread runs yet (:func:`start_method`)."""
    stack = ExitStack()
    try:
        chosen = start_method(method)
        pool = stack.enter_context(process_pool(workers, chosen))
        with main_script_hidden():
            futures = [pool.submit(work, job) for job in jobs]
    except BaseException:
        stack.close()
        raise
    return _results(futures, jobs, work, method, stack)


def _results(futures: list, jobs: list, work: Callable, method: str | None, stack: ExitStack):
    received = 0
    with stack:
        try:
            for future in futures:
                yield future.result()
                received += 1
            return
        except BrokenProcessPool:
            pass
    for job in jobs[received:]:
        yield _alone(work, job, method)


def _alone(work: Callable, job: tuple, method: str | None):
    try:
        with process_pool(1, method) as pool, main_script_hidden():
            future = pool.submit(work, job)
        return future.result()
    except BrokenProcessPool:
        return TraceReadError(
            job_file(job),
            "the worker process parsing this file died (out of memory, or a crash: try"
            " parallel=False to see the error in this process)",
        )


def job_file(job):
    """The file a job reads: ``(path, ...)``, or the first of ``([(path, part), ...], ...)``."""
    first = job
    while isinstance(first, (list, tuple)):
        first = first[0]
    return first


@contextmanager
def main_script_hidden():
    """While workers start: ``__main__`` without its path or module name. A spawn or forkserver
    worker otherwise runs the user's script again (as ``__mp_main__``) before any job; a script
    without an ``if __name__ == "__main__":`` guard would then load the folder again inside the
    worker, which dies. hta_lite's workers need nothing from the script (every job is a
    function of hta_lite), so the script is never re-run: no guard is needed, whatever the
    start method."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    with _HIDING:
        saved = {key: vars(main)[key] for key in ("__file__", "__spec__") if key in vars(main)}
        main.__dict__.pop("__file__", None)
        main.__spec__ = None
        try:
            yield
        finally:
            main.__dict__.pop("__spec__", None)
            main.__dict__.update(saved)


_HIDING = threading.Lock()


def start_method(requested: str | None = None) -> str:
    """How worker processes start. fork where it is safe: workers start in milliseconds with
    hta_lite already imported (Arrow re-initializes its thread pools after fork). Forking a
    process that runs other threads can deadlock the child on a lock one of them held — a
    notebook kernel always has some — so then forkserver: a clean server process (hta_lite
    preloaded) forks the workers. Spawn where the platform has neither (Windows; macOS's
    default). None of them re-runs the user's script (:func:`main_script_hidden`), so no
    ``if __name__ == "__main__":`` guard is needed. ``$HTA_LITE_START_METHOD`` overrides the
    choice."""
    methods = mp.get_all_start_methods()
    requested = requested or os.environ.get("HTA_LITE_START_METHOD") or None
    if requested:
        if requested not in methods:
            raise ValueError(f"start method {requested!r} not available here; choose in {methods}")
        return requested
    if "fork" in methods and threading.active_count() == 1 and "ipykernel" not in sys.modules:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


@contextmanager
def process_pool(workers: int, method: str | None = None):
    """A process pool whose workers start with :func:`start_method`. Python >= 3.12 warns that
    forking a process with threads may deadlock; fork is chosen only without other threads."""
    chosen = start_method(method)
    context = mp.get_context(chosen)
    if chosen == "forkserver":
        context.set_forkserver_preload(["hta_lite.load.loader", "hta_lite.tools.batch"])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
        spare = workers < (os.cpu_count() or 1)  # else no second thread per file (stream.py)
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=context, initializer=_worker, initargs=(spare,)
        ) as pool:
            yield pool


def _worker(spare_cpus: bool) -> None:
    """A pool worker's start: a large file read by two threads only where CPUs are left."""
    stream.SECOND_THREAD = spare_cpus
