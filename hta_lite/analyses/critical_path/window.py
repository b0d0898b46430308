"""The events a critical path is computed over, as the reference selects them.

Events are numbered in one space: ``cpu`` rows first (``0..C-1``), then ``gpu`` rows
(``C..C+G-1``). :func:`event_index` gives each the index the reference (and
``analysis.t.get_trace(rank)``) gives it: its position among all complete events sorted by start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...errors import MissingDataError, SelectionError
from ...kineto import STEP_PREFIX, STREAM_WAIT_EVENT
from ...load.rank_trace import RankTrace
from ...rows import gather


def event_index(trace: RankTrace) -> np.ndarray:
    """Per event (cpu rows, then gpu rows): its row in ``analysis.t.get_trace(rank)``."""
    ts = np.concatenate([trace.cpu["ts"].to_numpy(), trace.gpu["ts"].to_numpy()])
    order = np.argsort(ts, kind="stable")
    position = np.empty(len(ts), np.int64)
    position[order] = np.arange(len(ts))
    return position


@dataclass
class Window:
    """``start`` / ``end`` (ns) of the region; ``cpu`` / ``gpu``: rows of the tables in it."""

    start: int
    end: int
    cpu: np.ndarray
    gpu: np.ndarray


def _contains(names: pd.Series, text: str) -> np.ndarray:
    """Rows whose name contains ``text`` (tested once per distinct name)."""
    names = names.astype("category")
    hit = np.array([text in str(c) for c in names.cat.categories] + [False])
    return hit[names.cat.codes.to_numpy()]


def _bounds(trace: RankTrace, annotation: str, instance_id) -> tuple[int, int]:
    cpu, gpu = trace.cpu, trace.gpu
    tables = [t for t in (cpu, gpu) if len(t)]
    if annotation == "":
        if not tables:
            raise SelectionError(trace.path, "no events")
        start = min(int(t["ts"].min()) for t in tables)
        return start, max(int((t["ts"] + t["dur"]).max()) for t in tables)
    if cpu.empty:  # nothing on the host: no annotation, and no host side of a path
        raise MissingDataError(
            trace.path,
            "no CPU events: the critical path needs the host side (record with"
            " activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])",
        )
    named = pd.concat(
        [t.loc[_contains(t["name"], annotation), ["ts", "dur"]]
         for t in (cpu, trace.gpu_annotations) if len(t)],
        ignore_index=True,
    )  # fmt: skip
    named = named.sort_values("ts", kind="stable", ignore_index=True)
    if named.empty and STEP_PREFIX.startswith(annotation) and len(trace.steps):
        named = trace.steps[["ts", "dur"]]  # steps a reader gave (NVTX ranges, the capture)
    if named.empty:
        raise SelectionError(trace.path, f"no event whose name contains {annotation!r}")
    first, last = (instance_id, instance_id) if not isinstance(instance_id, tuple) else instance_id
    first, last = first or 0, last if last is not None else 0
    chosen = named.iloc[first : last + 1]
    if chosen.empty:
        raise SelectionError(
            trace.path,
            f"instance {instance_id} of {annotation!r} not found; there are {len(named)}"
            f" (0 to {len(named) - 1})",
        )
    return int(chosen["ts"].min()), int((chosen["ts"] + chosen["dur"]).max())


def select(trace: RankTrace, annotation: str, instance_id) -> Window:
    """The reference's region: CPU events that start in the window and last > 0; GPU events
    whose launch call does (and every ``Stream Wait Event``); GPU-side syncs written without a
    stream (``Event Sync``, ``Context Sync``) by their own start."""
    return between(trace, *_bounds(trace, annotation, instance_id))


def between(trace: RankTrace, start: int, end: int) -> Window:
    """The region from ``start`` to ``end`` (ns), selected as :func:`select` does."""
    cpu, gpu = trace.cpu, trace.gpu
    ts, dur = cpu["ts"].to_numpy(), cpu["dur"].to_numpy()
    in_window = (ts >= start) & (ts <= end) & (dur > 0)
    launch = gpu["launch_row"].to_numpy()
    launched_in = gather(in_window, launch, False)
    gpu_ts, gpu_dur = gpu["ts"].to_numpy(), gpu["dur"].to_numpy()
    streamless = (gpu["stream"].to_numpy() == -1) & (gpu_ts >= start) & (gpu_ts <= end)
    waits = np.asarray(gpu["name"] == STREAM_WAIT_EVENT)
    keep_gpu = launched_in | waits | (streamless & (gpu_dur > 0))
    return Window(start, end, np.flatnonzero(in_window), np.flatnonzero(keep_gpu))
