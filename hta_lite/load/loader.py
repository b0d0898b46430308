"""Folder of per-rank trace files -> ``{rank: RankTrace}``.

Discovery takes the files of every reader's suffixes (``*.json``, ``*.json.gz``, ``*.sqlite``,
:mod:`hta_lite.load.readers`) directly in the folder; a file may hold several ranks. A file's
rank is ``distributedInfo.rank``, else a number in the file name, else the smallest unused rank,
with a warning (:mod:`hta_lite.load.ranks`). Two files with one rank are an error naming both.

A file that cannot be loaded gives a :class:`~hta_lite.errors.TraceError` naming it, in this
process or in a worker (errors are rebuilt across processes; a worker that dies is retried alone,
so the file that killed it is named). ``on_error`` decides what happens next: ``"raise"`` the first
bad file's error, ``"skip"`` or ``"warn"`` keep the good ranks and list the bad files; a folder
where no file loads is an error either way.
"""

from __future__ import annotations

import functools
import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager
from pathlib import Path

from ..errors import (
    NoRanksLoadedError,
    NoTraceFilesError,
    TraceError,
    TraceFormatError,
    TraceNotFoundError,
    TraceParseError,
    TraceReadError,
)
from . import cache, decode, gzip_text, memory_fit, step_alignment, stream
from .health_items import record
from .options import ON_ERROR, LoadOptions, OnError  # noqa: F401 - the loader's interface
from .rank_trace import RankTrace, parse_parts
from .ranks import assign_ranks, checked_rank, rank_from_filename
from .readers import TRACE_SUFFIXES
from .workers import map_in_processes

#: the file names a trace folder's files are picked by, as errors say them
_NAMES = ", ".join(f"*{suffix}" for suffix in TRACE_SUFFIXES)


def discover(trace_dir: str | Path) -> list[Path]:
    """Trace files in ``trace_dir`` (not recursive), sorted by name; a trace file given as
    ``trace_dir`` is a folder of one rank."""
    folder = Path(trace_dir).expanduser()
    if not folder.exists():
        if folder.is_symlink():
            raise TraceNotFoundError(
                folder,
                f"a symbolic link to {os.readlink(folder)} that leads nowhere (a loop of links,"
                " or its target is gone)",
            )
        raise TraceNotFoundError(folder, "trace folder does not exist")
    if not folder.is_dir():
        if folder.name.endswith(TRACE_SUFFIXES):
            return [folder]  # a single trace file: a folder of one rank
        raise TraceNotFoundError(folder, f"neither a folder nor a trace file ({_NAMES})")
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
        raise NoTraceFilesError(
            folder,
            f"no trace files ({_NAMES}) in folder" + _subfolders(entries),
        )
    return files


def _subfolders(entries: list[Path], limit: int = 50) -> str:
    """Where a folder has no trace but some of its first ``limit`` subfolders do: which (a
    parent of several runs' folders given by mistake)."""
    found = []
    for sub in [p for p in entries if p.is_dir() and not p.name.startswith(".")][:limit]:
        try:
            if any(p.name.endswith(TRACE_SUFFIXES) for p in sub.iterdir()):
                found.append(sub.name)
        except OSError:
            continue
    if not found:
        return ""
    names = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    return f"; its subfolders {names} hold traces: pass one of them"


def load_parts(
    path: str | Path,
    rank: int | None = None,
    include_last_profiler_step: bool = False,
    cache_root: Path | None = None,
    by_address: bool = False,
) -> list[RankTrace] | TraceError:
    """Every rank of one file (one, or several for a fused file), through the cache when
    ``cache_root`` is given. Returns the error instead of raising it (this runs in worker
    processes; the caller decides what an error means). An unexpected exception is returned as
    :class:`TraceParseError` naming the file. ``rank``: the rank given for a file of one rank.

    ``by_address``: a parsed trace that was stored in the cache comes back as the cache entry
    (its tables read when first used), so that a worker sends the caller a few bytes instead
    of every table."""
    path = Path(path)
    try:
        traces = _load_parts(path, include_last_profiler_step, cache_root, by_address)
        if len(traces) == 1 and rank is not None:
            traces[0].rank = rank
        elif rank is not None:
            raise TraceFormatError(
                path, f"holds {len(traces)} ranks (a fused trace), so it cannot be given one"
            )
        elif len(traces) == 1 and traces[0].rank < 0:  # no rank in the file: the file name's
            from_name = rank_from_filename(path)
            if from_name is not None:
                traces[0].rank = from_name
                traces[0].health["rank_from_file_name"] = 1
        return traces
    except TraceError as exc:
        return exc
    except OSError as exc:
        return TraceReadError(path, f"cannot read file: {exc.strerror or exc}")
    except Exception as exc:  # a defect of ours on this input: name the file, keep the others
        return TraceParseError(
            path, f"unexpected {type(exc).__name__} while parsing: {exc} (please report it)"
        )


