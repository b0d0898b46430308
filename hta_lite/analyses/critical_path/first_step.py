"""The critical path the summary, the reports and the batch show: a rank's first step (or whole
trace) by what bounds it, with what its length means and what it cannot see."""

from __future__ import annotations

import pandas as pd

from ...kineto import GPU_SYNC_CATEGORY, STEP_ANNOTATION
from ...load.rank_trace import RankTrace
from ...units import fmt_us
from ..steps import step_extents
from .path import CriticalPath, critical_path

#: columns of :func:`rows`
COLUMNS = ["rank", "region", "bound_by", "duration_us", "pctg"]


def region(trace: RankTrace) -> tuple[str, int | None] | None:
    """(annotation, instance) of the rank's shown path: its first step, else its whole trace (as
    ``critical_path_analysis(rank)`` chooses); None when it has no host events to build a path
    from."""
    if trace.cpu.empty:
        return None
    return (STEP_ANNOTATION, 0) if len(trace.steps) else ("", None)


def label(trace: RankTrace) -> str:
    """``ProfilerStep#551`` (the step's own number, as every other view numbers steps), or
    ``whole trace``."""
    if not len(trace.steps):
        return "whole trace"
    return str(trace.steps.sort_values("ts")["name"].iloc[0])


def first_step_path(trace: RankTrace) -> CriticalPath | None:
    """The path of :func:`region` (None: no host events)."""
    where = region(trace)
    return None if where is None else critical_path(trace, *where)


def rows(trace: RankTrace, cp: CriticalPath | None) -> pd.DataFrame | str:
    """``cp`` (the rank's :func:`first_step_path`) by ``bound_by`` (:data:`COLUMNS`; µs and %
    of the path); dependencies, which carry no weight, are left out; ``attrs["note"]`` says what
    the path's length is against the step (:func:`note`). A sentence where there is none."""
    if cp is None:
        return "no CPU events: the critical path needs the host side"
    table = cp.bound_by_table().reset_index()
    table = table[table["bound_by"] != ""].assign(pctg=lambda t: t["pctg"].round(2))
    if table.empty:
        return " ".join(
            [
                f"no weighted edge on the path of {label(trace)}"
                " (the path needs host operators that depend on each other)",
                *caveats(trace),
            ]
        )
    table = table.assign(rank=trace.rank, region=label(trace))[COLUMNS].reset_index(drop=True)
    table.attrs["note"] = note(trace, cp)
    return table


def note(trace: RankTrace, cp: CriticalPath) -> str:
    """What the path's length is against the step: the rest is spanned by dependencies of zero
    weight (gaps between top-level CPU operators, waits), as in HTA's construction."""
    text = f"The path's weighted edges add up to {fmt_us(cp.length_us)}"
    if len(trace.steps):
        step = trace.steps.sort_values("ts").iloc[0]
        extent = step_extents(trace).set_index("step")  # the path's window: CPU and GPU work
        at = int(step["step"])
        ns = extent.loc[at, "end"] - extent.loc[at, "start"] if at in extent.index else step["dur"]
        step_us = float(ns) / 1e3
        text += f" of the {fmt_us(step_us)} from {label(trace)}'s start to the end of its GPU work"
        if step_us > cp.length_us:
            text += (
                f"; the other {fmt_us(step_us - cp.length_us)} are gaps between top-level CPU"
                " operators (Python, waits) and time outside the path, which HTA's"
                " construction joins with dependencies of zero weight"
            )
    return text + "." + "".join(f" {c}" for c in caveats(trace))


def caveats(trace: RankTrace) -> list[str]:
    """What a rank's critical path cannot see, said once with what to record: no GPU work (the
    path is the host's), or GPU work without CUDA synchronization events (HTA warns alike)."""
    if trace.gpu.empty:
        return ["No GPU work in the trace: every edge is on the host (CPU-only traces)."]
    if (trace.gpu["cat"] == GPU_SYNC_CATEGORY).any():
        return []
    if trace.source_format == "nsys":
        return [
            "The export has no CUDA synchronization records (nsys writes one for each"
            " cudaStreamSynchronize, cudaDeviceSynchronize or cudaEventSynchronize it traces; a"
            " blocking cudaMemcpy gets none): where the host waited for the GPU the path cannot"
            " follow the wait, so it may be inaccurate."
        ]
    return [
        "The trace has no CUDA synchronization events (cuda_sync: PyTorch 2.1+ records"
        " them): where the host waited for the GPU the path cannot follow the wait, so it"
        " may be inaccurate; record with a recent PyTorch to see them."
    ]
