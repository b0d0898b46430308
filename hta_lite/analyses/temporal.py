"""Temporal breakdown: where the GPU time of each rank went.

Over all GPU events of a rank (every stream merged): ``kernel_time`` is the span
from the first start to the last end (summed over the windows of a rank profiled in several
files: the gaps between windows were not profiled); ``idle_time`` the part of that span with no
GPU event; ``compute_time`` the union of COMPUTATION events (communication or
memory work hidden under compute counts as compute); ``non_compute_time`` the
rest. All times in µs; percentages of ``kernel_time``, rounded to 2 decimals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from .. import intervals
from ..classify import COMPUTATION
from ..load.rank_trace import RankTrace
from .common import GpuIntervals, select, us

COLUMNS = [
    "rank",
    "idle_time(us)",
    "compute_time(us)",
    "non_compute_time(us)",
    "kernel_time(us)",
    "idle_time_pctg",
    "compute_time_pctg",
    "non_compute_time_pctg",
]


def temporal_times_ns(gpu: GpuIntervals) -> tuple[int, int, int, int]:
    """``(idle, compute, non_compute, span)`` in ns."""
    starts, ends = intervals.merge(*gpu.of_type())
    if len(starts) == 0:
        return 0, 0, 0, 0
    span = gpu.span_ns()
    busy = int((ends - starts).sum())
    compute = intervals.total(*gpu.of_type(COMPUTATION))
    idle = span - busy
    return idle, compute, span - compute - idle, span


def temporal_breakdown(
    traces: Mapping[int, RankTrace], ranks: Iterable[int] | None = None
) -> pd.DataFrame:
    """One row per rank (columns in ``COLUMNS``); a CPU-only rank has NaN values."""
    rows = []
    for trace in select(traces, ranks):
        if trace.is_cpu_only:
            rows.append([trace.rank] + [np.nan] * 7)
            continue
        idle, compute, non_compute, span = temporal_times_ns(GpuIntervals.of(trace))
        pct = [round(100.0 * x / span, 2) if span else np.nan for x in (idle, compute, non_compute)]
        rows.append([trace.rank, us(idle), us(compute), us(non_compute), us(span), *pct])
    return pd.DataFrame(rows, columns=COLUMNS).astype({"rank": "int64"})
