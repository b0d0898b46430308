"""The HTML report of a batch (:func:`hta_lite.tools.batch.summarize_folder`): the sections of
``hta-lite report``, drawn by the same functions (:mod:`.report_sections`,
:mod:`.report_one_rank`) from the same tables, so the two reports say the same of a folder. The
memory timeline is the highest peak's rank's alone (the batch holds no rank's events); a view
the batch did not give would be listed at the end, with why."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from .. import plots
from ..analyses.catalog import VIEWS
from ..analyses.operators.summaries import across_ranks
from ..missing_data import why
from ..tools.batch_one_rank import cupti_frames
from . import report_one_rank as one_rank
from . import report_sections as sections
from .batch_cli import batch_tables
from .html import Report, note, table
from .report_extra import snapshot_section
from .report_operators import graph_section, module_parts, roofline_parts
from .summary import shown


def build_batch_report(summary, title: str | None = None) -> str:
    """The HTML page of a ``summarize_folder`` result; the data of its reduced charts is linked
    in ``report_data/`` (:func:`write_batch_report` writes it)."""
    return _report(summary, title).html()


def write_batch_report(summary, path: str | Path, title: str | None = None) -> Path:
    """The batch's report at ``path``, with the data of its reduced charts as CSV files in
    ``<name>_data/`` next to it (each file written atomically)."""
    return _report(summary, title).write(path)


def _report(summary, title: str | None) -> Report:
    where = summary.trace_dir or "traces"
    report = Report(title or f"GPU trace report: {where} (batch)")
    tables, absent = batch_tables(summary)
    ranks = len(summary["health_summary"])
    sections.overview(
        report,
        summary["health_summary"],
        f"<p>{ranks} rank(s) from <code>{html.escape(str(where))}</code>, each summarized"
        " where it was loaded (hta-lite batch).</p>",
    )
    if len(summary["temporal_breakdown"].dropna()):
        _gpu_sections(report, summary, tables, absent)
    else:
        sections.cpu_only(report)
    _step_anomalies(report, summary, tables, absent)
    one_rank.cupti_counters(report, cupti_frames(summary["cupti_counters"]))
    _critical_path(report, summary)
    if isinstance(tables.get("job_critical_path"), pd.DataFrame):
        sections.job_path(report, tables["job_critical_path"], _JobPath(summary))
    _memory(report, summary, tables, absent)
    if summary.snapshot is not None:
        snapshot_section(report, summary.snapshot)
    _collectives(report, summary)
    _cross_rank(report, summary)
    sections.health(report, summary["health"], summary["health_summary"])
    if summary.absent:
        _not_in_batch(report, summary.absent)
    report.sections.insert(0, sections.key_findings(report, summary["key_findings"]))
    found = summary["findings"]
    report.sections.insert(0, sections.ranked_findings(report, why(found) or found))
    return report


def _gpu_sections(report: Report, summary, tables: dict, absent: dict) -> None:
    sections.temporal(report, summary["temporal_breakdown"])
    sections.idle(report, summary["gpu_idle_by_cause"], summary["idle_time_breakdown"])
    sections.overlap(report, summary["comm_comp_overlap"])
    sections.kernels(report, tables["kernel_type_breakdown"], summary["kernel_breakdown"])
    sections.steps(report, summary["step_breakdown"])
    operators = across_ranks(summary["operator_summary"])
    if (operators["calls"] > 0).any():
        rows = tables["operators"] if "operators" in tables else absent["operators"]
        roofline, modules = summary["operator_roofline"], summary["operator_modules"]
        report.section(
            "operators",
            "Operators",
            note(sections.OPERATORS_NOTE),
            report.chart(plots.plot_operator_summary(operators, 20)),
            sections.table_or_note(shown("operators", rows)),
            *module_parts(report, None if why(modules) else modules),
            *roofline_parts(
                report,
                why(roofline) or roofline,
                lambda: tables.get("optimization_targets", absent.get("optimization_targets")),
                tables.get("mfu", absent.get("mfu")),
            ),
        )
        graph_section(report, summary["graph_launches"], summary["graph_kernels"])
    _one_rank_counters(report, summary)


def _one_rank_counters(report: Report, summary) -> None:
    """The lowest rank's launch queue, memory bandwidth and kernel launches."""
    rank = int(summary["health_summary"]["rank"].min())
    queue, bandwidth = summary["queue_length_series"], summary["memory_bw_series"]
    one_rank.counters(
        report, rank, queue if len(queue) else None,
        lambda: summary["queue_length_summary"].set_index(["rank", "stream"]),
        bandwidth if len(bandwidth) else None,
        lambda: summary["memory_bw_summary"].set_index(["rank", "name"]),
    )  # fmt: skip
    one_rank.launches(report, rank, summary["launch_stats"])


