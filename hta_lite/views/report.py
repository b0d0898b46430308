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
from ..analyses.critical_path import first_step
from ..facade.analysis import TraceAnalysis
from . import report_one_rank as one_rank
from . import report_sections as sections
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
    one_rank.counters(
        report, first, analysis.get_queue_length_time_series([first]).get(first),
        analysis.get_queue_length_summary,
        analysis.get_memory_bw_time_series([first]).get(first), analysis.get_memory_bw_summary,
    )  # fmt: skip


def _cupti_section(report: Report, analysis: TraceAnalysis) -> None:
    if any(len(t.kernel_counters) for t in analysis.traces.values()):
        one_rank.cupti_counters(report, analysis.get_cupti_counter_data_with_operators())


def _launch_section(report: Report, analysis: TraceAnalysis) -> None:
    first = analysis.ranks[0]
    stats = analysis.get_cuda_kernel_launch_stats(ranks=[first], visualize=False)[first]
    one_rank.launches(report, first, stats)


def _critical_path_section(report: Report, analysis: TraceAnalysis) -> None:
    """The critical path of the lowest rank's first step: what bounds it, on a timeline."""
    trace = analysis.trace(analysis.ranks[0])
    cp = first_step.first_step_path(trace)
    segments = plots.critical_path_segments(cp) if cp is not None else None
    one_rank.critical_path(
        report, first_step.rows(trace, cp), segments, cp.length_us if cp is not None else 0.0
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
