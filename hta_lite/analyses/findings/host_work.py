"""Data loading on the critical path.

Model: every host event whose name matches the data-loading patterns (and what runs inside
it on its thread) takes no time — the batch is ready when the step asks, as a DataLoader with
workers and prefetching gives; each rank's step graphs are replayed (:mod:`.graph_replay`) and
the job is replayed with each rank's segments cut by that (:mod:`.host_ranges`). The low end
removes half.

Blind spots: a data loader that is slow because the workers cannot keep up cannot be made
free by prefetching alone; copies to the device (pinning) are not data loading here.
"""

from __future__ import annotations

import re

import numpy as np

from ...units import fmt_us
from ..common import ranges_named
from .context import Context
from .finding import Finding
from .host_ranges import free_cut, path_events_inside, per_step


def find(ctx: Context) -> list[Finding]:
    regex = re.compile("|".join(f"(?:{p})" for p in ctx.patterns))
    ranges = {rank: ranges_named(t, regex) for rank, t in ctx.traces.items()}
    ranges = {r: v for r, v in ranges.items() if v}
    if not ranges or ctx.events.empty:
        return []
    ev = ctx.events
    inside = path_events_inside(ctx, ranges)
    on_path, cut = free_cut(ctx, ranges)
    if not on_path.any():
        return []
    _, low = free_cut(ctx, ranges, 0.5)
    per_rank = _in_steps(ctx, ranges)  # the ranges' own time per step, by rank
    worst = max(per_rank, key=per_rank.get)
    names = sorted(set(ev.loc[inside, "name"].astype(str)) & _matching(ev, regex))
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
    """Per rank with data-loading ranges: ns of them per step, the mean over its steps."""
    steps = per_step(ctx, ranges)
    out = {}
    for (rank, _), ns in steps.items():
        out.setdefault(rank, []).append(ns)
    return {rank: float(np.mean(v)) for rank, v in out.items()} or {next(iter(ranges)): 0.0}


def _matching(ev, regex: re.Pattern) -> set[str]:
    return {n for n in set(ev["name"].astype(str)) if regex.search(n)}
