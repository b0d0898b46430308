"""Charts a browser can draw (hta_lite.plots.budget): at most MAX_POINTS points and MAX_BARS bars
per figure, the reduced chart keeping what it is read for (outliers, each colour's total), the
data as it was one click away (a CSV next to the report), and every report within 8 MB."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from conftest import sample_folders, shared_cases
from synth import TraceBuilder

from hta_lite import TraceAnalysis, plots
from hta_lite.analyses.critical_path import first_step
from hta_lite.plots.budget import MAX_BARS, MAX_POINTS, bucketed_bars, envelope, full_data
from hta_lite.plots.critical_path import critical_path_segments
from hta_lite.views.report import write_report

REPORT_LIMIT = 8_000_000  # bytes
CHART_LIMIT = 1_000_000  # bytes of one chart's div


def test_envelope_keeps_each_bins_lowest_and_highest():
    x = np.arange(10_000)
    y = np.sin(x / 50.0)
    y[1234], y[8765] = 50.0, -50.0  # two outliers
    keep = envelope(x, y, 100)
    assert len(keep) <= 2 * 100 + 2 and np.all(np.diff(keep) > 0)
    assert {0, 1234, 8765, 9999} <= set(keep.tolist())
    bins = np.minimum(x // 100, 99)
    for b in (0, 37, 99):  # each bin's lowest and highest are kept
        inside = np.flatnonzero(bins == b)
        assert inside[np.argmax(y[inside])] in keep and inside[np.argmin(y[inside])] in keep


def test_a_large_scatter_is_cut_to_the_budget_with_its_data_kept():
    n = 50_000
    frame = pd.DataFrame(
        {
            "correlation": np.arange(n),
            "delay": np.ones(n),
            "kernel": [f"k{i % 7}" for i in range(n)],
        }
    )
    frame.loc[31_337, "delay"] = 900.0
    fig = plots.within_budget(
        go.Figure(
            go.Scatter(
                x=frame["correlation"],
                y=frame["delay"],
                customdata=frame[["kernel"]],
                mode="markers",
                hovertemplate="correlation=%{x}<br>delay=%{y}<br>kernel=%{customdata[0]}",
            )  # fmt: skip
        )
    )
    trace = fig.data[0]
    assert len(trace.x) <= MAX_POINTS and len(trace.customdata) == len(trace.x)
    assert 900.0 in list(trace.y) and 31_337 in list(trace.x)  # the outlier is drawn
    assert f"of {n:,} points" in fig.layout.title.text
    data = full_data(fig)
    assert list(data.columns) == ["trace", "correlation", "delay", "kernel"] and len(data) == n
    small = plots.within_budget(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])))
    assert full_data(small) is None and small.layout.title.text is None


def test_bucketed_bars_keep_each_colours_total():
    rng = np.random.default_rng(7)
    n = 20_000
    start = np.sort(rng.uniform(0, 1000, n))
    rows = pd.DataFrame(
        {
            "start_ms": start,
            "end_ms": start + rng.uniform(0.001, 0.05, n),
            "lane": rng.choice(["CPU thread 1", "GPU stream 7"], n),
            "bound_by": rng.choice(["cpu_bound", "gpu_compute_bound", "launch"], n),
            "weight_ms": 0.0,
            "name": [f"op{i}" for i in range(n)],
        }
    )
    rows["weight_ms"] = rows["end_ms"] - rows["start_ms"]
    bars, width = bucketed_bars(rows, ["lane", "bound_by"], "weight_ms")
    assert len(bars) <= MAX_BARS and width > 0
    assert bars["bars"].sum() == n
    drawn = (bars["end_ms"] - bars["start_ms"]).groupby([bars["lane"], bars["bound_by"]]).sum()
    table = rows["weight_ms"].groupby([rows["lane"], rows["bound_by"]]).sum()
    pd.testing.assert_series_equal(drawn, table, check_names=False, rtol=1e-9)
    assert bars["start_ms"].min() >= rows["start_ms"].min()


def _big_trace(folder, kernels: int = 15_000):
    """One rank, one step of ``kernels`` short kernels with long names, each launched: a
    launch scatter and a critical path beyond what a browser draws at once."""
    b = TraceBuilder(rank=0)
    b.step(1, 0, kernels * 10 + 100)
    for i in range(kernels):
        name = f"void at::native::elementwise_kernel_{i % 40}<128, 4, " + "T" * 150 + ">(int)"
        b.cpu_op("aten::add", 10 * i + 1, 6)
        b.kernel(name, 10 * i + 8 + (i % 13 == 0) * 2, 2, launch_ts=10 * i + 2, launch_dur=4)
    return b.write(folder / "rank0.json")


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    folder = tmp_path_factory.mktemp("big")
    _big_trace(folder)
    return TraceAnalysis(trace_dir=folder, parallel=False)


def _chart_sizes(page: str) -> list[int]:
    return [len(part.split("</script>")[0]) for part in page.split("<div class='chart'>")[1:]]


def test_a_large_traces_report_stays_small_and_links_its_data(big, tmp_path):
    path = write_report(big, tmp_path / "big.html")
    page = path.read_text()
    assert path.stat().st_size < 6_500_000, path.stat().st_size  # plotly.js alone is ~4.9 MB
    assert max(_chart_sizes(page)) < CHART_LIMIT
    links = re.findall(r"href='(big_data/chart-\d+\.csv)'", page)
    assert len(links) >= 3  # two launch scatters and the critical path
    tables = [pd.read_csv(tmp_path / link) for link in links]
    assert all(len(t) >= 15_000 for t in tables)
    launches = [t for t in tables if "kernel_name" in t]
    assert launches and launches[0]["kernel_name"].str.len().max() > 150  # whole names


def test_critical_path_chart_is_drawn_from_the_table_shown(big):
    cp, _ = big.critical_path_analysis(0, "ProfilerStep", 0)
    fig = plots.plot_critical_path(cp)
    bars = [t for t in fig.data if t.type == "bar"]
    assert sum(len(t.x) for t in bars) <= MAX_BARS < len(critical_path_segments(cp))
    assert "drawn as" in fig.layout.title.text
    table = first_step.rows(big.trace(0), cp).set_index("bound_by")["duration_us"]
    for trace in bars:
        if trace.name in table.index:  # each colour is as long in the chart as in the table
            assert float(np.sum(trace.x)) * 1e3 == pytest.approx(table[trace.name], rel=1e-6)


def _folders():
    return {**sample_folders(), **{f"shared/{k}": v for k, v in shared_cases().items()}}


@pytest.mark.parametrize("name", sorted(_folders()))
def test_every_sample_and_shared_report_is_within_budget(name, tmp_path):
    folder = _folders()[name]
    path = write_report(TraceAnalysis(trace_dir=folder, parallel=False), tmp_path / "r.html")
    assert path.stat().st_size <= REPORT_LIMIT
    assert max(_chart_sizes(path.read_text()), default=0) < CHART_LIMIT
