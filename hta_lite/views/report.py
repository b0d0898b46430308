"""Self-contained HTML report: every table and chart of a trace folder in one offline file.

plotly.js is inlined once (no CDN); figures are embedded as JSON (plotly escapes ``<`` there)
and every name in tables and text is HTML-escaped, so kernel names are data, never markup.
"""

from __future__ import annotations

import datetime as dt
import html
import warnings
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from .. import __version__, plots
from ..analyses import cupti
from ..analyses.health import problems
from ..errors import MissingDataError
from ..facade.analysis import TraceAnalysis
from .summary import (
    TARGET_COLUMNS,
    critical_path_region,
    critical_path_rows,
    memory_peaks,
    mfu_rows,
    quietly,
    top_operators,
)

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d232a;
background:#f6f7f9}
header{background:#22303c;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;opacity:.8}
nav{padding:8px 28px;background:#e8ecf0;position:sticky;top:0;z-index:5}
nav a{margin-right:14px;color:#22303c;text-decoration:none;font-size:14px}
section{background:#fff;margin:18px 28px;padding:16px 22px;border-radius:6px;
box-shadow:0 1px 3px rgba(0,0,0,.08)}
h2{margin-top:0;font-size:18px}p.note{color:#55606b;font-size:13px;margin-top:0}
table{border-collapse:collapse;font-size:12.5px;margin:8px 0 14px;max-width:100%}
th,td{border:1px solid #dde2e7;padding:3px 7px;text-align:right}th{background:#f0f3f6}
td:first-child,th:first-child{text-align:left}.chart{min-height:360px}
pre{background:#f4f6f8;padding:10px;overflow-x:auto;font-size:12.5px}
"""


def _table(df: pd.DataFrame | None, max_rows: int = 60, index: bool = False) -> str:
    if df is None or len(df) == 0:
        return "<p class='note'>No data.</p>"
    return df.head(max_rows).to_html(
        index=index, escape=True, float_format=lambda v: f"{v:,.2f}", border=0, na_rep="–"
    )


class Report:
    """Accumulates sections; ``html()`` renders the page."""

    def __init__(self, title: str):
        self.title = title
        self.sections: list[tuple[str, str, str]] = []
        self.n_charts = 0

    def section(self, anchor: str, heading: str, *parts: str) -> None:
        self.sections.append((anchor, heading, "".join(parts)))

    def chart(self, fig: go.Figure, height: int = 420) -> str:
        self.n_charts += 1
        fig.update_layout(
            height=fig.layout.height or height, margin={"l": 60, "r": 30, "t": 60, "b": 60}
        )
        div = fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"chart-{self.n_charts}",
            config={"displaylogo": False},
        )
        return f"<div class='chart'>{div}</div>"

    def html(self) -> str:
        nav = "".join(f"<a href='#{a}'>{html.escape(h)}</a>" for a, h, _ in self.sections)
        body = "".join(
            f"<section id='{a}'><h2>{html.escape(h)}</h2>{content}</section>"
            for a, h, content in self.sections
        )
        stamp = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
        return (
            "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(self.title)}</title><style>{CSS}</style>"
            f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            f"<header><h1>{html.escape(self.title)}</h1>"
            f"<p>hta_lite {__version__} · generated {stamp}</p></header>"
            f"<nav>{nav}</nav>{body}</body></html>"
        )


def build_report(analysis: TraceAnalysis, title: str | None = None) -> str:
    """The HTML page for a loaded ``TraceAnalysis``."""
    report = Report(title or f"GPU trace report: {analysis.trace_dir or 'traces'}")
    summary = analysis.health_summary()
    overview = summary[
        [
            "rank",
            "device_type",
            "gpu_name",
            "profiler_steps",
            "gpu_events",
            "cpu_events",
            "clock_offset_us",
            "problems",
        ]
    ]
    report.section(
        "overview",
        "Overview",
        f"<p>{len(analysis.ranks)} rank(s) loaded from"
        f" <code>{html.escape(str(analysis.trace_dir))}</code>.</p>",
        _table(overview),
    )

    temporal = analysis.get_temporal_breakdown(visualize=False)
    gpu_ranks = temporal.dropna()
    if len(gpu_ranks):
        report.section(
            "temporal",
            "Temporal breakdown",
            "<p class='note'>Share of each rank's GPU span that was idle, computing, or only"
            " communicating / copying.</p>",
            _table(temporal),
            report.chart(plots.plot_temporal_breakdown(gpu_ranks)),
        )
        idle, _ = analysis.get_idle_time_breakdown(visualize=False)
        report.section(
            "idle",
            "Idle time by cause",
            "<p class='note'>host_wait: the CPU launched too late; kernel_wait: launch overhead"
            " below 30 µs; other: waiting on other streams or syncs.</p>",
            report.chart(plots.plot_idle_time_breakdown(idle)),
            _table(idle),
        )
        overlap = analysis.get_comm_comp_overlap(visualize=False)
        report.section(
            "overlap",
            "Communication hidden by computation",
            _table(overlap),
            report.chart(plots.plot_comm_comp_overlap(overlap)),
        )
        type_df, kernel_df = analysis.get_gpu_kernel_breakdown(visualize=False)
        top = kernel_df.sort_values("sum (us)", ascending=False)
        report.section(
            "kernels",
            "Kernel breakdown",
            report.chart(plots.plot_kernel_type_pie(type_df)),
            _table(type_df),
            "<h3>Top kernels</h3>",
            _table(top, 25),
            *[report.chart(f) for f in plots.plot_kernel_distribution(kernel_df)],
        )
        steps = analysis.get_step_breakdown(visualize=False)
        if len(steps):
            report.section(
                "steps",
                "Per-step breakdown",
                report.chart(plots.plot_step_breakdown(steps)),
                _table(steps),
            )
        _operator_section(report, analysis)
        _counters_section(report, analysis)
        _launch_section(report, analysis)
    else:
        report.section(
            "temporal", "GPU analyses", "<p>No GPU events: these traces are CPU-only.</p>"
        )
    _cupti_section(report, analysis)
    _critical_path_section(report, analysis)
    _memory_section(report, analysis)
    _collectives_section(report, analysis)
    _cross_rank_section(report, analysis)
    health = analysis.health()
    problem_rows = problems(health)
    report.section(
        "health",
        "Trace health",
        "<p class='note'>Events skipped, clamped or not linked while loading (see"
        " docs/health.md).</p>",
        _table(problem_rows, 200),
        "<h3>Per rank</h3>",
        _table(summary),
    )
    return report.html()


def _operator_section(report: Report, analysis: TraceAnalysis) -> None:
    """Time by operator, by module, the roofline and its targets, MFU (what the traces allow)."""
    summary = analysis.get_operator_summary()
    if not (summary["calls"] > 0).any():
        return
    parts = [
        "<p class='note'>Every GPU event belongs to the operator that launched it (graph replays"
        " and events without an operator have rows of their own); FLOPs and bytes come from the"
        " recorded input shapes (docs/analyses/operators.md).</p>",
        report.chart(plots.plot_operator_summary(summary, 20)),
        _table(top_operators(analysis)),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        modules = analysis.get_operator_summary(by="module") if _has_modules(analysis) else None
        if modules is not None:
            parts += ["<h3>By nn.Module</h3>", report.chart(plots.plot_module_sunburst(modules))]
        try:
            roofline = analysis.get_operator_roofline()
        except MissingDataError:
            roofline = None
        if roofline is not None:
            device = ", ".join(sorted(set(roofline["device"])))
            parts += [
                f"<h3>Roofline ({html.escape(device)})</h3>",
                report.chart(plots.plot_roofline(roofline)),
                "<p class='note'>Furthest below their roof, weighted by time:</p>",
                _table(
                    quietly(lambda a: a.get_optimization_targets(top=10)[TARGET_COLUMNS])(analysis)
                ),
            ]
        mfu = quietly(mfu_rows)(analysis)
        if mfu is not None:
            parts += ["<h3>Model FLOPs utilization</h3>", _table(mfu)]
    report.section("operators", "Operators", *parts)


def _has_modules(analysis: TraceAnalysis) -> bool:
    return bool((analysis.get_operator_instances()["module"] != "").any())


def _counters_section(report: Report, analysis: TraceAnalysis) -> None:
    first = analysis.ranks[0]
    queue = analysis.get_queue_length_time_series([first]).get(first)
    bandwidth = analysis.get_memory_bw_time_series([first]).get(first)
    parts = []
    if queue is not None:
        parts += [
            report.chart(plots.plot_queue_length(queue, first)),
            _table(analysis.get_queue_length_summary(), index=True),
        ]
    if bandwidth is not None:
        parts += [
            report.chart(plots.plot_memory_bw(bandwidth, first)),
            _table(analysis.get_memory_bw_summary(), index=True),
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
        "<p class='note'>Kernels replayed by the CUPTI range profiler, paired with their launch"
        " calls in launch order; FLOPs from the SASS instruction counters.</p>",
        *[report.chart(plots.plot_cupti_counters(df, cupti.main_counter(df))) for df in frames],
        _table(cupti.by_operator(frames)),
    )


def _launch_section(report: Report, analysis: TraceAnalysis) -> None:
    first = analysis.ranks[0]
    stats = analysis.get_cuda_kernel_launch_stats(ranks=[first], visualize=False)[first]
    if len(stats):
        report.section(
            "launches",
            f"Kernel launches (rank {first})",
            _table(stats.describe().T, index=True),
            *[report.chart(f) for f in plots.plot_launch_stats(stats, first)],
        )


def _critical_path_section(report: Report, analysis: TraceAnalysis) -> None:
    """The critical path of the lowest rank's first step: what bounds it, on a timeline."""
    region = critical_path_region(analysis)
    if region is None:
        return
    rank, annotation, instance = region
    cp, _ = analysis.critical_path_analysis(rank, annotation, instance)
    report.section(
        "critical-path",
        "Critical path",
        f"<p class='note'>The longest chain of dependencies through rank {rank}'s"
        f" {html.escape(annotation + ' #' + str(instance)) if annotation else 'trace'}: CPU"
        " operators, launches, kernels, cross-stream waits and host synchronizations, with what"
        " bounds each part (docs/analyses/critical-path.md).</p>",
        _table(critical_path_rows(analysis, cp)),
        report.chart(plots.plot_critical_path(cp)),
    )


def _memory_section(report: Report, analysis: TraceAnalysis) -> None:
    """Allocated / reserved memory over time, peaks, growth per step, leaks, top operators."""
    peaks = memory_peaks(analysis)
    if peaks is None:
        return
    line = analysis.get_memory_timeline()
    steps = {r: analysis.trace(r).steps for r in line["rank"].unique()}
    leaks = analysis.get_memory_leaks()
    report.section(
        "memory",
        "Memory",
        "<p class='note'>From the allocator's [memory] events (profile_memory=True); bytes."
        " Fragmentation: reserved - allocated (docs/analyses/memory.md).</p>",
        _table(peaks),
        report.chart(plots.plot_memory_timeline(line, steps)),
        "<h3>Per step</h3>",
        _table(analysis.get_memory_by_step()),
        *(["<h3>Allocated in a step, never freed</h3>", _table(leaks)] if len(leaks) else []),
        "<h3>By operator</h3>",
        _table(analysis.get_memory_by_operator(), 20),
    )


def _collectives_section(report: Report, analysis: TraceAnalysis) -> None:
    """Collectives matched across ranks: bandwidth, who waited for whom, what did not match."""
    matching = analysis.get_collectives()
    if matching.calls.empty:
        return
    parts = [
        "<p class='note'>Each collective matched on its group's ranks by (group, step, order);"
        " bus bandwidth with the NCCL-tests factors over the transfer time (the shortest"
        " duration across ranks); wait: time a rank sat in the collective before the last one"
        " arrived (docs/analyses/collectives.md).</p>",
        _table(analysis.get_collective_summary(), 30),
        report.chart(plots.plot_bus_bandwidth(matching.instances)),
    ]
    if matching.calls["rank"].nunique() > 1:
        parts += [
            "<h3>By rank</h3>",
            _table(analysis.get_collective_summary("rank")),
            report.chart(plots.plot_wait_heatmap(matching.calls)),
            report.chart(plots.plot_arrival_skew(matching.instances)),
        ]
    if len(matching.problems):
        parts += ["<h3>Not matched or partial</h3>", _table(matching.problems, 50)]
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
        if len(straggler.ranks):
            parts += [
                f"<p>{html.escape(str(straggler))}</p>",
                report.chart(plots.plot_rank_lateness(straggler.ranks)),
                _table(straggler.causes),
            ]
    if parts:
        report.section("cross-rank", "Cross-rank timers and stragglers", *parts)


def write_report(analysis: TraceAnalysis, path: str | Path, title: str | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(build_report(analysis, title), encoding="utf-8")
    return path
