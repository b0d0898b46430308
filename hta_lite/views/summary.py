"""The builders of the summary tables (:mod:`hta_lite.analyses.catalog` lists them): each returns
the table, or a sentence saying why the traces have none (what to record, or that the view does
not apply), which the CLI and the report print in its place."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial

import pandas as pd

from ..analyses import cupti
from ..analyses import operators as ops
from ..analyses.catalog import VIEWS
from ..analyses.critical_path import first_step
from ..analyses.operators.roofline import mfu_why
from ..errors import MissingDataError
from ..facade.missing import need, no_gpu_work, why
from .steps_cli import anomaly_columns, unscored


def top_kernels(analysis) -> pd.DataFrame | str:
    return no_gpu_work(analysis) or top_kernel_rows(
        analysis.get_gpu_kernel_breakdown(visualize=False)[1]
    )


def top_kernel_rows(kernel_df: pd.DataFrame) -> pd.DataFrame | str:
    """:func:`top_kernels` of ``get_gpu_kernel_breakdown()``'s table of kernels."""
    named = kernel_df[kernel_df["name"] != "others"]
    if named.empty:
        return "no GPU kernel"
    return named.sort_values("sum (us)", ascending=False).head(20).reset_index(drop=True)


def critical_path_rows(analysis) -> pd.DataFrame | str:
    """The lowest rank's first step (or whole trace) by what bounds it
    (:func:`~hta_lite.analyses.critical_path.first_step.rows`)."""
    trace = analysis.trace(analysis.ranks[0])
    return first_step.rows(trace, first_step.first_step_path(trace))


def cupti_by_operator(analysis) -> pd.DataFrame | None:
    if not any(len(t.kernel_counters) for t in analysis.traces.values()):
        return None  # a rare recording mode: no line when absent
    return cupti.by_operator(analysis.get_cupti_counter_data_with_operators())


def top_operators(analysis) -> pd.DataFrame | str:
    """The 20 operators with most GPU time of their own, and the graph / no-operator rows."""
    table = analysis.get_operator_summary()
    return top_operator_rows(table, lambda: ops.nsys_operator_hint(analysis.traces.values()))


def top_operator_rows(table: pd.DataFrame, hint: Callable[[], str]) -> pd.DataFrame | str:
    """:func:`top_operators` of ``get_operator_summary()``'s table (``hint()``: what an Nsight
    Systems export would need for operators)."""
    if not (table["calls"] > 0).any():
        said = hint()
        return "no operator launched GPU work" + (f" ({said})" if said else "")
    if not (table["device_self_sum(us)"] > 0).any():
        return "no GPU events (CPU-only traces): no operator has GPU time"
    unowned = table["name"].str.startswith("[")
    return pd.concat([table[~unowned].head(20), table[unowned]], ignore_index=True)


OPERATOR_COLUMNS = ["name", "calls", "host_self(us)", "device_self_sum(us)",
                    "device_total_sum(us)", "device_self_pctg", "cumulative_pctg"]  # fmt: skip
TARGET_COLUMNS = ["device", "name", "input_dims", "precision", "calls", "gpu_time(us)",
                  "achieved_tflops", "bound", "roof_pctg", "time_below_roof(us)"]  # fmt: skip
MFU_COLUMNS = ["rank", "step", "step_time(us)", "achieved_tflops", "precision", "peak_tflops",
               "mfu_pctg", "modelled_gpu_pctg", "graph_replay_pctg", "device"]  # fmt: skip
NO_DEVICE = (
    "the traces do not name a GPU of the peak table: pass device=... to get_operator_roofline()"
    " / get_mfu() (names: hta_lite.analyses.operators.DEVICES)"
)


def quietly(build) -> Callable:
    """A builder whose missing data (a ``MissingDataError``, or a table view's empty table
    with ``attrs["why"]``) becomes its sentence."""

    def run(analysis):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return need(build(analysis))
            except MissingDataError as exc:
                return exc.problem

    return run


