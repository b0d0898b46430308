"""A straggler rank: the others wait for it at the collectives.

Model: the rank's local work before each collective (and before its step's end) is set to the
median of the other members' at the same collective instance (step end: of the other ranks'
step ends), where it was longer; the job is replayed. The low end sets it half way. Only the
collectives whose arrivals can be compared count (consistent, in a possible order, two ranks
present or more: :func:`..collectives.matching.comparable`), and only the work
between two points every member shares: its step's start or such a collective (which the
members leave together), and such a collective or the step's end. Work after a call paired
with a different one on another rank (a call missing there, a partial job) is not compared:
its start is not the others'. Each rank's work is taken once warm, as the straggler report
takes its arrivals: less its warm-up in the segment (:func:`..one_time.warmup_delay`: first
compiles, graph captures and module loads while its GPU runs nothing).

Blind spots: the other ranks' work is taken as it was (a rank that is itself slow at another
collective is its own finding); the typical rank is the median member, so with two ranks it is
the other one; a rank late because a collective held it longer (members not loaded) has no
excess of its own work here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...intervals import length_before
from ...units import fmt_us
from ..collectives.matching import comparable
from ..straggler_causes import cause_of
from .context import Context
from .finding import Finding
from .replay import Cut


def find(ctx: Context) -> list[Finding]:
    """The straggler the straggler report names (:mod:`..stragglers`: one rule, so that the key
    findings and this table never disagree), priced by the replay."""
    seg, report = ctx.segments, ctx.stragglers
    if seg.empty or seg["rank"].nunique() < 2 or report is None or not report.stragglers:
        return []
    rank = int(report.stragglers[0])
    excess = _excess(ctx, rank)
    row = report.ranks.set_index("rank").loc[rank]
    cause = _cause(ctx, rank)
    longer = ctx.replay.first_order(Cut(excess))
    own = (
        f"its work before them is {fmt_us(longer / 1e3)} per step longer than the median"
        " member's" if excess.any() else NOT_ITS_WORK
    )  # fmt: skip
    evidence = (
        f"rank {rank} arrives last at {int(row['last_arrivals'])} of {int(row['collectives'])}"
        f" matched collectives, {fmt_us(row['lateness_us'])} per step after the first rank; each"
        f" other rank waits {fmt_us(row['wait_caused_us'])} per step for it; {own}"
        + (f"; cause: {cause}" if cause else "")
        + _left_out(ctx.instances)
    )
    return [
        Finding(
            "straggler",
            f"rank {rank}",
            evidence,
            "the rank's work before each collective set to the median member's, job replayed",
            "find what makes this rank slower (its cause above: data loading, host work, a"
            " slower GPU or input imbalance) and even it out",
            Cut(excess),
            Cut(excess / 2),
            rank,
        )
    ]


#: the evidence of a straggler whose own work is no longer than the others' (listed all the same,
#: saving nothing, so that the key findings and this table name the same rank)
NOT_ITS_WORK = (
    "its work before them is no longer than the median member's, so evening it out saves"
    " nothing: the lateness is not its own work (it waits on others, or its clock or its step"
    " numbers are apart from the others': health)"
)


def _left_out(instances: pd.DataFrame) -> str:
    """What the evidence says of the collectives of two loaded ranks or more whose arrivals
    cannot be compared (their calls disagree, or the order is impossible): their work is not
    compared, so the saving is a lower bound."""
    shared = instances["ranks_present"] >= 2
    n = int((shared & ~comparable(instances)).sum())
    if not n:
        return ""
    return (
        f"; {n} of the {int(shared.sum())} collectives cannot be compared (their calls disagree"
        " or their order is impossible: get_collectives().problems), so the saving is a lower"
        " bound"
    )


def _measured(instances: pd.DataFrame) -> pd.DataFrame:
    return instances[comparable(instances)]


def _excess(ctx: Context, rank: int) -> np.ndarray:
    """ns per segment of ``rank`` above the median of the other members' at the same target,
    over the segments from a shared point to a shared point (module docstring)."""
    seg = ctx.segments
    measured = _measured(ctx.instances)["instance"].to_numpy()
    instance = ctx.instance_of_segment()
    target = np.where(instance >= 0, instance, -1 - seg["step"].to_numpy())  # step ends: < 0
    is_end = (seg["target_ts"] == -1).to_numpy()
    from_start = (seg["prev_ts"] == -1).to_numpy()
    shared = (is_end | np.isin(instance, measured)) & (
        from_start | np.isin(ctx.instance_of_segment("prev"), measured)
    )
    key = pd.Series(np.where(shared, target, np.iinfo(np.int64).min))
    warm = np.zeros(len(seg))
    for rank_, rows in seg.groupby("rank").indices.items():
        spans = ctx.warmup_delay(int(rank_))
        at = seg[["start", "end"]].to_numpy(np.int64)[rows]
        before = length_before(spans[:, 0], spans[:, 1], at.ravel()).reshape(-1, 2)
        warm[rows] = before[:, 1] - before[:, 0]
    frame = pd.DataFrame({"key": key, "rank": seg["rank"], "span": ctx.replay.spans - warm})
    others = frame[(frame["rank"] != rank) & (frame["key"] != np.iinfo(np.int64).min)]
    typical = others.groupby("key")["span"].median()
    mine = (frame["rank"] == rank).to_numpy() & frame["key"].isin(typical.index).to_numpy()
    excess = np.zeros(len(seg))
    excess[mine] = np.maximum(
        frame.loc[mine, "span"].to_numpy() - typical.reindex(frame.loc[mine, "key"]).to_numpy(), 0
    )
    return excess


def _cause(ctx: Context, rank: int) -> str:
    """The straggler report's cause of the rank, when it has one."""
    cause, region = cause_of(getattr(ctx.stragglers, "causes", None), rank)
    return cause + (f" in '{region}'" if region else "")
