"""What the report and the CLI summary show agrees with itself: each chart is drawn from exactly
the table beside it, one step numbering, readable units, and every absent view says why."""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
import pytest
from conftest import DATA, SAMPLES
from synth import TraceBuilder

from hta_lite import TraceAnalysis, plots
from hta_lite.plots.breakdowns import step_segments
from hta_lite.plots.critical_path import ZERO_WEIGHT, critical_path_segments
from hta_lite.views.html import table
from hta_lite.views.report import build_report
from hta_lite.views.summary import critical_path_rows, summary_tables


@pytest.fixture(scope="module")
def page(two_ranks) -> str:
    return build_report(two_ranks)


def test_report_opens_with_the_ranked_findings_then_the_key_findings(page, two_ranks):
    sections = re.findall(r"<section id='([^']+)'>", page)
    assert sections[:3] == ["findings", "key-findings", "overview"]
    ranked = two_ranks.get_findings()
    lead = page[page.index("<section id='findings'>") : page.index("<section id='key-findings'>")]
    assert len(ranked) and all(html.escape(w) in lead for w in ranked["where"])
    findings = two_ranks.get_key_findings()
    first = page.index("<section id='key-findings'>")
    for line, anchor in zip(findings["finding"], findings["section"]):
        assert line.replace("'", "&#x27;") in page[first:]
        assert anchor in sections  # every "details" link has its section


def test_bus_bandwidth_chart_draws_the_rows_the_table_counts(two_ranks):
    matching = two_ranks.get_collectives()
    summary = two_ranks.get_collective_summary()
    figure = plots.plot_bus_bandwidth(matching.instances)
    drawn = sum(len(trace.x) for trace in figure.data)
    assert drawn == summary.loc[summary["busbw_median_gbps"].notna(), "count"].sum() == 1
    assert {t.name for t in figure.data} <= set(summary["collective"])  # no all_to_all point
    assert figure.layout.xaxis.ticktext and "GiB" in " ".join(figure.layout.xaxis.ticktext)


def test_collective_dtypes_spelled_one_way(two_ranks):
    calls = two_ranks.get_collectives().calls
    # was int8_t, signed char; float32 from the nccl: ranges (test_collective_metadata.py)
    assert set(calls["dtype"]) == {"int8", "uint8", "int32", "int64", "float32"}
    summary = two_ranks.get_collective_summary()
    assert (summary["size_bucket"] > 0).all()


def test_critical_path_numbering_table_and_chart_agree(two_ranks):
    rows = critical_path_rows(two_ranks)
    assert set(rows["region"]) == {"ProfilerStep#551"}  # the step's number, as everywhere
    assert "" not in set(rows["bound_by"])  # no blank row
    assert rows["pctg"].sum() == pytest.approx(100, abs=0.05)
    cp, _ = two_ranks.critical_path_analysis(0, "ProfilerStep", 0)
    assert "301.5 ms" in rows.attrs["note"] and "607.3 ms" in rows.attrs["note"]
    segments = critical_path_segments(cp)
    assert not segments["lane"].str.contains("-1").any()  # no "CPU tid -1"
    zero = segments["bound_by"] == ZERO_WEIGHT
    assert (segments.loc[zero, "lane"] == "dependencies").all()
    assert segments.loc[zero, "weight_ms"].sum() == 0
    weighted = segments.loc[~zero, "weight_ms"].sum()
    assert weighted == pytest.approx(cp.length_us / 1e3, rel=1e-6)
    title = plots.plot_critical_path(cp).layout.title.text
    span = segments["end_ms"].max() - segments["start_ms"].min()
    assert f"{cp.length_us / 1e3:,.1f} ms of weighted edges over {span:,.1f} ms" in title


def test_step_bars_do_not_count_overlap_twice(two_ranks):
    steps = two_ranks.get_step_breakdown(visualize=False)
    parts = step_segments(steps)
    stacked = parts.drop(columns=["rank:step", "step_time"]).sum(axis=1)
    assert np.allclose(stacked * 1e3, steps["gpu_span"])  # adds up to the span, not more
    assert (parts.drop(columns=["rank:step"]) >= 0).all().all()


def test_idle_sections_use_time_not_per_stream_shares(page, two_ranks):
    per_stream, _ = two_ranks.get_idle_time_breakdown(visualize=False)
    figure = plots.plot_idle_time_breakdown(per_stream, pctg=False)
    assert np.isclose(sum(sum(t.y) for t in figure.data), per_stream["idle_time"].sum())
    assert "Idle time (µs)" in figure.layout.yaxis.title.text


def test_timers_heatmap_scale_starts_at_zero(two_ranks):
    figure = plots.plot_timer_heatmap(two_ranks.get_annotation_timers())
    assert figure.data[0].zmin == 0 and figure.data[0].zmax >= 607


def test_timers_chart_is_one_row_per_timer(two_ranks):
    minmax = two_ranks.get_timers_across_ranks(log_option="minmax")
    figure = plots.plot_timers_minmax(minmax)
    assert figure.data[0].orientation == "h" and figure.layout.height >= 36 * len(minmax)
    assert figure.layout.xaxis.type == "log"  # 0.1 ms to 600 ms


