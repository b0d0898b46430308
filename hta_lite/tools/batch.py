"""Summaries of large folders with bounded memory, on one machine or a Dask cluster.

Each rank is parsed (or read from the cache) and summarized where it is loaded; only the small
per-rank summary tables travel back, so memory does not grow with the number of ranks. The
lowest rank (and the rank of the highest memory peak) is reopened in the caller for the views of
one rank the reports show (:mod:`.batch_one_rank`), and each rank where a finding reads it
(:mod:`.batch_findings`); the executors are :mod:`.batch_jobs`.

Executors: ``"serial"`` (this process), ``"process"`` (local process pool, the default), ``"dask"``
(the current ``dask.distributed`` client, or a new local one) or a ``dask.distributed.Client``.
All give the same tables.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..analyses import job_path, step_anomalies, stragglers, timers
from ..analyses.catalog import NOT_IN_BATCH, VIEWS
from ..analyses.collectives import summaries
from ..analyses.collectives.matching import match
from ..analyses.findings import COLUMNS
from ..analyses.memory.operators import across_ranks
from ..analyses.memory.per_rank import TABLES as MEMORY_TABLES
from ..analyses.memory.per_rank import why_none
from ..analyses.memory.timeline import with_median_rank
from ..analyses.operators.graph_launches import NO_GRAPH_LAUNCH
from ..analyses.pipeline_stages import stages_view
from ..analyses.step_periodicity import periodicity
from ..errors import MissingDataError, TraceError
from ..load import cache
from ..load.loader import LoadOptions, collect, discover, load_part, load_parts
from ..load.ranks import assign_ranks, select_ranks
from ..load.series import join_windows
from ..missing_data import NO_STEPS, missing, no_gpu_work_in
from .batch_findings import Reopened, folder_findings
from .batch_health import (
    clock_offsets,
    count_across,
    count_matching,
    health_table,
    number_steps_alike,
)
from .batch_jobs import run_jobs
from .batch_key_findings import cross_rank_rows, key_findings
from .batch_one_rank import cupti_across, one_rank_tables, peak_memory_tables
from .batch_operators import architecture, operator_views
from .batch_worker import graph_captures, summarize_rank

SUMMARY_TABLES = (
    "temporal_breakdown", "comm_comp_overlap", "idle_time_breakdown", "gpu_idle_by_cause",
    "kernel_type_breakdown", "kernel_breakdown", "queue_length_summary", "memory_bw_summary",
    "step_breakdown", "health_summary", "operator_summary", "roofline_sums", "mfu_rows",
    "module_rows", "rank_facts", "collective_calls", "host_wait", "stage_work", "warmup_delay",
    "one_time_idle", "annotation_timers", "step_anomalies", "job_path_segments",
    "job_path_events", "job_path_gaps", "graph_launches", "graph_kernels", "cupti_counters",
    *MEMORY_TABLES,
)  # fmt: skip
#: the GPU views: without the rows of ranks that ran no GPU work, as TraceAnalysis gives them
GPU_TABLES = ("temporal_breakdown", "comm_comp_overlap", "idle_time_breakdown",
              "gpu_idle_by_cause", "kernel_type_breakdown", "kernel_breakdown",
              "queue_length_summary", "memory_bw_summary")  # fmt: skip
#: the GPU views whose ``attrs["why"]`` names the CPU-only ranks left out even beside rows
NAMES_CPU_ONLY = ("temporal_breakdown", "comm_comp_overlap", "gpu_idle_by_cause")
#: tables across ranks, computed in the driver from the per-rank partials above (roofline, MFU,
#: time by module: :mod:`.batch_operators`; ``collective_calls``, matched into
#: ``collective_instances`` and ``matched_calls``, each call with its instance and wait;
#: ``step_breakdown``, ``host_wait``, ``annotation_timers``; the scored steps of each rank, whose
#: origin ranks the matched collectives give; the job critical path from each rank's local paths
#: between its collectives, ``job_path_segments`` / ``_events`` / ``_gaps``; the findings ranked
#: by the step time a fix saves, :mod:`.batch_findings`). ``rank_lateness.attrs["report"]``: the
#: straggler report's text.
CROSS_RANK_TABLES = (
    "collectives", "collective_instances", "matched_calls", "collectives_by_rank",
    "collective_problems", "rank_lateness", "straggler_causes", "pipeline_stages", "timers",
    "step_anomalies", "step_periodicity", "job_step_anomalies", "job_critical_path",
    "job_critical_path_summary", "job_critical_path_hops", "job_critical_path_steps",
    "job_critical_path_problems", "findings", "health", "key_findings", "operator_roofline", "mfu",
    "operator_modules",
)  # fmt: skip


def _summarize_job(job: tuple[Path], options: LoadOptions, graph_capture: str | None):
    """Load + summarize every rank of one file where it is loaded (one, or several: a fused
    trace, an Nsight Systems export of several processes); returns ``([stub, ...], [tables,
    ...])`` or ``(error, None)``. A stub is the rank trace emptied of its tables (rank
    assignment needs only its rank, path, part and health); the tables stay in the worker."""
    result = load_parts(job[0], None, options.steps, options.cache_root)
    if isinstance(result, TraceError):
        return result, None
    captures = graph_captures(graph_capture, options)
    return [t.stub() for t in result], [summarize_rank(t, captures) for t in result]


def _summarize_series(
    job: tuple[list[tuple[str, int]], int], options: LoadOptions, graph_capture: str | None
):
    """Load the (file, part) places of one rank (its profiled windows), join them into one
    series and summarize it: ``(stub, tables)`` or ``(error, None)``."""
    places, rank = job
    parts = []
    for path, part in places:
        result = load_part(path, part, rank, options.steps, options.cache_root)
        if isinstance(result, TraceError):
            return result, None
        parts.append(result)
    try:
        trace = join_windows(parts)
    except TraceError as exc:
        return exc, None
    return trace.stub(), summarize_rank(trace, graph_captures(graph_capture, options))


def _join_series(
    ranked: dict, by_path: dict, executor: Any, options: LoadOptions, graph_capture
) -> dict:
    """``{rank: stub}`` from ``{rank: [stubs]}``: a rank of several files (profiled windows) is
    summarized again as one series where it is loaded (from the cache when it is on) and its
    tables replace the per-file ones in ``by_path``. A series that cannot be joined raises."""
    series = [
        ([(stub.path, stub.part) for stub in parts], rank)
        for rank, parts in ranked.items()
        if len(parts) > 1
    ]
    joined = run_jobs(
        functools.partial(_summarize_series, options=options, graph_capture=graph_capture),
        series,
        executor,
        options,
    )
    out = {rank: parts[0] for rank, parts in ranked.items()}
    for (_, rank), (stub, tables) in zip(series, joined):
        if isinstance(stub, TraceError):
            raise stub
        by_path[stub.path, stub.part] = tables
        out[rank] = stub
    return out


def summarize_folder(
    trace_dir: str | Path,
    executor: Any = "process",
    options: LoadOptions | None = None,
    findings: bool = True,
    snapshot=None,
    ranks: Iterable[int] | None = None,
    graph_capture: str | Path | None = None,
    **option_kwargs,
) -> Summary:
    """Summary tables of every rank of ``trace_dir`` (``SUMMARY_TABLES``), ranks in order.

    Args:
        trace_dir: folder with one trace file per rank.
        executor: ``"process"`` (default), ``"serial"``, ``"dask"`` or a
            ``dask.distributed.Client``.
        options: :class:`hta_lite.LoadOptions` (``max_workers``, ``on_error``, ``cache``,
            ``include_last_profiler_step``, ``progress``; ``parallel`` is not used), or the
            same as keyword arguments.
        findings: also the ``findings`` table (:mod:`.batch_findings`: the ranks reopened from
            the cache in this process, about 0.1 s a real-size rank, as the lowest rank is for
            its own views, :mod:`.batch_one_rank`; with the cache off, or ``False``, an empty
            table whose ``attrs["why"]`` says why).
        snapshot: a CUDA memory snapshot of the run (a :class:`hta_lite.MemorySnapshot`): its
            findings join the memory findings, as ``get_findings(snapshot=...)``'s, and
            ``Summary.snapshot`` keeps it for the views and the report.
        ranks: the ranks to summarize (default: all), as ``hta-lite summarize --ranks``: every
            file is still read (a file's rank is known once it is), the views and the
            cross-rank tables are of these ranks alone. A rank not in the folder (or none) raises
            :class:`hta_lite.errors.RankNotFoundError`.
        graph_capture: a trace file or folder of the run's graph captures or eager runs, as
            ``TraceAnalysis(graph_capture=...)``: each rank's graph replays are mapped against
            those of its rank (else all), in its worker, which loads them once (from the
            cache, which this process fills first; a capture that cannot be loaded raises
            here, naming it).

    Returns:
        :class:`Summary`: a dict ``{table name: DataFrame}`` (all ranks, a ``rank`` column each;
        plus ``CROSS_RANK_TABLES``: collectives matched across ranks from the per-rank
        ``collective_calls``, by collective, by rank, and what could not be matched; plus the
        lowest rank's ``batch_one_rank.TABLES``) whose
        ``skipped_files`` lists ``{path: problem}`` of files not loaded with ``on_error="skip"``
        / ``"warn"``, and ``absent`` the summary's views it does not give, and why.
    """
    options = options or LoadOptions(**option_kwargs)
    options.check_settings()
    jobs = [(path,) for path in discover(trace_dir)]
    graph_capture = None if graph_capture is None else str(graph_capture)
    graph_captures(graph_capture, options)  # its errors here, and the cache filled
    summarize_job = functools.partial(_summarize_job, options=options, graph_capture=graph_capture)
    results = run_jobs(summarize_job, jobs, executor, options)
    if options.cache_root is not None:
        cache.evict(options.cache_root)
    loaded, skipped = collect(
        [path for path, in jobs], [stubs for stubs, _ in results], options.on_error,
        where=trace_dir,
    )  # fmt: skip
    by_path = {
        (stub.path, stub.part): tables
        for stubs, per_rank in results if per_rank is not None
        for stub, tables in zip(stubs, per_rank)
    }  # fmt: skip
    assigned = select_ranks(assign_ranks(loaded, lambda msg: None, join=list), ranks, trace_dir)
    files = {rank: [(stub.path, stub.part) for stub in parts] for rank, parts in assigned.items()}
    ranked = _join_series(assigned, by_path, executor, options, graph_capture)
    graph_captures.cache_clear()
    moves = number_steps_alike(ranked, by_path)
    across = count_across(ranked, by_path)
    out = Summary(skipped_files=skipped, trace_dir=str(trace_dir), snapshot=snapshot)
    for name in SUMMARY_TABLES:
        out[name] = _all_ranks(name, ranked, by_path)
    out.update(operator_views(out, out["rank_facts"]))
    reopened = Reopened(files, options, moves)
    out.update(one_rank_tables(reopened[min(ranked)]))
    out.update(peak_memory_tables(out["memory_peaks"], reopened))
    tables, key_rows = cross_rank(
        out, ranked, reopened if findings else None,
        None if out["rank_facts"]["profiled_steps"].any() else _whole_traces(ranked, by_path),
        snapshot,
    )  # fmt: skip
    out.update(tables)
    out["health_summary"] = count_matching(
        clock_offsets(out["health_summary"], out["rank_facts"]), out["collective_problems"]
    )
    out["health"] = health_table(ranked, by_path, across, out["collective_problems"], skipped)
    out["key_findings"] = key_findings(out, ranked, key_rows, architecture(out["rank_facts"]))
    return out


def _all_ranks(name: str, ranked: dict, by_path: dict) -> pd.DataFrame:
    """One summary table of all ranks, each part's ``rank`` the one the rank was assigned, as
    ``TraceAnalysis`` gives it: a GPU view without the rows of the ranks that ran no GPU work
    (``attrs["why"]`` names them where it has no rows, or in :data:`NAMES_CPU_ONLY`); a
    memory table with the rows of the ranks with memory events, and where no rank has any, an
    empty table whose ``attrs["why"]`` says what to record."""
    tables = {rank: by_path[stub.path, stub.part] for rank, stub in ranked.items()}
    parts = [
        t[name].assign(rank=rank) if "rank" in t[name].columns else t[name]
        for rank, t in tables.items()
    ]
    if name in GPU_TABLES:
        cpu_only = [r for r, t in tables.items() if not t["health_summary"]["gpu_events"].iat[0]]
        gpu = [part for part, r in zip(parts, tables) if r not in cpu_only]
        table = pd.concat(gpu, ignore_index=True) if gpu else parts[0].iloc[:0].copy()
        if name == "kernel_breakdown":  # by kernel, as over all ranks at once
            table = table.sort_values(["kernel_type", "name", "rank"], ignore_index=True)
        if cpu_only and (table.empty or name in NAMES_CPU_ONLY):
            table.attrs["why"] = no_gpu_work_in(cpu_only)
        return table
    if name == "cupti_counters":
        return cupti_across(parts)
    if name not in MEMORY_TABLES:  # empty parts would make typed columns object
        table = pd.concat([part for part in parts if len(part)] or parts[:1], ignore_index=True)
        if name in ("graph_launches", "graph_kernels") and table.empty:
            return missing(list(table.columns), NO_GRAPH_LAUNCH)
        if name == "annotation_timers":  # by timer, as over all ranks at once
            return table.sort_values(["name", "rank", "step"], ignore_index=True)
        if name == "step_breakdown" and all(t["steps"].empty for t in tables.values()):
            table.attrs["why"] = NO_STEPS
        return table
    if not any(len(t["memory_peaks"]) for t in tables.values()):
        return missing(list(parts[0].columns), why_none(list(ranked.values())))
    rows = [part for part in parts if len(part)]  # empty parts would make columns object
    table = pd.concat(rows or parts[:1], ignore_index=True)
    if name == "memory_leak_sites":  # most bytes first, as over all ranks at once
        table = table.sort_values("bytes_per_step", ascending=False, kind="stable")
    elif name == "memory_by_step":  # each step's peak against the median rank's
        table = with_median_rank(table)
    elif name == "memory_by_operator":  # summed by operator over the ranks
        table = across_ranks(rows or parts[:1])
    return table.reset_index(drop=True)


def _whole_traces(ranked: dict, by_path: dict) -> dict[str, pd.DataFrame]:
    """Each rank's local paths with its whole trace as one step (``segments``, ``events``,
    ``gaps``: the ranks' ``whole_trace_*`` partials), which the findings replay where no rank
    has a profiled step, as ``TraceAnalysis.get_findings`` does."""
    tables = {rank: by_path[stub.path, stub.part] for rank, stub in sorted(ranked.items())}
    out = {}
    for name in ("segments", "events", "gaps"):
        parts = [t[f"whole_trace_{name}"].assign(rank=rank) for rank, t in tables.items()]
        out[name] = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)
    return out


def cross_rank(
    partials: dict[str, pd.DataFrame], ranks, traces: Reopened | None,
    whole: dict[str, pd.DataFrame] | None = None, snapshot=None,
) -> tuple[dict[str, pd.DataFrame], list[dict]]:  # fmt: skip
    """``CROSS_RANK_TABLES`` from the per-rank partials of all ranks (concatenated): the
    collectives matched across ranks, the lateness of each rank at them, the stragglers' causes
    (as :meth:`TraceAnalysis.get_straggler_report`), Megatron's min/max timers, the job
    critical path and the findings (``traces``: the ranks reopened where a finding reads them,
    None: not asked for; a folder whose findings cannot be computed gets an empty table whose
    ``attrs["why"]`` says why; ``whole``: where no rank has a profiled step, the ranks' local
    paths of their whole traces, which the findings replay; ``snapshot``: a memory snapshot of
    the run, whose findings join them); and the key findings' cross-rank rows
    (:func:`.batch_key_findings.cross_rank_rows`)."""
    matching = match(partials["collective_calls"], ranks)
    calls = matching.measured()
    delays = {int(r): rows[["start", "end"]].to_numpy(np.int64)
              for r, rows in partials["warmup_delay"].groupby("rank")}  # fmt: skip
    skew = stragglers.skew_table(stragglers.joint_calls(calls, delays))
    report = stragglers.report(
        skew,
        partials["step_breakdown"],
        partials["host_wait"],
        lambda: partials["annotation_timers"],
        partials["stage_work"],
    )
    tidy = partials["annotation_timers"]
    scored = partials["step_anomalies"].reset_index(drop=True)
    if scored.empty:  # no rank has a step to score, as get_step_anomalies() says
        scored.attrs["why"] = NO_STEPS
    if len(scored):
        scored["anomalous"] = scored["anomalous"].astype(bool)
        scored["origin_rank"] = step_anomalies.origins(scored, matching.instances)
    steps_found = len(scored) > 0
    path = job_path.job_critical_path(
        partials["job_path_segments"], partials["job_path_events"], matching.calls,
        matching.instances, sorted(ranks), gaps=partials["job_path_gaps"],
    )  # fmt: skip
    try:
        if traces is None:
            raise MissingDataError(None, "not asked for (summarize_folder(findings=False))")
        replayed, replayed_path = partials, path
        if whole is not None:  # no ProfilerStep on any rank: each trace is one step
            replayed = {**partials, **{f"job_path_{name}": t for name, t in whole.items()}}
            replayed_path = job_path.job_critical_path(
                whole["segments"], whole["events"], matching.calls, matching.instances,
                sorted(ranks), gaps=whole["gaps"],
            )  # fmt: skip
        found = folder_findings(
            replayed, matching, replayed_path, scored, report, traces, ranks, snapshot
        )
    except MissingDataError as exc:
        found = missing(COLUMNS, exc.problem)
    periods = periodicity(scored) if steps_found else pd.DataFrame()
    key_rows = cross_rank_rows(report, calls, partials, scored, periods, len(ranks))
    return {
        "findings": found,
        "job_critical_path": path.path(),
        "job_critical_path_summary": path.summary(),
        "job_critical_path_hops": path.hops(),
        "job_critical_path_steps": path.steps(),
        "job_critical_path_problems": path.problems,
        "step_anomalies": scored,
        "step_periodicity": periods,
        "job_step_anomalies": step_anomalies.job_steps(scored) if steps_found else pd.DataFrame(),
        "collectives": summaries.by_collective(matching),
        "collective_instances": matching.instances,
        "matched_calls": matching.calls,
        "collectives_by_rank": summaries.by_rank(matching),
        "collective_problems": matching.problems,
        "rank_lateness": _with_text(report.ranks, str(report)),
        "straggler_causes": report.causes,
        "pipeline_stages": stages_view(report.stages, report.slow_stage),
        "timers": timers.timers_across_ranks(tidy).reset_index() if len(tidy) else tidy,
    }, key_rows


def _with_text(lateness: pd.DataFrame, text: str) -> pd.DataFrame:
    lateness.attrs["report"] = text  # the straggler report's paragraphs (str(StragglerReport))
    return lateness


class Summary(dict):
    """``{table name: DataFrame}`` plus ``trace_dir``, ``skipped_files`` (``{path: problem}``),
    ``snapshot`` (the ``MemorySnapshot`` given, or None) and ``absent`` (``{view: why}``: the
    views of :data:`~hta_lite.analyses.catalog.VIEWS` the batch does not give)."""

    def __init__(self, skipped_files: dict[str, str], trace_dir: str | None = None,
                 snapshot=None):  # fmt: skip
        super().__init__()
        self.skipped_files = skipped_files
        self.trace_dir = trace_dir
        self.snapshot = snapshot
        self.absent = {view.key: NOT_IN_BATCH for view in VIEWS if view.batch is None}
