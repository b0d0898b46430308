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
can count negative gaps there). The gap from one profiled window to the next (a rank profiled
in several files) is not idle time and has no row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from ..intervals import running_max_by_group, sorted_by_group
from ..kineto import GPU_WORK_CATEGORIES
from ..load.rank_trace import RankTrace
from ..rows import gather
from .common import select, us, wanted, windows_of

IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")
STATS = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")
#: µs from a launch call's return to its kernel's start that is still the launch latency (and the
#: threshold of ``kernel_wait``)
CONSECUTIVE_KERNEL_DELAY_US = 30


def queued_after_launch(
    ts: np.ndarray, end: np.ndarray, returned: np.ndarray, delay_ns: int
) -> np.ndarray:
    """Per GPU event (``ts`` / ``end``, ns; ``returned``: when its launch call returned, ns, no
    later than ``ts`` where unknown): ns it waited, launched and with nothing on the GPU running,
    beyond ``delay_ns`` of launch latency — held by something the trace does not show (work
    launched before the profiler started, an event recorded outside the trace, another process).
    """
    order = np.argsort(ts, kind="stable")
    reach = np.maximum.accumulate(end[order]) if len(order) else end[order]
    before = np.r_[np.iinfo(np.int64).min, reach[:-1]]  # latest end among the earlier events
    out = np.zeros(len(ts), np.int64)
    out[order] = np.maximum(ts[order] - np.maximum(before, returned[order]) - delay_ns, 0)
    return out


def idle_gaps(
    trace: RankTrace, consecutive_kernel_delay_us: float = CONSECUTIVE_KERNEL_DELAY_US
) -> pd.DataFrame:
    """One row per gap: ``rank, stream, idle_category, idle_interval`` (µs), ``ts`` (ns, gap end)
    and ``step`` (iteration of the event after the gap)."""
    gpu = trace.gpu
    rows = np.flatnonzero(np.asarray(gpu["cat"].isin(GPU_WORK_CATEGORIES)))
    order, first = sorted_by_group(gpu["stream"].to_numpy()[rows], gpu["ts"].to_numpy()[rows])
    order = rows[order]
    stream = gpu["stream"].to_numpy()[order]
    ts = gpu["ts"].to_numpy()[order]
    end = ts + gpu["dur"].to_numpy()[order]
    runtime_ts = gather(
        trace.cpu["ts"].to_numpy(), gpu["launch_row"].to_numpy()[order], np.iinfo(np.int64).min
    )
    reach = running_max_by_group(end, first)  # latest end among the stream's events so far
    prev_end = np.empty_like(reach)
    prev_end[1:] = reach[:-1]
    gap = ts - prev_end
    window = windows_of(gpu, order)
    keep = ~first & (window == np.append(window[:1], window[:-1]))
    host = runtime_ts > prev_end
    kernel = ~host & (gap < consecutive_kernel_delay_us * 1000)
    category = np.where(host, 0, np.where(kernel, 1, 2))
    return pd.DataFrame(
        {
            "rank": trace.rank,
            "stream": stream[keep],
            "idle_category": pd.Categorical.from_codes(category[keep], IDLE_CATEGORIES),
            "idle_interval": us(np.maximum(gap[keep], 0)),
            "ts": ts[keep],
            "step": gpu["iteration"].to_numpy()[order][keep],
        }
    )


