"""The one list of the views a trace folder gets beyond the API, in the order the CLI prints them
and writes them (one file each).

A new analysis adds its :class:`View` here: its table's file stem and heading, the name of its
builder in :mod:`hta_lite.views.summary`, the anchor of the report section that shows it, and the
:func:`~hta_lite.summarize_folder` table that gives it for a whole folder (None: the batch does not,
and says so in ``Summary.absent``). Tests check each against the summary, the report and the batch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class View:
    """One view: ``key`` (file stem of its table), ``heading``, ``builder`` (the function of
    :mod:`hta_lite.views.summary` that returns its table, or a sentence saying why there is none),
    ``section`` (the report's anchor) and ``batch`` (the summarize_folder table, or None)."""

    key: str
    heading: str
    builder: str
    section: str
    batch: str | None


VIEWS: tuple[View, ...] = (
    View("findings", "Findings: what to fix first, by the step time it would save",
         "findings", "findings", "findings"),
    View("key_findings", "Key findings", "key_findings", "key-findings", "key_findings"),
    View("temporal_breakdown", "Temporal breakdown (µs, % of GPU span)",
         "temporal_breakdown", "temporal", "temporal_breakdown"),
    View("gpu_idle_by_cause", "GPU idle time by cause, no stream busy (µs, %)",
         "gpu_idle_by_cause", "idle", "gpu_idle_by_cause"),
    View("comm_comp_overlap", "Communication / computation overlap (%)",
         "comm_comp_overlap", "overlap", "comm_comp_overlap"),
    View("idle_time_breakdown", "Idle time by cause, per stream (µs)",
         "idle_time_breakdown", "idle", "idle_time_breakdown"),
    View("kernel_type_breakdown", "GPU time by kernel type (µs, all ranks)",
         "kernel_type_breakdown", "kernels",
         "kernel_type_breakdown"),
    View("top_kernels", "Top kernels (µs)", "top_kernels", "kernels", "kernel_breakdown"),
    View("step_breakdown", "Per-step breakdown (µs)", "step_breakdown", "temporal",
         "step_breakdown"),
    View("step_anomalies", "Anomalous steps: why, and the rank that caused each (µs)",
         "step_anomalies", "step-anomalies", "step_anomalies"),
    View("operators", "GPU time by operator (µs; launched itself / by the operators it calls)",
         "top_operators", "operators", "operator_summary"),
    View("optimization_targets", "Operators furthest below their roofline, by time (µs)",
         "optimization_targets", "operators", "operator_roofline"),
    View("mfu", "Model FLOPs utilization per step (%)", "mfu_rows", "operators", "mfu"),
    View("graph_launches",
         "CUDA / HIP graph launches: GPU time replayed, mapped to operators (µs, %)",
         "graph_launches", "graphs", "graph_launches"),
    View("critical_path",
         "Critical path of the first step of the lowest rank, by what bounds it (µs, %)",
         "critical_path_rows", "critical-path", "critical_path"),
    View("job_critical_path",
         "Job critical path: what bounds the steps, by rank (µs, % of the steps)",
         "job_critical_path", "job-critical-path", "job_critical_path"),
    View("memory_peaks", "Memory: peak allocated / reserved per rank and device (bytes)",
         "memory_peaks", "memory", "memory_peaks"),
    View("memory_leaks",
         "Memory allocated in a step and never freed (bytes; the same each step: a leak)",
         "leaks", "memory", "memory_leaks"),
    View("collectives", "Collectives (µs, GB/s bus bandwidth)",
         "collectives", "collectives", "collectives"),
    View("collectives_by_rank",
         "Collectives by rank: who arrived last, the wait caused and suffered (µs)",
         "collectives_by_rank", "collectives", "collectives_by_rank"),
    View("pipeline_stages",
         "Pipeline stages: work per step outside communication (µs)",
         "pipeline_stages", "cross-rank", "pipeline_stages"),
    View("collective_problems", "Collectives not matched across ranks, or partial (reason)",
         "collective_problems", "collectives", "collective_problems"),
    View("cupti_counters", "CUPTI counters by operator (sums over the profiled kernels)",
         "cupti_by_operator", "cupti", "cupti_counters"),
)  # fmt: skip

#: the tables of a memory snapshot given to the summary
SNAPSHOT_VIEWS = {
    "snapshot_summary": "CUDA memory snapshot: per device (MemorySnapshot.summary())",
    "snapshot_oom": "CUDA memory snapshot: out of memory, and the verdict (MemorySnapshot.oom())",
}
HEADINGS = {view.key: view.heading for view in VIEWS} | SNAPSHOT_VIEWS

#: why summarize_folder has no table for a view (``Summary.absent``)
NOT_IN_BATCH = "needs each rank's whole trace: open the folder with TraceAnalysis"
