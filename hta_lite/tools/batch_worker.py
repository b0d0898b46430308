"""What each worker of :func:`.batch.summarize_folder` makes of the rank it loaded: the per-rank
summary tables, and the partials the driver joins across ranks (collective calls, host wait per
step, warm-up spans, annotation timers, scored steps, the local critical path, memory tables,
the modelled operators' sums, MFU rows and module rows, graph launches, CUPTI counters, the
rank's health items)."""

from __future__ import annotations

import dataclasses
import functools
import warnings

import numpy as np
import pandas as pd

from ..analyses import (
    counters,
    idle,
    job_path,
    kernels,
    one_time,
    operators,
    overlap,
    step_anomalies,
    steps,
    temporal,
    timers,
)
from ..analyses.collectives.calls import collective_calls
from ..analyses.health import first_event_ns, health_summary
from ..analyses.memory.per_rank import rank_memory
from ..analyses.operators import graph_launches
from ..analyses.operators.graph_sources import for_rank
from ..analyses.pipeline_stages import stage_work
from ..analyses.straggler_causes import host_wait_by_step
from ..load import step_alignment
from ..load.loader import LoadOptions, load_graph_sources
from .batch_health import checks_found, health_items
from .batch_one_rank import rank_cupti_counters


@functools.lru_cache(maxsize=1)
def graph_captures(path: str | None, options: LoadOptions) -> list:
    """The traces of ``graph_capture=`` ``path`` (:func:`~hta_lite.load.loader.load_graph_sources`;
    none where None), loaded once per process, in it (a worker starts no workers of its own)."""
    if path is None:
        return []
    return load_graph_sources(path, dataclasses.replace(options, parallel=False, progress=False))


def summarize_rank(trace, captures: list = ()) -> dict[str, pd.DataFrame]:
    """The per-rank summary tables (small: a few rows per rank); ``captures``: the traces
    given as ``graph_capture=`` (graph replays are mapped against those of the rank, else all)."""
    one = {trace.rank: trace}
    type_df, kernel_df = kernels.gpu_kernel_breakdown(one)
    queue = counters.queue_length_summary(counters.queue_length_time_series(one))
    bandwidth = counters.memory_bw_summary(counters.memory_bw_time_series(one))
    calls = collective_calls(trace)
    ops = operators.RankOperators.of(trace, for_rank(list(captures), trace.rank))
    with warnings.catch_warnings():  # an unknown device: the views say what to pass
        warnings.simplefilter("ignore")
        devices = operators.devices_of([trace])
    memory, memory_found = rank_memory(trace)
    found = checks_found(calls, ops, memory_found)
    path = job_path.segments(trace)
    # a rank without ProfilerSteps as one step, for the findings of a folder with none (as
    # TraceAnalysis.get_findings does)
    whole = {n: t.iloc[:0] for n, t in path.items()} if len(trace.steps) else (
        job_path.segments(trace, whole=True)
    )  # fmt: skip
    return {
        "temporal_breakdown": temporal.temporal_breakdown(one),
        "comm_comp_overlap": overlap.comm_comp_overlap(one),
        "idle_time_breakdown": idle.idle_time_breakdown(one)[0],
        "gpu_idle_by_cause": idle.gpu_idle_by_cause(one),
        "kernel_type_breakdown": type_df.assign(rank=trace.rank),
        "kernel_breakdown": kernel_df,
        "queue_length_summary": queue.reset_index(),
        "memory_bw_summary": bandwidth.reset_index(),
        "cupti_counters": rank_cupti_counters(trace),
        "step_breakdown": steps.step_breakdown(one),
        "health_summary": health_summary(one, {trace.rank: found}),
        "operator_summary": operators.operator_summary([ops]).assign(rank=trace.rank),
        # float32 as TF32 is set by the driver, where the roofline of all ranks says
        "roofline_sums": operators.rank_roofline_sums(ops, devices),
        "mfu_rows": operators.mfu_table([ops], devices, pd.DataFrame()),
        "module_rows": operators.rank_modules(ops),
        "graph_launches": graph_launches.launch_table([ops]),
        "graph_kernels": graph_launches.graph_kernel_table([ops]),
        "collective_calls": calls,
        "stage_work": stage_work(trace, calls),
        "host_wait": host_wait_by_step(trace),
        "warmup_delay": _warmup_delay(trace),
        "one_time_idle": _one_time_idle(trace),
        "annotation_timers": timers.annotation_timers(one),
        "step_anomalies": _scored_steps(one),
        **{f"job_path_{name}": table for name, table in path.items()},
        **{f"whole_trace_{name}": table for name, table in whole.items()},
        **memory,
        # read by the driver to number found steps alike (step_alignment), to set the ranks'
        # clock offsets and to choose the findings' steps, not summaries
        "steps": trace.steps,
        "point_to_point": pd.DataFrame({"sends": [step_alignment.point_to_point(trace.cpu)]}),
        "health_items": health_items(trace, found),
        "rank_facts": pd.DataFrame(
            {
                "rank": [trace.rank],
                "first_event_ns": pd.array([first_event_ns(trace)], dtype="Int64"),
                "profiled_steps": [len(steps.profiled_steps(trace))],
                # what the operator views need of the rank beyond its tables
                "device": [operators.device_name(devices[trace.rank])],
                "gpu_time_us": [ops.gpu_time_us],
                "architecture": [
                    operators.architecture_hint(pd.unique(trace.gpu["name"]))
                    if len(trace.gpu)
                    else None
                ],
                "operator_ranges": pd.array([operators.operator_ranges(trace)], "boolean"),
            }
        ),  # fmt: skip
    }


def _warmup_delay(trace) -> pd.DataFrame:
    """``rank, start, end`` (ns): the rank's :func:`~hta_lite.analyses.one_time.warmup_delay`."""
    spans = one_time.warmup_delay(trace)
    return pd.DataFrame({"rank": np.full(len(spans), trace.rank, np.int64),
                         "start": spans[:, 0], "end": spans[:, 1]})  # fmt: skip


def _one_time_idle(trace) -> pd.DataFrame:
    """``rank, idle_ns, doing``: the rank's :func:`~hta_lite.analyses.one_time.idle_while_one_time`
    (the key findings' idle line)."""
    ns, doing = one_time.idle_while_one_time(trace)
    return pd.DataFrame({"rank": [trace.rank], "idle_ns": [float(ns)], "doing": [doing]})


def _scored_steps(one: dict) -> pd.DataFrame:
    """The rank's steps scored where it is loaded (the origin ranks are set in the driver)."""
    components = step_anomalies.step_components(one)
    if components.empty:
        return pd.DataFrame(columns=["rank", "step", "step_time", "anomalous"])
    return step_anomalies.anomalies(components, None, one)