def _critical_path(report: Report, summary) -> None:
    segments = summary["critical_path_segments"]
    path = summary["critical_path"]
    one_rank.critical_path(report, why(path) or path, segments, segments.attrs["length_us"])


def _step_anomalies(report: Report, summary, tables: dict, absent: dict) -> None:
    scored = summary["step_anomalies"]
    if scored.empty:
        return
    odd = tables["step_anomalies"] if "step_anomalies" in tables else absent["step_anomalies"]
    several = len(summary["health_summary"]) > 1
    sections.step_anomalies(
        report, scored, summary["step_periodicity"], odd,
        lambda: summary["job_step_anomalies"] if several else None,
    )  # fmt: skip


def _memory(report: Report, summary, tables: dict, absent: dict) -> None:
    if "memory_peaks" in absent:
        report.section("memory", "Memory", note(f"Not recorded: {absent['memory_peaks']}."))
        return
    report.section(
        "memory",
        "Memory",
        note(sections.MEMORY_NOTE),
        *sections.memory_parts(
            shown("memory_peaks", tables["memory_peaks"]),
            _memory_over_time(report, summary),
            summary["memory_by_step"],
            summary["memory_leaks"],
            summary["memory_by_operator"],
        ),  # fmt: skip
    )


def _memory_over_time(report: Report, summary) -> str:
    """The chart of the rank with the highest peak (the analysis's draws every rank's), and
    which rank it is where several have memory events."""
    line = summary["memory_timeline"]
    rank = int(line["rank"].iat[0])
    chart = report.chart(plots.plot_memory_timeline(line, {rank: summary["memory_timeline_steps"]}))
    ranks = summary["memory_peaks"]["rank"].nunique()
    if ranks == 1:
        return chart
    return chart + note(
        f"Memory over time of rank {rank}, the highest peak allocated of the {ranks} ranks with"
        " memory events (the batch holds no other rank's events: hta-lite report draws each"
        " rank; the table per step gives each step's peak on every rank)."
    )


def _collectives(report: Report, summary) -> None:
    if summary["collective_calls"].empty:
        if len(summary["health_summary"]) > 1:
            report.section("collectives", "Collectives across ranks",
                           note("No collective in the traces."))  # fmt: skip
        return
    instances = summary["collective_instances"]
    parts = [
        note(sections.COLLECTIVES_NOTE),
        table(summary["collectives"], 30),
        sections.bus_bandwidth(report, instances),
    ]
    if summary["matched_calls"]["rank"].nunique() > 1:
        parts += [
            "<h3>By rank</h3>",
            table(summary["collectives_by_rank"]),
            report.chart(plots.plot_wait_heatmap(summary["matched_calls"])),
            report.chart(plots.plot_arrival_skew(instances)),
        ]
    parts += sections.unmatched(summary["collective_problems"])
    report.section("collectives", "Collectives across ranks", *parts)


def _cross_rank(report: Report, summary) -> None:
    parts = sections.timer_parts(report, summary["annotation_timers"])
    if len(summary["health_summary"]) > 1:
        lateness = summary["rank_lateness"]
        parts += sections.straggler_parts(
            report, lateness.attrs["report"], lateness, summary["straggler_causes"],
            summary["pipeline_stages"],
        )  # fmt: skip
    if parts:
        report.section("cross-rank", "Cross-rank timers and stragglers", *parts)


def _not_in_batch(report: Report, absent: dict[str, str]) -> None:
    headings = {view.key: view.heading for view in VIEWS}
    rows = pd.DataFrame(
        {"view": list(absent), "heading": [headings[key] for key in absent],
         "why": list(absent.values())}
    )  # fmt: skip
    report.section(
        "not-in-batch",
        "Not in the batch",
        note(
            "The views of hta-lite report that the batch does not give: open the folder with"
            " hta-lite report or TraceAnalysis for them."
        ),  # fmt: skip
        table(rows, prose=("heading", "why")),
    )


class _JobPath:
    """The batch's job critical path tables, read as :func:`.report_sections.job_path` reads a
    ``JobCriticalPath``."""

    def __init__(self, summary):
        self._summary = summary
        self.problems = summary["job_critical_path_problems"]

    def path(self) -> pd.DataFrame:
        return self._summary["job_critical_path"]

    def steps(self) -> pd.DataFrame:
        return self._summary["job_critical_path_steps"]

    def hops(self) -> pd.DataFrame:
        return self._summary["job_critical_path_hops"]