def test_kernel_type_pie_hides_labels_of_slivers(two_ranks):
    type_df, _ = two_ranks.get_gpu_kernel_breakdown(visualize=False)
    labels = plots.plot_kernel_type_pie(type_df).data[0].texttemplate
    shares = type_df.loc[type_df["sum"] > 0, "sum"] / type_df["sum"].sum()
    assert [bool(t) for t in labels] == (shares >= 0.02).tolist()


def test_launch_table_has_times_not_correlation_ids(page):
    launches = page[page.index("<section id='launches'>") :]
    launches = launches[: launches.index("</section>")]
    assert ">correlation<" not in launches and ">launch_delay<" in launches


def test_tables_readable(two_ranks):
    frame = pd.DataFrame(
        {"name": ["k" * 200], "peak_allocated": [2_873_323_520], "calls": [3], "x": [0.5],
         "step": [1009]}
    )  # fmt: skip
    html = table(frame)
    assert "<div class='table'>" in html  # scrolls inside its box
    assert "title='" + "k" * 200 + "'" in html and "k" * 69 + "…" in html
    assert "2.7 GiB" in html and "2,873,323,520 bytes" in html
    assert ">3<" in html and ">0.50<" in html and ">1009<" in html
    assert "Nothing to show" in table(frame.iloc[:0]) and "why" in table(None, empty="why")


def test_absent_views_say_why(page, two_ranks):
    _, absent = summary_tables(two_ranks)
    assert "profile_memory=True" in absent["memory_peaks"]
    assert "device=" in absent["mfu"] and "device=" in absent["optimization_targets"]
    memory = page[page.index("<section id='memory'>") :]
    assert "profile_memory=True" in memory[: memory.index("</section>")]
    assert "No data" not in page
    assert "Achieved TFLOP/s (device unknown)" in page and "Roofline (unknown)" not in page


def test_health_section_shows_what_was_left_out(page):
    health = page[page.index("<section id='health'>") :]
    assert "gpu_in_last_step" in health and "include_last_profiler_step=True" in health


def test_single_gpu_without_communication_draws_no_empty_overlap_chart():
    a = TraceAnalysis(trace_dir=SAMPLES / "h100_bert_small", parallel=False)
    page = build_report(a)
    overlap = page[page.index("<section id='overlap'>") :]
    overlap = overlap[: overlap.index("</section>")]
    assert "nothing to hide" in overlap and "class='chart'" not in overlap


def test_memory_by_operator_says_what_is_never_freed():
    a = TraceAnalysis(trace_dir=SAMPLES / "memory_leak", parallel=False)
    table_ = a.get_memory_by_operator().set_index("name")
    leaks = a.get_memory_leaks()
    assert table_["self_unfreed_bytes"].sum() == leaks["bytes"].sum() == 3 * 1_048_576
    assert table_.loc["aten::mm", "free_count"] == 0  # freed by other operators, and so:
    assert table_.loc["aten::mm", "self_unfreed_bytes"] == 0


def test_cpu_only_report_and_summary(tmp_path):
    a = TraceAnalysis(trace_dir=DATA / "cpu_only", parallel=False)
    page = build_report(a)
    assert "CPU-only" in page and "No data" not in page


def test_critical_path_note_without_steps(tmp_path):
    b = TraceBuilder()
    b.cpu_op("aten::mm", 0, 10)
    b.kernel("k", 5, 20, launch_ts=2)
    a = TraceAnalysis(trace_files={0: b.write(tmp_path / "t.json")}, parallel=False, cache=False)
    rows = critical_path_rows(a)
    assert set(rows["region"]) == {"whole trace"} and rows.attrs["note"].endswith(".")


def test_critical_path_note_measures_the_step_to_the_end_of_its_gpu_work(tmp_path):
    # the step's CPU range is 10 us; the kernel it launches runs to 100 us: the path (about
    # 100 us) is not longer than the step, and no negative gap is stated
    b = TraceBuilder()
    b.step(1, 0, 10)
    b.cpu_op("aten::mm", 1, 5)
    b.kernel("k", 10, 90, launch_ts=2)
    b.step(2, 200, 10)
    b.cpu_op("aten::mm", 201, 5)
    a = TraceAnalysis(
        trace_files={0: b.write(tmp_path / "t.json")}, parallel=False, cache=False,
        include_last_profiler_step=True,
    )  # fmt: skip
    note = critical_path_rows(a).attrs["note"]
    assert "of the 100 µs from ProfilerStep#1's start" in note, note
    assert "the other -" not in note


def test_no_bus_bandwidth_to_draw_is_said_not_drawn_empty(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 100)
    b.step(2, 100, 100)
    b.kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWork)", 20, 30, launch_ts=10)
    a = TraceAnalysis(trace_files={0: b.write(tmp_path / "t.json")}, parallel=False, cache=False)
    assert len(plots.plot_bus_bandwidth(a.get_collectives().instances).data) == 0
    page = build_report(a)
    collectives = page[page.index("<section id='collectives'>") :]
    collectives = collectives[: collectives.index("</section>")]
    assert "No bus bandwidth to draw" in collectives and "class='chart'" not in collectives
