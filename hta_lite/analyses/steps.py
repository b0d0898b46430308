"""Per-step breakdown: for each rank and ProfilerStep, where the step's time went.

GPU events belong to the step of their launching call. Per (rank, step), in µs:
``step_time`` — **the step's length, the one every "% of the step" uses**: from the
ProfilerStep's start (its first CPU event) to the later of its end and the end of the last GPU
event launched in it (the GPU may finish a step after the CPU has left it) —, ``cpu_time``
(the ProfilerStep's own CPU wall time), ``gpu_span`` (first start to last end of
the step's GPU events), ``gpu_busy`` (union of those events), ``gpu_idle`` (span - busy),
``compute``, ``communication``, ``memory`` (union per kernel type), ``comm_overlapped``
(communication under computation) and ``comp_comm_overlap_pctg`` (NaN without communication).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from .. import intervals
from ..classify import COMMUNICATION, COMPUTATION, MEMORY
from ..load.rank_trace import RankTrace
from .common import GpuIntervals, select, us, wanted

COLUMNS = [
    "rank",
    "step",
    "step_time",
    "cpu_time",
    "gpu_span",
    "gpu_busy",
    "gpu_idle",
    "compute",
    "communication",
    "memory",
    "comm_overlapped",
    "comp_comm_overlap_pctg",
]


def profiled_steps(trace: RankTrace) -> pd.DataFrame:
    """Steps whose events were kept (the last one is left out unless asked for)."""
    kept = set(np.unique(trace.cpu["iteration"].to_numpy()).tolist()) if len(trace.cpu) else set()
    return trace.steps[trace.steps["step"].isin(kept)]


def step_rows(trace: RankTrace, steps: Iterable[int] | None = None) -> list[list]:
    gpu = GpuIntervals.of(trace)
    iteration = trace.gpu["iteration"].to_numpy()[gpu.rows]
    # the events of each step, by one sort (a mask per step is quadratic in long runs)
    order = np.argsort(iteration, kind="stable")
    keys = iteration[order]
    rows = []
    for step in profiled_steps(trace).itertuples(index=False):
        if steps is not None and step.step not in steps:
            continue
        lo, hi = np.searchsorted(keys, [step.step, step.step + 1])
        part = gpu.subset(order[lo:hi])  # in row order: the sort is stable
        span = int(part.end.max() - part.ts.min()) if hi > lo else 0
        extent = max(int(step.dur), int(part.end.max()) - int(step.ts) if hi > lo else 0)
        busy = intervals.total(*part.of_type())
        comm = part.of_type(COMMUNICATION)
        comm_time = intervals.total(*comm)
        overlapped = intervals.overlap(comm, part.of_type(COMPUTATION))
        rows.append(
            [
                trace.rank,
                int(step.step),
                us(extent),
                us(int(step.dur)),
                us(span),
                us(busy),
                us(span - busy),
                us(intervals.total(*part.of_type(COMPUTATION))),
                us(comm_time),
                us(intervals.total(*part.of_type(MEMORY))),
                us(overlapped),
                round(100.0 * overlapped / comm_time, 2) if comm_time else np.nan,
            ]
        )
    return rows


def step_breakdown(
    traces: Mapping[int, RankTrace],
    ranks: Iterable[int] | None = None,
    steps: Iterable[int] | None = None,
) -> pd.DataFrame:
    """Rows of ``COLUMNS`` per rank and profiled step (no rows without ProfilerStep); a step of
    ``steps`` that none of the ranks profiled is a :class:`SelectionError`."""
    selected = select(traces, ranks)
    present = [s for t in selected for s in profiled_steps(t)["step"].tolist()]
    asked = wanted(steps, present, "ProfilerStep(s)", "the profiled steps of these ranks")
    rows = [
        row for trace in selected for row in step_rows(trace, None if asked is None else set(asked))
    ]
    return pd.DataFrame(rows, columns=COLUMNS).astype({"rank": "int64", "step": "int64"})
