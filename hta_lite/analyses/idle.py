"""Idle-time breakdown per (rank, stream): why each gap between GPU events happened.

For consecutive events on a stream, the gap before an event is
- ``host_wait``   when its launching runtime call started after the stream went
  idle (the CPU was not enqueuing fast enough);
- ``kernel_wait`` otherwise, when the gap is shorter than
  ``consecutive_kernel_delay`` (µs) — the normal back-to-back launch overhead;
- ``other``       otherwise (e.g. waiting on another stream or an event).
``idle_time`` is in µs; ``idle_time_ratio`` is the category's share of the
stream's idle time.  Gaps are measured from the latest end seen so far on the
stream, so an event overlapping its predecessor adds no idle time (the reference
can count negative gaps there).
"""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from ..links import gather
from ..rank_trace import RankTrace
from .common import select, us

IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")
EVENT_CATEGORIES = ("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events")


def idle_gaps(trace: RankTrace, consecutive_kernel_delay_us: float = 30) -> pd.DataFrame:
    """One row per gap: ``rank, stream, idle_category, idle_interval`` (µs), ``ts`` (ns, gap end)."""
    gpu = trace.gpu[trace.gpu["cat"].isin(EVENT_CATEGORIES)]
    gpu = gpu.sort_values(["stream", "ts"], kind="stable")
    stream = gpu["stream"].to_numpy()
    ts = gpu["ts"].to_numpy()
    end = ts + gpu["dur"].to_numpy()
    launch = gpu["launch_row"].to_numpy()
    runtime_ts = gather(trace.cpu["ts"].to_numpy(), launch, np.iinfo(np.int64).min)
    first = np.ones(len(gpu), bool)
    first[1:] = stream[1:] != stream[:-1]
    # latest end among the previous events of the same stream
    reach = pd.Series(end).groupby(stream).cummax().to_numpy()
    prev_end = np.empty_like(reach)
    prev_end[1:] = reach[:-1]
    gap = ts - prev_end
    keep = ~first
    host = runtime_ts > prev_end
    kernel = ~host & (gap < consecutive_kernel_delay_us * 1000)
    category = np.where(host, 0, np.where(kernel, 1, 2))
    out = pd.DataFrame(
        {
            "rank": trace.rank,
            "stream": stream[keep],
            "idle_category": pd.Categorical.from_codes(category[keep], IDLE_CATEGORIES),
            "idle_interval": us(np.maximum(gap[keep], 0)),
            "ts": ts[keep],
        }
    )
    return out


def idle_time_breakdown(
    traces: Mapping[int, RankTrace],
    ranks: Iterable[int] | None = None,
    streams: Iterable[int] | None = None,
    consecutive_kernel_delay: float = 30,
    show_idle_interval_stats: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """``(breakdown, interval_stats)``; every stream gets all three categories."""
    gaps = [idle_gaps(t, consecutive_kernel_delay) for t in select(traces, ranks) if not t.is_cpu_only]
    gaps = pd.concat(gaps, ignore_index=True) if gaps else idle_gaps_empty()
    if streams is not None:
        gaps = gaps[gaps["stream"].isin(list(streams))]
    streams_seen = _streams(traces, ranks, streams)
    grid = pd.MultiIndex.from_tuples(
        [(r, s, c) for r, s in streams_seen for c in IDLE_CATEGORIES], names=["rank", "stream", "idle_category"]
    )
    sums = gaps.groupby(["rank", "stream", "idle_category"], observed=True)["idle_interval"].sum()
    result = sums.reindex(grid, fill_value=0.0).rename("idle_time").reset_index()
    per_stream = result.groupby(["rank", "stream"])["idle_time"].transform("sum")
    result["idle_time_ratio"] = (result["idle_time"] / per_stream.where(per_stream > 0)).round(2)
    result["idle_time"] = result["idle_time"].round(3)
    result["idle_category"] = result["idle_category"].astype(str)
    stats = None
    if show_idle_interval_stats:
        stats = (
            gaps.groupby(["rank", "stream", "idle_category"], observed=True)["idle_interval"].describe().round(2).reset_index()
        )
        stats["idle_category"] = stats["idle_category"].astype(str)
    return result, stats


def _streams(traces, ranks, streams) -> list[tuple[int, int]]:
    pairs = []
    for t in select(traces, ranks):
        gpu = t.gpu[t.gpu["cat"].isin(EVENT_CATEGORIES)]
        for s in sorted(gpu["stream"].unique().tolist()):
            if streams is None or s in set(streams):
                pairs.append((t.rank, int(s)))
    return pairs


def idle_gaps_empty() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rank": pd.Series(dtype="int64"),
            "stream": pd.Series(dtype="int64"),
            "idle_category": pd.Categorical([], IDLE_CATEGORIES),
            "idle_interval": pd.Series(dtype="float64"),
            "ts": pd.Series(dtype="int64"),
        }
    )
