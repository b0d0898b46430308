"""The report's sections of the newer views: the ranked findings, a CUDA memory snapshot
(``hta-lite report ... --snapshot FILE``), the anomalous steps of a long run and the job
critical path."""

from __future__ import annotations

import html

from .. import plots
from ..errors import MissingDataError
from ..facade.missing import need
from .findings_cli import caveat_lines, finding_lines
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
    odd = step_anomalies(analysis)
    parts = [
        note(
            "Each step's time against the rank's typical step (median and MAD); for an"
            " anomalous step, the component that grew most and the rank it waited for at its"
            " collectives (docs/analyses/long-runs.md)."
        ),  # fmt: skip
        report.chart(plots.plot_step_anomalies(scored, analysis.get_step_periodicity())),
    ]
    if isinstance(odd, str):
        parts.append(note(f"Nothing flagged: {odd}."))
    else:
        parts += [table(odd, 50), note(odd.attrs["note"])]
        if len(analysis.ranks) > 1:
            job = analysis.get_job_step_anomalies()
            parts += ["<h3>The job's steps, and the rank that caused each</h3>",
                      table(job[job["anomalous"]], 50)]  # fmt: skip
    report.section("step-anomalies", "Anomalous and periodic steps", *parts)


def job_path_section(report: Report, analysis) -> None:
    """The job critical path: by rank and bound_by, over time with its hops, the hops."""
    try:
        rows = job_critical_path(analysis)
    except MissingDataError:
        return
    if isinstance(rows, str):
        return
    path = analysis.get_job_critical_path()
    parts = [
        note(
            "The chain of work across ranks that sets each step's time: every rank's local"
            " critical path between its collectives, joined where a collective waits for its"
            " last rank (docs/analyses/job-critical-path.md)."
        ),  # fmt: skip
        f"<p>{html.escape(rows.attrs['note'])}</p>",
        table(rows),
        report.chart(plots.plot_job_critical_path(path)),
        "<h3>Hops: where the path moves to the rank that arrived last</h3>",
        table(path.hops(), 30),
    ]
    if len(path.problems):
        parts += ["<h3>Where the path is a lower bound</h3>", table(path.problems, 30)]
    report.section("job-critical-path", "Job critical path", *parts)


def ranked_findings_section(report: Report, analysis, snapshot=None) -> tuple[str, str, str]:
    """The report's lead: the findings ranked by the step time a fix would save, their chart,
    evidence and advice (``(anchor, title, html)``, for the report to put first; with the
    memory snapshot's findings when one is given)."""
    title = "Findings: what to fix first"
    try:
        ranked = need(analysis.get_findings(snapshot=snapshot))
    except MissingDataError as exc:
        return "findings", title, note(exc.problem)
    parts = [
        note(
            "Ranked by the step time each fix would save, estimated by replaying the job's"
            " critical path with the fix made (range: a partial fix to the time removed without"
            " replay; cumulative: the fixes above made together, overlaps discounted;"
            " docs/analyses/findings.md)."
        ),
        "<ol>" + "".join(f"<li>{html.escape(line.split('. ', 1)[1])}</li>"
                         for line in finding_lines(ranked)) + "</ol>"
        if len(ranked) else f"<p>{html.escape(finding_lines(ranked)[0])}</p>",
        *(note(text) for text in caveat_lines(ranked)),
    ]  # fmt: skip
    if (ranked["saving_ms_per_step"] > 0).any():
        parts.append(report.chart(plots.plot_findings(ranked)))
    if len(ranked):
        columns = ["kind", "rank", "where", "evidence", "advice"]
        parts.append(table(ranked[columns], 30, prose=("where", "evidence", "advice")))
    return "findings", title, "".join(parts)
