"""The critical path the summary and the report show: the lowest rank's first step (or whole
trace) by what bounds it, with what its length means and what it cannot see."""

from __future__ import annotations

import pandas as pd

from ..analyses.steps import step_extents
from ..kineto import GPU_SYNC_CATEGORY
from ..units import fmt_us


def critical_path_region(analysis) -> tuple[int, str, int | None] | None:
    """(rank, annotation, instance) the summary's critical path covers: the lowest rank's first
    ProfilerStep, else its whole trace (as ``critical_path_analysis(rank)`` chooses); None when
    the rank has no host events to build a path from."""
    rank = analysis.ranks[0]
    trace = analysis.trace(rank)
    if trace.cpu.empty:
        return None
    return (rank, "ProfilerStep", 0) if len(trace.steps) else (rank, "", None)


def region_label(analysis, region: tuple[int, str, int | None]) -> str:
    """``ProfilerStep#551`` (the step's own number, as every other view numbers steps), or
    ``whole trace``."""
    rank, annotation, instance = region
    if not annotation:
        return "whole trace"
    steps = analysis.trace(rank).steps.sort_values("ts")
    return str(steps["name"].iloc[instance]) if instance < len(steps) else annotation


def critical_path_rows(analysis, cp=None) -> pd.DataFrame | str:
    """The summary's critical path by ``bound_by`` (``cp``: that path, when already computed);
    dependencies, which carry no weight, are left out; ``attrs["note"]`` says what the path's
    length is against the step (:func:`critical_path_note`)."""
    region = critical_path_region(analysis)
    if region is None:
        return "no CPU events: the critical path needs the host side"
    if cp is None:
        cp, _ = analysis.critical_path_analysis(*region)
    table = cp.bound_by_table().reset_index()
    table = table[table["bound_by"] != ""].assign(pctg=lambda t: t["pctg"].round(2))
    if table.empty:
        caveats = critical_path_caveats(analysis.trace(region[0]))
        return " ".join(
            [
                f"no weighted edge on the path of {region_label(analysis, region)}"
                " (the path needs host operators that depend on each other)",
                *caveats,
            ]
        )
    table = table.assign(rank=region[0], region=region_label(analysis, region))[
        ["rank", "region", "bound_by", "duration_us", "pctg"]
    ].reset_index(drop=True)
    table.attrs["note"] = critical_path_note(analysis, cp)
    return table


def critical_path_note(analysis, cp) -> str:
    """What the path's length is against the step: the rest is spanned by dependencies of zero
    weight (gaps between top-level CPU operators, waits), as in HTA's construction."""
    region = critical_path_region(analysis)
    rank, annotation, instance = region
    label = region_label(analysis, region)
    text = f"The path's weighted edges add up to {fmt_us(cp.length_us)}"
    if annotation:
        trace = analysis.trace(rank)
        step = trace.steps.sort_values("ts").iloc[instance]
        extent = step_extents(trace).set_index("step")  # the path's window: CPU and GPU work
        at = int(step["step"])
        ns = extent.loc[at, "end"] - extent.loc[at, "start"] if at in extent.index else step["dur"]
        step_us = float(ns) / 1e3
        text += f" of the {fmt_us(step_us)} from {label}'s start to the end of its GPU work"
        if step_us > cp.length_us:
            text += (
                f"; the other {fmt_us(step_us - cp.length_us)} are gaps between top-level CPU"
                " operators (Python, waits) and time outside the path, which HTA's"
                " construction joins with dependencies of zero weight"
            )
    return text + "." + "".join(f" {c}" for c in critical_path_caveats(analysis.trace(rank)))


def critical_path_caveats(trace) -> list[str]:
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
