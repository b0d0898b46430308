"""The views of one rank that the reports show of a whole folder, the lowest rank's: its first
step's critical path, its launch queue and memory bandwidth over time and its kernel launches
(:mod:`hta_lite.views.report_one_rank` draws them); and the memory over time of the rank with
the highest peak. :func:`.batch.summarize_folder` makes them in the caller from the rank
reopened (:class:`.batch_findings.Reopened`: from the cache, or parsed again with the cache
off), as ``TraceAnalysis`` makes them of its lowest rank (and of every rank's memory)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..analyses import counters, cupti, launches
from ..analyses.critical_path import first_step
from ..analyses.memory.events import memory_events
from ..analyses.memory.timeline import TIMELINE_COLUMNS, timeline
from ..errors import TraceError
from ..load.rank_trace import RankTrace
from ..missing_data import missing
from ..plots import critical_path_segments

#: the tables :func:`one_rank_tables` and :func:`peak_memory_tables` give (``Summary`` keys)
TABLES = (
    "critical_path", "critical_path_segments", "queue_length_series", "memory_bw_series",
    "launch_stats", "memory_timeline", "memory_timeline_steps",
)  # fmt: skip


def one_rank_tables(trace: RankTrace) -> dict[str, pd.DataFrame]:
    """The lowest rank's tables: ``critical_path`` (:func:`first_step.rows`; where there is none,
    no rows and ``attrs["why"]``), ``critical_path_segments`` (the path's edges,
    :func:`~hta_lite.plots.critical_path.critical_path_segments`; ``attrs["length_us"]``: its
    weighted edges' sum), ``queue_length_series`` and ``memory_bw_series`` (as
    ``get_queue_length_time_series`` / ``get_memory_bw_time_series`` give the rank's; no rows
    where it has none) and ``launch_stats`` (``get_cuda_kernel_launch_stats``' table of it)."""
    cp = first_step.first_step_path(trace)
    rows = first_step.rows(trace, cp)
    segments = critical_path_segments(cp) if cp is not None else pd.DataFrame()
    segments.attrs["length_us"] = cp.length_us if cp is not None else 0.0
    return {
        "critical_path": missing(first_step.COLUMNS, rows) if isinstance(rows, str) else rows,
        "critical_path_segments": segments,
        "queue_length_series": counters.queue_length_series(trace),
        "memory_bw_series": counters.memory_bw_series(trace),
        "launch_stats": launches.launch_stats(trace),
    }


def peak_memory_tables(peaks: pd.DataFrame, traces: Mapping[int, RankTrace]) -> dict:
    """``memory_timeline`` (``get_memory_timeline()``'s rows of one rank: the rank with the
    highest peak allocated of ``peaks``, the batch's ``memory_peaks``, the lowest such rank on a
    tie) and ``memory_timeline_steps`` (its steps, which the chart shades); where no rank has
    memory events, no rows (``peaks``' ``attrs["why"]``)."""
    if peaks.empty:
        return {"memory_timeline": missing(TIMELINE_COLUMNS, peaks.attrs.get("why", "")),
                "memory_timeline_steps": pd.DataFrame()}  # fmt: skip
    rank = int(
        peaks.sort_values(["peak_allocated", "rank"], ascending=[False, True])["rank"].iat[0]
    )
    trace = traces[rank]
    return {
        "memory_timeline": timeline(memory_events(trace), rank),
        "memory_timeline_steps": trace.steps,
    }


def rank_cupti_counters(trace: RankTrace) -> pd.DataFrame:
    """The rank's kernels replayed by the CUPTI range profiler with their operators
    (:func:`~hta_lite.analyses.cupti.counter_data_with_operators`); no rows without them, and
    ``attrs["why"]`` where they cannot be paired with their launches."""
    if not len(trace.kernel_counters):
        return pd.DataFrame(columns=cupti.FIXED_COLUMNS)
    try:
        return cupti.counter_data_with_operators(trace)
    except TraceError as exc:
        return missing(cupti.FIXED_COLUMNS, str(exc))


def cupti_across(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The batch's ``cupti_counters``: the ranks' :func:`rank_cupti_counters` in one table
    (``attrs["why"]``: the first rank's whose ranges could not be paired)."""
    table = pd.concat([part for part in parts if len(part)] or parts[:1], ignore_index=True)
    reasons = [part.attrs["why"] for part in parts if "why" in part.attrs]
    if reasons:
        table.attrs["why"] = reasons[0]
    return table


def cupti_frames(table: pd.DataFrame) -> list[pd.DataFrame]:
    """``get_cupti_counter_data_with_operators()``'s frames (one per rank with ranges) from the
    batch's ``cupti_counters`` (all ranks; each rank's frame without the counters it lacks)."""
    fixed = cupti.FIXED_COLUMNS
    return [
        pd.concat(
            [rows[fixed], rows.drop(columns=fixed).dropna(axis=1, how="all")], axis=1
        ).reset_index(drop=True)
        for _, rows in table.groupby("rank", sort=True)
    ]
