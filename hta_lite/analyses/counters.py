"""Counters: launch-queue length per stream and memory bandwidth per memcpy kind.

Queue length, per (rank, stream): +1 when a runtime/driver call enqueues a GPU event
(``LAUNCH_NAMES``; a graph launch adds one per GPU event it releases), -1 when that GPU
event starts. The series has one row per change: ``ts`` (ns), ``pid``/``tid`` of the
GPU event (device, stream), ``stream``, ``queue_length`` (outstanding operations).
A GPU event that starts before its launch (clock skew) is queued at its start, so the
length never goes negative; the health table counts such events. Changes at one instant are
ordered: starts of operations already queued, then enqueues, then starts of operations enqueued
at that instant (the reference orders them arbitrarily: docs/differences-from-hta.md).

Memory bandwidth, per (rank, kind): each MEMORY event adds its bandwidth (GB/s) at its start
and removes it at its end; the series is the running sum per kind (``Memcpy HtoD``,
``Memcpy DtoH``, ``Memcpy DtoD``, ``Memcpy PtoP``, ``Memset``, ``Memcpy Unknown``).
The bandwidth is Kineto's ``memory bandwidth (GB/s)`` arg or, where absent, bytes / duration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from ..classify import MEMORY
from ..kineto import GRAPH_LAUNCH_NAMES, LAUNCH_NAMES, memcpy_kind
from ..load.rank_trace import RankTrace
from ..rows import gather
from .common import select, text_values, us


def _group_starts(sorted_groups: np.ndarray) -> np.ndarray:
    first = np.ones(len(sorted_groups), bool)
    first[1:] = sorted_groups[1:] != sorted_groups[:-1]
    return first


def _cumsum_by_group(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Running sum of ``values`` restarting where ``first`` is True."""
    total = np.cumsum(values)
    start = np.maximum.accumulate(np.where(first, np.arange(len(values)), 0))
    return total - (total[start] - values[start])


