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
from ..kineto import CPU_COLLECTIVE
from ..load.rank_trace import RankTrace
from .collectives.matching import Matching, match_traces
from .common import select, us, wanted
from .idle import gpu_idle_gaps
from .lateness import RANK_COLUMNS, rank_skew  # noqa: F401 (the straggler finders' input)
from .one_time import warmup_delay
from .steps import profiled_steps


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
    calls = calls[calls["step"] >= 0]
    return discount_warmup(calls, {t.rank: warmup_delay(t) for t in selected})


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
    calls = _matched(traces, ranks, steps, matching)
    table = skew_table(calls)
    table.attrs["warmup_ns"] = calls.attrs.get("warmup_ns", 0)
    return table


def skew_table(calls: pd.DataFrame) -> pd.DataFrame:
    """:func:`collective_skew` of measured matched calls (``Matching.measured()`` in steps)."""
    if calls.empty:
        return pd.DataFrame(columns=SKEW_COLUMNS)
    first = calls.groupby("instance")["ts"].transform("min")
    return pd.DataFrame(
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
    others = _median_of_the_others(late)
    excess = late - others
    floor = min_step_pctg / 100.0 * step_us if np.isfinite(step_us) else 0.0
    keep = (late > factor * others) & (excess >= floor) & (excess > 1.0)
    if "wait_share_pctg" in skew_by_rank:
        keep &= skew_by_rank["wait_share_pctg"].to_numpy(np.float64) >= min_wait_pctg
    return [int(r) for r in skew_by_rank.loc[keep, "rank"]]


def _median_of_the_others(values: np.ndarray) -> np.ndarray:
    """For each value, the median of all the other values (vectorised leave-one-out)."""
    n = len(values)
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    position = np.empty(n, np.int64)
    position[order] = np.arange(n)

    def rest(j: int) -> np.ndarray:  # the j-th smallest of the others, for every value
        return np.where(j < position, ranked[j], ranked[min(j + 1, n - 1)])

    middle = (n - 1) // 2
    return rest(middle) if (n - 1) % 2 else (rest(middle - 1) + rest(middle)) / 2.0


def straggler_rule(
    lateness: pd.DataFrame, step_us: float, found: list[int], warmup_ns: int = 0, **rule
) -> str:
    """What :func:`find_stragglers` tested, and the latest rank's figures: the text of a
    report that finds no straggler; ``warmup_ns``: the warm-up taken off the arrivals
    (:func:`discount_warmup`), said when there is any."""
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


def host_wait_by_step(trace: RankTrace) -> pd.DataFrame:
    """``rank, step, host_wait_us``: the time per step the whole GPU (no stream busy) waited
    for the host to launch work (a per-rank partial of :func:`explain`)."""
    gaps = gpu_idle_gaps(trace) if not trace.is_cpu_only else None
    if gaps is None or gaps.empty:
        per_step = pd.Series(dtype=np.float64)
    else:
        waits = gaps[gaps["idle_category"] == "host_wait"]
        per_step = waits.groupby("step")["idle_interval"].sum()
    return pd.DataFrame(
        {
            "rank": np.full(len(per_step), trace.rank, np.int64),
            "step": per_step.index.to_numpy(np.int64),
            "host_wait_us": per_step.to_numpy(np.float64),
        }
    )


def explain(
    per_step: pd.DataFrame,
    host_wait: pd.DataFrame,
    timers: Callable[[], pd.DataFrame],
    lateness: pd.DataFrame,
    stragglers: list[int],
) -> tuple[pd.DataFrame, dict[int, str]]:
    """For each straggler: extra compute, host wait, communication and CPU step time per step
    (µs) against the median of the other ranks, the cause and a paragraph.

    Inputs are tables, so the same code runs on per-rank partials made in worker processes:
    ``per_step`` (``step_breakdown`` of the chosen steps), ``host_wait``
    (:func:`host_wait_by_step` of every rank), ``timers`` (gives ``annotation_timers`` of the
    chosen steps: called only for CPU-only jobs).

    The cause is the component that accounts for at least half of the rank's lateness: compute
    kernels (compute-bound) or GPU idle waiting for the host (host-bound); else it was itself
    waiting (on communication or other ranks)."""
    if per_step.empty or per_step["gpu_busy"].sum() == 0:
        return _explain_cpu(timers(), lateness, stragglers)
    chosen = host_wait[host_wait["step"].isin(per_step["step"].unique())]
    per_rank = per_step.groupby("rank")[
        ["step_time", "compute", "communication", "gpu_busy"]
    ].mean()
    n_steps = per_step.groupby("rank")["step"].nunique()
    waited = chosen.groupby("rank")["host_wait_us"].sum().reindex(per_rank.index, fill_value=0.0)
    per_rank["host_wait"] = waited / n_steps
    late_by_rank = (
        lateness.set_index("rank")["lateness_us"] if len(lateness) else pd.Series(dtype=float)
    )
    rows, texts = [], {}
    for rank in stragglers:
        if rank not in per_rank.index or len(per_rank) < 2:
            continue
        me, typical = per_rank.loc[rank], per_rank.drop(index=rank).median()
        extra = {
            k: float(me[k] - typical[k])
            for k in ("compute", "host_wait", "communication", "step_time")
        }
        late = float(late_by_rank.get(rank, 0.0))
        if extra["compute"] >= 0.5 * late and extra["compute"] >= extra["host_wait"]:
            cause, why = (
                "compute-bound",
                f"its GPU compute takes {extra['compute']:,.0f} µs more per step than the median"
                " rank",
            )
        elif extra["host_wait"] >= 0.5 * late:
            cause = "host-bound"
            why = (
                f"its GPU waits {extra['host_wait']:,.0f} µs more per step for the CPU to launch"
                " work (host_wait idle) than the median rank: look at data loading, CPU"
                " operators and synchronizations on this rank"
            )
        else:
            cause = "waiting on others"
            why = (
                "neither its compute nor its host launch time accounts for the delay; it is"
                " likely held up by communication or another rank"
            )
        rows.append(
            {
                "rank": rank,
                "lateness_us": round(late, 1),
                "cause": cause,
                **{f"extra_{k}_us": round(v, 1) for k, v in extra.items()},
            }
        )
        texts[rank] = (
            f"Rank {rank} reaches its collectives {late:,.0f} µs per step after the others, who"
            f" wait for it. It is {cause}: {why}. Per step it spends {me['compute']:,.0f} µs in"
            f" compute kernels (median rank {typical['compute']:,.0f}), {me['host_wait']:,.0f} µs"
            f" with the GPU idle waiting for the host (median {typical['host_wait']:,.0f}), and"
            f" {me['communication']:,.0f} µs in communication (median"
            f" {typical['communication']:,.0f}), "
            f"over {int(n_steps[rank])} step(s)."
        )
    return pd.DataFrame(rows), texts


def _explain_cpu(
    timers: pd.DataFrame, lateness: pd.DataFrame, stragglers: list[int]
) -> tuple[pd.DataFrame, dict[int, str]]:
    """CPU-only jobs: the user annotation (timer) whose time per step exceeds the median rank's
    the most; host-bound when it accounts for at least half of the lateness."""
    from .timers import STEP_TIMER

    timers = timers[(timers["name"] != STEP_TIMER) & ~timers["name"].str.match(CPU_COLLECTIVE)]
    if timers.empty:
        return pd.DataFrame(), {}
    per_rank = (
        timers.groupby(["name", "rank"])["elapsed_ms"].mean().unstack("rank").fillna(0.0) * 1000.0
    )  # µs per step
    late_by_rank = (
        lateness.set_index("rank")["lateness_us"] if len(lateness) else pd.Series(dtype=float)
    )
    rows, texts = [], {}
    for rank in stragglers:
        if rank not in per_rank.columns or per_rank.shape[1] < 2:
            continue
        extra = per_rank[rank] - per_rank.drop(columns=rank).median(axis=1)
        region, excess = extra.idxmax(), float(extra.max())
        late = float(late_by_rank.get(rank, 0.0))
        cause = "host-bound" if excess >= 0.5 * late else "waiting on others"
        rows.append(
            {
                "rank": rank,
                "lateness_us": round(late, 1),
                "cause": cause,
                "region": region,
                "extra_region_us": round(excess, 1),
            }
        )
        texts[rank] = (
            f"Rank {rank} reaches its collectives {late:,.0f} µs per step after the others, who"
            f" wait for it. It is {cause}: its '{region}' region takes {excess:,.0f} µs more per"
            f" step than the median rank ({per_rank.loc[region, rank]:,.0f} vs"
            f" {per_rank.loc[region].drop(rank).median():,.0f} µs)."
        )
    return pd.DataFrame(rows), texts


@dataclass
class StragglerReport:
    """``collectives``: per matched collective and rank (``collective_skew``); ``ranks``: lateness
    per rank (``rank_skew``); ``stragglers``: flagged ranks; ``causes``: per straggler the cause
    and the extra time per step; ``texts``: one paragraph per straggler; ``rule``: what was
    tested (with the latest rank's figures when no rank is flagged)."""

    collectives: pd.DataFrame
    ranks: pd.DataFrame
    stragglers: list[int]
    causes: pd.DataFrame
    texts: dict[int, str] = field(default_factory=dict)
    rule: str = ""

    def __str__(self) -> str:
        if not self.stragglers:
            if self.ranks.empty:
                return "No straggler: no collective was matched across ranks in a profiled step."
            return f"No straggler: {self.rule}."
        return "\n\n".join(self.texts[r] for r in self.stragglers if r in self.texts)
