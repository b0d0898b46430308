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
from ..analyses.health import problems
from ..facade.analysis import TraceAnalysis
from .critical_path_rows import critical_path_region, critical_path_rows, region_label
from .html import Report, findings_list, note, table
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
    columns = ["rank", "device_type", "gpu_name", "profiler_steps", "gpu_events", "cpu_events",
               "clock_offset_us", "problems"]  # fmt: skip
    report.section(
        "overview",
        "Overview",
        f"<p>{len(analysis.ranks)} rank(s) loaded from"
        f" <code>{html.escape(str(analysis.trace_dir))}</code>.</p>",
        table(summary[columns]),
    )
    temporal = analysis.get_temporal_breakdown(visualize=False)
    if len(temporal.dropna()):
        _gpu_sections(report, analysis, temporal)
    else:
        report.section(
            "temporal", "GPU analyses", "<p>No GPU events: these traces are CPU-only.</p>"
        )
    step_anomaly_section(report, analysis)
    _cupti_section(report, analysis)
    _critical_path_section(report, analysis)
    job_path_section(report, analysis)
    _memory_section(report, analysis)
    if snapshot is not None:
        snapshot_section(report, snapshot)
    _collectives_section(report, analysis)
    _cross_rank_section(report, analysis)
    _health_section(report, analysis, summary)
    findings = analysis.get_key_findings()
    anchors = {anchor for anchor, _, _ in report.sections}
    parts = [
        note("What to read first; each line links to the section it comes from."),
        findings_list(findings, anchors),
    ]
    if findings["step_pctg"].notna().any():
        parts.append(report.chart(plots.plot_key_findings(findings)))
    report.sections.insert(0, ("key-findings", "Key findings", "".join(parts)))
    report.sections.insert(0, ranked_findings_section(report, analysis, snapshot))
    return report


def _gpu_sections(report: Report, analysis: TraceAnalysis, temporal) -> None:
    report.section(
        "temporal",
        "Temporal breakdown",
        note(
            "Share of each rank's GPU span (first to last GPU work) that was idle, computing,"
            " or only communicating / copying."
        ),  # fmt: skip
        table(temporal),
        report.chart(plots.plot_temporal_breakdown(temporal.dropna())),
    )
    by_cause = analysis.get_gpu_idle_by_cause()
    per_stream, _ = analysis.get_idle_time_breakdown(visualize=False)
    report.section(
        "idle",
        "Idle time by cause",
        note(
            "The whole GPU idle (no stream busy), by the event that ended each gap:"
            " host_wait: its launch came after the GPU went idle (the CPU was late);"
            " kernel_wait: under 30 µs between kernels (launch overhead); other: waiting on"
            " another stream, an event or a synchronization."
        ),  # fmt: skip
        table(by_cause),
        report.chart(plots.plot_gpu_idle_by_cause(by_cause)),
        "<h3>Per stream (µs)</h3>",
        note(
            "Each stream's own gaps: a stream with little work is idle most of the time"
            " without the GPU being idle."
        ),  # fmt: skip
        report.chart(plots.plot_idle_time_breakdown(per_stream, pctg=False)),
        table(per_stream),
    )
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    if overlap["comp_comm_overlap_pctg"].notna().any():
        parts = [table(overlap), report.chart(plots.plot_comm_comp_overlap(overlap))]
    else:
        parts = [note("No communication kernels: there is nothing to hide under computation.")]
    report.section("overlap", "Communication hidden by computation", *parts)
    type_df, kernel_df = analysis.get_gpu_kernel_breakdown(visualize=False)
    top = kernel_df.sort_values("sum (us)", ascending=False)
    report.section(
        "kernels",
        "Kernel breakdown",
        report.chart(plots.plot_kernel_type_pie(type_df)),
        table(type_df),
        "<h3>Top kernels</h3>",
        table(top, 25),
        *[report.chart(f) for f in plots.plot_kernel_distribution(kernel_df)],
    )
    steps = analysis.get_step_breakdown(visualize=False)
    if len(steps):
        report.section(
            "steps",
            "Per-step breakdown",
            report.chart(plots.plot_step_breakdown(steps)),
            table(steps),
        )
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
    leaks = analysis.get_memory_leaks()
    report.section(
        "memory",
        "Memory",
        note(
            "From the allocator's [memory] events (profile_memory=True). Fragmentation:"
            " reserved - allocated (docs/analyses/memory.md)."
        ),  # fmt: skip
        table(peaks),
        report.chart(plots.plot_memory_timeline(line, steps)),
        "<h3>Per step</h3>",
        table(analysis.get_memory_by_step()),
        "<h3>Allocated in a step, never freed</h3>",
        table(leaks, empty="No allocation made in a step stays unfreed."),
        "<h3>By operator</h3>",
        note(
            "alloc_bytes adds up every allocation an operator made over the trace, and a free"
            " counts where it happens, often in another operator: far more than the peak with"
            " no free of its own is normal. self_unfreed_bytes is what the operator allocated"
            " itself and the trace never frees."
        ),  # fmt: skip
        table(analysis.get_memory_by_operator(), 20),
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
        note(
            "Each collective matched on its group's ranks by (group, step, order); bus"
            " bandwidth with the NCCL-tests factors over the transfer time (the shortest"
            " duration across ranks); wait: time a rank sat in the collective before the last"
            " one arrived. Only collectives whose ranks agree on collective, dtype and size"
            " are summarised and drawn (docs/analyses/collectives.md)."
        ),  # fmt: skip
        table(analysis.get_collective_summary(), 30),
    ]
    bandwidth = plots.plot_bus_bandwidth(matching.instances)
    if len(bandwidth.data):
        parts.append(report.chart(bandwidth))
    else:
        why = "no collective here has a known size and ranks that agree on it"
        parts.append(note(f"No bus bandwidth to draw: {why} (see what was not matched below)."))
    if matching.calls["rank"].nunique() > 1:
        parts += [
            "<h3>By rank</h3>",
            table(analysis.get_collective_summary("rank")),
            report.chart(plots.plot_wait_heatmap(matching.calls)),
            report.chart(plots.plot_arrival_skew(matching.instances)),
        ]
    if len(matching.problems):
        parts += ["<h3>Not matched or partial</h3>", table(matching.problems, 50)]
    report.section("collectives", "Collectives across ranks", *parts)


