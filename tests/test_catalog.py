"""The one list of views (hta_lite.analyses.catalog.VIEWS) is what the summary prints, what the
report shows and what the batch says it gives or not: each checked against the real outputs."""

from __future__ import annotations

import pytest

from hta_lite import TraceAnalysis
from hta_lite.analyses.catalog import HEADINGS, NOT_IN_BATCH, VIEWS
from hta_lite.tools.batch import CROSS_RANK_TABLES, SUMMARY_TABLES, summarize_folder
from hta_lite.tools.batch_one_rank import TABLES as ONE_RANK
from hta_lite.views import summary
from hta_lite.views.report import build_report
from tests.conftest import SAMPLES

FOLDERS = ["two_ranks", "gloo_4ranks", "memory_leak", "long_run"]
RARE = {"cupti_counters", "collective_problems", "graph_launches", "pipeline_stages"}  # no line


def test_every_view_has_a_builder_and_a_batch_table_that_exist():
    keys = [view.key for view in VIEWS]
    assert len(keys) == len(set(keys)), "a key twice"
    for view in VIEWS:
        assert callable(getattr(summary, view.builder, None)), view
        assert view.batch is None or view.batch in {
            *SUMMARY_TABLES,
            *CROSS_RANK_TABLES,
            *ONE_RANK,
        }, view
    assert set(HEADINGS) >= set(keys)


@pytest.fixture(scope="module", params=FOLDERS)
def analysis(request):
    return TraceAnalysis(trace_dir=SAMPLES / request.param, parallel=False)


def test_summary_tables_are_the_views_in_their_order(analysis):
    tables, absent = summary.summary_tables(analysis)
    keys = [view.key for view in VIEWS]
    given = [k for k in tables if k not in ("health_summary", "health")]
    assert given == [k for k in keys if k in tables]
    assert set(absent) <= set(keys)
    assert set(tables) | set(absent) >= set(keys) - RARE


def test_the_report_has_the_section_of_every_view_it_has_a_table_for(analysis):
    tables, _ = summary.summary_tables(analysis)
    page = build_report(analysis)
    for view in VIEWS:
        if view.key in tables and view.key != "cupti_counters":
            assert f"<section id='{view.section}'>" in page, view


def test_the_batch_gives_the_views_it_names_and_says_which_it_does_not():
    tables = summarize_folder(SAMPLES / "gloo_4ranks", executor="serial", cache=False)
    for view in VIEWS:
        if view.batch is None:
            assert tables.absent[view.key] == NOT_IN_BATCH
        else:
            assert view.batch in tables and view.key not in tables.absent, view
    # CPU-only ranks: the GPU views have no rows and say why, as the analysis's do
    full = TraceAnalysis(trace_dir=SAMPLES / "gloo_4ranks", parallel=False, cache=False)
    assert tables["temporal_breakdown"].empty
    assert (
        tables["temporal_breakdown"].attrs["why"]
        == (full.get_temporal_breakdown(visualize=False).attrs["why"])
    )
    assert len(tables["step_breakdown"]) == 12