def load_part(
    path: str | Path,
    part: int = 0,
    rank: int | None = None,
    include_last_profiler_step: bool = False,
    cache_root: Path | None = None,
    by_address: bool = False,
) -> RankTrace | TraceError:
    """Rank ``part`` of a file (its ``RankTrace.part``; 0 for a file of one rank), as
    :func:`load_parts`, given ``rank`` when not None (the batch reopens the ranks it assigned)."""
    traces = load_parts(path, None, include_last_profiler_step, cache_root, by_address)
    if isinstance(traces, TraceError):
        return traces
    if not 0 <= part < len(traces):
        return TraceFormatError(
            path, f"holds {len(traces)} rank(s), not {part + 1}: changed since it was read"
        )
    trace = traces[part]
    if rank is not None:
        trace.rank = rank
    return trace


def _load_parts(path, include_last_profiler_step, cache_root, by_address) -> list[RankTrace]:
    """``load_parts`` without the ranks from the file name and the errors turned into values."""
    key = cache.entry_key(path, include_last_profiler_step) if cache_root else None
    cached = None
    if key is not None:
        cached = cache.load(cache_root, key, path, include_last_profiler_step)
        if isinstance(cached, list):
            for trace in cached:
                trace.path = str(path)
            return cached
    traces = parse_parts(path, include_last_profiler_step)
    if cached == cache.REBUILD:
        for trace in traces:
            record(trace.health, "cache_rebuilt", 1, "meta.json")
    if key is not None:
        cache.store(cache_root, key, traces)
        stored = (
            cache.load(cache_root, key, path, include_last_profiler_step) if by_address else None
        )
        if isinstance(stored, list) and len(stored) == len(traces):
            for back, trace in zip(stored, traces):
                back.path, back.rank = trace.path, trace.rank
                back.health.update(trace.health)  # with what this load found
            return stored
    return traces


def _load_job(
    job: tuple[Path, int | None], options: LoadOptions, by_address: bool = False
) -> list[RankTrace] | TraceError:
    path, rank = job
    with gzip_text.inflate_limits(options.max_inflate_ratio, options.max_text_gb):
        return load_parts(path, rank, options.steps, options.cache_root, by_address)


def parse_many(
    jobs: list[tuple[Path, int | None]], options: LoadOptions
) -> list[list[RankTrace] | TraceError]:
    """``load_parts`` for each (path, rank) job, in worker processes when ``options.parallel``
    and there are several files; results in job order."""
    work = functools.partial(_load_job, options=options)
    show = options.progress if options.progress is not None else len(jobs) > 1
    workers = min(len(jobs), options.max_workers or os.cpu_count() or 1)
    if options.parallel and len(jobs) > 1 and workers > 1:
        # workers hand back cached ranks by address: the tables travel through the cache files,
        # and this process reads only those its analyses use
        work = functools.partial(_load_job, options=options, by_address=True)
        done = map_in_processes(work, jobs, workers, options.start_method)
        return list(progress_bar(done, len(jobs), show))
    if len(jobs) == 1 and options.progress is not False and _is_large(jobs[0][0]):
        with _bytes_progress(jobs[0][0]):
            return [work(jobs[0])]
    return list(progress_bar(map(work, jobs), len(jobs), show))


_SAID = {"c_not_built": False}  # what this process has been told once
LARGE_FILE_BYTES = 64 << 20  # a single file this large (on disk) shows a progress bar of bytes


def _is_large(path: Path) -> bool:
    try:
        return path.stat().st_size >= LARGE_FILE_BYTES
    except OSError:
        return False


@contextmanager
def _bytes_progress(path: Path):
    """A progress bar of the text read from one large file (the C decoder's path, which reads
    it in pieces; a cached file opens without one)."""
    from tqdm.auto import tqdm

    bars = []  # made at the first piece: nothing is shown for a file read from the cache

    def report(done: int, total: int) -> None:
        if not bars:
            bars.append(tqdm(desc=f"reading {path.name}", total=total, unit="B",
                             unit_scale=True, unit_divisor=1024))  # fmt: skip
        bars[0].update(done - bars[0].n)

    stream.PROGRESS = report
    try:
        yield
    finally:
        stream.PROGRESS = None
        for bar in bars:
            bar.close()


def progress_bar(results: Iterable, total: int, show: bool, desc: str = "loading ranks"):
    """``results`` counted in a progress bar of ``total`` ranks (``show``: whether at all)."""
    if not show:
        return results
    from tqdm.auto import tqdm

    return tqdm(results, total=total, desc=desc, unit="rank")


