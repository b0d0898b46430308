"""Memory figures: allocated / reserved over time with the steps shaded, and the raw memory
timeline by category (HTA's chart)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots


def plot_memory_timeline(line: pd.DataFrame, steps: dict | None = None) -> go.Figure:
    """Allocated and reserved memory (MiB) over time (ms from the first event), one panel per
    (rank, device); ProfilerSteps shaded."""
    keys = list(line.groupby(["rank", "device"], sort=True).groups)
    fig = make_subplots(rows=max(len(keys), 1), cols=1, shared_xaxes=False,
                        subplot_titles=[f"rank {r}, {d}" for r, d in keys])  # fmt: skip
    for i, (rank, device) in enumerate(keys, start=1):
        part = line[(line["rank"] == rank) & (line["device"] == device)]
        origin = part["ts"].min()
        x = (part["ts"] - origin) / 1e6
        for column, name in (("allocated", "allocated"), ("reserved", "reserved")):
            fig.add_trace(
                go.Scatter(x=x, y=part[column] / 2**20, mode="lines", line_shape="hv",
                           name=f"{name} (rank {rank}, {device})"),
                row=i, col=1,
            )  # fmt: skip
        for step in (steps or {}).get(rank, pd.DataFrame()).itertuples(index=False):
            fig.add_vrect(x0=(step.ts - origin) / 1e6, x1=(step.ts + step.dur - origin) / 1e6,
                          fillcolor="grey", opacity=0.08, line_width=0, row=i, col=1)  # fmt: skip
        fig.update_yaxes(title_text="MiB", row=i, col=1)
    fig.update_xaxes(title_text="Time (ms)")
    fig.update_layout(title="Memory: allocated and reserved", height=320 * max(len(keys), 1))
    return fig


def plot_memory_by_category(wide: pd.DataFrame) -> go.Figure:
    """Memory by category over time (GiB, stacked), from the raw memory timeline."""
    fig = go.Figure()
    x = (wide["ts"] - wide["ts"].min()) / 1e6
    for category in [c for c in wide.columns if c != "ts"]:
        fig.add_trace(go.Scatter(x=x, y=wide[category] / 2**30, mode="lines", stackgroup="one",
                                 name=category.replace("_", " ").lower()))  # fmt: skip
    fig.update_layout(title="Memory timeline by category", xaxis_title="Time (ms)",
                      yaxis_title="Memory (GiB)")  # fmt: skip
    return fig
