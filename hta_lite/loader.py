"""Folder of per-rank trace files -> ``{rank: RankTrace}``.

Discovery takes ``*.json`` and ``*.json.gz`` files directly in the folder. A
file's rank is ``distributedInfo.rank``; when absent, a number in the file name
(``rank-3``, ``rank_3``, ``rank3``, ``worker3``); otherwise the smallest unused
rank, assigned in file-name order, with a warning. Two files with one rank are
an error naming both.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from . import cache
from .errors import (
    DuplicateRankError,
    NoTraceFilesError,
    TraceError,
    TraceNotFoundError,
    TraceReadError,
)
from .rank_trace import RankTrace, parse_file

OnError = Literal["raise", "skip", "warn"]
_RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)
TRACE_SUFFIXES = (".json", ".json.gz")


def discover(trace_dir: str | Path) -> list[Path]:
    """Trace files in ``trace_dir`` (not recursive), sorted by name."""
    folder = Path(trace_dir).expanduser()
    if not folder.exists():
        raise TraceNotFoundError(folder, "trace folder does not exist")
    if not folder.is_dir():
        raise TraceNotFoundError(
            folder, "not a folder (pass trace_files={rank: path} for single files)"
        )
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise TraceNotFoundError(folder, f"cannot list folder: {exc.strerror or exc}") from None
    files = [
        p
        for p in entries
        if p.name.endswith(TRACE_SUFFIXES) and not p.name.startswith(".") and not p.is_dir()
    ]
    if not files:
        raise NoTraceFilesError(folder, "no *.json or *.json.gz trace files in folder")
    return files


def rank_from_filename(path: str | Path) -> int | None:
    match = _RANK_IN_NAME.search(Path(path).name)
    return int(match.group(1)) if match else None


def _parse_job(args: tuple) -> RankTrace | TraceError:
    """Parse one file, through the cache when it is on (runs in a worker process)."""
    path, rank, include_last, cache_root = args
    try:
        key = cache.entry_key(Path(path), include_last) if cache_root is not None else None
        if key is not None:
            cached = cache.load(cache_root, key)
            if cached is not None:
                cached.path = str(path)
                cached.rank = rank if rank is not None else cached.rank
                return cached
        trace = parse_file(path, rank, include_last)
        if key is not None:
            cache.store(cache_root, key, trace)
        return trace
    except TraceError as exc:
        return exc
    except OSError as exc:
        return TraceReadError(path, f"cannot read file: {exc.strerror or exc}")


def parse_many(
    jobs: list[tuple[Path, int | None]],
    include_last_profiler_step: bool,
    parallel: bool,
    max_workers: int | None,
    progress: bool | None,
    cache_root: Path | None = None,
) -> list[RankTrace | TraceError]:
    """Parse each (path, rank) job, in worker processes when ``parallel`` and there are several."""
    tasks = [(p, r, include_last_profiler_step, cache_root) for p, r in jobs]
    show = progress if progress is not None else len(tasks) > 1
    workers = min(len(tasks), max_workers or os.cpu_count() or 1)
    if parallel and len(tasks) > 1 and workers > 1:
        with process_pool(workers) as pool:
            return list(_progress(pool.map(_parse_job, tasks), len(tasks), show))
    return list(_progress(map(_parse_job, tasks), len(tasks), show))


def _context():
    """fork where the platform has it: workers start in milliseconds with hta_lite already
    imported, and scripts or notebooks need no ``if __name__ == "__main__"`` guard (spawn and
    forkserver re-import the main module). Arrow re-initializes its thread pools after fork."""
    if "fork" in mp.get_all_start_methods():
        return mp.get_context("fork")
    return mp.get_context("spawn")  # pragma: no cover - macOS / Windows


@contextmanager
def process_pool(workers: int):
    """A process pool started with :func:`_context`. Python >= 3.12 warns that forking a process
    with threads may deadlock; Arrow re-initializes its pools after fork, so the warning is muted."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
        with ProcessPoolExecutor(max_workers=workers, mp_context=_context()) as pool:
            yield pool


def _progress(results: Iterable, total: int, show: bool) -> Iterable:
    if not show:
        return results
    from tqdm.auto import tqdm

    return tqdm(results, total=total, desc="loading ranks", unit="rank")


def load(
    trace_dir: str | Path | None = None,
    trace_files: Mapping[int, str | Path] | None = None,
    include_last_profiler_step: bool = False,
    parallel: bool = True,
    max_workers: int | None = None,
    on_error: OnError = "raise",
    progress: bool | None = None,
    warn: Callable[[str], None] | None = None,
    use_cache: bool | str | Path | None = None,
) -> tuple[dict[int, RankTrace], dict[str, str]]:
    """Load every rank; returns ``(traces_by_rank, skipped_files)``.

    ``skipped_files`` maps a path to the reason it was not loaded (only with
    ``on_error="skip"`` or ``"warn"``; with ``"raise"`` the first bad file raises).
    """
    if on_error not in ("raise", "skip", "warn"):
        raise ValueError("on_error must be 'raise', 'skip' or 'warn'")
    warn = warn or (lambda msg: warnings.warn(msg, stacklevel=3))
    if trace_files is not None:
        jobs = [(Path(p).expanduser(), int(r)) for r, p in sorted(trace_files.items())]
        for path, _ in jobs:
            if not path.is_file():
                raise TraceNotFoundError(path, "trace file does not exist")
    elif trace_dir is not None:
        jobs = [(p, None) for p in discover(trace_dir)]
    else:
        raise TypeError("give trace_dir=... or trace_files={rank: path}")
    cache_root = cache.cache_dir(use_cache) if cache.enabled(use_cache) else None
    results = parse_many(
        jobs, include_last_profiler_step, parallel, max_workers, progress, cache_root
    )
    skipped: dict[str, str] = {}
    loaded: list[RankTrace] = []
    for (path, _), result in zip(jobs, results):
        if isinstance(result, TraceError):
            if on_error == "raise":
                raise result
            skipped[str(path)] = str(result)
            if on_error == "warn":
                warn(f"skipped {result}")
        else:
            loaded.append(result)
    return _assign_ranks(loaded, warn), skipped


def _assign_ranks(loaded: list[RankTrace], warn: Callable[[str], None]) -> dict[int, RankTrace]:
    by_rank: dict[int, RankTrace] = {}
    unranked = []
    for trace in loaded:
        if trace.rank < 0:
            from_name = rank_from_filename(trace.path)
            trace.rank = -1 if from_name is None else from_name
            if trace.rank >= 0:
                trace.health["rank taken from the file name (no distributedInfo.rank)"] = 1
        if trace.rank < 0:
            unranked.append(trace)
            continue
        if trace.rank in by_rank:
            raise DuplicateRankError(
                trace.path,
                f"claims rank {trace.rank}, already claimed by {by_rank[trace.rank].path}",
            )
        by_rank[trace.rank] = trace
    next_rank = 0
    for trace in unranked:
        while next_rank in by_rank:
            next_rank += 1
        trace.rank = next_rank
        trace.health["rank assigned by file order (no distributedInfo.rank, no rank in name)"] = 1
        if len(loaded) > 1:
            warn(
                f"{trace.path}: no distributedInfo.rank and no rank in the file name; assigned rank {next_rank}"
            )
        by_rank[next_rank] = trace
    return dict(sorted(by_rank.items()))
