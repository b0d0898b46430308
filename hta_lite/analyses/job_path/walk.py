"""The job critical path from the ranks' segments and the matched collectives (the driver's part).

The model: each rank runs its step as local work cut by collectives; a collective ends on
every member when the last member has arrived plus the transfer. So the chain that sets the
job's step ends on the rank whose step ends last and, walked backwards, runs through that
rank's local path to its latest finished collective; there, if another rank arrived last,
the path hops to it (what this rank did meanwhile was waiting, not on the path) and goes on
from that rank's arrival; else it stays. It stops at the step's start on the rank it is on.
This is the longest path of the graph whose nodes are the arrivals and ends of collectives and
whose edges are the ranks' local paths and the collectives' ``max(arrivals) + transfer`` joins.

Rows, in time order, cover the path without a gap: ``bound_by`` as in HTA's critical path for
local work, ``communication`` for a collective after its last arrival, ``untracked`` for the
parts of a segment its local path does not cover (dependencies of zero weight: host code no
operator records, waits on things the trace does not link, host idle), each where it lies
(given the segments' ``gaps``; else one row at the segment's start).

Nothing is silent: a rank that lacks the step, a collective that is not matched, partial (a
member not loaded: an absent rank may have arrived later) or unmeasured (its calls disagree)
is listed in ``problems``; the path then goes on the rank it is on (a lower bound).

Where the GPU runs behind the CPU, a step's extent (from its start to the end of its GPU work)
begins while the GPU still runs the earlier steps: the walk's step starts at the end of the
earlier steps of the rank it starts on, so that, as in the step table (:mod:`..steps`), each
step holds the time it adds, not the queue before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..common import us
from .segments import CALL_KEY, END_OF_STEP

PATH_COLUMNS = [
    "step", "rank", "name", "category", "bound_by", "start_us", "duration_us", "tid", "stream",
]  # fmt: skip
SUMMARY_COLUMNS = ["rank", "bound_by", "duration_us", "share_pctg"]
HOP_COLUMNS = [
    "step", "from_rank", "to_rank", "collective", "pg", "instance", "at_us", "wait_us",
]  # fmt: skip
STEP_COLUMNS = ["step", "start_us", "end_us", "step_us", "end_rank", "start_rank", "hops"]
PROBLEM_COLUMNS = ["step", "rank", "reason", "detail"]
COMMUNICATION, UNTRACKED = "communication", "untracked"


@dataclass
class JobCriticalPath:
    """The job critical path of the selected steps. Times are µs on the ranks' clock (the
    trace's absolute time), so rows of several ranks line up.

    ``path()``: one row per event on the path, in time order (:data:`PATH_COLUMNS`);
    ``summary()``: by rank and ``bound_by``; ``hops()``: each move between ranks, with the
    collective it crossed (``from_rank``: the rank that arrived last, where the path goes on;
    ``to_rank``: the rank that waited ``wait_us`` for it); ``steps()``: per step its span, the
    rank it ends and starts on; ``problems``: what the path could not see."""

    rows: pd.DataFrame
    hop_rows: pd.DataFrame
    step_rows: pd.DataFrame
    problems: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=PROBLEM_COLUMNS))

    def path(self) -> pd.DataFrame:
        return self.rows

    def hops(self) -> pd.DataFrame:
        return self.hop_rows

    def steps(self) -> pd.DataFrame:
        return self.step_rows

    def summary(self) -> pd.DataFrame:
        """``rank``, ``bound_by``, ``duration_us`` (summed over the steps), ``share_pctg`` (of
        the steps' total span: the rows add up to 100), largest first."""
        if self.rows.empty:
            return pd.DataFrame(columns=SUMMARY_COLUMNS)
        table = self.rows.groupby(["rank", "bound_by"], as_index=False)["duration_us"].sum()
        total = float(self.step_rows["step_us"].sum())
        table["share_pctg"] = (table["duration_us"] / total * 100).round(2) if total else 0.0
        table["duration_us"] = table["duration_us"].round(3)
        return table.sort_values(["duration_us", "rank"], ascending=[False, True],
                                 ignore_index=True)[SUMMARY_COLUMNS]  # fmt: skip

    def by_rank(self) -> pd.DataFrame:
        """``rank``, ``duration_us``, ``share_pctg``: how much of the steps each rank bounds."""
        table = self.summary().groupby("rank", as_index=False)[["duration_us", "share_pctg"]]
        return table.sum().sort_values("duration_us", ascending=False, ignore_index=True)


def job_critical_path(
    segments: pd.DataFrame,
    events: pd.DataFrame,
    calls: pd.DataFrame,
    instances: pd.DataFrame,
    loaded: list[int],
    steps=None,
    gaps: pd.DataFrame | None = None,
) -> JobCriticalPath:
    """The job path over ``segments`` / ``events`` / ``gaps`` (the ranks'
    :func:`.segments.segments`, concatenated) and a
    :class:`~..collectives.matching.Matching`'s ``calls`` / ``instances``; ``steps``: the steps
    to walk (default: every step a rank has)."""
    problems: list[list] = []
    present = sorted(segments["step"].unique().tolist()) if len(segments) else []
    chosen = present if steps is None else [s for s in steps if s in present]
    by_call = _call_table(calls, instances)
    seg = segments.set_index(["rank", "step", "target_ts", "target_tid", "target_stream"])
    seg = seg.sort_index()
    keys = ["rank", "step", "target_ts", "target_tid", "target_stream"]
    ev = {key: part for key, part in events.groupby(keys, sort=False)}
    has_gaps = gaps is not None and len(gaps) > 0
    gap_ns = (
        (gaps["end"] - gaps["start"]).groupby([gaps[k] for k in keys], sort=False).sum()
        if has_gaps
        else pd.Series(dtype="int64")
    ).to_dict()
    visited = []  # the segments on the path: their gaps are rows too
    rows, hops, step_rows, cut = [], [], [], {}
    for step in chosen:
        ends = segments[(segments["step"] == step) & (segments["target_ts"] == -1)]
        missing = sorted(set(loaded) - set(ends["rank"].tolist()))
        if missing:
            problems.append([step, ",".join(map(str, missing)), "rank without step",
                             f"{len(missing)} loaded rank(s) have no step {step}: the path"
                             " is over the others"])  # fmt: skip
        last = ends.sort_values(["step_end", "rank"], ascending=[False, True]).iloc[0]
        rank, target = int(last["rank"]), END_OF_STEP
        step_end = int(last["step_end"])
        seen, n_hops, step_start = set(), 0, step_end
        while (rank, target) not in seen:
            seen.add((rank, target))
            s = seg.loc[(rank, step, *target)]
            part = ev.get((rank, step, *target))
            gap = gap_ns.get((rank, step, *target), 0)
            own = _segment_rows(step, rank, s, part, gap)
            if own is not None:  # (a segment all in its gaps has no row of its own)
                rows.append(own)
            visited.append((rank, step, *target))
            step_start = int(s["start"])
            prev = (int(s["prev_ts"]), int(s["prev_tid"]), int(s["prev_stream"]))
            if prev == END_OF_STEP:
                break
            call = by_call.get((rank, *prev))
            if call is not None and call["why"]:  # unmatched, unmeasured or partial
                problems.append([step, str(rank), call["why"], call["detail"]])
            measured = call is not None and call["measured"]
            end = int(s["start"])
            # a measured collective from its last arrival, else the call's own span
            start = min(max(call["last_start"], prev[0]), end) if measured else prev[0]
            name = call["name"] if call else "collective"
            rows.append(_row(step, rank, name, COMMUNICATION, start, end, prev[1], prev[2]))
            if measured and call["last_rank"] != rank:
                lead, arrival = call["last_rank"], call["last_start"]
                n_hops += 1
                hops.append([step, lead, rank, call["collective"], call["pg"], call["instance"],
                             us(arrival), us(arrival - prev[0])])  # fmt: skip
                target = by_call.lead_key(call["instance"], lead)
                rank = lead
            else:
                target = prev
        step_rows.append([step, us(step_start), us(step_end), us(step_end - step_start),
                          int(last["rank"]), rank, n_hops])  # fmt: skip
        if int(s["after"]) > step_start:  # the rank it starts on ran its earlier steps till then
            cut[step] = us(min(int(s["after"]), step_end))
    if has_gaps and visited:
        rows.append(_gap_rows(gaps, pd.DataFrame(visited, columns=keys)))
    table = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=PATH_COLUMNS)
    table = table.sort_values(["step", "start_us"], kind="stable", ignore_index=True)
    hop_table = pd.DataFrame(hops, columns=HOP_COLUMNS)
    step_table = pd.DataFrame(step_rows, columns=STEP_COLUMNS)
    if cut:
        table, hop_table, step_table = _cut(table, hop_table, step_table, cut)
    return JobCriticalPath(
        table[PATH_COLUMNS],
        hop_table.sort_values(["step", "at_us"], ignore_index=True),
        step_table,
        pd.DataFrame(problems, columns=PROBLEM_COLUMNS).drop_duplicates(ignore_index=True),
    )


