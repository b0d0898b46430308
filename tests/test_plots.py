"""Figures: every chart builds from the analysis tables, with titles, axis labels and names."""

from __future__ import annotations

import plotly.graph_objects as go

from hta_lite import plots


def test_figures_build_from_results(two_ranks):
    temporal = two_ranks.get_temporal_breakdown(visualize=True)  # visualize never blocks a script
    idle, _ = two_ranks.get_idle_time_breakdown(visualize=True)
    overlap = two_ranks.get_comm_comp_overlap(visualize=True)
    type_df, kernel_df = two_ranks.get_gpu_kernel_breakdown(visualize=True)
    figs = [
        plots.plot_temporal_breakdown(temporal),
        plots.plot_idle_time_breakdown(idle),
        plots.plot_idle_time_breakdown(idle, pctg=False),
        plots.plot_comm_comp_overlap(overlap),
        plots.plot_kernel_type_pie(type_df),
        plots.plot_kernel_type_pies_per_rank(kernel_df, "COMMUNICATION"),
        *plots.plot_kernel_distribution(kernel_df),
    ]
    for fig in figs:
        assert isinstance(fig, go.Figure)
        assert fig.layout.title.text
        assert len(fig.data) > 0
    assert figs[0].layout.yaxis.title.text == "Share of GPU span (%)"
    bars = next(f for f in figs if f.layout.title.text.startswith("COMMUNICATION: kernel duration"))
    names = {t.name for t in bars.data}
    assert any(n.startswith("ncclKernel") for n in names)
    assert bars.data[0].error_y.array is not None


def test_show_does_nothing_outside_a_notebook():
    assert plots.in_notebook() is False