def collectives(analysis, by: str = "collective") -> pd.DataFrame | str:
    """The collective summary, or why there is none."""
    if analysis.get_collectives().calls.empty:
        return "no collective in the traces"
    return analysis.get_collective_summary(by)


def optimization_targets(analysis) -> pd.DataFrame | str:
    return target_rows(need(analysis.get_operator_roofline()))


def target_rows(roofline: pd.DataFrame) -> pd.DataFrame | str:
    """:func:`optimization_targets` of ``get_operator_roofline()``'s table."""
    if roofline["peak_tflops"].isna().all():
        return NO_DEVICE
    targets = ops.optimization_targets(roofline, 10)
    if targets.empty:  # as get_optimization_targets says it
        return f"no device peaks for {sorted(set(roofline['device']))}: pass device=..."
    return targets


def mfu_rows(analysis) -> pd.DataFrame | str:
    return mfu_table_rows(analysis.get_mfu())


def mfu_table_rows(table: pd.DataFrame) -> pd.DataFrame | str:
    """:func:`mfu_rows` of ``get_mfu()``'s table."""
    if table.empty:
        return mfu_why(table)
    return NO_DEVICE if table["mfu_pctg"].isna().all() else table


def memory_peaks(analysis) -> pd.DataFrame | str:
    """Peak allocated / reserved memory per (rank, device), or what to record."""
    return quietly(lambda a: a.get_memory_peaks())(analysis)


MEMORY_PEAK_COLUMNS = ["rank", "device", "peak_allocated", "operator", "module", "step",
                       "peak_reserved", "peak_cached"]  # fmt: skip


def leaks(analysis) -> pd.DataFrame | str:
    table = need(analysis.get_memory_leaks())
    return "no allocation made in a step stays unfreed" if table.empty else table


GRAPH_COLUMNS = ["rank", "name", "where", "kernels", "gpu_time(us)", "span(us)", "gpu_pctg",
                 "mapped_kernels", "mapped_pctg", "source"]  # fmt: skip


def graph_launches(analysis) -> pd.DataFrame | None:
    """One row per CUDA / HIP graph launch, with how much of it is mapped to operators; None
    (no section) where no graph launch replayed anything."""
    return graph_launch_rows(analysis.get_graph_launches())


def graph_launch_rows(table: pd.DataFrame) -> pd.DataFrame | None:
    """:func:`graph_launches` of ``get_graph_launches()``'s table (the batch's too)."""
    if table.empty:
        return None
    table = table.copy()  # its note is the summary's
    unmapped = table["mapped_kernels"] < table["kernels"]
    if unmapped.any():
        table.attrs["note"] = (
            f"{int(unmapped.sum())} of {len(table)} launch(es) replay GPU events no operator is"
            " mapped to ([graph replay] in the operator views, not modelled by roofline and"
            " MFU): give the trace of the graph's capture or of an eager run with"
            " --graph-capture (graph_capture= in Python)."
        )
    return table


def step_anomalies(analysis) -> pd.DataFrame | str:
    """The anomalous steps with their causes and origin ranks, or why there are none;
    ``attrs["note"]``: the periods they recur with."""
    scored = analysis.get_step_anomalies()
    return anomalous_steps(scored, lambda: analysis.get_step_periodicity())


def anomalous_steps(scored: pd.DataFrame, periods: Callable[[], pd.DataFrame]):
    """:func:`step_anomalies` of the scored steps and their periods (``periods()``)."""
    reason = unscored(scored)
    if reason:
        return reason
    odd = scored[scored["anomalous"]]
    if odd.empty:
        return f"no anomalous step among {len(scored)} (score > 3.5 against the median step)"
    table = odd[anomaly_columns(scored)].reset_index(drop=True)
    table.attrs["note"] = (
        "; ".join(
            f"rank {r.rank} every {r.period} steps at step % {r.period} == {r.phase} ({r.cause})"
            for r in periods().itertuples()
        )
        or "No period: the anomalous steps do not recur every N steps."
    )
    return table


