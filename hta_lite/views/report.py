"""Self-contained HTML report: the key findings first, then every view of a trace folder, each
section with its table and the chart drawn from exactly that table.

plotly.js is inlined once (no CDN); figures are embedded as JSON (plotly escapes ``<`` there)
and every name in tables and text is HTML-escaped (:mod:`.html`). A view the traces lack keeps
its section with a sentence saying why (what to record), never a bare "No data".
"""

from __future__ import annotations

import html
from pathlib import Path

from .. import plots
from ..analyses import cupti
from ..facade.analysis import TraceAnalysis
from . import report_sections as sections
from .critical_path_rows import critical_path_region, critical_path_rows, region_label
from .html import Report, note, table
from .report_extra import (
    job_path_section,
    ranked_findings_section,
    snapshot_section,
    step_anomaly_section,
)
from .report_operators import operator_section
from .summary import memory_peaks, shown


def build_report(analysis: TraceAnalysis, title: str | None = None, snapshot=None) -> str:
    """The HTML page for a loaded ``TraceAnalysis`` (and a ``MemorySnapshot`` of the run); the
    data of its reduced charts is linked in ``report_data/`` (:func:`write_report` writes it)."""
    return _report(analysis, title, snapshot).html()


def _report(analysis: TraceAnalysis, title: str | None, snapshot) -> Report:
    report = Report(title or f"GPU trace report: {analysis.trace_dir or 'traces'}")
    summary = analysis.health_summary()
    sections.overview(
        report,
        summary,
        f"<p>{len(analysis.ranks)} rank(s) loaded from"
        f" <code>{html.escape(str(analysis.trace_dir))}</code>.</p>",
    )
    temporal = analysis.get_temporal_breakdown(visualize=False)
    if len(temporal.dropna()):
        _gpu_sections(report, analysis, temporal)
    else:
        sections.cpu_only(report)
    step_anomaly_section(report, analysis)
    _cupti_section(report, analysis)
    _critical_path_section(report, analysis)
    job_path_section(report, analysis)
    _memory_section(report, analysis)
    if snapshot is not None:
        snapshot_section(report, snapshot)
    _collectives_section(report, analysis)
    _cross_rank_section(report, analysis)
    sections.health(report, analysis.health(), summary)
    report.sections.insert(0, sections.key_findings(report, analysis.get_key_findings()))
    report.sections.insert(0, ranked_findings_section(report, analysis, snapshot))
    return report


def _gpu_sections(report: Report, analysis: TraceAnalysis, temporal) -> None:
    sections.temporal(report, temporal)
    per_stream, _ = analysis.get_idle_time_breakdown(visualize=False)
    sections.idle(report, analysis.get_gpu_idle_by_cause(), per_stream)
    sections.overlap(report, analysis.get_comm_comp_overlap(visualize=False))
    sections.kernels(report, *analysis.get_gpu_kernel_breakdown(visualize=False))
    sections.steps(report, analysis.get_step_breakdown(visualize=False))
    operator_section(report, analysis)
    _counters_section(report, analysis)
    _launch_section(report, analysis)


def _counters_section(report: Report, analysis: TraceAnalysis) -> None:
    first = analysis.ranks[0]
    queue = analysis.get_queue_length_time_series([first]).get(first)
    bandwidth = analysis.get_memory_bw_time_series([first]).get(first)
    parts = []
    if queue is not None:
        parts += [
            report.chart(plots.plot_queue_length(queue, first)),
            table(analysis.get_queue_length_summary(), index=True),
        ]
    if bandwidth is not None:
        parts += [
            report.chart(plots.plot_memory_bw(bandwidth, first)),
            table(analysis.get_memory_bw_summary(), index=True),
        ]
    if parts:
        report.section("counters", f"Launch queue and memory bandwidth (rank {first})", *parts)


def _cupti_section(report: Report, analysis: TraceAnalysis) -> None:
    if not any(len(t.kernel_counters) for t in analysis.traces.values()):
        return
    frames = analysis.get_cupti_counter_data_with_operators()
    report.section(
        "cupti",
        "CUPTI counters per operator",
        note(
            "Kernels replayed by the CUPTI range profiler, paired with their launch calls in"
            " launch order; FLOPs from the SASS instruction counters."
        ),  # fmt: skip
        *[report.chart(plots.plot_cupti_counters(df, cupti.main_counter(df))) for df in frames],
        table(cupti.by_operator(frames)),
    )


