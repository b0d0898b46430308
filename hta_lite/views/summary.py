"""The summary tables of a trace folder, in the order the CLI prints them and writes them (one
file each) and the report shows them. A new analysis adds its table here: ``(file stem, heading,
builder)``; a builder returns None when the traces lack what the table needs, and the table is
left out."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pandas as pd

from ..analyses import cupti
from ..errors import MissingDataError


def _top_kernels(analysis) -> pd.DataFrame:
    _, kernel_df = analysis.get_gpu_kernel_breakdown(visualize=False)
    named = kernel_df[kernel_df["name"] != "others"]
    return named.sort_values("sum (us)", ascending=False).head(20).reset_index(drop=True)


def _cupti_by_operator(analysis) -> pd.DataFrame | None:
    if not any(len(t.kernel_counters) for t in analysis.traces.values()):
        return None
    return cupti.by_operator(analysis.get_cupti_counter_data_with_operators())


def top_operators(analysis) -> pd.DataFrame | None:
    """The 20 operators with most GPU time of their own, and the graph / no-operator rows."""
    table = analysis.get_operator_summary()
    if not (table["calls"] > 0).any():
        return None
    unowned = table["name"].str.startswith("[")
    rows = pd.concat([table[~unowned].head(20), table[unowned]], ignore_index=True)
    return rows[OPERATOR_COLUMNS]


OPERATOR_COLUMNS = ["name", "calls", "host_self(us)", "device_self_sum(us)",
                    "device_total_sum(us)", "device_self_pctg", "cumulative_pctg"]  # fmt: skip
TARGET_COLUMNS = ["device", "name", "input_dims", "precision", "calls", "gpu_time(us)",
                  "achieved_tflops", "bound", "roof_pctg", "time_below_roof(us)"]  # fmt: skip
MFU_COLUMNS = ["rank", "step", "step_time(us)", "achieved_tflops", "precision", "peak_tflops",
               "mfu_pctg", "modelled_gpu_pctg", "device"]  # fmt: skip


def quietly(build) -> Callable:
    """A builder that gives None where the traces lack shapes, a FLOP model or a known device."""

    def run(analysis):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return build(analysis)
            except MissingDataError:
                return None

    return run


def collectives(analysis, by: str) -> pd.DataFrame | None:
    """The collective summary, None when the traces have no collective."""
    return None if analysis.get_collectives().calls.empty else analysis.get_collective_summary(by)


def critical_path_region(analysis) -> tuple[int, str, int | None] | None:
    """(rank, annotation, instance) the summary's critical path covers: the lowest rank's first
    ProfilerStep, else its whole trace; None for CPU-only traces."""
    rank = analysis.ranks[0]
    trace = analysis.trace(rank)
    if trace.gpu.empty:
        return None
    return (rank, "ProfilerStep", 0) if len(trace.steps) else (rank, "", None)


def critical_path_rows(analysis, cp=None) -> pd.DataFrame | None:
    """The summary's critical path by ``bound_by`` (``cp``: that path, when already computed)."""
    region = critical_path_region(analysis)
    if region is None:
        return None
    rank, annotation, instance = region
    if cp is None:
        cp, _ = analysis.critical_path_analysis(rank, annotation, instance)
    table = cp.bound_by_table().reset_index()
    where = f"{annotation} #{instance}" if annotation else "whole trace"
    return table.assign(rank=rank, region=where)[
        ["rank", "region", "bound_by", "duration_us", "pctg"]
    ]


def memory_peaks(analysis) -> pd.DataFrame | None:
    """Peak allocated / reserved memory per (rank, device), None without ``[memory]`` events."""
    return quietly(lambda a: a.get_memory_peaks()[MEMORY_PEAK_COLUMNS])(analysis)


MEMORY_PEAK_COLUMNS = ["rank", "device", "peak_allocated", "operator", "module", "step",
                       "peak_reserved", "peak_fragmentation"]  # fmt: skip


def mfu_rows(analysis) -> pd.DataFrame | None:
    table = analysis.get_mfu()
    return None if table.empty or table["mfu_pctg"].isna().all() else table[MFU_COLUMNS]


TABLES: list[tuple[str, str, Callable]] = [
    (
        "temporal_breakdown",
        "Temporal breakdown (µs, % of GPU span)",
        lambda a: a.get_temporal_breakdown(visualize=False),
    ),
    (
        "comm_comp_overlap",
        "Communication / computation overlap (%)",
        lambda a: a.get_comm_comp_overlap(visualize=False),
    ),
    (
        "idle_time_breakdown",
        "Idle time by cause (µs)",
        lambda a: a.get_idle_time_breakdown(visualize=False)[0],
    ),
    (
        "kernel_type_breakdown",
        "GPU time by kernel type (µs, all ranks)",
        lambda a: a.get_gpu_kernel_breakdown(visualize=False)[0],
    ),
    ("top_kernels", "Top kernels (µs)", _top_kernels),
    (
        "step_breakdown",
        "Per-step breakdown (µs)",
        lambda a: a.get_step_breakdown(visualize=False),
    ),
    (
        "operators",
        "GPU time by operator (µs; launched itself / by the operators it calls)",
        top_operators,
    ),
    (
        "optimization_targets",
        "Operators furthest below their roofline, by time (µs)",
        quietly(lambda a: a.get_optimization_targets(top=10)[TARGET_COLUMNS]),
    ),
    ("mfu", "Model FLOPs utilization per step (%)", quietly(mfu_rows)),
    (
        "critical_path",
        "Critical path of the first step of the lowest rank, by what bounds it (µs, %)",
        critical_path_rows,
    ),
    ("memory_peaks", "Memory: peak allocated / reserved per rank and device (bytes)", memory_peaks),
    (
        "memory_leaks",
        "Memory allocated in a step and never freed (bytes; the same each step: a leak)",
        quietly(lambda a: None if (t := a.get_memory_leaks()).empty else t),
    ),
    ("collectives", "Collectives (µs, GB/s bus bandwidth)", lambda a: collectives(a, "collective")),
    (
        "collectives_by_rank",
        "Collectives by rank: who arrived last, the wait caused and suffered (µs)",
        lambda a: collectives(a, "rank"),
    ),
    (
        "collective_problems",
        "Collectives not matched across ranks, or partial (reason)",
        lambda a: None if a.get_collectives().problems.empty else a.get_collectives().problems,
    ),
    (
        "cupti_counters",
        "CUPTI counters by operator (sums over the profiled kernels)",
        _cupti_by_operator,
    ),
]


def summary_tables(analysis) -> dict[str, pd.DataFrame]:
    """``{file stem: table}`` of every summary table the traces allow, then ``health_summary``
    and ``health``."""
    tables = {}
    for key, _, build in TABLES:
        table = build(analysis)
        if table is not None:
            tables[key] = table
    tables["health_summary"] = analysis.health_summary()
    tables["health"] = analysis.health()
    return tables


HEADINGS = {key: heading for key, heading, _ in TABLES}