def _cut(path: pd.DataFrame, hops: pd.DataFrame, steps: pd.DataFrame, cut: dict) -> tuple:
    """The path (rows in time order), hops and steps with each step in ``cut`` (step -> µs)
    starting there: the path's time before it was the job's earlier steps'. The step's first
    rows give up that much time (a row across the cut keeps its part after it), so that the
    rows still add up to the step."""
    began = steps.set_index("step")["start_us"]
    drop = path["step"].map({s: at - began[s] for s, at in cut.items()}).fillna(0.0)
    done = path.groupby("step", sort=False)["duration_us"].cumsum()  # the path's time so far
    path = path[(done > drop + 1e-9).to_numpy()].copy()
    left = (done - drop)[path.index]  # what each kept row has after the cut
    shortened = left < path["duration_us"]
    path.loc[shortened, "duration_us"] = left[shortened]
    at = path["step"].map(cut)
    path.loc[shortened, "start_us"] = np.maximum(path["start_us"], at)[shortened]
    hops = hops[~(hops["at_us"].to_numpy(float) < hops["step"].map(cut).to_numpy(float))]
    steps = steps.copy()
    for step, start_us in cut.items():
        row = steps["step"] == step
        steps.loc[row, "start_us"] = start_us
        steps.loc[row, "step_us"] = steps.loc[row, "end_us"] - start_us
        steps.loc[row, "hops"] = int((hops["step"] == step).sum())
        first = path[path["step"] == step]
        if len(first):
            steps.loc[row, "start_rank"] = int(first["rank"].iloc[0])
    return path.reset_index(drop=True), hops.reset_index(drop=True), steps


