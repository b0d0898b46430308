"""Figures across ranks: timers, stragglers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go


def _texts(values) -> list[str]:
    return [str(v) for v in values]


def plot_timers_minmax(table: pd.DataFrame) -> go.Figure:
    """Per timer, the fastest and slowest rank (ms): the gap is the imbalance. One row per
    timer (horizontal bars), so that many timers with long names stay readable."""
    names = _texts(table.index)
    fig = go.Figure(
        [
            go.Bar(
                y=names,
                x=table["min_ms"],
                name="min across ranks",
                orientation="h",
                hovertext=[f"rank {r}" for r in table["fastest_rank"]],
            ),
            go.Bar(
                y=names,
                x=table["max_ms"],
                name="max across ranks",
                orientation="h",
                hovertext=[f"rank {r}" for r in table["slowest_rank"]],
            ),
        ]
    )
    spread = table["max_ms"].max() / max(table["min_ms"][table["min_ms"] > 0].min(), 1e-9)
    fig.update_layout(
        title="Timers: (min, max) across ranks",
        xaxis={"title": "Time (ms)", "type": "log" if spread > 100 else "linear"},
        barmode="group",
        yaxis={"autorange": "reversed", "automargin": True},
        height=160 + 36 * len(table),
    )
    return fig


def plot_timer_heatmap(tidy: pd.DataFrame, name: str | None = None) -> go.Figure:
    """Rank x step heatmap of one timer (ProfilerStep by default, else the first timer)."""
    names = tidy["name"].unique().tolist()
    name = name or ("ProfilerStep" if "ProfilerStep" in names else (names[0] if names else ""))
    grid = tidy[tidy["name"] == name].pivot_table(
        index="rank", columns="step", values="elapsed_ms", aggfunc="sum"
    )
    fig = go.Figure(
        go.Heatmap(
            z=grid.to_numpy(),
            x=[str(c) for c in grid.columns],
            y=[str(r) for r in grid.index],
            colorbar={"title": "ms"},
            # from zero: a 0.1 % difference between ranks never spans the whole scale
            zmin=0,
            zmax=float(np.nanmax(grid.to_numpy())) if grid.size else 1.0,
            hovertemplate="rank %{y}, step %{x}: %{z:.2f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"{str(name)}: time per rank and step", xaxis_title="Step", yaxis_title="Rank"
    )
    return fig


def plot_pipeline_stages(stages: pd.DataFrame) -> go.Figure:
    """Each pipeline stage's work per step (``get_straggler_report().stages``), the slowest
    first, against the median of the other stages'."""
    fig = px.bar(
        stages,
        x=stages["rank"].astype(str),
        y="work_us",
        hover_data=["typical_us", "excess_us", "steps"],
        title="Work per step of each pipeline stage, outside communication",
        labels={"x": "Rank (stage)", "work_us": "Work per step (µs)"},
    )
    if len(stages):
        typical = float(stages["work_us"].median())
        fig.add_hline(y=typical, line_dash="dot", annotation_text="median stage")
    return fig


def plot_rank_lateness(lateness: pd.DataFrame) -> go.Figure:
    fig = px.bar(
        lateness,
        x=lateness["rank"].astype(str),
        y="lateness_us",
        hover_data=["max_skew_us", "last_arrivals", "collectives"],
        title="How late each rank reaches its collectives",
        labels={"x": "Rank", "lateness_us": "Lateness per step (µs)"},
    )
    return fig