def job_critical_path(analysis) -> pd.DataFrame | str:
    """The job path's time by rank and what bounds it, or why there is none; ``attrs["note"]``:
    its hops and problems."""
    if len(analysis.ranks) < 2:
        return "one rank loaded: the job path joins several ranks (its own path is above)"
    path = analysis.get_job_critical_path()
    return job_path_rows(path.summary(), path.hops(), path.steps(), path.problems)


def job_path_rows(summary, hops, steps, problems) -> pd.DataFrame:
    """:func:`job_critical_path` of the path's tables (``JobCriticalPath.summary()``,
    ``hops()``, ``steps()``, ``problems``)."""
    table = summary.head(12)
    by_rank = summary.groupby("rank")["share_pctg"].sum()
    note = (
        f"{len(steps)} step(s), {steps['step_us'].sum():,.0f} µs; {len(hops)} hop(s) between"
        " ranks"
        + (f"; rank {int(by_rank.idxmax())} bounds {by_rank.max():.1f} % of it" if len(table)
           else "")
    )  # fmt: skip
    if len(problems):
        reasons = ", ".join(sorted(set(problems["reason"])))
        note += f". Lower bound where: {reasons} (get_job_critical_path().problems)"
    table.attrs["note"] = note + "."
    return table


def pipeline_stages(analysis) -> pd.DataFrame | None:
    """The pipeline's stages and their work per step (no section where no rank sends or
    receives point to point); ``attrs["note"]``: the slowest stage, when one is named."""
    return stage_rows(analysis.get_pipeline_stages()) if len(analysis.ranks) > 1 else None


def stage_rows(table: pd.DataFrame) -> pd.DataFrame | None:
    """:func:`pipeline_stages` of ``get_pipeline_stages()``'s table."""
    if table.empty:
        return None
    slow = table.attrs.get("slow_stage")
    table.attrs["note"] = (
        f"rank {slow} is the slowest stage: the pipeline runs at its pace (findings:"
        " pipeline_stage)."
        if slow is not None
        else "no stage works 10 % more than the median other stage."
    )
    return table


#: the findings columns the summary shows (the evidence and method are in get_findings())
FINDING_COLUMNS = [
    "kind", "rank", "where", "saving_ms_per_step", "saving_pctg", "saving_low_ms",
    "saving_high_ms", "cumulative_ms", "advice",
]  # fmt: skip


def findings(analysis, snapshot=None) -> pd.DataFrame:
    """The ranked findings (ms per step, rounded), their advice (with those of a memory
    snapshot of the run, when given)."""
    return rounded_findings(need(analysis.get_findings(snapshot=snapshot)))


def rounded_findings(table: pd.DataFrame) -> pd.DataFrame:
    """The findings as the summary shows them: one rounding, the one `hta-lite findings`
    prints (ms to 2 decimals, % to 1), and a note on how the savings add up."""
    timed = [c for c in FINDING_COLUMNS if c.startswith(("saving", "cumulative"))]
    table = table.assign(**{c: table[c].round(1 if c.endswith("pctg") else 2) for c in timed})
    table.attrs["note"] = (
        "Each saving replays the job's critical path with the fix made; cumulative_ms: this"
        " fix and those above it made together (overlaps discounted)."
        if len(table)
        else "No fix would save 0.5 % of the step or more."
    )
    return table


def collective_problems(analysis) -> pd.DataFrame | None:
    """The collectives not matched across ranks, or partial (None when all matched)."""
    problems = analysis.get_collectives().problems
    return None if problems.empty else problems


def step_breakdown(analysis) -> pd.DataFrame:
    """The per-step breakdown; where no rank ran GPU work, its steps' host columns only (the GPU
    columns would read 0 and NaN), with a note that says so."""
    return host_columns(analysis.get_step_breakdown(visualize=False), no_gpu_work(analysis))