def queue_changes(trace: RankTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The queue of every stream, change by change: ``(queued, order, length)``. ``queued``: the
    ``gpu`` rows enqueued by a launch call; the changes are their enqueues (positions ``0..n-1``)
    then their starts (``n..2n-1``); ``order``: the changes in time order per stream;
    ``length[i]``: the queue length right after change ``order[i]``."""
    gpu, cpu = trace.gpu, trace.cpu
    launch = gpu["launch_row"].to_numpy()
    launch_names = (
        gather(text_values(cpu["name"]), launch, None) if len(cpu) else np.full(len(gpu), None)
    )
    queued = np.flatnonzero(
        (launch >= 0) & np.isin(launch_names.astype(object), LAUNCH_NAMES + GRAPH_LAUNCH_NAMES)
    )
    start = gpu["ts"].to_numpy()[queued]
    enqueue = np.minimum(cpu["ts"].to_numpy()[launch[queued]], start)
    stream = np.concatenate([gpu["stream"].to_numpy()[queued]] * 2)
    ts = np.concatenate([enqueue, start])
    delta = np.concatenate([np.ones(len(queued), np.int64), -np.ones(len(queued), np.int64)])
    # at one instant: ops already waiting start, then new ones arrive, then those that start as
    # they arrive; so no zero-length state above the true length is reported (max, full queue)
    tie_rank = np.concatenate([np.ones(len(queued)), np.where(enqueue < start, 0, 2)])
    order = np.lexsort((tie_rank, ts, stream))
    first = _group_starts(stream[order])
    return queued, order, _cumsum_by_group(delta[order], first)


def queue_length_series(trace: RankTrace) -> pd.DataFrame:
    gpu = trace.gpu
    queued, order, length = queue_changes(trace)
    rows = np.concatenate([queued, queued])[order]
    enqueue = order < len(queued)
    launch = gpu["launch_row"].to_numpy()[rows]
    ts = np.where(
        enqueue,
        np.minimum(trace.cpu["ts"].to_numpy()[np.maximum(launch, 0)], gpu["ts"].to_numpy()[rows])
        if len(trace.cpu)
        else 0,
        gpu["ts"].to_numpy()[rows],
    )
    return pd.DataFrame(
        {
            "ts": ts,
            "pid": gpu["pid"].to_numpy()[rows],
            "tid": gpu["tid"].to_numpy()[rows],
            "stream": gpu["stream"].to_numpy()[rows],
            "queue_length": length,
        }
    )


def _series_by_rank(traces: Mapping[int, RankTrace], ranks, build) -> dict[int, pd.DataFrame]:
    """``{rank: build(trace)}`` for the ranks where the series is not empty."""
    out = {}
    for trace in select(traces, ranks):
        series = build(trace)
        if len(series):
            out[trace.rank] = series
    return out


DESCRIBE_STATS = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")


def _describe(
    series_by_rank: Mapping[int, pd.DataFrame], key: str, value: str, positive_only: bool = False
) -> pd.DataFrame:
    """``describe()`` of ``value`` per (rank, key), the reference's shape: index (rank, key),
    columns ``(value, stat)``; no rows (same columns) without data."""
    parts = [s.assign(rank=r)[["rank", key, value]] for r, s in series_by_rank.items()]
    data = pd.concat(parts) if parts else pd.DataFrame({"rank": [], key: [], value: []})
    if positive_only:
        data = data[data[value] > 1e-9]  # running sums return to ~0, not exactly 0
    if data.empty:
        index = pd.MultiIndex.from_arrays([[], []], names=["rank", key])
        columns = pd.MultiIndex.from_product([[value], DESCRIBE_STATS])
        return pd.DataFrame(index=index, columns=columns, dtype="float64")
    return data.groupby(["rank", key]).describe()


def queue_length_time_series(
    traces: Mapping[int, RankTrace], ranks: Iterable[int] | None = None
) -> dict[int, pd.DataFrame]:
    """``{rank: series}`` for the ranks that launch work (CPU-only ranks are absent)."""
    return _series_by_rank(traces, ranks, queue_length_series)


def queue_length_summary(series_by_rank: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """``describe()`` of the queue length per (rank, stream), like the reference
    (MultiIndex columns ``('queue_length', 'count'|'mean'|...)``); no rows when nothing is
    launched."""
    return _describe(series_by_rank, "stream", "queue_length")


def time_blocked_on_full_queue(
    traces: Mapping[int, RankTrace],
    series_by_rank: Mapping[int, pd.DataFrame],
    max_queue_length: int = 1024,
) -> pd.DataFrame:
    """One row per (rank, stream) that reached ``max_queue_length``:
    ``duration_at_max_queue_length`` (µs spent at or above it) and
    ``relative_duration_at_max_queue_length`` (share of the rank's trace span). CUDA blocks the
    launching thread when 1024 operations are queued on a stream."""
    rows = []
    for rank, series in series_by_rank.items():
        ts = series["ts"].to_numpy()
        stream = series["stream"].to_numpy()
        last = np.append(stream[1:] != stream[:-1], True)
        held = np.where(last, 0, np.append(ts[1:] - ts[:-1], 0))  # time until the next change
        full = series["queue_length"].to_numpy() >= max_queue_length
        span = trace_span_ns(traces[rank])
        for s in np.unique(stream[full]):
            blocked = int(held[full & (stream == s)].sum())
            rows.append((rank, int(s), us(blocked), blocked / span if span else np.nan))
    return pd.DataFrame(
        rows,
        columns=[
            "rank",
            "stream",
            "duration_at_max_queue_length",
            "relative_duration_at_max_queue_length",
        ],
    )


def trace_span_ns(trace: RankTrace) -> int:
    """First start to last end over the CPU and GPU events of a rank (ns)."""
    starts = [t["ts"].min() for t in (trace.cpu, trace.gpu) if len(t)]
    ends = [(t["ts"] + t["dur"]).max() for t in (trace.cpu, trace.gpu) if len(t)]
    return int(max(ends) - min(starts)) if starts else 0


def memory_bw_series(trace: RankTrace) -> pd.DataFrame:
    gpu = trace.gpu
    rows = np.flatnonzero(np.asarray(gpu["kernel_type"] == MEMORY))
    names = pd.Categorical(gpu["name"].array[rows])  # classify each distinct name once
    kind = (
        np.array([memcpy_kind(str(n)) for n in names.categories], dtype=object)[names.codes]
        if len(rows)
        else np.array([], object)
    )
    ts = gpu["ts"].to_numpy()[rows]
    dur = np.maximum(gpu["dur"].to_numpy()[rows], 1)  # a 0-ns copy still moved its bytes
    bw = gpu["memory_bw_gbps"].to_numpy()[rows]
    nbytes = gpu["bytes"].to_numpy()[rows]
    derived = np.isnan(bw) & (nbytes >= 0)
    bw = np.where(derived, nbytes / dur, bw)  # bytes per ns = GB/s
    keep = ~np.isnan(bw)
    ts, dur, bw, kind, pid = (
        ts[keep],
        dur[keep],
        bw[keep],
        kind[keep],
        gpu["pid"].to_numpy()[rows][keep],
    )
    all_ts = np.concatenate([ts, ts + dur])
    delta = np.concatenate([bw, -bw])
    all_kind = np.concatenate([kind, kind])
    kind_codes, _ = pd.factorize(all_kind)
    order = np.lexsort((delta, all_ts, kind_codes))  # on ties, ends before starts
    first = _group_starts(kind_codes[order])
    return pd.DataFrame(
        {
            "ts": all_ts[order],
            "pid": np.concatenate([pid, pid])[order],
            "name": all_kind[order],
            "memory_bw_gbps": _cumsum_by_group(delta[order], first),
        }
    )


def memory_bw_time_series(
    traces: Mapping[int, RankTrace], ranks: Iterable[int] | None = None
) -> dict[int, pd.DataFrame]:
    return _series_by_rank(traces, ranks, memory_bw_series)


def memory_bw_summary(series_by_rank: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """``describe()`` of the bandwidth while copies run (values > 0), per (rank, name)."""
    return _describe(series_by_rank, "name", "memory_bw_gbps", positive_only=True)
