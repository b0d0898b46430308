"""Stragglers: which rank made the others wait, and why.

Both finders work on collectives matched across ranks by process group and order
(:mod:`hta_lite.analyses.collectives.matching`), never by name alone: groups that interleave
are kept apart.

``potential_stragglers`` keeps the reference's idea (late-starting communication): among the
matched collectives longer than 1% of the mean step, the one per step whose duration varies most
across ranks is the probe (the ranks that waited in it ran long); the ``num_candidates`` ranks
that reached it last are that step's candidates; ranks are returned by how often they were
candidates. (The reference probes the *last* kernel of one (stream, name) in every step, which
on real traces is often not the one the ranks waited in: it then names the rank with the latest
clock.)

``collective_skew``: per matched collective and rank, the arrival after the first rank (µs): the
last to arrive is the one the others waited for. Both read each rank's arrivals once warm
(:func:`discount_warmup`): a rank that compiles, captures a graph or loads a module for the
first time before a collective arrives that much later, which is warm-up, not how it runs.

``find_stragglers`` flags ranks whose lateness (:mod:`.lateness`: how far behind the first rank
per step) is far above the other ranks' median and a share of the step, and at whose arrivals
the others wait; ``explain`` compares each with the median of the
other ranks over the same steps: extra compute kernel time means compute-bound, extra GPU idle
waiting for the host means host-bound, otherwise it was itself waiting (on communication or
other ranks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..intervals import length_before
from ..load.rank_trace import RankTrace
from .collectives.calls import POINT_TO_POINT
from .collectives.matching import Matching, match_traces
from .common import median_of_the_others, select, us, wanted
from .lateness import RANK_COLUMNS, rank_skew  # noqa: F401 (the straggler finders' input)
from .one_time import warmup_delay
from .pipeline_stages import STAGE_COLUMNS, slow_stage, stage_text
from .steps import profiled_steps
from .straggler_causes import cause_of, explain


def _matched(
    traces: Mapping[int, RankTrace], ranks, steps, matching: Matching | None = None
) -> pd.DataFrame:
    """The measured calls (:meth:`Matching.measured`) of the selected ranks and steps (from
    ``matching`` when given: the matching of all loaded ranks); a step no selected rank profiled
    is a :class:`SelectionError`."""
    selected = select(traces, ranks)
    present = [s for t in selected for s in profiled_steps(t)["step"].tolist()]
    steps = wanted(steps, present, "ProfilerStep(s)", "the profiled steps of these ranks")
    if matching is None or ranks is not None:
        matching = match_traces({t.rank: t for t in selected})
    calls = matching.measured()
    if steps is not None:
        calls = calls[calls["step"].isin(list(steps))]
    return joint_calls(calls, {t.rank: warmup_delay(t) for t in selected})


def joint_calls(calls: pd.DataFrame, delays: Mapping[int, np.ndarray]) -> pd.DataFrame:
    """The measured ``calls`` the straggler report compares: those of profiled steps, less the
    point-to-point pairs (:mod:`.pipeline_stages`: a receiver waits for its sender by design;
    ``attrs["point_to_point"]``: how many pairs), arrivals once warm (:func:`discount_warmup`)."""
    calls = calls[calls["step"] >= 0]
    pairs = calls["collective"].isin(POINT_TO_POINT).to_numpy()
    joint = discount_warmup(calls[~pairs], delays)
    joint.attrs["point_to_point"] = int(calls.loc[pairs, "instance"].nunique())
    return joint


def discount_warmup(calls: pd.DataFrame, delays: Mapping[int, np.ndarray]) -> pd.DataFrame:
    """The measured ``calls`` with each rank's arrivals once warm: ``ts`` less the rank's
    warm-up delay (``delays[rank]``: :func:`.one_time.warmup_delay`) since the end of its latest
    call that ended by then, with ``wait`` and ``arrived_last`` of their collectives taken
    again from those arrivals; ``warmup`` (ns): what was taken off. ``attrs["warmup_ns"]``: its
    sum. Only the warm-up since the previous call counts: a collective brings its members
    together, so warm-up before it delays no later arrival."""
    calls = calls.copy()
    calls["warmup"] = np.zeros(len(calls), np.int64)
    for rank, spans in delays.items():
        mine = np.flatnonzero(calls["rank"].to_numpy() == rank)
        if not len(spans) or not len(mine):
            continue
        ts = calls["ts"].to_numpy()[mine]
        ended = np.sort(calls["end"].to_numpy()[mine])
        latest = np.searchsorted(ended, ts, "right") - 1
        since = np.where(latest >= 0, ended[np.maximum(latest, 0)], np.iinfo(np.int64).min)
        before = length_before(spans[:, 0], spans[:, 1], ts)
        calls.iloc[mine, calls.columns.get_loc("warmup")] = before - np.minimum(
            length_before(spans[:, 0], spans[:, 1], since), before
        )
    calls.attrs["warmup_ns"] = int(calls["warmup"].sum())
    if not calls.attrs["warmup_ns"]:
        return calls
    calls["ts"] = calls["ts"] - calls["warmup"]
    last = calls.groupby("instance")["ts"].transform("max")
    calls["wait"] = (last - calls["ts"]).astype(np.int64)
    calls["arrived_last"] = False
    calls.loc[calls.groupby("instance")["ts"].idxmax().to_numpy(), "arrived_last"] = True
    return calls


def potential_stragglers(
    traces: Mapping[int, RankTrace],
    profiler_steps: Iterable[int] | None = None,
    num_candidates: int = 2,
    matching: Matching | None = None,
) -> list[int]:
    """The reference's straggler finder (module docstring) on matched collectives."""
    calls = _matched(traces, None, profiler_steps, matching)
    if calls.empty or calls["rank"].nunique() < 2:
        return []
    n_steps = max(calls["step"].nunique(), 1)
    mean_step = (calls["end"].max() - calls["ts"].min()) / n_steps
    durations = calls.groupby("instance")["dur"]
    spread = durations.std()[durations.max() >= 0.01 * mean_step].dropna()
    if spread.empty:
        return []
    step_of = calls.groupby("instance")["step"].first()
    probes = spread.groupby(step_of.reindex(spread.index)).idxmax()
    votes = pd.Series(0, index=sorted(calls["rank"].unique()))
    for instance in probes:
        group = calls[calls["instance"] == instance]
        k = min(max(num_candidates, 1), len(group))
        threshold = np.sort(group["ts"].to_numpy())[::-1][k - 1]
        votes[group.loc[group["ts"] >= threshold, "rank"].to_numpy()] += 1
    votes = votes[votes > 0].sort_values(ascending=False, kind="stable")
    return [int(r) for r in votes.index]


