"""Per-step breakdown: for each rank and ProfilerStep, where the step's time went.

GPU events belong to the step of their launching call. A step's *extent* runs from its
ProfilerStep's start (its first CPU event) to the later of its end and the end of the last GPU
event launched in it (the GPU may finish a step after the CPU has left it). Per (rank, step), in
µs: ``step_time`` — **the step's length, the one every "% of the step" uses**: its extent, from
the later of its start and the end of the rank's earlier steps (:func:`step_lengths`: where the
GPU runs behind the CPU, extents overlap, and each step counts only the time it adds, so that
the steps add up to the time they cover) —, ``cpu_time``
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


def step_extents(trace: RankTrace) -> pd.DataFrame:
    """``step``, ``start``, ``end`` (ns) of the rank's profiled steps in time order: each step's
    extent (module docstring)."""
    table = profiled_steps(trace).sort_values("ts", kind="stable")
    start = table["ts"].to_numpy(np.int64)
    end = start + table["dur"].to_numpy(np.int64)
    if len(trace.gpu) and len(table):
        gpu_end = (trace.gpu["ts"] + trace.gpu["dur"]).groupby(trace.gpu["iteration"]).max()
        launched = gpu_end.reindex(table["step"].to_numpy(), fill_value=0).to_numpy(np.int64)
        end = np.maximum(end, launched)
    return pd.DataFrame({"step": table["step"].to_numpy(np.int64), "start": start, "end": end})


def step_lengths(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """ns each of a rank's steps (extents ``start`` / ``end`` ns, in time order) adds to the
    run: from the later of its start and the end of every earlier step to its end, never below
    zero. Where the CPU runs ahead of the GPU the extents overlap (a step's GPU work runs while
    the CPU launches the next) and a step's length is then the GPU's period, not the queue's
    depth; the lengths add up to the union of the extents."""
    start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
    return np.maximum(end - np.maximum(start, earlier_ends(end)), 0)


def earlier_ends(end: np.ndarray) -> np.ndarray:
    """Per step (extents' ``end`` ns, in time order): the end of every earlier step (ns; the
    int64 minimum for the first)."""
    end = np.asarray(end, np.int64)
    return np.concatenate([[np.iinfo(np.int64).min], np.maximum.accumulate(end)[:-1]])[: len(end)]


def step_rows(trace: RankTrace, steps: Iterable[int] | None = None) -> list[list]:
    extents = step_extents(trace)
    length = dict(zip(extents["step"].tolist(), step_lengths(extents["start"], extents["end"])))
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
        busy = intervals.total(*part.of_type())
        comm = part.of_type(COMMUNICATION)
        comm_time = intervals.total(*comm)
        overlapped = intervals.overlap(comm, part.of_type(COMPUTATION))
        rows.append(
            [
                trace.rank,
                int(step.step),
                us(int(length[step.step])),
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
