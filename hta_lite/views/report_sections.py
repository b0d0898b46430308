"""The report's sections drawn from tables alone. The report of a loaded folder (:mod:`.report`)
and the batch's (:mod:`.batch_report`) both build these sections from their tables, so the two
say the same thing of the same table. Each function adds one section to ``report``, or returns
what its caller places."""

from __future__ import annotations

import html

import pandas as pd

from .. import plots
from ..analyses import timers
from ..analyses.health import problems
from .findings_cli import caveat_lines, finding_lines
from .html import Report, findings_list, note, table

FINDINGS_TITLE = "Findings: what to fix first"
HEALTH_COLUMNS = ["rank", "device_type", "gpu_name", "profiler_steps", "gpu_events",
                  "cpu_events", "clock_offset_us", "problems"]  # fmt: skip


def ranked_findings(report: Report, ranked: pd.DataFrame | str) -> tuple[str, str, str]:
    """The report's lead: the findings ranked by the step time a fix would save, their chart,
    evidence and advice (``(anchor, title, html)``, for the report to put first); ``ranked``:
    ``get_findings()``, or why there are none."""
    if isinstance(ranked, str):
        return "findings", FINDINGS_TITLE, note(ranked)
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
    return "findings", FINDINGS_TITLE, "".join(parts)


def key_findings(report: Report, findings: pd.DataFrame) -> tuple[str, str, str]:
    """``get_key_findings()`` as a list linking to the sections already in ``report``, and
    their chart (``(anchor, title, html)``, for the report to put near the top)."""
    anchors = {anchor for anchor, _, _ in report.sections}
    parts = [
        note("What to read first; each line links to the section it comes from."),
        findings_list(findings, anchors),
    ]
    if findings["step_pctg"].notna().any():
        parts.append(report.chart(plots.plot_key_findings(findings)))
    return "key-findings", "Key findings", "".join(parts)


def overview(report: Report, summary: pd.DataFrame, intro: str) -> None:
    """``intro`` (HTML) over the per-rank health summary."""
    report.section("overview", "Overview", intro, table(summary[HEALTH_COLUMNS]))


def cpu_only(report: Report) -> None:
    """In place of the GPU sections."""
    report.section("temporal", "GPU analyses", "<p>No GPU events: these traces are CPU-only.</p>")


def temporal(report: Report, breakdown: pd.DataFrame) -> None:
    report.section(
        "temporal",
        "Temporal breakdown",
        note(
            "Share of each rank's GPU span (first to last GPU work) that was idle, computing,"
            " or only communicating / copying."
        ),  # fmt: skip
        table(breakdown),
        report.chart(plots.plot_temporal_breakdown(breakdown.dropna())),
    )


def idle(report: Report, by_cause: pd.DataFrame, per_stream: pd.DataFrame) -> None:
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


def overlap(report: Report, shares: pd.DataFrame) -> None:
    if shares["comp_comm_overlap_pctg"].notna().any():
        parts = [table(shares), report.chart(plots.plot_comm_comp_overlap(shares))]
    else:
        parts = [note("No communication kernels: there is nothing to hide under computation.")]
    report.section("overlap", "Communication hidden by computation", *parts)


def kernels(report: Report, type_df: pd.DataFrame, kernel_df: pd.DataFrame) -> None:
    """The kernel section: the kernel types' pie and table, the top kernels and their duration
    across ranks (``get_gpu_kernel_breakdown()``'s tables)."""
    report.section(
        "kernels",
        "Kernel breakdown",
        report.chart(plots.plot_kernel_type_pie(type_df)),
        table(type_df),
        "<h3>Top kernels</h3>",
        table(kernel_df.sort_values("sum (us)", ascending=False), 25),
        *[report.chart(f) for f in plots.plot_kernel_distribution(kernel_df)],
    )


def steps(report: Report, per_step: pd.DataFrame) -> None:
    if len(per_step):
        report.section(
            "steps",
            "Per-step breakdown",
            report.chart(plots.plot_step_breakdown(per_step)),
            table(per_step),
        )


def step_anomalies(report: Report, scored, periods, odd, job_steps) -> None:
    """Step time per step with the anomalies marked (``scored``, ``periods``: the step
    periodicity), the anomalous steps (``odd``: their rows, or why none) and, with several
    ranks, the job's anomalous steps (``job_steps()``: the job step anomalies, or None)."""
    parts = [
        note(
            "Each step's time against the rank's typical step (median and MAD); for an"
            " anomalous step, the component that grew most and the rank it waited for at its"
            " collectives (docs/analyses/long-runs.md)."
        ),  # fmt: skip
        report.chart(plots.plot_step_anomalies(scored, periods)),
    ]
    if isinstance(odd, str):
        parts.append(note(f"Nothing flagged: {odd}."))
    else:
        parts += [table(odd, 50), note(odd.attrs["note"])]
        job = job_steps()
        if job is not None:
            parts += ["<h3>The job's steps, and the rank that caused each</h3>",
                      table(job[job["anomalous"]], 50)]  # fmt: skip
    report.section("step-anomalies", "Anomalous and periodic steps", *parts)


