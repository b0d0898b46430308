"""health() is the same whatever ran before: it runs the checks it reports, and the views that
need a choice (a device, a step) keep their problems with their result."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import ROOT

from hta_lite import TraceAnalysis


@pytest.mark.filterwarnings("ignore:rank .* is not in the peak table")
@pytest.mark.parametrize("folder", ["two_ranks", "gloo_4ranks", "h100_bert_small", "memory_leak"])
def test_health_before_and_after_every_view(folder):
    fresh = TraceAnalysis(trace_dir=ROOT / "sample_traces" / folder, cache=False, progress=False)
    first, first_summary = fresh.health(), fresh.health_summary()
    used = TraceAnalysis(trace_dir=ROOT / "sample_traces" / folder, cache=False, progress=False)
    rank = used.ranks[0]
    used.get_findings()
    used.critical_path_analysis(rank)
    for view in ("get_operator_roofline", "get_mfu", "get_memory_timeline", "get_collectives"):
        try:
            getattr(used, view)()
        except Exception:  # noqa: BLE001 -- a view the folder cannot give: not what is tested
            pass
    pd.testing.assert_frame_equal(used.health(), first)
    pd.testing.assert_frame_equal(used.health_summary(), first_summary)
    pd.testing.assert_frame_equal(fresh.health(), first)  # asking twice changes nothing


def test_a_check_is_reported_before_its_view_runs(tmp_path):
    """Memory totals that disagree (the second allocation says 250 B allocated, 200 B are):
    health() says so at once, and the same after the timeline is drawn."""
    from synth import TraceBuilder
    from test_memory import memory

    b = TraceBuilder().step(1, 0, 100)
    memory(b, 10, 100, 1, 100)
    memory(b, 20, 100, 2, 250)
    b.write(tmp_path / "rank0.json")
    a = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    before = a.health()
    assert "memory_total_mismatch" in set(before["code"])
    assert a.health_summary()["problems"].iloc[0] >= 1
    a.get_memory_timeline()
    pd.testing.assert_frame_equal(a.health(), before)
    from hta_lite.tools.batch import summarize_folder  # the batch counts it too

    batch = summarize_folder(tmp_path, executor="serial", cache=False, progress=False)
    assert batch["health_summary"]["problems"].tolist() == a.health_summary()["problems"].tolist()
    # memory events outside any operator: no row by operator in either (the batch's crashed)
    pd.testing.assert_frame_equal(batch["memory_by_operator"], a.get_memory_by_operator())


def test_every_health_code_is_documented():
    """docs/health.md lists every item the loader and the checks can report, by its code."""
    import re

    from hta_lite.load.health_items import ITEMS

    page = (ROOT / "docs" / "health.md").read_text()
    documented = set(re.findall(r"[a-z][a-z0-9_]+", page))
    assert sorted(code for code in ITEMS if code not in documented) == []


@pytest.mark.parametrize("case", ["steps_unlike", "sglang_decode", "gloo_4ranks"])
def test_health_summary_counts_the_warnings_of_the_health_table(tmp_path, case):
    """health_summary()'s ``problems`` is the rank's warning counts in health() added up (as
    docs/health.md says), the facts the health table adds next to the other ranks included:
    two ranks whose steps are found otherwise (steps_unlike_other_ranks, 1 each), a trace with
    no ProfilerStep (no_profiler_step). The batch counts them alike."""
    from test_steps_found import _loop

    from hta_lite.analyses.health import problems
    from hta_lite.tools.batch import summarize_folder

    folder = ROOT / "sample_traces" / case
    if case == "steps_unlike":
        folder = tmp_path
        _loop(tmp_path, ranges="sequential", rank=0)
        _loop(tmp_path, ranges="", rank=1)
    analysis = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    health = analysis.health()
    warned = problems(health).groupby("rank")["count"].sum()
    summary = analysis.health_summary().set_index("rank")["problems"]
    assert summary.to_dict() == {rank: warned.get(rank, 0) for rank in analysis.ranks}
    expected = {"steps_unlike": "steps_unlike_other_ranks", "sglang_decode": "no_profiler_step"}
    if case in expected:
        assert expected[case] in set(problems(health)["code"]) and (summary >= 1).all()
    batch = summarize_folder(folder, executor="serial", cache=False, progress=False)
    assert batch["health_summary"].set_index("rank")["problems"].to_dict() == summary.to_dict()
