"""The report's sections of the newer views: the ranked findings, a CUDA memory snapshot
(``hta-lite report ... --snapshot FILE``), the anomalous steps of a long run and the job
critical path."""

from __future__ import annotations

import html

from .. import plots
from ..errors import MissingDataError
from ..facade.missing import need
from . import report_sections as sections
from .html import Report, note, table
from .summary import job_critical_path, step_anomalies


def snapshot_section(report: Report, snap) -> None:
    """Summary and fragmentation, memory over the trace with the peak, who holds the peak, the
    segment map, and the verdict on each out-of-memory."""
    summary = snap.summary()
    parts = [
        note(
            "The allocator's own state (torch.cuda.memory._dump_snapshot): reserved = allocated"
            " + internal free (rounding) + external free (cached, unused); fragmentation: the"
            " share of the free memory one allocation of the largest free block's size cannot"
            " use (docs/analyses/memory-snapshots.md)."
        ),  # fmt: skip
        f"<p><code>{html.escape(snap.path)}</code></p>",
        table(summary),
    ]
    try:
        parts.append(
            report.chart(plots.plot_snapshot_timeline(need(snap.timeline()), snap.peaks()))
        )
    except MissingDataError as exc:
        parts.append(note(f"No memory over time: {exc.problem}."))
    peak = snap.peak()
    parts += [
        "<h3>Held at the peak</h3>" if peak.index >= 0 else "<h3>Held at the dump</h3>",
        report.chart(plots.plot_peak_sites(peak.by_site)),
        table(peak.by_site, 20),
        "<h3>Segment map</h3>",
        report.chart(plots.plot_segment_map(snap.summary(by="segment"))),
        "<h3>Out of memory</h3>",
    ]
    try:
        parts.append(table(need(snap.oom()), prose=("advice",)))
    except MissingDataError:
        parts += [note("None recorded in an allocator trace. What the state at the dump implies:"),
                  table(snap.at_dump())]  # fmt: skip
    report.section("snapshot", "Memory snapshot", *parts)


def step_anomaly_section(report: Report, analysis) -> None:
    """Step time per step with the anomalies marked, their causes and origins, the periods."""
    try:
        scored = need(analysis.get_step_anomalies())
    except MissingDataError:
        return
    several = len(analysis.ranks) > 1
    sections.step_anomalies(
        report, scored, analysis.get_step_periodicity(), step_anomalies(analysis),
        lambda: analysis.get_job_step_anomalies() if several else None,
    )  # fmt: skip


def job_path_section(report: Report, analysis) -> None:
    """The job critical path: by rank and bound_by, over time with its hops, the hops."""
    try:
        rows = job_critical_path(analysis)
    except MissingDataError:
        return
    if not isinstance(rows, str):
        sections.job_path(report, rows, analysis.get_job_critical_path())


def ranked_findings_section(report: Report, analysis, snapshot=None) -> tuple[str, str, str]:
    """The report's lead (:func:`.report_sections.ranked_findings`) with the memory snapshot's
    findings when one is given."""
    try:
        ranked = need(analysis.get_findings(snapshot=snapshot))
    except MissingDataError as exc:
        ranked = exc.problem
    return sections.ranked_findings(report, ranked)