def job_path(report: Report, rows: pd.DataFrame, path) -> None:
    """The job critical path: ``rows`` (:func:`.summary.job_path_rows`), the path over time
    with its hops, the hops and where it is a lower bound (``path``: a ``JobCriticalPath``, or
    anything with its ``path()``, ``steps()``, ``hops()`` and ``problems``)."""
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


OPERATORS_NOTE = (
    "Every GPU event belongs to the operator that launched it (graph replays and events without"
    " an operator have rows of their own); FLOPs and bytes come from the recorded input shapes"
    " (docs/analyses/operators.md)."
)


def table_or_note(rows: pd.DataFrame | str) -> str:
    """A table, or the sentence saying why there is none."""
    return note(f"None: {rows}.") if isinstance(rows, str) else table(rows)


MEMORY_NOTE = (
    "From the allocator's [memory] events (profile_memory=True). Cached: reserved - allocated,"
    " held by the caching allocator but not allocated; whether it is fragmented only a memory"
    " snapshot tells (docs/analyses/memory.md)."
)


def memory_parts(
    peaks: pd.DataFrame, over_time: str, by_step: pd.DataFrame, leaks: pd.DataFrame,
    by_operator: pd.DataFrame,
) -> list[str]:  # fmt: skip
    """The memory section's parts after its note: peaks, ``over_time`` (the timeline chart, or
    why there is none), per step, the allocations no step frees, by operator."""
    return [
        table(peaks),
        over_time,
        "<h3>Per step</h3>",
        table(by_step),
        "<h3>Allocated in a step, never freed</h3>",
        table(leaks, empty="No allocation made in a step stays unfreed."),
        "<h3>By operator</h3>",
        note(
            "alloc_bytes adds up every allocation an operator made over the trace, and a free"
            " counts where it happens, often in another operator: far more than the peak with"
            " no free of its own is normal. self_unfreed_bytes is what the operator allocated"
            " itself and the trace never frees."
        ),  # fmt: skip
        table(by_operator, 20),
    ]


COLLECTIVES_NOTE = (
    "Each collective matched on its group's ranks by (group, step, order); bus bandwidth with"
    " the NCCL-tests factors over the transfer time (the shortest duration across ranks); wait:"
    " time a rank sat in the collective before the last one arrived. Only collectives whose"
    " ranks agree on collective, dtype and size are summarised and drawn"
    " (docs/analyses/collectives.md)."
)


def bus_bandwidth(report: Report, instances: pd.DataFrame) -> str:
    bandwidth = plots.plot_bus_bandwidth(instances)
    if len(bandwidth.data):
        return report.chart(bandwidth)
    why = "no collective here has a known size and ranks that agree on it"
    return note(f"No bus bandwidth to draw: {why} (see what was not matched below).")


def unmatched(matching_problems: pd.DataFrame) -> list[str]:
    if len(matching_problems):
        return ["<h3>Not matched or partial</h3>", table(matching_problems, 50)]
    return []


def timer_parts(report: Report, tidy: pd.DataFrame) -> list[str]:
    """Megatron's min/max timers across ranks (``tidy``: ``get_annotation_timers()``)."""
    if not len(tidy):
        return []
    minmax = timers.timers_across_ranks(tidy, "minmax")
    return [
        f"<pre>{html.escape(timers.megatron_text(minmax, 'minmax'))}</pre>",
        report.chart(plots.plot_timers_minmax(minmax)),
        report.chart(plots.plot_timer_heatmap(tidy)),
    ]


def straggler_parts(report: Report, text: str, lateness, causes, stages) -> list[str]:
    """The straggler report (``text``) with its lateness chart, causes and pipeline stages."""
    parts = [f"<p>{html.escape(text)}</p>"]
    if len(lateness):
        parts += [
            report.chart(plots.plot_rank_lateness(lateness)),
            table(causes, empty="No straggler: no cause to explain."),
        ]
    if len(stages):
        parts += [report.chart(plots.plot_pipeline_stages(stages)), table(stages)]
    return parts


def health(report: Report, items: pd.DataFrame, summary: pd.DataFrame) -> None:
    """The health table's problems and what was left out by design, and the per-rank summary."""
    excluded = items[items["severity"] == "excluded"]
    report.section(
        "health",
        "Trace health",
        note(
            "What the loader skipped, clamped or did not link (warnings), and what it left out"
            " by design (docs/health.md)."
        ),  # fmt: skip
        "<h3>Problems</h3>",
        table(problems(items), 200, empty="Nothing skipped, clamped or left unlinked."),
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