def _row(step, rank, name, bound_by, start, end, tid, stream) -> pd.DataFrame:
    return pd.DataFrame([[step, rank, name, bound_by, bound_by, us(start), us(max(end - start, 0)),
                          tid, stream]], columns=PATH_COLUMNS)  # fmt: skip


def _gap_rows(gaps: pd.DataFrame, visited: pd.DataFrame) -> pd.DataFrame:
    """The ``untracked`` rows of the visited segments' gaps, where they lie."""
    mine = gaps.merge(visited.drop_duplicates(), on=list(visited.columns))
    return pd.DataFrame({
        "step": mine["step"], "rank": mine["rank"], "name": UNTRACKED, "category": UNTRACKED,
        "bound_by": UNTRACKED, "start_us": us(mine["start"].to_numpy(np.int64)),
        "duration_us": us((mine["end"] - mine["start"]).to_numpy(np.int64)),
        "tid": mine["tid"].to_numpy(), "stream": -1,
    })[PATH_COLUMNS]  # fmt: skip


def _segment_rows(
    step: int, rank: int, s: pd.Series, part: pd.DataFrame | None, gap_ns: int = 0
) -> pd.DataFrame | None:
    """The local path of one segment, and what of the segment it does not cover beyond its
    gaps (``gap_ns``, rows of their own: :func:`_gap_rows`), at the segment's start."""
    span = int(s["end"]) - int(s["start"])
    covered = (int(part["duration"].sum()) if part is not None else 0) + int(gap_ns)
    frames = []
    if part is not None:
        frames.append(pd.DataFrame({
            "step": step, "rank": rank, "name": part["name"].to_numpy(),
            "category": part["category"].to_numpy(), "bound_by": part["bound_by"].to_numpy(),
            "start_us": us(part["start"].to_numpy(np.int64)),
            "duration_us": us(part["duration"].to_numpy(np.int64)),
            "tid": part["tid"].to_numpy(), "stream": part["stream"].to_numpy(),
        }))  # fmt: skip
    if span - covered > 0:
        frames.append(_row(step, rank, "untracked", UNTRACKED, int(s["start"]),
                           int(s["start"]) + span - covered, -1, -1))  # fmt: skip
    return pd.concat(frames, ignore_index=True) if frames else None


