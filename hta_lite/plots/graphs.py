"""Figure of CUDA / HIP graph launches: each launch's GPU time by kernel type, mapped or not."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go


def plot_graph_launches(launches: pd.DataFrame, kernels: pd.DataFrame) -> go.Figure:
    """One bar per launch (``get_graph_launches``), stacked by kernel type from
    ``get_graph_kernels``; the events no operator was mapped to are hatched."""
    label = {
        (r.rank, r.row): f"rank {r.rank} · {r.name} @ {r.ts // 1000 % 10**9} µs"
        for r in launches.itertuples()
    }
    kernels = kernels[[(r, w) in label for r, w in zip(kernels["rank"], kernels["launch_row"])]]
    unmapped = ~kernels["mapped"].astype(bool)
    sums = (
        kernels.assign(unmapped=unmapped)
        .groupby(["rank", "launch_row", "kernel_type", "unmapped"], sort=False)["gpu_time(us)"]
        .sum()
        .reset_index()
    )
    fig = go.Figure()
    for (kind, not_mapped), part in sums.groupby(["kernel_type", "unmapped"], sort=True):
        fig.add_bar(
            x=[label[(r, w)] for r, w in zip(part["rank"], part["launch_row"])],
            y=part["gpu_time(us)"],
            name=f"{kind} (not mapped)" if not_mapped else kind,
            marker_pattern_shape="/" if not_mapped else "",
        )
    fig.update_layout(
        barmode="stack",
        title="CUDA / HIP graph launches: GPU time replayed, by kernel type",
        yaxis={"title": "GPU time (µs)"},
        xaxis={"title": "graph launch"},
    )
    return fig
