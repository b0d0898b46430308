"""Named host ranges made free: what the kinds whose fix removes host work read (data loading,
compilation).

A rank's *ranges* are ``{tid: (n, 2) merged, sorted [start, end) ns}``: the CPU events whose
name a regex finds, merged per thread (:func:`..common.ranges_named`). Made free, each rank's
step graphs lose the edge time inside them on their thread (:func:`.graph_replay.thread_overlap`),
and the job's segments lose the time of their paths' zero-weight dependencies inside them (a
range with no operator in it).
"""

from __future__ import annotations

import numpy as np

from .. import one_time
from .context import Context
from .graph_replay import covered, thread_overlap
from .replay import Cut


def path_events_inside(ctx: Context, ranges: dict[int, dict]) -> np.ndarray:
    """Per path event (``ctx.events`` row): a host event that starts inside its rank's
    ``ranges`` (``{rank: ranges}``) on its thread."""
    ev = ctx.events
    inside = np.zeros(len(ev), bool)
    for rank, spans in ranges.items():
        for tid, merged in spans.items():
            mine = np.flatnonzero(
                (ev["rank"] == rank).to_numpy() & (ev["tid"] == tid).to_numpy()
                & (ev["stream"] < 0).to_numpy()
            )  # fmt: skip
            start = ev["start"].to_numpy()[mine]
            j = np.searchsorted(merged[:, 0], start, side="right") - 1
            inside[mine] = (j >= 0) & (start < merged[np.maximum(j, 0), 1])
    return inside


def gaps_inside(ctx: Context, ranges: dict[int, dict]) -> np.ndarray:
    """ns per segment of the paths' zero-weight time (``ctx.gaps``, launch latencies left out)
    inside the ranges on the path's thread."""
    out = np.zeros(len(ctx.segments))
    gaps = ctx.gaps
    if gaps is None or gaps.empty:
        return out
    lo, hi = gaps["start"].to_numpy(np.int64), gaps["end"].to_numpy(np.int64)
    keep = (ctx.gap_segment >= 0) & (gaps["launch_latency"].to_numpy() == 0)
    ranks, tids = gaps["rank"].to_numpy(), gaps["tid"].to_numpy()
    for rank, spans in ranges.items():
        for tid, merged in spans.items():
            mine = np.flatnonzero(keep & (ranks == rank) & (tids == tid))
            if len(mine):
                ns = covered(merged, hi[mine]) - covered(merged, lo[mine])
                np.add.at(out, ctx.gap_segment[mine], np.maximum(ns, 0))
    return out


def per_step(ctx: Context, ranges: dict[int, dict]) -> dict[tuple[int, int], float]:
    """``{(rank, step): ns}`` of the ranges within each of the rank's steps (their union per
    thread, summed over threads), for every step of a rank with ranges."""
    return {
        (rank, step): ns
        for rank, spans in ranges.items()
        for step, ns in one_time.time_per_step(spans, ctx.step_bounds(rank)).items()
    }


def free_cut(ctx: Context, ranges: dict[int, dict], scale: float = 1.0) -> tuple[np.ndarray, Cut]:
    """(path ns per segment inside the ranges, the cut that makes ``scale`` of them free:
    :meth:`Context.graph_cut` with each rank's own ranges, plus their zero-weight time)."""
    on_path = ctx.per_segment(path_events_inside(ctx, ranges))

    def change_of(rank):
        spans = ranges.get(rank, {})
        return lambda graph, events: (graph.weight - scale * thread_overlap(graph, events, spans),
                                      None)  # fmt: skip

    extra = scale * gaps_inside(ctx, ranges)
    return on_path, ctx.graph_cut(on_path * scale, change_of, extra=extra)
