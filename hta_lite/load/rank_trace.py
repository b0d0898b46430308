"""One rank's trace: its tables, metadata and health counters, parsed from one file."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import TraceFormatError
from .metadata import TraceMetadata


@dataclass
class RankTrace:
    """Typed tables of one rank (see :mod:`hta_lite.load.tables` for the columns).

    ``ts``/``dur`` are int64 nanoseconds since the epoch of the trace clock,
    exactly as written (µs with 3 decimals -> ns).  ``health`` counts every event
    that was skipped, clamped or excluded, by reason.
    """

    rank: int
    path: str
    gpu: pd.DataFrame
    cpu: pd.DataFrame
    gpu_annotations: pd.DataFrame
    steps: pd.DataFrame
    instants: pd.DataFrame
    flows: pd.DataFrame
    counters: pd.DataFrame
    meta_events: pd.DataFrame
    kernel_counters: pd.DataFrame
    metadata: dict[str, Any]
    events_read: dict[str, int]
    health: dict[str, int] = field(default_factory=dict)
    source_format: str = "kineto"  # the reader's format (:mod:`hta_lite.load.readers`)
    part: int = 0  # which rank of its file this is (a fused trace or an export holds several)

    #: the tables (DataFrame fields), as stored in the cache
    TABLES = (
        "gpu", "cpu", "gpu_annotations", "steps", "instants", "flows", "counters", "meta_events",
        "kernel_counters",
    )  # fmt: skip

    @classmethod
    def deferred(cls, build: Callable[[str], pd.DataFrame], **fields: Any) -> RankTrace:
        """A trace whose tables are made by ``build(name)`` when first read (a reopen from the
        cache builds only the tables its analyses use). ``fields``: the other fields."""
        trace = cls.__new__(cls)
        trace.__dict__.update(fields, _build=build)
        return trace

    def __getattr__(self, name: str):
        """Called only for a missing attribute: a table of a deferred trace not built yet."""
        build = self.__dict__.get("_build")
        if build is None or name not in self.TABLES:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        table = self.__dict__[name] = build(name)
        return table

    def _fields(self) -> dict:
        """The fields other than the tables (rank, path, metadata, counters, health)."""
        return {k: v for k, v in self.__dict__.items() if k not in self.TABLES and k[0] != "_"}

    def stub(self) -> RankTrace:
        """The same rank without its tables (empty frames; nothing is built)."""
        return RankTrace(**self._fields(), **{name: pd.DataFrame() for name in self.TABLES})

    def with_tables(self, **tables: pd.DataFrame) -> RankTrace:
        """The same rank with these tables in place of its own; the others are this trace's,
        built when first read, and the health counters are shared."""
        return RankTrace.deferred(functools.partial(getattr, self), **self._fields(), **tables)

    @property
    def meta(self) -> TraceMetadata:
        """What the file says about the run, typed (:mod:`hta_lite.load.metadata`)."""
        meta = self.__dict__.get("_meta")
        if meta is None:
            meta = self.__dict__["_meta"] = TraceMetadata.from_kineto(
                self.metadata, self.source_format
            )
        return meta

    @property
    def is_cpu_only(self) -> bool:
        return self.gpu.empty


def parse_parts(path: str | Path, include_last_profiler_step=False) -> list[RankTrace]:
    """Every rank of one file: read by its format's reader (:mod:`hta_lite.load.readers`), then
    linked (:func:`hta_lite.load.finish.finish`; ``include_last_profiler_step``: its
    :class:`~hta_lite.load.finish.StepRule`, or the flag alone); runs inside a worker process."""
    from . import readers
    from .finish import finish

    path = Path(path)
    parts = readers.read(path)
    if not parts:  # never a file that silently adds no rank
        raise TraceFormatError(path, "no rank in the file: no GPU or CPU work with usable times")
    traces = [finish(part, path, include_last_profiler_step) for part in parts]
    for i, trace in enumerate(traces):
        trace.part = i
    return traces


def parse_file(
    path: str | Path, rank: int | None = None, include_last_profiler_step=False
) -> RankTrace:
    """The one rank of a file (``rank``: given, not the file's); a file holding several ranks
    is a :class:`TraceFormatError` (read those with :func:`parse_parts`)."""
    parts = parse_parts(path, include_last_profiler_step)
    if len(parts) != 1:
        raise TraceFormatError(
            path, f"holds {len(parts)} ranks (a fused trace): open it as a folder of ranks"
        )
    if rank is not None:
        parts[0].rank = rank
    return parts[0]
