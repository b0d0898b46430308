"""One rank's memory tables where it is loaded (the batch's workers: peaks, the allocations
each step leaves unfreed, the sites that leak in every step), the device memory its trace
states, and why the memory views are empty where no selected rank has memory events."""

from __future__ import annotations

import math
from collections import Counter

import pandas as pd

from ...load.rank_trace import RankTrace
from . import lifetimes as life
from . import operators as ops
from . import timeline
from .events import memory_events

NO_MEMORY = (
    "no [memory] events in the selected ranks: record with"
    " torch.profiler.profile(profile_memory=True)"
)

#: no memory event although the trace's header says ``"profile_memory": 1``
RECORDED_BUT_NONE = (
    "no [memory] events, although rank(s) {} were recorded with profile_memory=True (their"
    " header says so): the profiled window allocated and freed nothing, or the events were"
    " left out (health() says what was)"
)

#: no memory event, and every selected trace is an Nsight Systems export (which never has them)
NSYS_NO_MEMORY = (
    "the Nsight Systems export has no PyTorch allocator events (nsys records CUDA's own"
    " allocations, not the caching allocator's): for the memory views record a step with"
    " torch.profiler.profile(profile_memory=True), or pass a CUDA memory snapshot"
    " (torch.cuda.memory._dump_snapshot; --snapshot)"
)

#: the batch's per-rank memory tables (:func:`rank_memory`)
TABLES = ("memory_peaks", "memory_leaks", "memory_leak_sites", "memory_by_step",
          "memory_by_operator")  # fmt: skip


def why_none(traces: list[RankTrace]) -> str:
    """Why the memory views of ``traces`` (none with memory events) are empty."""
    flagged = [t.rank for t in traces if t.meta.profile_memory]
    if flagged:
        return RECORDED_BUT_NONE.format(flagged)
    return NSYS_NO_MEMORY if all(t.source_format == "nsys" for t in traces) else NO_MEMORY


def device_memory(trace: RankTrace, device: str) -> float:
    """Bytes of memory of the rank's device (``cuda:N``) from its trace's deviceProperties,
    NaN when the trace does not say."""
    kind, _, index = device.partition(":")
    for entry in trace.meta.devices:
        if str(entry.index) == index and kind != "cpu":
            return math.nan if entry.total_memory is None else float(entry.total_memory)
    return math.nan


def rank_memory(trace: RankTrace) -> tuple[dict[str, pd.DataFrame], Counter]:
    """``({name: table}, found)`` for one rank: ``memory_peaks`` (``get_memory_peaks()``'s
    rows), ``memory_leaks`` (``get_memory_leaks()``'s), ``memory_leak_sites``
    (:func:`~.lifetimes.steady_leaks`), ``memory_by_step`` (``get_memory_by_step()``'s rows,
    ``peak_vs_median_rank`` of this rank alone: :func:`~.timeline.with_median_rank` sets it
    across ranks), ``memory_by_operator`` (the rank's :func:`~.operators.by_operator` with its
    ``self_unfreed_bytes``: summed by name over ranks, ``get_memory_by_operator()``), all empty
    without memory events; ``found``: what the timeline's checks found (health codes)."""
    events = memory_events(trace)
    line = timeline.timeline(events, trace.rank)
    if events.empty:  # most ranks: 20 ms of empty groupbys saved
        columns = (timeline.PEAK_COLUMNS, life.LEAK_COLUMNS, life.STEADY_COLUMNS,
                   timeline.STEP_COLUMNS, ops.MEMORY_OPERATOR_COLUMNS)  # fmt: skip
        empty = {name: pd.DataFrame(columns=c) for name, c in zip(TABLES, columns)}
        return empty, timeline.found(events, line)
    table = life.lifetimes(events, trace.rank)
    tables = {
        "memory_peaks": timeline.peaks(line),
        "memory_leaks": life.leaks(table),
        "memory_leak_sites": life.steady_leaks(table),
        "memory_by_step": timeline.by_step(line),
        "memory_by_operator": ops.rank_table(trace, events, table),
    }
    return tables, timeline.found(events, line)