#: columns of :func:`collective_skew`
SKEW_COLUMNS = [
    "step", "pg", "instance", "collective", "rank", "start_us", "skew_us", "wait_us",
    "arrived_last",
]  # fmt: skip


def collective_skew(
    traces: Mapping[int, RankTrace],
    ranks=None,
    steps: Iterable[int] | None = None,
    matching: Matching | None = None,
) -> pd.DataFrame:
    """Per matched collective (:mod:`~hta_lite.analyses.collectives.matching`) and rank:
    ``start_us`` (relative to the earliest call), ``skew_us`` (its arrival after the first
    rank), ``wait_us`` (time it waited for the last rank), ``arrived_last``."""
    return skew_table(_matched(traces, ranks, steps, matching))


def skew_table(calls: pd.DataFrame) -> pd.DataFrame:
    """:func:`collective_skew` of measured matched calls (:func:`joint_calls`; their ``attrs``
    kept: what the rule says was taken off or left out)."""
    if calls.empty:
        table = pd.DataFrame(columns=SKEW_COLUMNS)
        table.attrs.update(calls.attrs)
        return table
    first = calls.groupby("instance")["ts"].transform("min")
    table = pd.DataFrame(
        {
            "step": calls["step"].to_numpy(),
            "pg": calls["pg"].to_numpy(),
            "instance": calls["instance"].to_numpy(),
            "collective": calls["collective"].to_numpy(),
            "rank": calls["rank"].to_numpy(),
            "start_us": us(calls["ts"].to_numpy() - calls["ts"].min()),
            "skew_us": us((calls["ts"] - first).to_numpy()),
            "wait_us": us(calls["wait"].to_numpy()),
            "arrived_last": calls["arrived_last"].to_numpy(),
        }
    ).sort_values(["instance", "rank"], ignore_index=True)
    table.attrs.update(calls.attrs)
    return table


def find_stragglers(
    skew_by_rank: pd.DataFrame,
    step_us: float,
    factor: float = 3.0,
    min_step_pctg: float = 0.5,
    min_wait_pctg: float = 25.0,
) -> list[int]:
    """Ranks whose lateness (``rank_skew``) is above ``factor`` times the median of the *other*
    ranks' and exceeds it by at least ``min_step_pctg`` % of the mean step (``step_us``; clock
    jitter of a few µs is not a straggler), and that arrive last at the collectives holding
    ``min_wait_pctg`` % of the members' waiting or more (the others wait for it). Each rank is
    compared with the others, so two ranks suffice: one of two that others wait for is found
    (the median of both never lets it be ``factor`` times as late). A step time that is not
    known (NaN) leaves only the factor. A rank late to the first arrival but never last makes
    nobody wait: not named."""
    if len(skew_by_rank) < 2:
        return []
    late = skew_by_rank["lateness_us"].to_numpy(np.float64)
    others = median_of_the_others(late)
    excess = late - others
    floor = min_step_pctg / 100.0 * step_us if np.isfinite(step_us) else 0.0
    keep = (late > factor * others) & (excess >= floor) & (excess > 1.0)
    if "wait_share_pctg" in skew_by_rank:
        keep &= skew_by_rank["wait_share_pctg"].to_numpy(np.float64) >= min_wait_pctg
    return [int(r) for r in skew_by_rank.loc[keep, "rank"]]


