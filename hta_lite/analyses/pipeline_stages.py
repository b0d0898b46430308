"""Pipeline stages: the ranks linked by point-to-point sends and receives, and the slowest one.

The stages of a pipeline wait for each other by design: a stage receives what the stage before
it sent, so it waits for that stage's work, and with a send that blocks until it is received
(gloo; NCCL beyond its buffers) the sender waits for its receiver too. So a send / recv pair is
no collective whose members should arrive together (the straggler report does not compare
them); a pipeline runs at the pace of its slowest stage.

A stage's *work* per step (:func:`stage_work`, µs) is, on a rank with GPU work, the time its GPU
runs anything but communication in the step (the union of those kernels, copies and sets) and
the time it sits idle waiting for its host to launch work (:func:`.idle.host_wait_per_step`: a
first stage loading data while its GPU idles is slow too); on a CPU-only rank, the step's time
outside its calls (collectives, sends and receives: the union of their intervals), the step
from its ProfilerStep's start to the later of its end and its calls' ends. :func:`slow_stage`
compares each rank's typical work (its median step's: one slow step is no slow stage) with the
median of the other ranks': the slowest stage is named when it works ``min_excess_pctg`` % more
than that median and the difference is ``min_step_pctg`` % of the mean step or more.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..classify import COMMUNICATION
from ..intervals import total
from ..load.rank_trace import RankTrace
from .collectives.calls import POINT_TO_POINT
from .common import GpuIntervals, median_of_the_others, us
from .idle import host_wait_per_step
from .steps import profiled_steps

#: columns of :func:`stage_work`
WORK_COLUMNS = ["rank", "step", "work_us", "step_us"]
#: columns of :func:`slow_stage`'s table
STAGE_COLUMNS = ["rank", "work_us", "typical_us", "excess_us", "steps"]


def stage_work(trace: RankTrace, calls: pd.DataFrame) -> pd.DataFrame:
    """Per profiled step of a rank that sends or receives point to point (columns
    :data:`WORK_COLUMNS`): its ``work_us`` (module docstring) and ``step_us``; empty for a rank
    without such a call. ``calls``: collective calls (:func:`~.collectives.calls.collective_calls`
    columns; other ranks' are ignored). A per-rank partial."""
    mine = calls[calls["rank"].to_numpy() == trace.rank]
    if not mine["collective"].isin(POINT_TO_POINT).any():
        return pd.DataFrame(columns=WORK_COLUMNS)
    ts, end, step = (mine[c].to_numpy(np.int64) for c in ("ts", "end", "step"))
    gpu = GpuIntervals.of(trace)
    gpu = gpu.subset(gpu.kernel_type != COMMUNICATION)
    order = np.argsort(trace.gpu["iteration"].to_numpy()[gpu.rows], kind="stable")
    gpu = gpu.subset(order)  # by step: each step's work is one slice
    by_step = trace.gpu["iteration"].to_numpy()[gpu.rows]
    host_wait = host_wait_per_step(trace) if len(gpu.ts) else pd.Series(dtype=np.float64)
    rows = []
    for s in profiled_steps(trace).itertuples(index=False):
        inside = step == s.step
        lo = int(s.ts)
        hi = max(lo + int(s.dur), int(end[inside].max()) if inside.any() else lo)
        if len(gpu.ts):
            first, last = np.searchsorted(by_step, [s.step, s.step + 1])
            waited = int(round(1000 * host_wait.get(s.step, 0.0)))  # µs -> ns
            work = total(gpu.ts[first:last], gpu.end[first:last]) + waited
        else:
            work = hi - lo - total(np.clip(ts[inside], lo, hi), np.clip(end[inside], lo, hi))
        rows.append((trace.rank, int(s.step), us(work), us(hi - lo)))
    return pd.DataFrame(rows, columns=WORK_COLUMNS)


def slow_stage(
    work: pd.DataFrame, min_excess_pctg: float = 10.0, min_step_pctg: float = 0.5
) -> tuple[pd.DataFrame, int | None]:
    """(per stage, the largest excess first: ``work_us`` (its median step's), ``typical_us`` (the
    median of the other stages'), ``excess_us``, ``steps``; the slowest stage's rank when it is
    named (module docstring), else None). ``work``: :func:`stage_work` of the ranks (fewer
    than two: none)."""
    if work.empty or work["rank"].nunique() < 2:
        return pd.DataFrame(columns=STAGE_COLUMNS), None
    per = work.groupby("rank").agg(
        work_us=("work_us", "median"), step_us=("step_us", "mean"), steps=("step", "nunique")
    )
    per["typical_us"] = median_of_the_others(per["work_us"].to_numpy(np.float64))
    per["excess_us"] = per["work_us"] - per["typical_us"]
    per = per.sort_values("excess_us", ascending=False, kind="stable")
    top = per.iloc[0]
    named = (
        top["excess_us"] >= min_excess_pctg / 100.0 * top["typical_us"]
        and top["excess_us"] >= min_step_pctg / 100.0 * float(per["step_us"].mean())
        and top["excess_us"] > 0
    )
    table = per.reset_index()[STAGE_COLUMNS].round({"work_us": 1, "typical_us": 1,
                                                    "excess_us": 1})  # fmt: skip
    return table, (int(per.index[0]) if named else None)


def stage_text(table: pd.DataFrame, rank: int, cause: str) -> str:
    """The paragraph that names the slowest stage (``table``: :func:`slow_stage`'s)."""
    row = table.set_index("rank").loc[rank]
    return (
        f"Rank {rank} is the pipeline's slowest stage: it works {row['work_us']:,.0f} µs per step"
        f" outside communication, the median other stage"
        f" {row['typical_us']:,.0f} µs; the stages after it wait in their receives and, where a"
        f" send waits to be received, those before it in their sends"
        + (f" (cause: {cause})" if cause else "")
        + "."
    )


#: why ``get_pipeline_stages()`` has no rows
NO_PIPELINE = (
    "no pipeline: fewer than two ranks send or receive point to point in the profiled steps"
    " (get_straggler_report() compares the collectives)"
)


def stages_view(stages: pd.DataFrame, slow: int | None) -> pd.DataFrame:
    """``get_pipeline_stages()``'s table (the batch's ``pipeline_stages`` too): the straggler
    report's ``stages`` (:func:`slow_stage`'s table) with ``attrs["slow_stage"]`` (``slow``,
    its slowest stage's rank or None) and, with no rows, ``attrs["why"]``."""
    table = stages.copy()
    table.attrs["slow_stage"] = slow
    if table.empty:
        table.attrs["why"] = NO_PIPELINE
    return table
