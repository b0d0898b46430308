"""Why a straggler is late: its extra compute, host wait or annotated region per step against
the median of the other ranks (:func:`explain`), from per-rank tables (made where each rank is
loaded: :func:`host_wait_by_step`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ..kineto import CPU_COLLECTIVE
from ..load.rank_trace import RankTrace
from .idle import host_wait_per_step


def cause_of(causes: pd.DataFrame | None, rank: int) -> tuple[str, str]:
    """(``cause``, ``region``: the annotation whose extra time makes the rank host-bound, ``""``
    where none, or where the cause is another: the region whose time grew most does not then
    account for the lateness) of ``rank`` in an :func:`explain` table; ``("", "")`` where the
    table has no row for it."""
    if causes is None or causes.empty or rank not in causes["rank"].tolist():
        return "", ""
    row = causes.set_index("rank").loc[rank]
    region = row.get("region") if "region" in row.index else None
    cause = str(row["cause"])
    return cause, region if isinstance(region, str) and cause == "host-bound" else ""


def host_wait_by_step(trace: RankTrace) -> pd.DataFrame:
    """``rank, step, host_wait_us``: the time per step the whole GPU (no stream busy) waited
    for the host to launch work (a per-rank partial of :func:`explain`), by HTA's rule: each
    gap whose work was launched after the GPU went idle, all of it (whether the rank's host
    was late to launch, the question here; how long the work then waited is not asked)."""
    per_step = host_wait_per_step(trace, split_held=False)
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
                " work (idle ended by work launched after the GPU went idle) than the median"
                " rank: look at data loading, CPU"
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
            f" with the GPU idle until work launched after it went idle (median"
            f" {typical['host_wait']:,.0f}), and"
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
