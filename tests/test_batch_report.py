"""The batch's HTML report (``hta-lite batch -o``, :func:`write_batch_report`) says what
``hta-lite report`` says of the same folder: it has the same sections, each the same HTML up
to what the batch does not compute (said in its place), and would list a view it lacked."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from conftest import DATA, SAMPLES

from hta_lite import TraceAnalysis
from hta_lite.analyses.catalog import VIEWS
from hta_lite.tools.batch import summarize_folder
from hta_lite.views import batch_report
from hta_lite.views.report import _report

FOLDERS = [SAMPLES / "two_ranks", SAMPLES / "gloo_4ranks", SAMPLES / "memory_leak",
           SAMPLES / "long_run", SAMPLES / "h100_bert_small", DATA / "cpu_only",
           DATA / "memory_ranks", SAMPLES / "sglang_decode"]  # fmt: skip
#: the sections with a part the batch does not compute: the overview's first line, memory over
#: time where several ranks have memory events (the batch draws the highest peak's rank alone)
PARTIAL = {"overview", "memory"}
#: what the batch's memory section says beside the one rank's timeline chart
ONE_TIMELINE = "Memory over time of rank {}, the highest peak allocated of the {} ranks"


def _sections(report) -> dict[str, str]:
    """``{anchor: html}``, the charts numbered alike (the batch draws fewer)."""
    return {a: re.sub(r"chart-\d+", "chart-N", h) for a, _, h in report.sections}


@pytest.fixture(scope="module", params=FOLDERS, ids=lambda p: p.name)
def both(request):
    analysis = TraceAnalysis(trace_dir=request.param, parallel=False, progress=False)
    summary = summarize_folder(request.param, executor="serial", progress=False)
    return analysis, summary


def _without_timeline(html: str) -> str:
    """The memory section less its second part: the timeline chart (the analysis's report) or
    the note saying why there is none (the batch's)."""
    head, per_step, tail = html.partition("<h3>Per step</h3>")
    if not per_step:  # no memory events: the section says what to record
        return html
    peaks = head[: head.index("</table>")]
    return peaks + per_step + tail


def test_the_sections_both_reports_have_are_the_same(both):
    analysis, summary = both
    full = _sections(_report(analysis, None, None))
    batch = _sections(batch_report._report(summary, None))
    shared = [anchor for anchor in batch if anchor in full]
    assert {"findings", "key-findings", "overview", "temporal", "health"} <= set(shared)
    if "operators" in full:  # the roofline, its targets, MFU and time by module too
        assert "operators" in shared
    for anchor in shared:
        if anchor not in PARTIAL:
            assert batch[anchor] == full[anchor], anchor
    if "memory" in shared:  # all but the timeline chart: peaks, per step, leaks, by operator
        assert _without_timeline(batch["memory"]) == _without_timeline(full["memory"])
        if summary["memory_peaks"]["rank"].nunique() == 1:  # the chart too, where one rank
            assert batch["memory"] == full["memory"]
        assert ("<h3>By operator</h3>" in batch["memory"]) == ("Not recorded" not in full["memory"])
    assert list(batch)[:3] == ["findings", "key-findings", "overview"]
    # the lowest rank's views (critical path, launch queue, launches) and the CUPTI counters too
    assert set(batch) == set(full)


def test_the_partial_sections_say_what_the_batch_leaves_out(both):
    _, summary = both
    batch = _sections(batch_report._report(summary, None))
    peaks = summary["memory_peaks"]
    if peaks["rank"].nunique() > 1:  # the rank of the highest peak: rank 3 in memory_ranks
        top = peaks.sort_values("peak_allocated")["rank"].iat[-1]
        assert ONE_TIMELINE.format(top, peaks["rank"].nunique()) in batch["memory"]
        assert summary["memory_timeline"]["rank"].eq(top).all()
    missing = [view.key for view in VIEWS if view.batch is None]
    assert ("not-in-batch" in batch) == bool(missing)
    for key in missing:  # every view the batch does not give is listed, with why
        assert f"<td class='text'>{key}</td>" in batch["not-in-batch"], key


def test_batch_writes_the_report_with_its_tables(tmp_path, capsys):
    from hta_lite.views.cli import main

    out_dir = tmp_path / "out"
    assert main(["batch", str(SAMPLES / "gloo_4ranks"), "--serial", "-o", str(out_dir)]) == 0
    err = capsys.readouterr().err
    page = (out_dir / "report.html").read_text()
    assert f"wrote {len(list(out_dir.glob('*.csv')))} tables and {out_dir / 'report.html'}" in err
    assert "4 rank(s) from" in page and "summarized where it was loaded" in page
    assert "<section id='job-critical-path'>" in page and "<section id='critical-path'>" in page
    waits = pd.read_csv(out_dir / "matched_calls.csv")  # the heatmap's table, written whole
    assert set(waits["rank"]) == {0, 1, 2, 3} and "wait" in waits.columns
