"""Data loading on the critical path.

Model: every host event whose name matches the data-loading patterns (and what runs inside
it on its thread) takes no time — the batch is ready when the step asks, as a DataLoader with
workers and prefetching gives; each rank's step graphs are replayed (:mod:`.graph_replay`) and
the job is replayed with each rank's segments cut by that. The low end removes half.

Blind spots: a data loader that is slow because the workers cannot keep up cannot be made
free by prefetching alone; copies to the device (pinning) are not data loading here.
"""

from __future__ import annotations

import re

import numpy as np

from ...intervals import merge
from ...units import fmt_us
from .context import Context
from .finding import Finding
from .graph_replay import thread_overlap
from .replay import Cut


def find(ctx: Context) -> list[Finding]:
    ranges = {rank: _ranges(t, ctx.patterns) for rank, t in ctx.traces.items()}
    ranges = {r: v for r, v in ranges.items() if v}
    if not ranges or ctx.events.empty:
        return []
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
    on_path = ctx.per_segment(inside)
    if not on_path.any():
        return []

    cut = _graph_cut(ctx, on_path, ranges, 1.0)
    low = _graph_cut(ctx, on_path, ranges, 0.5)
    per_rank = _in_steps(ctx, ranges)  # the ranges' own time per step, by rank
    worst = max(per_rank, key=per_rank.get)
    names = sorted(set(ev.loc[inside, "name"].astype(str)) & _matching(ev, ctx.patterns))
    others = [v for r, v in per_rank.items() if r != worst]
    evidence = (
        f"rank {worst} spends {fmt_us(per_rank[worst] / 1e3)} per step in data loading"
        f" ({', '.join(names[:3]) or 'data loading'}), on its critical path"
        + (f"; the other ranks {fmt_us(float(np.median(others)) / 1e3)} (median)" if others else "")
    )
    return [
        Finding(
            "data_loading",
            ", ".join(names[:3]) or "data loading",
            evidence,
            "data-loading events made free in each rank's step graph (critical path"
            " replayed), then the job replayed",
            "load batches ahead of the step: DataLoader(num_workers>0, prefetch_factor,"
            " pin_memory=True, persistent_workers=True), or move the preprocessing off the"
            " training loop",
            cut,
            low,
            ctx.main_rank(on_path),
        )
    ]


def _in_steps(ctx: Context, ranges: dict) -> dict[int, float]:
    """Per rank with data-loading ranges: ns of them per step (their union, within its steps'
    bounds), the mean over its steps."""
    steps = ctx.segments.drop_duplicates(["rank", "step"])
    out = {}
    for rank, spans in ranges.items():
        mine = steps[steps["rank"] == rank]
        if mine.empty:
            continue
        total = 0.0
        for start, end in zip(mine["step_start"].tolist(), mine["step_end"].tolist()):
            for merged in spans.values():
                lo = np.clip(merged[:, 0], start, end)
                hi = np.clip(merged[:, 1], start, end)
                total += float((hi - lo).sum())
        out[rank] = total / len(mine)
    return out or {next(iter(ranges)): 0.0}


def _graph_cut(ctx: Context, on_path, ranges, scale: float) -> Cut:
    """:meth:`Context.graph_cut` with each rank's own data-loading ranges, ``scale`` of them
    made free."""

    def change_of(rank):
        spans = ranges.get(rank, {})
        return lambda graph, events: (graph.weight - scale * thread_overlap(graph, events, spans),
                                      None)  # fmt: skip

    return ctx.graph_cut(on_path * scale, change_of)


def _ranges(trace, patterns) -> dict[int, np.ndarray]:
    """``{tid: merged [start, end) ns}`` of the rank's CPU events named as data loading."""
    cpu = trace.cpu
    if not len(cpu):
        return {}
    regex = re.compile("|".join(f"(?:{p})" for p in patterns))
    names = cpu["name"].astype("category")
    hit = np.isin(names.cat.codes, [i for i, n in enumerate(names.cat.categories)
                                    if regex.search(str(n))])  # fmt: skip
    if not hit.any():
        return {}
    rows = cpu[hit]
    out = {}
    for tid, part in rows.groupby("tid", sort=False):
        starts, ends = merge(part["ts"].to_numpy(), (part["ts"] + part["dur"]).to_numpy())
        out[int(tid)] = np.stack([starts, ends], axis=1)
    return out


def _matching(ev, patterns) -> set[str]:
    regex = re.compile("|".join(f"(?:{p})" for p in patterns))
    return {n for n in set(ev["name"].astype(str)) if regex.search(n)}
