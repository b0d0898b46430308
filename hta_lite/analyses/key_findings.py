"""Key findings: the few facts a reader needs first, one line each, from the views' tables.

Each kind is a pure function of the tables of the view it summarizes (``None`` where those
tables are absent or say nothing) and gives one row; :func:`key_findings` ranks them.

Columns: ``kind`` (``KINDS``), ``rank`` (nullable: the rank the finding is about, ``<NA>`` for
the job), ``finding`` (one line with its numbers), ``value`` and ``unit`` (the main number),
``step_pctg`` (that number as a share of the step, for findings that are wall-clock time the
step spends: idle GPU, a late rank, exposed communication; NaN for the others), ``section``
(the report's anchor of the view behind it). Ranked by ``step_pctg``, largest first, then the
others in ``KINDS`` order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ..kineto import CPU_COLLECTIVE, PARAM_COMMS_NAME
from ..units import fmt_bytes, fmt_pct, fmt_us
from .memory.lifetimes import leak_clause
from .memory.timeline import imbalance_clause
from .straggler_causes import cause_of

COLUMNS = ["kind", "rank", "finding", "value", "unit", "step_pctg", "section"]
KINDS = (
    "gpu_idle", "straggler", "pipeline_stage", "exposed_communication", "step_anomalies",
    "top_operator", "mfu", "memory_peak", "partial_job", "health",
)  # fmt: skip

#: MFU is a headline only when its FLOP model covers at least this share of GPU time
MIN_MODELLED_PCTG = 50.0

IDLE_CAUSES = {
    "host_wait": "waiting for the host to launch work",
    "kernel_wait": "launch overhead between kernels",
    # no stream busy, the work launched: held by what the trace does not show (idle.queued_waits)
    "other": "with launched work waiting, held by something the trace does not show",
}


def _row(kind, finding, value=np.nan, unit="", step_pctg=np.nan, section="", rank=None) -> dict:
    return {
        "kind": kind, "rank": rank, "finding": finding, "value": float(value), "unit": unit,
        "step_pctg": float(step_pctg), "section": section,
    }  # fmt: skip


def step_anomalies(scored: pd.DataFrame | None, periods: pd.DataFrame | None) -> dict | None:
    """Anomalous steps (``get_step_anomalies``): how many, their excess as a share of the run's
    step time, the largest, and the period they recur with (``get_step_periodicity``)."""
    if scored is None or not scored["anomalous"].any():
        return None
    odd = scored[scored["anomalous"]]
    excess = (odd["step_time"] - odd["typical"]).clip(lower=0)
    share = 100.0 * float(excess.sum()) / float(scored["step_time"].sum())
    worst = odd.loc[excess.idxmax()]
    text = (
        f"{len(odd)} of {len(scored)} steps (rank x step) are anomalous, {fmt_us(excess.mean())}"
        f" longer than typical on average ({fmt_pct(share)} of all step time); the largest:"
        f" rank {int(worst['rank'])} step {int(worst['step'])}, {worst['cause']}"
    )
    if int(worst["origin_rank"]) not in (-1, int(worst["rank"])):
        text += f", waiting for rank {int(worst['origin_rank'])}"
    for row in (periods if periods is not None else pd.DataFrame()).head(2).itertuples():
        text += (
            f"; rank {row.rank} every {row.period} steps (step % {row.period} == {row.phase}),"
            f" {row.cause}"
        )
    return _row("step_anomalies", text, share, "%", share, section="step-anomalies")


#: the share of the GPU's span below which the steps' own busy share is said beside the span's
STEPS_COVER = 0.9


def gpu_idle(
    temporal: pd.DataFrame,
    by_cause: pd.DataFrame,
    one_time: tuple[float, str] = (0.0, ""),
    steps: pd.DataFrame | None = None,
) -> dict | None:
    """Share of the GPU span with no work on any stream (``get_temporal_breakdown``) and its
    main cause (``get_gpu_idle_by_cause``: that idle time by the event that ended each gap);
    ``one_time``: (µs of that idle time, over the ranks, while a host compiles or captures a
    graph; what it does, ``compiles (torch.compile)``: :func:`..one_time.idle_while_one_time`),
    said where it is at least a tenth of it (the findings' warmup / recompilation / recapture);
    ``steps`` (``get_step_breakdown``): where the GPU's work spans under half of the steps' time
    (HTA's triton sample: one 1.8 µs kernel in a 1.8 ms step, idle "0.0 %" of its span), the
    share of the steps' time the GPU is busy; where the steps cover under :data:`STEPS_COVER`
    of the GPU's span (start-up before them, an Nsight Systems capture's model initialization),
    that share too: the findings price the steps."""
    busy = temporal.dropna(subset=["idle_time_pctg"])
    if busy.empty:
        return None
    mean = float(busy["idle_time_pctg"].mean())
    worst = busy.loc[busy["idle_time_pctg"].idxmax()]
    text = f"The GPU is idle {fmt_pct(mean)} of the time from its first to its last work"
    if len(busy) > 1:
        text += f" (mean of {len(busy)} ranks; rank {int(worst['rank'])}: "
        text += f"{fmt_pct(worst['idle_time_pctg'])})"
    causes = by_cause.groupby("idle_category", sort=False)["idle_time"].sum()
    if causes.sum() > 0:
        cause = str(causes.idxmax())
        share = 100.0 * causes[cause] / causes.sum()
        text += f", mostly {IDLE_CAUSES.get(cause, cause)} ({cause}: {fmt_pct(share)} of it)"
    if steps is not None and len(steps) and steps["step_time"].sum() > 0:
        total = float(steps["step_time"].sum())
        span = float(steps["gpu_span"].sum()) / total
        if span < 0.5:
            text += (
                f"; in the steps, the GPU's work spans {fmt_pct(100.0 * span)} of their time"
                " and the GPU is busy"
                f" {fmt_pct(min(100.0, 100.0 * float(steps['gpu_busy'].sum()) / total))} of it"
            )
        elif "kernel_time(us)" in busy and total < STEPS_COVER * busy["kernel_time(us)"].sum():
            cover = 100.0 * total / float(busy["kernel_time(us)"].sum())
            text += (
                f"; the steps cover {fmt_pct(cover)} of that time, and in them the GPU is busy"
                f" {fmt_pct(min(100.0, 100.0 * float(steps['gpu_busy'].sum()) / total))}"
            )
    idle_us = float(busy["idle_time(us)"].sum()) if "idle_time(us)" in busy else 0.0
    if idle_us > 0 and one_time[0] >= 0.1 * idle_us:
        text += (
            f"; {fmt_pct(min(100.0, 100.0 * one_time[0] / idle_us))} of the idle time is while"
            f" the host {one_time[1]}: see the findings' warmup, recompilation or recapture"
        )
    return _row("gpu_idle", text, mean, "%", mean, "idle")


def straggler(report, step_us: float) -> dict | None:
    """The rank the others wait for at collectives (``get_straggler_report``), or what was
    tested when none is; ``None`` with fewer than two ranks at matched collectives."""
    if len(report.ranks) < 2:
        return None
    if not report.stragglers:
        top = report.ranks.iloc[0]
        return _row("straggler", f"No straggler: {report.rule}.", top["lateness_us"], "µs",
                    section="cross-rank")  # fmt: skip
    rank = report.stragglers[0]
    row = report.ranks.set_index("rank").loc[rank]
    late = float(row["lateness_us"])
    pctg = 100.0 * late / step_us if step_us > 0 else np.nan
    share = f"{fmt_pct(pctg)} of the {fmt_us(step_us)} step"
    if pctg > 100:  # no share of a step: its step N is not the others' iteration, or its clock
        pctg, share = np.nan, (
            f"more than the {fmt_us(step_us)} step, which one iteration cannot be: the ranks'"
            " step N is not the same iteration, or their clocks are apart"
        )  # fmt: skip
    text = (
        f"Rank {rank} reaches its collectives {fmt_us(late)} per step after the others"
        f" ({share}), last at"
        f" {int(row['last_arrivals'])} of {int(row['collectives'])} collectives holding"
        f" {fmt_pct(row['wait_share_pctg'])} of the waiting; each other rank waits"
        f" {fmt_us(row['wait_caused_us'])} per step for it"
    )
    text += _cause_clause(report, rank)
    if len(report.stragglers) > 1:
        text += f"; also late: ranks {', '.join(map(str, report.stragglers[1:]))}"
    return _row("straggler", text, late, "µs", pctg, "cross-rank", rank)


def pipeline_stage(report, step_us: float) -> dict | None:
    """The pipeline's slowest stage (``get_straggler_report().slow_stage``), when it is named and
    is no straggler at the collectives (whose row says it)."""
    rank = getattr(report, "slow_stage", None)
    if rank is None or rank in report.stragglers:
        return None
    row = report.stages.set_index("rank").loc[rank]
    excess = float(row["excess_us"])
    pctg = min(100.0, 100.0 * excess / step_us) if step_us > 0 else np.nan  # one rank, mean step
    text = (
        f"Rank {rank} is the pipeline's slowest stage: it works {fmt_us(row['work_us'])} per"
        f" step outside communication, {fmt_us(excess)} more than the"
        f" median other stage ({fmt_pct(pctg)} of the {fmt_us(step_us)} step); the other stages"
        " wait for it"
    )
    text += _cause_clause(report, rank)
    return _row("pipeline_stage", text, excess, "µs", pctg, "cross-rank", rank)


def _cause_clause(report, rank: int) -> str:
    """`` (cause: host-bound, in 'data-loading')`` of the straggler report's rank, or ``""``."""
    cause, region = cause_of(report.causes, rank)
    return f" (cause: {cause}" + (f", in '{region}')" if region else ")") if cause else ""


def exposed_communication(
    steps: pd.DataFrame, wait_suffered: pd.Series | None = None
) -> dict | None:
    """Communication not under computation per step (``get_step_breakdown``: communication
    minus the part overlapped by compute), mean over ranks and steps; with ``wait_suffered``
    (the straggler report's per rank, µs per step), how much of it can be waiting for the last
    rank to arrive (their mean over the ranks, at most the exposed time)."""
    if steps.empty or steps["communication"].sum() <= 0:
        return None
    exposed = steps["communication"] - steps["comm_overlapped"]
    mean, step = float(exposed.mean()), float(steps["step_time"].mean())
    pctg = 100.0 * mean / step if step > 0 else np.nan
    hidden = 100.0 * steps["comm_overlapped"].sum() / steps["communication"].sum()
    worst = steps.loc[exposed.idxmax()]
    waiting = 0.0
    if wait_suffered is not None and len(wait_suffered):
        waiting = min(float(wait_suffered.sum()) / steps["rank"].nunique(), mean)
    waited = (
        f", up to {fmt_us(waiting)} of it waiting for the last rank to arrive"
        if waiting >= 0.01 * mean
        else ""
    )
    text = (
        f"Communication not hidden by computation: {fmt_us(mean)} per step ({fmt_pct(pctg)} of"
        f" the step){waited}; {fmt_pct(hidden)} of communication time overlaps compute"
    )
    if steps["rank"].nunique() > 1:
        text += f" (most exposed: rank {int(worst['rank'])}, step {int(worst['step'])})"
    return _row("exposed_communication", text, mean, "µs", pctg, "overlap")


#: what the operator summary's rows of GPU work no operator owns hold
UNOWNED = {
    "[graph replay]": "CUDA / HIP graph replay mapped to no operator",
    "[no operator]": "launched outside any operator",
}


def top_operator(operators: pd.DataFrame | None) -> dict | None:
    """The operator with the most GPU time of its own (``get_operator_summary``), and the GPU
    work no operator owns where it is more (graph replays mapped to none)."""
    if operators is None:
        return None
    named = operators[~operators["name"].str.startswith("[") & (operators["calls"] > 0)]
    if named.empty or named["device_self_sum(us)"].max() <= 0:
        return None
    top = named.loc[named["device_self_sum(us)"].idxmax()]
    name, gpu_us = _short(str(top["name"])), top["device_self_sum(us)"]
    if _is_communication(str(top["name"])):  # a wrapper whose GPU time is its collectives'
        name += " (collective communication kernels)"
    unowned = operators[operators["name"].isin(list(UNOWNED))]
    more = "".join(
        f"; {fmt_pct(pctg)} is {UNOWNED[label]}"
        for label, us, pctg in unowned[["name", "device_self_sum(us)", "device_self_pctg"]].values
        if us > gpu_us
    )
    text = (
        f"Top operator by GPU time: {name}, {fmt_us(gpu_us)}"
        f" ({fmt_pct(top['device_self_pctg'])} of GPU time{more}) in {int(top['calls']):,} call(s)"
    )
    return _row("top_operator", text, top["device_self_sum(us)"], "µs", section="operators")


def _is_communication(name: str) -> bool:
    """Whether an operator is the profiler's or c10d's wrapper around a collective."""
    return name == PARAM_COMMS_NAME or name.startswith("c10d::") or bool(CPU_COLLECTIVE.match(name))


def mfu(table: pd.DataFrame | None, device_names: list[str], hint: str = "") -> dict | None:
    """Model FLOPs utilization (``get_mfu``), or why it is unknown and what to pass (``hint``:
    what the kernel names say of the device, e.g. ``"sm80 or newer"``)."""
    if table is None or table.empty or table["achieved_tflops"].isna().all():
        return _row("mfu", "MFU unknown: no operator with input shapes and a FLOP model ran GPU"
                    " work (record with record_shapes=True)", section="operators")  # fmt: skip
    replayed = _graph_replay_note(table)
    if table["mfu_pctg"].isna().all() and (table["device"] != "unknown").all():
        return _row(
            "mfu",
            "MFU unknown: no matrix product, convolution or attention with input shapes ran"
            f" GPU work{replayed}",
            section="operators",
        )
    if table["mfu_pctg"].isna().all():
        named = ", ".join(f"'{n}'" for n in device_names[:3])
        said = f" (its kernel names say {hint})" if hint else ""
        return _row(
            "mfu",
            f"MFU unknown: the trace does not name a GPU of the peak table{said}; pass device="
            f" to get_mfu() (one of {named}, ...: hta_lite.analyses.operators.DEVICES)",
            section="operators",
        )
    known = table.dropna(subset=["mfu_pctg"])
    mean = float(known["mfu_pctg"].mean())
    coverage = float(known["modelled_gpu_pctg"].mean())
    if not coverage >= MIN_MODELLED_PCTG:  # a headline number must describe most of the GPU
        return _row(
            "mfu",
            f"MFU not shown: the FLOP model covers {fmt_pct(coverage)} of GPU time (under"
            f" {MIN_MODELLED_PCTG:g} %), so a share of the peak would describe little of the"
            f" run ({known['achieved_tflops'].mean():.1f} TFLOP/s in the modelled part;"
            " get_mfu() has the numbers)",
            section="operators",
        )
    if known["above_peak"].any():
        return _row(
            "mfu",
            f"MFU {fmt_pct(mean)} is above 100 %, which cannot be: the device's peak"
            f" ({known['device'].iloc[0]}) or the FLOP model is wrong (health: above_peak)",
            mean, "%", section="operators",
        )  # fmt: skip
    text = (
        f"MFU {fmt_pct(mean)}: {known['achieved_tflops'].mean():.1f} TFLOP/s of"
        f" {known['peak_tflops'].iloc[0]:.0f} ({known['precision'].iloc[0]}, "
        f"{known['device'].iloc[0]}); the FLOP model covers"
        f" {fmt_pct(known['modelled_gpu_pctg'].mean())} of GPU time{replayed}"
    )
    return _row("mfu", text, mean, "%", section="operators")


def _graph_replay_note(table: pd.DataFrame) -> str:
    """What the MFU cannot see of CUDA-graph replays mapped to no operator ("" when none)."""
    share = float(table["graph_replay_pctg"].mean()) if "graph_replay_pctg" in table else 0.0
    if not share > 0:
        return ""
    return (
        f"; {fmt_pct(share)} of GPU time is CUDA / HIP graph replay mapped to no operator (pass"
        " graph_capture= a trace of its capture or of an eager run)"
    )


def memory_peak(peaks: pd.DataFrame | None, capacity: Callable[[int, str], float],
                leaks: pd.DataFrame | None = None) -> dict:  # fmt: skip
    """The highest allocated peak (GPU first) against its device's ``capacity`` (NaN unknown)
    and the median rank's, and the largest leak (``leaks``); with no peak, why."""
    if peaks is None or peaks.empty:
        why = peaks.attrs.get("why") if peaks is not None else None
        reason = why or "profile with torch.profiler.profile(profile_memory=True)"
        return _row("memory_peak", f"Memory: {reason}", section="memory")
    gpu = peaks[peaks["device"].astype(str) != "cpu"]
    chosen = gpu if len(gpu) else peaks
    top = chosen.loc[chosen["peak_allocated"].idxmax()]
    rank, device = int(top["rank"]), str(top["device"])
    total = capacity(rank, device)
    text = f"Memory peak: {fmt_bytes(top['peak_allocated'])} allocated on rank {rank} {device}"
    if np.isfinite(total) and total > 0:
        text += f" ({fmt_pct(100.0 * top['peak_allocated'] / total)} of {fmt_bytes(total)})"
    text += imbalance_clause(chosen, rank, device)
    if np.isfinite(top["peak_reserved"]):
        text += f", {fmt_bytes(top['peak_reserved'])} reserved"
    if top["operator"]:
        text += f"; reached in {_short(str(top['operator']))}"
    if top["step"] >= 0:
        text += f" (step {int(top['step'])})"
    text += leak_clause(leaks) if leaks is not None else ""
    return _row("memory_peak", text, top["peak_allocated"], "bytes", section="memory", rank=rank)


def partial_job(loaded: list[int], world_size: int) -> dict | None:
    """A job of which not every rank is loaded (``world_size`` from ``distributedInfo``, -1 when
    not recorded): what that bounds."""
    if world_size <= len(loaded):
        return None
    return _row(
        "partial_job",
        f"Only {len(loaded)} of the job's {world_size} ranks loaded: collective transfer times"
        " include waiting for the absent ranks (upper bounds; bus bandwidths are lower bounds),"
        " and waits and late ranks are among the loaded ranks only",
        len(loaded),
        "ranks",
        section="collectives",
    )


def health(table: pd.DataFrame) -> dict:
    """What the loader skipped, clamped or left out (``health()``): warnings first."""
    problems = table[table["severity"].isin(["warning", "error"])]
    excluded = table[table["severity"] == "excluded"]
    parts = []
    if len(problems):
        codes = problems.groupby("code", sort=False)["count"].sum()
        listed = ", ".join(f"{c} ({n:,})" for c, n in codes.head(3).items())
        parts.append(
            f"{len(codes)} kind(s) of problem: {listed}" + (", ..." if len(codes) > 3 else "")
        )
    last = excluded[excluded["code"].isin(["gpu_in_last_step", "cpu_in_last_step"])]
    if len(last):
        counts = last.groupby("code")["count"].sum()
        parts.append(
            f"{int(counts.get('gpu_in_last_step', 0)):,} GPU and"
            f" {int(counts.get('cpu_in_last_step', 0)):,} CPU events of the last step left out, as"
            " HTA leaves out the last ProfilerStep (include_last_profiler_step=True keeps them)"
        )
    text = "Trace health: " + (
        "; ".join(parts) if parts else "nothing skipped, clamped or left out"
    )
    return _row("health", text, len(problems), "problems", section="health")


def key_findings(rows: list[dict | None]) -> pd.DataFrame:
    """The findings table (module docstring) from the rows of the kinds above."""
    table = pd.DataFrame([r for r in rows if r is not None], columns=COLUMNS)
    table["rank"] = table["rank"].astype("Int64")
    order = table["kind"].map({k: i for i, k in enumerate(KINDS)})
    timed = table["step_pctg"].notna()
    table = table.assign(_timed=~timed, _pctg=-table["step_pctg"].fillna(0), _order=order)
    table = table.sort_values(["_timed", "_pctg", "_order"], kind="stable")
    return table[COLUMNS].reset_index(drop=True)


def _short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"
