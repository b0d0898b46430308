"""The report sections drawn from one rank's tables, the lowest rank's (its launch queue and
memory bandwidth, its kernel launches, its first step's critical path), and the CUPTI counters:
``hta-lite report`` and the batch's report call them with the same tables."""

from __future__ import annotations

import html
from collections.abc import Callable

import pandas as pd

from .. import plots
from ..analyses import cupti
from .html import Report, note, table


def counters(
    report: Report, rank: int, queue: pd.DataFrame | None, queue_summary: Callable,
    bandwidth: pd.DataFrame | None, bandwidth_summary: Callable,
) -> None:  # fmt: skip
    """The rank's launch queue and memory bandwidth over time (``queue`` / ``bandwidth``: its
    series, None where it has none) and the summaries of all ranks (called where drawn)."""
    parts = []
    if queue is not None:
        parts += [
            report.chart(plots.plot_queue_length(queue, rank)),
            table(queue_summary(), index=True),
        ]
    if bandwidth is not None:
        parts += [
            report.chart(plots.plot_memory_bw(bandwidth, rank)),
            table(bandwidth_summary(), index=True),
        ]
    if parts:
        report.section("counters", f"Launch queue and memory bandwidth (rank {rank})", *parts)


def launches(report: Report, rank: int, stats: pd.DataFrame) -> None:
    """The rank's kernel launches (``get_cuda_kernel_launch_stats``' table of it)."""
    if len(stats):
        times = stats.drop(columns=["correlation"], errors="ignore")
        report.section(
            "launches",
            f"Kernel launches (rank {rank})",
            note(
                "Per launch (µs): the launch call's duration, the GPU event's, and the delay"
                " from the call's end to the GPU start."
            ),  # fmt: skip
            table(times.describe().T.rename_axis("measure (µs)"), index=True),
            *[report.chart(f) for f in plots.plot_launch_stats(stats, rank)],
        )


def critical_path(
    report: Report, rows: pd.DataFrame | str, segments: pd.DataFrame, length_us: float
) -> None:
    """The critical path of the lowest rank's first step (``rows``:
    :func:`~hta_lite.analyses.critical_path.first_step.rows`, or why there is none), what bounds
    it, on a timeline (``segments``: the path's edges, ``length_us``: its weighted edges' sum)."""
    if isinstance(rows, str):
        report.section("critical-path", "Critical path", note(f"No critical path: {rows}."))
        return
    rank, label = rows["rank"].iat[0], rows["region"].iat[0]
    report.section(
        "critical-path",
        "Critical path",
        note(
            f"The longest chain of dependencies through rank {rank}'s {label}: CPU"
            " operators, launches, kernels, cross-stream waits and host synchronizations,"
            " with what bounds each part (docs/analyses/critical-path.md)."
        ),  # fmt: skip
        f"<p>{html.escape(rows.attrs['note'])}</p>",
        table(rows),
        report.chart(
            plots.plot_path_segments(segments, length_us, f"Critical path of rank {rank}, {label}")
        ),
    )


def cupti_counters(report: Report, frames: list[pd.DataFrame]) -> None:
    """The kernels the CUPTI range profiler replayed, one frame per rank that has them
    (``get_cupti_counter_data_with_operators()``), and their sums by operator."""
    if not frames:
        return
    report.section(
        "cupti",
        "CUPTI counters per operator",
        note(
            "Kernels replayed by the CUPTI range profiler, paired with their launch calls in"
            " launch order; FLOPs from the SASS instruction counters."
        ),  # fmt: skip
        *[report.chart(plots.plot_cupti_counters(df, cupti.main_counter(df))) for df in frames],
        table(cupti.by_operator(frames)),
    )