def jobs_for(
    trace_dir: str | Path | None, trace_files: Mapping[int, str | Path] | None
) -> list[tuple[Path, int | None]]:
    """(path, rank) of every file to load: the files of ``trace_dir`` (rank from the file) or
    the ``{rank: path}`` mapping."""
    if trace_files is not None:
        jobs = [
            (Path(p).expanduser(), checked_rank(int(r), p, "the rank given for it"))
            for r, p in sorted(trace_files.items())
        ]
        for path, _ in jobs:
            if not path.is_file():
                raise TraceNotFoundError(path, "trace file does not exist")
        return jobs
    if trace_dir is not None:
        return [(p, None) for p in discover(trace_dir)]
    raise TypeError("give trace_dir=... or trace_files={rank: path}")


def collect(
    paths: list[Path],
    results: list,
    on_error: OnError,
    warn: Callable[[str], None] | None = None,
    where: str | Path | None = None,
) -> tuple[list, dict[str, str]]:
    """Split results (one per path: a list of its ranks, or an error) into the loaded ranks
    and ``{path: problem}`` of the others,
    as ``on_error`` says: the first error raises with ``"raise"``; ``"warn"`` also warns per
    file. No loaded file is a :class:`NoRanksLoadedError` (``where``: the folder) either way."""
    warn = warn or (lambda msg: warnings.warn(msg, stacklevel=4))
    loaded, skipped = [], {}
    for path, result in zip(paths, results):
        if not isinstance(result, TraceError):
            loaded.extend(result if isinstance(result, list) else [result])
            continue
        if on_error == "raise":
            raise result
        skipped[str(path)] = result.problem
        if on_error == "warn":
            warn(f"skipped {result}")
    if not loaded:
        raise NoRanksLoadedError(where, f"no trace file could be loaded ({summarized(skipped)})")
    return loaded, skipped


def summarized(skipped: dict[str, str], examples: int = 3) -> str:
    """``{path: problem}`` in a few lines however many files: per problem, how many files and
    the first few names (500 empty files: one line, not 500)."""
    by_problem: dict[str, list[str]] = {}
    for path, problem in skipped.items():
        by_problem.setdefault(problem, []).append(Path(path).name)
    parts = []
    for problem, names in sorted(by_problem.items(), key=lambda item: -len(item[1])):
        shown = ", ".join(names[:examples]) + (", ..." if len(names) > examples else "")
        count = f"{len(names)} files" if len(names) > 1 else "1 file"
        parts.append(f"{count}: {problem} ({shown})")
    return "; ".join(parts)


def load(
    trace_dir: str | Path | None = None,
    trace_files: Mapping[int, str | Path] | None = None,
    options: LoadOptions | None = None,
    warn: Callable[[str], None] | None = None,
) -> tuple[dict[int, RankTrace], dict[str, str]]:
    """Load every rank; returns ``(traces_by_rank, skipped_files)`` (``{path: problem}`` of the
    files not loaded, with ``on_error="skip"`` or ``"warn"``)."""
    options = options or LoadOptions()
    options.check_settings()
    warn = warn or (lambda msg: warnings.warn(msg, stacklevel=3))
    jobs = jobs_for(trace_dir, trace_files)
    if decode.C_NOT_BUILT and not _SAID["c_not_built"]:
        _SAID["c_not_built"] = True
        warnings.warn(decode.C_NOT_BUILT_WARNING, stacklevel=3)
    if said := memory_fit.too_large([path for path, _ in jobs]):
        warn(said)
    started = time.time()
    results = parse_many(jobs, options)
    if options.cache_root is not None:
        cache.evict(options.cache_root, keep_since=started - 1.0)  # 1 s: coarse file times
    loaded, skipped = collect([p for p, _ in jobs], results, options.on_error, warn, trace_dir)
    return step_alignment.aligned(assign_ranks(loaded, warn)), skipped


#: TraceLens' list of the captures in a capture folder (not a trace: ignored there)
CAPTURE_LIST_NAME = "execution_details.json"


def load_graph_sources(path: str | Path, options: LoadOptions) -> list[RankTrace]:
    """The traces of ``path`` (a trace file or a folder of them: graph captures or eager runs of
    the job whose graph replays are to be mapped), in file-name order. Several files may hold one
    rank (captures of several batch sizes); a file's rank is its ``distributedInfo.rank`` or the
    rank in its name, else -1. A file that cannot be loaded is an error naming it."""
    files = [p for p in discover(path) if p.name != CAPTURE_LIST_NAME]
    if not files:
        raise NoTraceFilesError(path, "no graph capture or eager trace in folder")
    out = []
    for result in parse_many([(p, None) for p in files], options):
        if isinstance(result, TraceError):
            raise result
        out.extend(result)
    return out