def gpu_idle_gaps(
    trace: RankTrace,
    consecutive_kernel_delay_us: float = CONSECUTIVE_KERNEL_DELAY_US,
    split_held: bool = True,
) -> pd.DataFrame:
    """The gaps of the whole GPU (no work on any stream): ``idle_category``, ``idle_interval``
    (µs), ``step`` (iteration of the GPU event that ends the gap); none from one profiled window
    to the next.

    The category is the rule of :func:`idle_gaps` applied to the event that ends the gap, with
    one refinement: of a ``host_wait`` gap, only the time until that event's launch call returned
    (plus ``consecutive_kernel_delay_us``, the launch latency) is the host's; the rest is a second
    row, ``other`` — the work was launched and, with nothing running, still waited: for what the
    trace does not show (:func:`queued_after_launch`). HTA's rule counts it all as host wait
    (``split_held=False``)."""
    gpu = trace.gpu
    work = np.flatnonzero(np.asarray(gpu["cat"].isin(GPU_WORK_CATEGORIES)))
    order = work[np.argsort(gpu["ts"].to_numpy()[work], kind="stable")]
    ts = gpu["ts"].to_numpy()[order]
    reach = np.maximum.accumulate(ts + gpu["dur"].to_numpy()[order]) if len(ts) else ts
    launch = gpu["launch_row"].to_numpy()[order]
    launched = gather(trace.cpu["ts"].to_numpy(), launch, np.iinfo(np.int64).min)
    delay = int(consecutive_kernel_delay_us * 1000)
    gap = np.maximum(ts[1:] - reach[:-1], 0)
    host = launched[1:] > reach[:-1]
    category = np.where(host, 0, np.where(gap < delay, 1, 2))
    queued = np.zeros_like(gap)
    if split_held:
        queued = np.where(host, np.minimum(queued_waits(trace, delay)[order][1:], gap), 0)
    window = windows_of(gpu, order)
    inside = window[1:] == window[:-1]  # the gap from one window to the next is not idle
    step = gpu["iteration"].to_numpy()[order][1:]
    split = np.flatnonzero(inside & (queued > 0))
    keep = np.flatnonzero(inside)
    return pd.DataFrame(
        {
            "idle_category": pd.Categorical.from_codes(
                np.r_[category[keep], np.full(len(split), 2)], IDLE_CATEGORIES
            ),
            "idle_interval": us(np.r_[gap[keep] - queued[keep], queued[split]]),
            "step": np.r_[step[keep], step[split]],
        }
    )


def host_wait_per_step(trace: RankTrace, split_held: bool = True) -> pd.Series:
    """µs per step (index) the rank's whole GPU idled waiting for its host to launch work: the
    ``host_wait`` rows of :func:`gpu_idle_gaps` (``split_held``: its refinement, else HTA's
    rule); empty for a CPU-only rank."""
    if trace.is_cpu_only:
        return pd.Series(dtype=np.float64)
    gaps = gpu_idle_gaps(trace, split_held=split_held)
    waits = gaps[(gaps["idle_category"] == "host_wait").to_numpy()]
    return waits.groupby("step")["idle_interval"].sum().astype(np.float64)


def queued_waits(
    trace: RankTrace, delay_ns: int = CONSECUTIVE_KERNEL_DELAY_US * 1000
) -> np.ndarray:
    """Per row of ``trace.gpu``: :func:`queued_after_launch` over the rank's GPU work (0 for other
    rows, and for work without a launch call in the trace); kept with the trace (several kinds of
    finding read it)."""
    key = f"_queued_waits_{delay_ns}"
    if key not in trace.__dict__:
        trace.__dict__[key] = _queued_waits(trace, delay_ns)
        trace.__dict__[key].flags.writeable = False  # shared by its readers
    return trace.__dict__[key]


def _queued_waits(trace: RankTrace, delay_ns: int) -> np.ndarray:
    gpu = trace.gpu
    work = np.flatnonzero(np.asarray(gpu["cat"].isin(GPU_WORK_CATEGORIES)))
    ts = gpu["ts"].to_numpy()[work]
    end = ts + gpu["dur"].to_numpy()[work]
    launch = gpu["launch_row"].to_numpy()[work]
    returned = gather((trace.cpu["ts"] + trace.cpu["dur"]).to_numpy(), launch, 0)
    out = np.zeros(len(gpu), np.int64)
    out[work] = queued_after_launch(ts, end, np.where(launch >= 0, returned, ts), delay_ns)
    return out


