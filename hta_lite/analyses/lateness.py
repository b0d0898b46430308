"""How late each rank is at the collectives, per step: what a step lost, not a sum.

The collectives of one step may overlap (two gradient buckets in flight): a rank late to both
by 250 ms lost the step 250 ms, not 500. So each figure is the length of the union of its
intervals in the step, averaged over steps: never more than the step.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..intervals import union_length_by_group

#: columns of :func:`rank_skew`
RANK_COLUMNS = [
    "rank", "lateness_us", "max_skew_us", "last_arrivals", "collectives", "wait_share_pctg",
    "wait_caused_us", "wait_suffered_us",
]  # fmt: skip


def rank_skew(skew: pd.DataFrame) -> pd.DataFrame:
    """Per rank, per step on average (µs), what a step lost — the collectives of one step may
    overlap (two gradient buckets in flight), so each figure is the length of the *union* of
    its intervals in the step, never their sum, and never more than the step:

    - ``lateness_us``: the union of [first arrival, its arrival] over the step's collectives
      (the time it was behind the first rank);
    - ``wait_caused_us``: over the collectives it reached last, each other member's waiting
      intervals ([its arrival, this rank's]) united per member and step, the mean over the
      members that waited;
    - ``wait_suffered_us``: the union of its own waiting intervals;

    and ``max_skew_us`` (its largest arrival skew at one collective), ``last_arrivals`` /
    ``collectives`` (how many it reached last, of how many), ``wait_share_pctg`` (of all the
    members' waiting in the matched collectives, the share at those it reached last: the
    collectives weighted by how long they held the others). The latest rank first."""
    if skew.empty:
        return pd.DataFrame(columns=RANK_COLUMNS)
    start = skew["start_us"].to_numpy(np.float64)
    rank, step = skew["rank"].to_numpy(np.int64), skew["step"].to_numpy(np.int64)
    n_steps = skew.groupby("rank")["step"].nunique()
    late = _per_rank(rank, step, start - skew["skew_us"].to_numpy(np.float64), start, n_steps)
    waited = start + skew["wait_us"].to_numpy(np.float64)
    suffered = _per_rank(rank, step, start, waited, n_steps)
    table = skew.groupby("rank").agg(
        max_skew_us=("skew_us", "max"),
        last_arrivals=("arrived_last", "sum"),
        collectives=("skew_us", "size"),
    )
    table.insert(0, "lateness_us", late.reindex(table.index, fill_value=0.0))
    table["last_arrivals"] = table["last_arrivals"].astype(np.int64)
    waits = skew.groupby("instance")["wait_us"].sum()
    last = skew[skew["arrived_last"].to_numpy(bool)]
    held = pd.Series(waits.reindex(last["instance"]).to_numpy(), index=last["rank"].to_numpy())
    share = 100.0 * held.groupby(level=0).sum() / max(float(waits.sum()), 1e-9)
    table["wait_share_pctg"] = share.reindex(table.index, fill_value=0.0).round(1)
    table["wait_caused_us"] = _caused(skew, n_steps).reindex(table.index, fill_value=0.0)
    table["wait_suffered_us"] = suffered.reindex(table.index, fill_value=0.0)
    return table.sort_values(["lateness_us", "last_arrivals"], ascending=False).reset_index()[
        RANK_COLUMNS
    ]


def _per_rank(rank, step, start, end, n_steps: pd.Series) -> pd.Series:
    """Per rank: the union of its [start, end) intervals per step, summed, over its steps."""
    key = rank * (2**31) + (step - step.min() if len(step) else step)
    keep = end > start
    groups, lengths = union_length_by_group(key[keep], start[keep], end[keep])
    per = pd.Series(lengths, index=groups // (2**31)).groupby(level=0).sum()
    return per / n_steps.reindex(per.index)


def _caused(skew: pd.DataFrame, n_steps: pd.Series) -> pd.Series:
    """Per rank: the waits it made the others suffer per step (:func:`rank_skew`)."""
    last = skew.loc[skew["arrived_last"].to_numpy(bool), ["instance", "rank"]]
    culprit = pd.Series(last["rank"].to_numpy(), index=last["instance"].to_numpy())
    who = culprit.reindex(skew["instance"].to_numpy()).to_numpy()
    waiting = (skew["wait_us"].to_numpy() > 0) & ~np.isnan(who)
    if not waiting.any():
        return pd.Series(dtype=np.float64)
    part = skew[waiting]
    start = part["start_us"].to_numpy(np.float64)
    key = pd.DataFrame({"culprit": who[waiting].astype(np.int64), "rank": part["rank"].to_numpy(),
                        "step": part["step"].to_numpy()})  # fmt: skip
    codes, combos = pd.factorize(pd.MultiIndex.from_frame(key))
    groups, lengths = union_length_by_group(codes, start, start + part["wait_us"].to_numpy())
    per = pd.DataFrame(list(combos[groups]), columns=["culprit", "rank", "step"])
    per["wait"] = lengths
    # per culprit: each waiting member's per-step waits summed over steps, then the mean member
    by_member = per.groupby(["culprit", "rank"])["wait"].sum()
    mean_member = by_member.groupby(level="culprit").mean()
    return mean_member / n_steps.reindex(mean_member.index).fillna(1)
