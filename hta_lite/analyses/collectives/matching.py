"""The same collective on every member rank, and who waited for whom.

A collective call of rank r is matched with the calls of the other members of its process group
by ``(pg, step, ordinal)``: ranks issue the collectives of one group in the same order (NCCL and
gloo require it), so the k-th call of a group in a step, in issue order (``issued``: a kernel's
start; for gloo, the ``c10d::*`` op that enqueued the worker range), is the same collective on
every member. The arrival stays the call's own start (the kernel's, the worker range's).
(Kineto traces carry no per-group sequence number; the step bounds the effect of a rank that
missed a call.) Nothing is paired silently:

- point-to-point ``send`` / ``recv`` are paired by their peers (:mod:`.point_to_point`): an
  instance of two calls, collective ``send_recv``; a call without a recorded peer is not;
- a group member that is not loaded makes its group's collectives *partial*
  (``complete == False``), measured over the ranks present;
- ranks with different numbers of calls of a group in a step: the calls beyond the smallest
  count are unmatched (``count mismatch``);
- matched calls whose collective, dtype or size disagree: the metadata of a strict majority of
  the ranks present is the instance's, and the ranks that differ are listed (``metadata
  disagree``, with the ranks); without a majority (one of two ranks, or all different) the
  instance is kept but ``consistent == False``, and left out of skew and bandwidth. So one
  rank's bad metadata never empties the summary of a job;
- a collective in which every rank needs every other rank's data (all_reduce, all_gather,
  reduce_scatter, all_to_all, barrier) cannot end on one rank before it starts on another. An
  instance where it does, by more than ``ORDER_SLACK_NS`` (clock jitter), is ``ordered ==
  False``, left out of waits and stragglers and listed (``impossible order``): the calls paired
  are not one collective (a call missing on one rank shifts the pairing) or the clocks disagree.
  A rank whose calls lie apart in most of its collectives by about the same time has a clock
  offset: it is listed with the estimate (``clock offset``: the median over those collectives
  of its start minus the others'), and every collective it takes part in is ``ordered ==
  False`` (its times cannot be compared with the others').

Per matched collective (``instances``): arrival skew (latest start - earliest), end skew, transfer
time (the shortest duration over the ranks: the part not spent waiting), the rank that arrived
last. Per call (``calls`` with ``instance``): ``wait`` = latest start - its start, the time it sat
in the collective waiting for the last rank. The last rank *caused* the others' waits: per rank,
``wait_caused`` summed over the collectives it reached last equals the ``wait_suffered`` of the
others, by construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...load.rank_trace import RankTrace
from ..common import us
from . import point_to_point
from .bandwidth import add_bandwidth
from .calls import CALL_COLUMNS, POINT_TO_POINT, collective_calls, out_bytes_from_input
from .point_to_point import PAIRED

#: columns of :attr:`Matching.instances` (µs floats, ns ints, GB/s decimal)
INSTANCE_COLUMNS = [
    "instance", "pg", "step", "ordinal", "collective", "dtype", "bytes", "group_size",
    "ranks_present", "complete", "consistent", "ordered", "first_start", "last_start",
    "arrival_skew_us",
    "end_skew_us", "transfer_us", "last_rank", "wait_us", "algbw_gbps", "busbw_gbps",
]  # fmt: skip
PROBLEM_COLUMNS = ["pg", "step", "reason", "ranks", "calls", "detail"]


@dataclass
class Matching:
    """``calls``: every collective call of the loaded ranks (:func:`~.calls.collective_calls`)
    plus ``ordinal`` (k-th call of its group in the step on its rank), ``instance`` (-1:
    unmatched), ``wait`` (ns, latest start of the instance - its start), ``arrived_last``;
    ``instances``: one row per matched collective (:data:`INSTANCE_COLUMNS`); ``problems``: what
    could not be matched or disagrees, one row per (group, step, reason) (:data:`PROBLEM_COLUMNS`).
    """

    calls: pd.DataFrame
    instances: pd.DataFrame
    problems: pd.DataFrame
    #: per rank, what its recorded values could not give (health codes -> counts)
    rank_problems: dict = field(default_factory=dict)

    def measured(self) -> pd.DataFrame:
        """The calls of consistent, ordered instances with at least two ranks present (what
        skew, waits and stragglers are computed from)."""
        good = self.instances.loc[comparable(self.instances), "instance"]
        return self.calls[self.calls["instance"].isin(good)]


def comparable(instances: pd.DataFrame) -> pd.Series:
    """Which instances' arrivals can be compared: consistent, ordered, two ranks present or
    more."""
    return instances["consistent"] & instances["ordered"] & (instances["ranks_present"] >= 2)


def wait_caused(calls: pd.DataFrame, wait: str = "wait") -> pd.Series:
    """Per rank (index): the others' waits (column ``wait``, summed) in the matched collectives
    it reached last; over all ranks this sums to every wait."""
    waits = calls.groupby("instance")[wait].sum()
    last = calls[calls["arrived_last"]]
    caused = pd.Series(waits.reindex(last["instance"]).to_numpy(), index=last["rank"].to_numpy())
    return caused.groupby(level=0).sum()


def _group_sizes(
    calls: pd.DataFrame, members: dict[str, set[int]], loaded: set[int]
) -> dict[str, int]:
    """Size of each group: its recorded members; else the size its calls recorded or derived
    (the most common); else, when every rank of the job is loaded (``world_size``), the ranks
    that call it; else -1 (unknown: two loaded ranks of a 128-rank job say nothing of it)."""
    out = {}
    world = calls["world_size"].max() if "world_size" in calls else -1
    whole_job = world > 0 and len(loaded) >= world
    for pg, rows in calls.groupby("pg", sort=False):
        recorded = rows["members"].ne("").any()
        known = rows.loc[rows["group_size"] > 0, "group_size"]
        if recorded:
            out[pg] = len(members[pg])
        elif len(known):
            out[pg] = int(known.mode().iloc[0])
        else:
            out[pg] = len(members[pg]) if whole_job else -1
    return out


def _members(calls: pd.DataFrame) -> dict[str, set[int]]:
    """Global ranks of each group: as recorded, else the ranks that called it."""
    out = {}
    for pg, rows in calls.groupby("pg", sort=False):
        recorded = {int(r) for text in rows["members"].unique() if text for r in text.split(",")}
        out[pg] = recorded or set(rows["rank"].unique().tolist())
    return out


def _outside_steps_apart(calls: pd.DataFrame, p2p: np.ndarray) -> tuple[np.ndarray, list]:
    """The calls outside every step (step -1) of each group whose ranks' calls in steps begin
    or end at different steps (a rank's capture started an iteration earlier): on each rank
    they are other iterations, so they are not matched (one problem row per group)."""
    inside = calls[~p2p & (calls["step"].to_numpy() >= 0)]
    span = inside.groupby(["pg", "rank"], observed=True)["step"].agg(["min", "max"])
    differ = span.groupby(level="pg", observed=True).nunique().max(axis=1) > 1
    apart = ~p2p & (calls["step"].to_numpy() < 0) & calls["pg"].isin(differ[differ].index)
    problems = [
        (pg, -1, "outside the steps", _ranks(rows), len(rows),
         "the ranks' steps begin or end at different steps, so their calls outside the steps"
         " are other iterations: not matched")
        for pg, rows in calls[apart].groupby("pg", sort=True)
    ]  # fmt: skip
    return apart.to_numpy(bool), problems


def match_traces(traces: Mapping[int, RankTrace]) -> Matching:
    """:func:`match` over the :func:`~.calls.collective_calls` of every loaded rank."""
    parts = [collective_calls(traces[r]) for r in sorted(traces)]
    found = {r: part.attrs["problems"] for r, part in zip(sorted(traces), parts)}
    calls = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=CALL_COLUMNS)
    matching = match(calls, traces)
    matching.rank_problems = {r: p for r, p in found.items() if p}
    return matching


def match(calls: pd.DataFrame, loaded: Iterable[int]) -> Matching:
    """Match the calls of all loaded ranks (``calls``: concatenated per-rank tables)."""
    loaded = set(loaded)
    if calls.empty:
        empty = pd.DataFrame(columns=INSTANCE_COLUMNS)
        extra = pd.DataFrame(columns=["ordinal", "instance", "wait", "arrived_last"])
        return Matching(
            pd.concat([calls, extra], axis=1), empty, pd.DataFrame(columns=PROBLEM_COLUMNS)
        )
    calls = calls.sort_values(
        ["rank", "pg", "step", "issued", "ts"], kind="stable", ignore_index=True
    )
    calls["ordinal"] = calls.groupby(["rank", "pg", "step"]).cumcount()
    calls["instance"] = -1
    problems = []
    p2p = calls["collective"].isin(POINT_TO_POINT).to_numpy()
    pairs, pair_problems = point_to_point.pair(calls, loaded)
    problems += pair_problems
    members = _members(calls)
    guessed = calls.loc[calls["members"] == "", "pg"].unique().tolist()
    sizes = _group_sizes(calls, members, loaded)
    for pg in guessed:
        size = (
            f"its size is {sizes[pg]}" if sizes[pg] > 0
            else "its size is unknown (bus bandwidth not computed)"
        )  # fmt: skip
        problems.append(
            (pg, -1, "group not recorded", _text(sorted(members[pg])), 0,
             "no process group in the trace: matched by stream (GPU) or as one group (CPU)"
             f" among the loaded ranks that call it; {size}")
        )  # fmt: skip
    for pg, group in members.items():
        absent = sorted(group - loaded)
        if absent:
            problems.append(
                (pg, -1, "missing ranks", _text(absent), 0,
                 f"{len(absent)} of {len(group)} members not loaded: its collectives are partial")
            )  # fmt: skip
        elif pg in guessed and sizes[pg] > len(group):
            problems.append(
                (pg, -1, "missing ranks", "", 0,
                 f"{sizes[pg] - len(group)} of {sizes[pg]} members not loaded (which ones is"
                 " not recorded): its collectives are partial")
            )  # fmt: skip
    # without metadata the group's size is known only now (or never): and the sizes from it
    unsized = calls["group_size"].to_numpy() < 0
    if unsized.any():
        size = calls["pg"].map(sizes).to_numpy()
        calls["group_size"] = np.where(unsized, size, calls["group_size"].to_numpy())
        calls["group_size_source"] = np.where(
            unsized & (size > 0), "matching", calls["group_size_source"].to_numpy()
        )
        derived = out_bytes_from_input(
            calls["collective"].to_numpy(),
            calls["in_bytes"].to_numpy(),
            calls["group_size"].to_numpy(),
        )
        calls["out_bytes"] = np.where(
            calls["out_bytes"].to_numpy() < 0, derived, calls["out_bytes"]
        )
    apart, outside = _outside_steps_apart(calls, p2p)
    problems += outside
    counts = calls[~p2p & ~apart].groupby(["pg", "step", "rank"]).size()
    for (pg, step), per_rank in counts.groupby(level=["pg", "step"]):
        per_rank = per_rank.droplevel(["pg", "step"])
        limit = int(per_rank.min())
        silent = sorted((members[pg] & loaded) - set(per_rank.index.tolist()))
        if silent:
            problems.append(
                (pg, step, "no calls", _text(silent), 0,
                 f"loaded members without a call of this group in step {step}")
            )  # fmt: skip
        if per_rank.nunique() > 1:
            detail = ", ".join(f"rank {r}: {n}" for r, n in per_rank.items())
            problems.append(
                (pg, step, "count mismatch", _text(per_rank.index), int((per_rank - limit).sum()),
                 f"calls per rank differ ({detail}); calls beyond the first {limit} unmatched")
            )  # fmt: skip
    keyed = calls.set_index(["pg", "step"]).index
    limits = counts.groupby(level=["pg", "step"]).min()
    limit = limits.reindex(keyed).to_numpy(na_value=0)
    matched = ~p2p & ~apart & (calls["ordinal"].to_numpy() < limit)
    key = calls.loc[matched, ["pg", "step", "ordinal"]]
    codes = key.groupby(["pg", "step", "ordinal"], sort=True).ngroup().to_numpy()
    calls.loc[matched, "instance"] = codes
    paired = pairs >= 0
    calls.loc[paired, "instance"] = pairs[paired] + (int(codes.max()) + 1 if len(codes) else 0)
    instances, calls = _instances(calls, sizes)
    for row in instances[~instances["consistent"]].itertuples():
        problems.append(
            (row.pg, row.step, "metadata disagree", "", row.ranks_present,
             f"instance {row.instance}: collective, dtype or size differ across ranks, no"
             " majority: not measured")
        )  # fmt: skip
    odd = calls[calls["odd_metadata"]]
    for (pg, step), rows in odd.groupby(["pg", "step"], sort=True):
        problems.append(
            (pg, step, "metadata disagree", _ranks(rows), len(rows),
             f"instance(s) {_text(sorted(rows['instance'].unique()))}: these ranks' collective,"
             " dtype or size differ from the other ranks' (measured with the majority's)")
        )  # fmt: skip
    calls = calls.drop(columns="odd_metadata")
    for row in instances[~instances["ordered"]].itertuples():
        problems.append(
            (row.pg, row.step, "impossible order", "", row.ranks_present,
             f"instance {row.instance} ({row.collective}): one rank's call ends more than"
             f" {ORDER_SLACK_NS / 1e6:g} ms before another's starts, which a collective cannot:"
             " the calls paired are not one collective (a call missing on a rank shifts the"
             " pairing) or the clocks disagree; left out of waits and stragglers")
        )  # fmt: skip
    offsets = _clock_offsets(calls, instances)
    problems += offsets
    if offsets:  # every collective of a rank whose clock is off: no wait, no last arrival
        off = calls["rank"].isin([int(p[3]) for p in offsets]) & (calls["instance"] >= 0)
        apart = instances["instance"].isin(calls.loc[off, "instance"].unique())
        instances.loc[apart, "ordered"] = False
        instances.loc[apart, "wait_us"] = 0.0
        involved = calls["instance"].isin(instances.loc[apart, "instance"])
        calls.loc[involved, "wait"] = 0
        calls.loc[involved, "arrived_last"] = False
    # an impossible order or a clock apart: its times are not a skew, a transfer or a bandwidth
    unmeasured = ~instances["ordered"].to_numpy(bool)
    instances.loc[unmeasured, list(_TIMED)] = np.nan
    return Matching(calls, instances, pd.DataFrame(problems, columns=PROBLEM_COLUMNS))


#: an instance's columns measured from its calls' times (NaN where they cannot be compared)
_TIMED = ("arrival_skew_us", "end_skew_us", "transfer_us", "algbw_gbps", "busbw_gbps")


#: collectives where every rank needs every other rank's data: no rank ends before all started
SYMMETRIC = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "barrier")
ORDER_SLACK_NS = 1_000_000  # a call may end this long before another starts: clock jitter


def _clock_offsets(calls: pd.DataFrame, instances: pd.DataFrame) -> list[tuple]:
    """Ranks whose calls lie apart from the others' (one's start after all the others' ends, or
    its end before their starts) in most of their symmetric collectives, by about the same time
    (spread under a tenth of it): a ``clock offset`` problem each, with the estimate. A loop
    over the instances that are not ``ordered`` only."""
    symmetric = instances.loc[instances["collective"].isin(SYMMETRIC), "instance"]
    taken = calls[calls["instance"].isin(symmetric)].groupby("rank")["instance"].nunique()
    apart: dict[int, list[int]] = {}
    for instance in instances.loc[~instances["ordered"], "instance"].tolist():
        rows = calls[calls["instance"] == instance]
        for rank in rows["rank"].unique().tolist():
            mine, others = rows[rows["rank"] == rank], rows[rows["rank"] != rank]
            start, end = int(mine["ts"].min()), int(mine["end"].max())
            if start > others["end"].min() + ORDER_SLACK_NS or (
                end + ORDER_SLACK_NS < others["ts"].max()
            ):
                apart.setdefault(rank, []).append(start - int(others["ts"].median()))
    out = []
    for rank, offsets in sorted(apart.items()):
        offset = float(np.median(offsets))
        spread = float(np.max(offsets) - np.min(offsets))
        if 2 * len(offsets) <= taken.get(rank, 0) or spread > 0.1 * abs(offset):
            continue  # apart now and then, by different times: pairing, not the clock
        where = "ahead of" if offset > 0 else "behind"
        out.append(
            ("", -1, "clock offset", str(rank), len(offsets),
             f"rank {rank}'s clock is about {abs(offset) / 1e3:,.0f} µs {where} the others'"
             f" (median over the {len(offsets)} collectives its calls lie apart in): every"
             " collective it takes part in is left out of waits and stragglers")
        )  # fmt: skip
    return out


def _majority(matched: pd.DataFrame) -> pd.DataFrame:
    """Per instance (index): the (collective, dtype, size) the most ranks recorded (``bytes``:
    that size) and ``votes`` (how many did); ties go to the first in sorted order."""
    counts = matched.groupby(["instance", "collective", "dtype", "size"], sort=True).size()
    top = counts.reset_index(name="votes").sort_values(
        ["instance", "votes"], ascending=[True, False], kind="stable"
    )
    top = top.drop_duplicates("instance").set_index("instance")
    return top.rename(columns={"size": "bytes"})


def _ranks(rows: pd.DataFrame) -> str:
    return _text(sorted(rows["rank"].unique().tolist()))


def _text(ranks) -> str:
    return ",".join(str(int(r)) for r in ranks)


def _instances(calls: pd.DataFrame, sizes: dict[str, int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    calls["size"] = calls[["in_bytes", "out_bytes"]].max(axis=1)
    matched = calls[calls["instance"] >= 0]
    p2p = matched["collective"].isin(POINT_TO_POINT)  # a pair's two sides: one collective
    matched = matched.assign(collective=matched["collective"].where(~p2p, PAIRED))
    by = matched.groupby("instance", sort=True)
    table = by.agg(
        pg=("pg", "first"),
        step=("step", "first"),
        ordinal=("ordinal", "first"),
        ranks_present=("rank", "nunique"),
        first_start=("ts", "min"),
        last_start=("ts", "max"),
        first_end=("end", "min"),
        last_end=("end", "max"),
        transfer=("dur", "min"),
    )
    agreed = _majority(matched)
    table = table.join(agreed[["collective", "dtype", "bytes", "votes"]])
    table["group_size"] = table["pg"].map(sizes).astype(np.int64)
    table.loc[table["collective"] == PAIRED, "group_size"] = 2  # a pair, whatever its group
    table["complete"] = (table["group_size"] > 0) & (table["ranks_present"] >= table["group_size"])
    table["consistent"] = 2 * table["votes"] > table["ranks_present"]
    symmetric = table["collective"].isin(SYMMETRIC)
    table["ordered"] = ~symmetric | (table["last_start"] <= table["first_end"] + ORDER_SLACK_NS)
    # a call of a measured instance whose metadata is not the majority's: listed
    key = ["collective", "dtype", "size"]
    own = pd.MultiIndex.from_frame(matched[key])
    theirs = pd.MultiIndex.from_frame(
        agreed.reindex(matched["instance"])[["collective", "dtype", "bytes"]].set_axis(key, axis=1)
    )
    measured = table["consistent"].reindex(matched["instance"]).to_numpy()
    calls["odd_metadata"] = False
    calls.loc[matched.index[(own != theirs) & measured], "odd_metadata"] = True
    last_row = matched["ts"].groupby(matched["instance"]).idxmax()
    table["last_rank"] = calls.loc[last_row.to_numpy(), "rank"].to_numpy()
    table["arrival_skew_us"] = us(table["last_start"] - table["first_start"])
    table["end_skew_us"] = us(table["last_end"] - table["first_end"])
    table["transfer_us"] = us(table["transfer"])
    last_start = table["last_start"].reindex(calls["instance"]).to_numpy()
    calls["wait"] = np.where(calls["instance"] >= 0, last_start - calls["ts"].to_numpy(), 0)
    calls["wait"] = calls["wait"].fillna(0).astype(np.int64)
    ordered = table["ordered"].reindex(calls["instance"], fill_value=True).to_numpy(bool)
    calls.loc[~ordered, "wait"] = 0  # an impossible order: no wait from it
    calls["arrived_last"] = False
    last_row = last_row[table.loc[last_row.index, "ordered"].to_numpy()]
    calls.loc[last_row.to_numpy(), "arrived_last"] = True
    table["wait_us"] = us(calls.groupby("instance")["wait"].sum().reindex(table.index))
    table = add_bandwidth(table.reset_index())
    return table[INSTANCE_COLUMNS], calls.drop(columns="size")
