"""The GPU idle with launched work waiting, held by something the trace does not show.

A kernel that starts long after its launch call returned, with nothing on the GPU running
meanwhile (:func:`..idle.queued_waits`), waited on no host and no recorded GPU work: work launched
before the profiler started, an event recorded outside the trace, another process on the GPU.
No fix of the trace's code is known to remove it, so no finding prices it (and the host-bound
kinds do not count it); where it is a large share of a rank's step, the findings say so.
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_pct, fmt_us
from ..idle import held_spans
from .context import Context

#: said where a rank's GPU is held this share of its step or more
MIN_SHARE = 0.05


def caveat(ctx: Context) -> str | None:
    """A sentence on the rank whose GPU is held the largest share of its steps (``None`` where
    no rank's is ``MIN_SHARE`` of its steps or more)."""
    worst = (0.0, 0.0, -1)  # (share of the steps, ns per step, rank)
    for rank, trace in ctx.traces.items():
        steps = ctx.step_bounds(rank).sort_values("start")
        if steps.empty or trace.is_cpu_only:
            continue
        lo, hi = held_spans(trace)
        start, end = steps["start"].to_numpy(), steps["end"].to_numpy()
        j = np.searchsorted(start, hi, side="right") - 1  # the step each held wait ends in
        inside = (j >= 0) & (hi <= end[np.maximum(j, 0)])
        held = float(np.maximum(hi - np.maximum(lo, start[np.maximum(j, 0)]), 0)[inside].sum())
        total = float((end - start).sum())
        if total > 0 and held / total > worst[0]:
            worst = (held / total, held / len(steps), rank)
    share, per_step, rank = worst
    if share < MIN_SHARE:
        return None
    return (
        f"On rank {rank} the GPU sat idle {fmt_us(per_step / 1e3)} per step"
        f" ({fmt_pct(100.0 * share)} of its steps) with launched work waiting: held by something"
        " the trace does not show (work launched before the profiler started, an event recorded"
        " outside the trace, another process on the GPU), not by the host. No finding prices"
        " it; profile a later or longer window to see what it waits for."
    )