def _launch_section(report: Report, analysis: TraceAnalysis) -> None:
    first = analysis.ranks[0]
    stats = analysis.get_cuda_kernel_launch_stats(ranks=[first], visualize=False)[first]
    if len(stats):
        times = stats.drop(columns=["correlation"], errors="ignore")
        report.section(
            "launches",
            f"Kernel launches (rank {first})",
            note(
                "Per launch (µs): the launch call's duration, the GPU event's, and the delay"
                " from the call's end to the GPU start."
            ),  # fmt: skip
            table(times.describe().T.rename_axis("measure (µs)"), index=True),
            *[report.chart(f) for f in plots.plot_launch_stats(stats, first)],
        )


def _critical_path_section(report: Report, analysis: TraceAnalysis) -> None:
    """The critical path of the lowest rank's first step: what bounds it, on a timeline."""
    region = critical_path_region(analysis)
    if region is None:
        return
    cp, _ = analysis.critical_path_analysis(*region)
    rows = critical_path_rows(analysis, cp)
    label = region_label(analysis, region)
    if isinstance(rows, str):
        report.section("critical-path", "Critical path", note(f"No critical path: {rows}."))
        return
    report.section(
        "critical-path",
        "Critical path",
        note(
            f"The longest chain of dependencies through rank {region[0]}'s {label}: CPU"
            " operators, launches, kernels, cross-stream waits and host synchronizations,"
            " with what bounds each part (docs/analyses/critical-path.md)."
        ),  # fmt: skip
        f"<p>{html.escape(rows.attrs['note'])}</p>",
        table(rows),
        report.chart(plots.plot_critical_path(cp, f"Critical path of rank {region[0]}, {label}")),
    )


def _memory_section(report: Report, analysis: TraceAnalysis) -> None:
    """Allocated / reserved memory over time, peaks, growth per step, leaks, top operators."""
    peaks = shown("memory_peaks", memory_peaks(analysis))
    if isinstance(peaks, str):
        report.section("memory", "Memory", note(f"Not recorded: {peaks}."))
        return
    line = analysis.get_memory_timeline()
    steps = {r: analysis.trace(r).steps for r in line["rank"].unique()}
    report.section(
        "memory",
        "Memory",
        note(sections.MEMORY_NOTE),
        *sections.memory_parts(
            peaks,
            report.chart(plots.plot_memory_timeline(line, steps)),
            analysis.get_memory_by_step(),
            analysis.get_memory_leaks(),
            analysis.get_memory_by_operator(),
        ),  # fmt: skip
    )


def _collectives_section(report: Report, analysis: TraceAnalysis) -> None:
    """Collectives matched across ranks: bandwidth, who waited for whom, what did not match."""
    matching = analysis.get_collectives()
    if matching.calls.empty:
        if len(analysis.ranks) > 1:
            report.section("collectives", "Collectives across ranks",
                           note("No collective in the traces."))  # fmt: skip
        return
    parts = [
        note(sections.COLLECTIVES_NOTE),
        table(analysis.get_collective_summary(), 30),
        sections.bus_bandwidth(report, matching.instances),
    ]
    if matching.calls["rank"].nunique() > 1:
        parts += [
            "<h3>By rank</h3>",
            table(analysis.get_collective_summary("rank")),
            report.chart(plots.plot_wait_heatmap(matching.calls)),
            report.chart(plots.plot_arrival_skew(matching.instances)),
        ]
    parts += sections.unmatched(matching.problems)
    report.section("collectives", "Collectives across ranks", *parts)


def _cross_rank_section(report: Report, analysis: TraceAnalysis) -> None:
    parts = sections.timer_parts(report, analysis.get_annotation_timers())
    if len(analysis.ranks) > 1:
        straggler = analysis.get_straggler_report()
        parts += sections.straggler_parts(
            report, str(straggler), straggler.ranks, straggler.causes, straggler.stages
        )
    if parts:
        report.section("cross-rank", "Cross-rank timers and stragglers", *parts)


def write_report(
    analysis: TraceAnalysis, path: str | Path, title: str | None = None, snapshot=None
) -> Path:
    """The report at ``path``, with the data of its reduced charts as CSV files in
    ``<name>_data/`` next to it."""
    return _report(analysis, title, snapshot).write(path)