class _Calls(dict):
    """``(rank, ts, tid, stream)`` -> the call and its instance; ``lead_key``: the key of the
    last rank's call of an instance."""

    def __init__(self, items, leads):
        super().__init__(items)
        self.leads = leads

    def lead_key(self, instance: int, rank: int) -> tuple:
        return self.leads[(instance, rank)]


def _call_table(calls: pd.DataFrame, instances: pd.DataFrame) -> _Calls:
    if calls.empty:
        return _Calls({}, {})
    inst = instances.set_index("instance")
    measured_ids = set(
        inst.index[inst["consistent"] & inst["ordered"] & (inst["ranks_present"] >= 2)].tolist()
    )
    items, leads = {}, {}
    for row in calls.itertuples(index=False):
        key = (int(row.rank), *(int(getattr(row, k)) for k in CALL_KEY))
        i = int(row.instance)
        entry = {"name": row.name, "collective": row.collective, "pg": row.pg, "instance": i,
                 "measured": i in measured_ids, "why": "", "detail": ""}  # fmt: skip
        if i < 0:
            entry["why"] = "collective not matched"
            entry["detail"] = (
                f"{row.collective} on rank {row.rank} (pg {row.pg}) has no match on the other"
                " ranks: the path stays on this rank"
            )
        elif (
            i not in measured_ids
            and not inst.at[i, "complete"]
            and (inst.at[i, "ranks_present"] < 2)
        ):
            entry["why"] = "partial collective"
            entry["detail"] = (f"instance {i} ({row.collective}, pg {row.pg}): no other member"
                               " is loaded (they may have arrived later): the path stays on this"
                               " rank, a lower bound there")  # fmt: skip
        elif i not in measured_ids:
            entry["why"] = "collective not measured"
            entry["detail"] = (f"instance {i} ({row.collective}): its calls disagree or cannot be"
                               " one collective (collective_problems): the path stays on this"
                               " rank")  # fmt: skip
        else:
            info = inst.loc[i]
            entry["last_rank"] = int(info["last_rank"])
            entry["last_start"] = int(info["last_start"])
            if not bool(info["complete"]):
                entry["why"] = "partial collective"
                entry["detail"] = (f"instance {i} ({row.collective}, pg {row.pg}): a member is not"
                                   " loaded and may have arrived later; the path is a lower"
                                   " bound there")  # fmt: skip
            leads[(i, int(row.rank))] = key[1:]
        items[key] = entry
    return _Calls(items, leads)
