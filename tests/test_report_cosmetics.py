"""What the report's charts and tables show, checked on the data behind them: numbers readable
without hovering, axes in units that suit the data, nothing drawn over a label."""

from __future__ import annotations

import math

import pandas as pd
from conftest import SAMPLES

from hta_lite import TraceAnalysis, plots
from hta_lite.views.report import build_report


def test_findings_evidence_and_advice_are_shown_whole(two_ranks):
    page = build_report(two_ranks)
    findings = two_ranks.get_findings()
    assert len(findings)
    for text in [*findings["evidence"], *findings["advice"]]:
        escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert escaped.replace("'", "&#x27;") in page or escaped in page  # not cut to a hover
    assert "td.prose{white-space:normal" in page  # wrapped inside the card, not overflowing


def test_findings_chart_keeps_its_labels_clear_of_the_range(two_ranks):
    findings = two_ranks.get_findings()
    fig = plots.plot_findings(findings)
    bars = fig.data[0]
    assert bars.text is None  # the range's line would cross a label drawn on the bar
    top = findings[findings["saving_ms_per_step"] > 0].iloc[0]
    assert any(f"{top['saving_ms_per_step']:.2f} ms" in str(y) for y in bars.y)


def test_memory_timeline_axes_suit_the_data():
    line = pd.DataFrame({"rank": 0, "device": "cpu", "ts": [20_000_000, 30_000_000],
                         "allocated": [16, 0], "reserved": [16, 16]})  # fmt: skip
    steps = {0: pd.DataFrame({"ts": [7_000_000], "dur": [30_000_000]})}  # starts 13 ms earlier
    fig = plots.plot_memory_timeline(line, steps)
    assert fig.layout.yaxis.title.text == "bytes" and list(fig.data[0].y) == [16, 0]
    assert min(fig.data[0].x) >= 0 and fig.layout.shapes[0].x0 == 0  # from the step's start
    big = line.assign(allocated=[3 * 2**30, 0], reserved=[4 * 2**30, 4 * 2**30])
    assert plots.plot_memory_timeline(big, steps).layout.yaxis.title.text == "GiB"


def test_bus_bandwidth_of_one_message_size_has_labelled_ticks():
    instances = pd.DataFrame({"consistent": True, "busbw_gbps": [10.0, 12.0],
                              "bytes": [3 * 2**19] * 2, "collective": "all_reduce", "pg": "0",
                              "step": 1, "instance": [0, 1], "dtype": "float",
                              "transfer_us": 5.0, "group_size": 2})  # fmt: skip
    axis = plots.plot_bus_bandwidth(instances).layout.xaxis
    low, high = axis.range
    shown = [t for t in axis.tickvals if low <= math.log10(t) <= high]
    assert len(shown) >= 2 and "1.5 MiB" not in axis.ticktext  # powers of two, in range


def test_step_axes_show_whole_steps():
    scored = TraceAnalysis(trace_dir=SAMPLES / "long_run", parallel=False).get_step_anomalies()
    axis = plots.plot_step_anomalies(scored).layout.xaxis
    assert axis.tickformat == "d" and axis.dtick >= 1 and float(axis.dtick).is_integer()


def test_cpu_only_charts_do_not_speak_of_the_gpu():
    folder = SAMPLES / "gloo_4ranks"
    findings = TraceAnalysis(trace_dir=folder, parallel=False).get_key_findings()
    fig = plots.plot_key_findings(findings)
    assert "GPU" not in fig.layout.xaxis.title.text
    assert not any("GPU" in str(y) for y in fig.data[0].y)
