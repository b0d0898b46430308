"""The key findings of a folder summarized by :func:`.batch.summarize_folder`: the rows of
``TraceAnalysis.get_key_findings()`` (:mod:`hta_lite.analyses.key_findings`) from the batch's
tables.

The cross-rank rows (the straggler, the slowest pipeline stage, exposed communication with the
waits at collectives, the anomalous steps) are made where the straggler report and the matched
collectives are (:func:`cross_rank_rows`); the others from the tables of all ranks
(:func:`key_findings`)."""

from __future__ import annotations

import pandas as pd

from ..analyses import key_findings as kf
from ..analyses.lateness import rank_skew
from ..analyses.memory.per_rank import device_memory
from ..analyses.operators import DEVICES
from ..analyses.operators.summaries import across_ranks
from ..analyses.stragglers import skew_table
from ..missing_data import why


def cross_rank_rows(
    report, calls: pd.DataFrame, partials: dict, scored: pd.DataFrame, periods, loaded: int
) -> list[dict]:
    """The key findings' rows of the straggler ``report`` and the measured collective
    ``calls`` (the waits each rank suffered) where more than one rank is ``loaded``, of
    exposed communication, and of the scored steps with their ``periods``."""
    steps = partials["step_breakdown"]
    step_us = float(steps["step_time"].mean()) if len(steps) else float("nan")
    rows, waits = [], None
    if loaded > 1:
        rows += [kf.straggler(report, step_us), kf.pipeline_stage(report, step_us)]
        waits = rank_skew(skew_table(calls[calls["step"] >= 0]))["wait_suffered_us"]
    rows.append(kf.exposed_communication(steps, waits))
    if len(scored):
        rows.append(kf.step_anomalies(scored, periods))
    return rows


def key_findings(summary: dict, stubs: dict, cross: list, architecture: str) -> pd.DataFrame:
    """``get_key_findings()``'s table of the batch: the ``cross`` rows (:func:`cross_rank_rows`)
    and those of the tables of all ranks in ``summary``; ``stubs``: ``{rank: the rank's trace
    without its tables}`` (devices, world size); ``architecture``: what the first GPU rank's
    kernel names say of its device."""
    one_time = summary["one_time_idle"]
    doing = one_time.sort_values(["idle_ns", "doing"], ascending=False)
    doing = doing.loc[doing["idle_ns"] > 0, "doing"]
    peaks, sites = summary["memory_peaks"], summary["memory_leak_sites"]
    sizes = [s.meta.world_size for s in stubs.values() if s.meta.world_size is not None]
    top = kf.top_operator(across_ranks(summary["operator_summary"]))
    mfu = None if why(summary["mfu"]) else summary["mfu"]
    rows = [
        kf.gpu_idle(
            summary["temporal_breakdown"],
            summary["gpu_idle_by_cause"],
            (float(one_time["idle_ns"].sum()) / 1e3, str(doing.iloc[0]) if len(doing) else ""),
            summary["step_breakdown"],
        ),
        *cross,
        top,
        kf.mfu(mfu, list(DEVICES), architecture) if top else None,
        kf.memory_peak(
            peaks,
            lambda rank, device: device_memory(stubs[rank], device),
            None if why(sites) else sites,
        ),
        kf.partial_job(sorted(stubs), max(sizes or [-1])),
        kf.health(summary["health"]),
    ]
    return kf.key_findings(rows)
