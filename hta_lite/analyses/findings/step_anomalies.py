"""Anomalous steps: their excess over the typical step, amortised over the run.

Model: each anomalous step of a rank that is its own origin (not one waiting for another rank:
that rank's anomaly is the finding) is brought to the typical step (``get_step_anomalies``'
baseline): its segments are cut by the excess in proportion to their spans, and the job is
replayed; the saving is per step of the run, so a 25 ms spike every 10 steps is 2.5 ms. The low
end removes half the excess. The time in the step that another kind claims, beyond what its
typical step holds, is not excess here: that kind prices it, or says it is warm-up that no fix
saves (a first compile).

Blind spots: a periodic stall that is real work (a checkpoint) can be made cheaper or less
frequent, not free.
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_us
from .. import one_time
from .context import Context
from .finding import Finding
from .replay import Cut


def find(ctx: Context) -> list[Finding]:
    scored = ctx.anomalies
    if scored is None or scored.empty or not scored["anomalous"].any():
        return []
    odd = scored[scored["anomalous"]]
    origin = odd["origin_rank"].astype(int)
    odd = odd[(origin == -1) | (origin == odd["rank"].astype(int))]
    seg = ctx.segments
    cut = np.zeros(len(seg))
    spans = ctx.replay.spans
    excesses = []
    for row in odd.itertuples(index=False):
        rows = np.flatnonzero((seg["rank"] == row.rank).to_numpy() & (seg["step"] == row.step))
        excess = max(float(row.step_time - row.typical) * 1e3 - _claimed(ctx, row.rank, rows), 0)
        excesses.append(excess)
        total = spans[rows].sum()
        if total > 0:
            cut[rows] = np.minimum(spans[rows], spans[rows] / total * excess)
    odd = odd[np.array(excesses) > 0]
    if not cut.any():
        return []
    causes = odd["cause"].astype(str).value_counts()
    steps = ", ".join(f"{int(r)}:{int(s)}" for r, s in zip(odd["rank"], odd["step"]))
    evidence = (
        f"{len(odd)} anomalous step(s) (rank:step {steps[:80]}), on average"
        f" {fmt_us(np.mean([e for e in excesses if e > 0]) / 1e3)} longer than typical; cause:"
        f" {causes.index[0]}"
    )
    ranks = odd["rank"].unique()
    return [
        Finding(
            "step_anomalies",
            causes.index[0],
            evidence,
            "each anomalous step brought to the typical step, job replayed, amortised over the"
            " run's steps",
            "see get_step_anomalies() / get_step_periodicity(): a periodic stall is usually"
            " data-loader refills, checkpoints, garbage collection (gc.freeze()) or logging",
            Cut(cut),
            Cut(cut / 2),
            int(ranks[0]) if len(ranks) == 1 else None,
        )
    ]


def _claimed(ctx: Context, rank: int, rows: np.ndarray) -> float:
    """ns of the rank's claimed time within its step (the segments ``rows``) beyond the claimed
    time of its typical step (the median over its steps)."""
    spans = ctx.claimed(int(rank))
    if not len(rows) or not len(spans):
        return 0.0
    per_step = one_time.time_per_step({0: spans}, ctx.step_bounds(int(rank)))
    step = int(ctx.segments["step"].to_numpy()[rows[0]])
    return float(max(per_step.get(step, 0.0) - np.median(list(per_step.values())), 0.0))
