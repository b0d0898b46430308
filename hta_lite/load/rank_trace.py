"""One rank's trace: its tables, metadata and health counters, parsed from one file."""

from __future__ import annotations

import functools
import gc
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..classify import kernel_types
from ..errors import TraceFormatError
from ..intervals import count_overlaps_by_group
from ..kineto import CPU_OP_CATEGORY, GPU_WORK_CATEGORIES, LAUNCH_NAMES, RUNTIME_CATEGORIES
from . import decode as dec
from .health_items import note
from .links import (
    first_row_by_key,
    gather,
    iteration_of,
    lookup,
    nearest_ancestor,
    nesting,
    profiler_steps,
)
from .ranks import rank_from_metadata
from .stream import decode_in_pieces
from .tables import build_tables


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
    def is_cpu_only(self) -> bool:
        return self.gpu.empty


def parse_file(
    path: str | Path, rank: int | None = None, include_last_profiler_step: bool = False
) -> RankTrace:
    """Read, decode and link one trace file (runs inside a worker process)."""
    path = Path(path)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # hundreds of thousands of short-lived containers, no cycles: ~10% faster
    try:
        decoded = decode_in_pieces(path)  # a large file, never whole in memory
        if decoded is None:
            decoded = dec.read_and_decode(path)
        tables, events_read, health = build_tables(decoded)
        del decoded.events
    finally:
        if gc_was_enabled:
            gc.enable()
    cpu, gpu = tables["cpu"], tables["gpu"]
    try:
        steps = profiler_steps(cpu)
    except TraceFormatError as exc:
        raise TraceFormatError(path, exc.problem) from None
    note(health, "profiler_step_empty", int((steps["dur"] <= 0).sum()))
    cpu, gpu, annotations = _apply_step_window(
        cpu, gpu, tables["gpu_annotations"], steps, include_last_profiler_step, health
    )
    _link(cpu, gpu, steps, health)
    gpu["kernel_type"] = kernel_types(gpu["name"])
    annotations["iteration"] = iteration_of(annotations["ts"].to_numpy(), steps)
    if rank is None:
        rank = rank_from_metadata(decoded.metadata, path)
    return RankTrace(
        rank=-1 if rank is None else rank,
        path=str(path),
        gpu=gpu,
        cpu=cpu,
        gpu_annotations=annotations,
        steps=steps,
        instants=tables["instants"],
        flows=tables["flows"],
        counters=tables["counters"],
        meta_events=tables["meta_events"],
        kernel_counters=tables["kernel_counters"],
        metadata=decoded.metadata,
        events_read=dict(events_read),
        health=dict(health),
    )


def _runtime_rows(cpu: pd.DataFrame) -> np.ndarray:
    corr = cpu["correlation"].to_numpy()
    return np.flatnonzero((corr != -1) & np.asarray(cpu["cat"].isin(RUNTIME_CATEGORIES)))


def _launch_rows(cpu: pd.DataFrame, gpu: pd.DataFrame, health: Counter | None) -> np.ndarray:
    runtime = _runtime_rows(cpu)
    corr = cpu["correlation"].to_numpy()
    index, rows = first_row_by_key(corr, runtime)
    if health is not None and len(runtime) > len(rows):
        note(health, "shared_correlation", len(runtime) - len(rows))
    return lookup(index, rows, gpu["correlation"].to_numpy())


def _apply_step_window(cpu, gpu, annotations, steps, include_last, health):
    """Keep the profiled iterations, as the reference does.

    With two or more ProfilerSteps, CPU events that start at or after the last
    step's start (its end with ``include_last_profiler_step``) are dropped, and so
    are GPU events whose launching call was dropped or is absent from the trace.
    With fewer than two steps nothing is dropped.
    """
    if len(steps) < 2:
        return cpu, gpu, annotations
    last = steps.iloc[-1]
    cutoff = int(last["ts"] + last["dur"]) if include_last else int(last["ts"])
    ts = cpu["ts"].to_numpy()
    keep_cpu = ts <= cutoff if include_last else ts < cutoff
    launch = _launch_rows(cpu, gpu, None)
    keep_gpu = gather(keep_cpu, launch, False)
    keep_anno = annotations["ts"].to_numpy() < cutoff + (1 if include_last else 0)
    note(health, "gpu_outside_steps", int((launch < 0).sum()))
    where = "after" if include_last else "in"
    note(health, f"cpu_{where}_last_step", int((~keep_cpu).sum()))
    note(health, f"gpu_{where}_last_step", int(((launch >= 0) & ~keep_gpu).sum()))
    note(health, "annotations_outside_steps", int((~keep_anno).sum()))
    return (
        cpu[keep_cpu].reset_index(drop=True),
        gpu[keep_gpu].reset_index(drop=True),
        annotations[keep_anno].reset_index(drop=True),
    )


def _link(cpu: pd.DataFrame, gpu: pd.DataFrame, steps: pd.DataFrame, health: Counter) -> None:
    cpu["iteration"] = iteration_of(cpu["ts"].to_numpy(), steps)
    depth, parent = nesting(cpu)
    cpu["depth"] = depth
    cpu["parent_row"] = parent
    launch = _launch_rows(cpu, gpu, health)
    gpu["launch_row"] = launch
    gpu["iteration"] = gather(cpu["iteration"].to_numpy(), launch, -1)
    no_launch = int((launch < 0).sum())
    note(health, "gpu_without_launch", no_launch)
    launched_at = gather(cpu["ts"].to_numpy(), launch, np.iinfo(np.int64).min)
    early = int((gpu["ts"].to_numpy() < launched_at).sum())
    note(health, "gpu_before_launch", early)
    launches = np.asarray(cpu["name"].isin(LAUNCH_NAMES)) & (cpu["correlation"].to_numpy() != -1)
    orphan_launches = launches & ~np.isin(
        cpu["correlation"].to_numpy(), gpu["correlation"].to_numpy()
    )
    note(health, "launch_without_gpu", int(orphan_launches.sum()))
    on_streams = np.asarray(gpu["cat"].isin(GPU_WORK_CATEGORIES))
    ts = gpu["ts"].to_numpy()[on_streams]
    overlaps = count_overlaps_by_group(
        gpu["stream"].to_numpy()[on_streams], ts, ts + gpu["dur"].to_numpy()[on_streams]
    )
    note(health, "gpu_overlap_on_stream", overlaps)
    runtime = _runtime_rows(cpu)
    op_row = np.full(len(cpu), -1, np.int64)
    op_row[runtime] = nearest_ancestor(parent, np.asarray(cpu["cat"] == CPU_OP_CATEGORY), runtime)
    cpu["op_row"] = op_row  # a whole column: setting rows with .loc would copy the table