def held_spans(trace: RankTrace) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) ns of the rank's time the GPU ran nothing with work launched and waiting
    (:func:`queued_waits`): whatever the host did then, it is not what the GPU waited for."""
    queued = queued_waits(trace)
    held = np.flatnonzero(queued > 0)
    ts = trace.gpu["ts"].to_numpy(np.int64)[held]
    return ts - queued[held], ts


def gpu_idle_by_cause(
    traces: Mapping[int, RankTrace],
    consecutive_kernel_delay_us: float = CONSECUTIVE_KERNEL_DELAY_US,
) -> pd.DataFrame:
    """Idle time of the whole GPU (:func:`gpu_idle_gaps`; the idle time of
    ``get_temporal_breakdown``) by cause, per rank. Columns ``rank, idle_category,
    idle_time`` (µs), ``idle_time_pctg`` (of the rank's idle time); every category per rank
    with GPU work, none for a CPU-only rank."""
    rows = []
    for trace in traces.values():
        if trace.is_cpu_only:
            continue
        gaps = gpu_idle_gaps(trace, consecutive_kernel_delay_us)
        sums = np.bincount(
            gaps["idle_category"].cat.codes, weights=gaps["idle_interval"], minlength=3
        )
        total = sums.sum()
        for name, value in zip(IDLE_CATEGORIES, sums):
            share = round(100.0 * value / total, 2) if total else np.nan
            rows.append((trace.rank, name, round(float(value), 3), share))
    return pd.DataFrame(rows, columns=["rank", "idle_category", "idle_time", "idle_time_pctg"])


def stream_breakdown(gaps: pd.DataFrame, rank: int, streams: np.ndarray) -> pd.DataFrame:
    """Rows ``rank, stream, idle_category, idle_time, idle_time_ratio`` for the given streams."""
    index = np.searchsorted(streams, gaps["stream"].to_numpy())
    found = (
        (index < len(streams))
        & (streams[np.minimum(index, len(streams) - 1)] == gaps["stream"].to_numpy())
        if len(streams)
        else np.zeros(len(gaps), bool)
    )
    key = index[found] * 3 + gaps["idle_category"].cat.codes.to_numpy()[found]
    sums = np.bincount(
        key, weights=gaps["idle_interval"].to_numpy()[found], minlength=3 * len(streams)
    ).reshape(-1, 3)
    totals = sums.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(totals > 0, sums / totals, np.nan)
    return pd.DataFrame(
        {
            "rank": rank,
            "stream": np.repeat(streams, 3),
            "idle_category": np.tile(np.array(IDLE_CATEGORIES, dtype=object), len(streams)),
            "idle_time": sums.ravel().round(3),
            "idle_time_ratio": ratio.ravel().round(2),
        }
    )


def work_streams(trace: RankTrace) -> np.ndarray:
    """Streams of the rank's GPU work (kernels, copies, sets), sorted."""
    return np.unique(trace.gpu.loc[trace.gpu["cat"].isin(GPU_WORK_CATEGORIES), "stream"].to_numpy())


def idle_time_breakdown(
    traces: Mapping[int, RankTrace],
    ranks: Iterable[int] | int | None = None,
    streams: Iterable[int] | None = None,
    consecutive_kernel_delay: float = 30,
    show_idle_interval_stats: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """``(breakdown, interval_stats)``; every stream gets all three categories (µs).

    ``interval_stats`` (with ``show_idle_interval_stats``) describes the gaps per
    rank, stream and category: count, mean, std, min, quartiles, max (µs). A stream of
    ``streams`` that none of the ranks has is a :class:`SelectionError`.
    """
    selected = select(traces, ranks)
    streams_of = {t.rank: work_streams(t) for t in selected}
    asked = wanted(streams, np.concatenate([[], *streams_of.values()]), "stream(s)", "these ranks")
    parts, all_gaps = [], []
    for trace in selected:
        gaps = idle_gaps(trace, consecutive_kernel_delay)
        rank_streams = streams_of[trace.rank]
        if asked is not None:
            rank_streams = np.intersect1d(rank_streams, np.array(asked, dtype=np.int64))
            gaps = gaps[gaps["stream"].isin(rank_streams)]
        parts.append(stream_breakdown(gaps, trace.rank, rank_streams))
        all_gaps.append(gaps)
    result = (
        pd.concat(parts, ignore_index=True)
        if parts
        else stream_breakdown(idle_gaps_empty(), 0, np.zeros(0, np.int64))
    )
    stats = None
    if show_idle_interval_stats:
        gaps = pd.concat(all_gaps, ignore_index=True) if all_gaps else idle_gaps_empty()
        keys = ["rank", "stream", "idle_category"]
        stats = (
            gaps.groupby(keys, observed=True)["idle_interval"].describe().round(2).reset_index()
            if len(gaps)
            else pd.DataFrame(columns=keys + list(STATS))
        )
        stats["idle_category"] = stats["idle_category"].astype(str)
    return result, stats


def idle_gaps_empty() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rank": pd.Series(dtype="int64"),
            "stream": pd.Series(dtype="int64"),
            "idle_category": pd.Categorical([], IDLE_CATEGORIES),
            "idle_interval": pd.Series(dtype="float64"),
            "ts": pd.Series(dtype="int64"),
            "step": pd.Series(dtype="int64"),
        }
    )