def _cross_rank_section(report: Report, analysis: TraceAnalysis) -> None:
    tidy = analysis.get_annotation_timers()
    parts = []
    if len(tidy):
        minmax = analysis.get_timers_across_ranks(log_option="minmax")
        parts += [
            f"<pre>{html.escape(analysis.timers_text())}</pre>",
            report.chart(plots.plot_timers_minmax(minmax)),
            report.chart(plots.plot_timer_heatmap(tidy)),
        ]
    if len(analysis.ranks) > 1:
        straggler = analysis.get_straggler_report()
        parts.append(f"<p>{html.escape(str(straggler))}</p>")
        if len(straggler.ranks):
            parts += [
                report.chart(plots.plot_rank_lateness(straggler.ranks)),
                table(straggler.causes, empty="No straggler: no cause to explain."),
            ]
        if len(straggler.stages):
            parts += [
                report.chart(plots.plot_pipeline_stages(straggler.stages)),
                table(straggler.stages),
            ]
    if parts:
        report.section("cross-rank", "Cross-rank timers and stragglers", *parts)


def _health_section(report: Report, analysis: TraceAnalysis, summary) -> None:
    health = analysis.health()
    excluded = health[health["severity"] == "excluded"]
    report.section(
        "health",
        "Trace health",
        note(
            "What the loader skipped, clamped or did not link (warnings), and what it left out"
            " by design (docs/health.md)."
        ),  # fmt: skip
        "<h3>Problems</h3>",
        table(problems(health), 200, empty="Nothing skipped, clamped or left unlinked."),
        "<h3>Left out</h3>",
        note(
            "The last ProfilerStep is left out as in HTA (the profiler usually cuts it short):"
            " load with include_last_profiler_step=True (--include-last-profiler-step) to keep"
            " it."
        ),  # fmt: skip
        table(excluded, 200, empty="Nothing left out."),
        "<h3>Per rank</h3>",
        table(summary),
    )


def write_report(
    analysis: TraceAnalysis, path: str | Path, title: str | None = None, snapshot=None
) -> Path:
    """The report at ``path``, with the data of its reduced charts as CSV files in
    ``<name>_data/`` next to it."""
    return _report(analysis, title, snapshot).write(path)
