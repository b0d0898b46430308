"""Memory figures: allocated / reserved over time with the steps shaded, and the raw memory
timeline by category (HTA's chart)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

#: (divisor, name) of the unit a panel of bytes is drawn in, by its largest value
_UNITS = ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "bytes"))


def byte_unit(largest: float) -> tuple[int, str]:
    """The unit whose numbers stay readable for values up to ``largest`` bytes (never "15µ MiB"
    for 16 bytes)."""
    return next(((d, n) for d, n in _UNITS if largest >= d), _UNITS[-1])


def plot_memory_timeline(line: pd.DataFrame, steps: dict | None = None) -> go.Figure:
    """Allocated and reserved memory over time (ms from the panel's first memory event or step,
    whichever is first: the axis starts at 0), one panel per (rank, device), in the unit that
    suits its peak; ProfilerSteps shaded."""
    keys = list(line.groupby(["rank", "device"], sort=True).groups)
    fig = make_subplots(rows=max(len(keys), 1), cols=1, shared_xaxes=False,
                        subplot_titles=[f"rank {r}, {d}" for r, d in keys])  # fmt: skip
    for i, (rank, device) in enumerate(keys, start=1):
        part = line[(line["rank"] == rank) & (line["device"] == device)]
        ranks_steps = (steps or {}).get(rank, pd.DataFrame())
        origin = min([part["ts"].min(), *([ranks_steps["ts"].min()] if len(ranks_steps) else [])])
        x = (part["ts"] - origin) / 1e6
        divisor, unit = byte_unit(float(part[["allocated", "reserved"]].max().max() or 0))
        for column, name in (("allocated", "allocated"), ("reserved", "reserved")):
            fig.add_trace(
                go.Scatter(x=x, y=part[column] / divisor, mode="lines", line_shape="hv",
                           name=f"{name} (rank {rank}, {device})"),
                row=i, col=1,
            )  # fmt: skip
        for step in ranks_steps.itertuples(index=False):
            fig.add_vrect(x0=(step.ts - origin) / 1e6, x1=(step.ts + step.dur - origin) / 1e6,
                          fillcolor="grey", opacity=0.08, line_width=0, row=i, col=1)  # fmt: skip
        fig.update_yaxes(title_text=unit, rangemode="tozero", exponentformat="none",
                         row=i, col=1)  # fmt: skip
    fig.update_xaxes(title_text="Time (ms)", rangemode="tozero")
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