def host_columns(table: pd.DataFrame, reason: str | None) -> pd.DataFrame:
    """:func:`step_breakdown` of ``get_step_breakdown()``'s table and why no rank ran GPU work
    (None where one did)."""
    if reason and len(table):
        table = table[["rank", "step", "step_time", "cpu_time"]]
        table.attrs["note"] = f"GPU columns left out: {reason}."
    return table


def key_findings(analysis) -> pd.DataFrame:
    return analysis.get_key_findings()


def temporal_breakdown(analysis) -> pd.DataFrame:
    return analysis.get_temporal_breakdown(visualize=False)


def gpu_idle_by_cause(analysis) -> pd.DataFrame:
    return analysis.get_gpu_idle_by_cause()


def comm_comp_overlap(analysis) -> pd.DataFrame:
    return analysis.get_comm_comp_overlap(visualize=False)


def idle_time_breakdown(analysis) -> pd.DataFrame:
    return analysis.get_idle_time_breakdown(visualize=False)[0]


def kernel_type_breakdown(analysis) -> pd.DataFrame:
    return analysis.get_gpu_kernel_breakdown(visualize=False)[0]


def collectives_by_rank(analysis) -> pd.DataFrame | str:
    return collectives(analysis, "rank")


def summary_tables(analysis, snapshot=None) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    """``({file stem: table}, {file stem: why it is absent})`` for every view, then
    ``health_summary`` and ``health``. A table absent without a reason (``None``) is one that
    rarely applies (CUPTI counters, unmatched collectives): it is simply left out. With
    ``snapshot`` (a :class:`~hta_lite.MemorySnapshot` of the run): its findings among the
    findings, and its tables (:data:`~hta_lite.analyses.catalog.SNAPSHOT_VIEWS`)."""
    builders = [(view.key, globals()[view.builder]) for view in VIEWS]
    if snapshot is not None:
        builders = [(k, partial(findings, snapshot=snapshot) if k == "findings" else b)
                    for k, b in builders]  # fmt: skip
    tables, absent = {}, {}
    for key, build in builders:
        place(tables, absent, key, quietly(build)(analysis))
    add_snapshot_views(tables, absent, snapshot)
    tables["health_summary"] = analysis.health_summary()
    tables["health"] = analysis.health()
    return tables, absent


def place(tables: dict, absent: dict, key: str, table) -> None:
    """A view's ``table`` among the ``tables`` shown, or its sentence (a string, or the
    ``attrs["why"]`` of a table with no rows) among the ``absent``; None: left out."""
    if isinstance(table, pd.DataFrame) and why(table):  # no rows, and why
        table = why(table)
    if isinstance(table, str):
        absent[key] = table
    elif table is not None:
        tables[key] = table


def add_snapshot_views(tables: dict, absent: dict, snapshot) -> None:
    """The views of a CUDA memory snapshot of the run (:data:`~hta_lite.analyses.catalog.
    SNAPSHOT_VIEWS`), placed as :func:`place` places a view; nothing without one."""
    if snapshot is not None:
        place(tables, absent, "snapshot_summary", quietly(lambda _: snapshot.summary())(None))
        place(tables, absent, "snapshot_oom", quietly(lambda _: snapshot.oom())(None))


#: the columns the CLI's text and the report show of a summary table (its CSV, JSON and Parquet
#: carry every column the API returns)
SHOWN = {
    "findings": FINDING_COLUMNS,
    "key_findings": ["kind", "rank", "finding"],
    "operators": OPERATOR_COLUMNS,
    "optimization_targets": TARGET_COLUMNS,
    "mfu": MFU_COLUMNS,
    "memory_peaks": MEMORY_PEAK_COLUMNS,
    "graph_launches": GRAPH_COLUMNS,
}


def shown(key: str, table):
    """The columns of ``table`` (summary table ``key``) the text and the report show; a reason
    (a string) or None as it is."""
    if table is None or isinstance(table, str) or key not in SHOWN:
        return table
    out = table[[c for c in SHOWN[key] if c in table.columns]]
    out.attrs = dict(table.attrs)
    return out