def straggler_rule(
    lateness: pd.DataFrame,
    step_us: float,
    found: list[int],
    attrs: Mapping | None = None,
    **rule,
) -> str:
    """What :func:`find_stragglers` tested, and the latest rank's figures: the text of a
    report that finds no straggler; ``attrs`` (the skew table's): the warm-up taken off the
    arrivals and the point-to-point pairs not compared (:func:`joint_calls`), said where any."""
    attrs = attrs or {}
    warmup_ns, pairs = attrs.get("warmup_ns", 0), attrs.get("point_to_point", 0)
    factor = rule.get("factor", 3.0)
    pctg = rule.get("min_step_pctg", 0.5)
    last = rule.get("min_wait_pctg", 25.0)
    test = (
        f"a straggler arrives later than the median of the other ranks by at least {pctg:g} % of"
        f" the step, is more than {factor:g}x as late, and arrives last at the collectives"
        f" holding {last:g} % of the others' waiting or more"
    )
    if warmup_ns:
        test += (
            f" (arrivals taken once warm: {warmup_ns / 1e6:,.1f} ms of first compiles, graph"
            " captures and module loads before them taken off)"
        )
    if pairs:
        test += (
            f" ({pairs} point-to-point send / recv pair(s) not compared: a pipeline's stages"
            " wait for each other by design; its slowest stage is in the report's stages)"
        )
    if found or lateness.empty:
        return test
    top = lateness.iloc[0]
    others = float(lateness["lateness_us"].iloc[1:].median()) if len(lateness) > 1 else 0.0
    share = 100.0 * (float(top["lateness_us"]) - others) / step_us if step_us > 0 else np.nan
    return (
        f"the latest rank, {int(top['rank'])}, arrives {float(top['lateness_us']):,.0f} µs per"
        f" step after the first (the others' median: {others:,.0f} µs), {share:.1f} % of the"
        f" {step_us:,.0f} µs step; {test}"
    )


@dataclass
class StragglerReport:
    """``collectives``: per matched collective and rank (``collective_skew``); ``ranks``: lateness
    per rank (``rank_skew``); ``stragglers``: flagged ranks; ``causes``: per straggler (and
    slow stage) the cause and the extra time per step; ``texts``: one paragraph per straggler
    (and slow stage); ``rule``: what was tested (with the latest rank's figures when no rank is
    flagged); ``stages``: the pipeline's stages (:func:`.pipeline_stages.slow_stage`: the ranks
    that send or receive point to point, their work per step), ``slow_stage``: the slowest
    stage's rank when it is named, else None."""

    collectives: pd.DataFrame
    ranks: pd.DataFrame
    stragglers: list[int]
    causes: pd.DataFrame
    texts: dict[int, str] = field(default_factory=dict)
    rule: str = ""
    stages: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=STAGE_COLUMNS))
    slow_stage: int | None = None

    def __str__(self) -> str:
        said = [self.texts[r] for r in self.stragglers if r in self.texts]
        if not self.stragglers:
            pairs = self.collectives.attrs.get("point_to_point", 0)
            said.append(
                "No straggler: no collective was matched across ranks in a profiled step"
                + (f" ({pairs} point-to-point send / recv pair(s) are not compared: a pipeline's"
                   " stages wait for each other by design)." if pairs else ".")
                if self.ranks.empty
                else f"No straggler: {self.rule}."
            )  # fmt: skip
        if self.slow_stage is not None and self.slow_stage not in self.stragglers:
            said.append(self.texts[self.slow_stage])
        return "\n\n".join(said)


def report(
    skew: pd.DataFrame,
    per_step: pd.DataFrame,
    host_wait: pd.DataFrame,
    timers: Callable[[], pd.DataFrame],
    work: pd.DataFrame,
    factor: float = 3.0,
    min_step_pctg: float = 0.5,
) -> StragglerReport:
    """The report of a job from tables, where it is loaded or from per-rank partials: ``skew``
    (:func:`skew_table` of :func:`joint_calls`), ``per_step`` (``step_breakdown``),
    ``host_wait`` / ``timers`` (:func:`.straggler_causes.explain`'s), ``work``
    (:func:`.pipeline_stages.stage_work` of every rank)."""
    lateness = rank_skew(skew)
    step_us = float(per_step["step_time"].mean()) if len(per_step) else float("nan")
    found = find_stragglers(lateness, step_us, factor, min_step_pctg)
    causes, texts = explain(per_step, host_wait, timers, lateness, found)
    rule = straggler_rule(lateness, step_us, found, skew.attrs, factor=factor,
                          min_step_pctg=min_step_pctg)  # fmt: skip
    stages, slow = slow_stage(work, min_step_pctg=min_step_pctg)
    if slow is not None and slow not in found:
        extra = stages.rename(columns={"excess_us": "lateness_us"})
        why, _ = explain(per_step, host_wait, timers, extra, [slow])
        if len(why):
            causes = pd.concat([causes, why], ignore_index=True) if len(causes) else why
        cause, region = cause_of(why, slow)
        texts[slow] = stage_text(stages, slow, cause + (f", in '{region}'" if region else ""))
    return StragglerReport(skew, lateness, found, causes, texts, rule, stages, slow)
