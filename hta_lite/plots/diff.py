"""Figures of a trace diff."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .base import label, labels


def plot_diff(df: pd.DataFrame, column: str, title: str, top: int = 30) -> go.Figure:
    """Horizontal bars of the largest changes of a ``TraceDiff.compare_traces`` column."""
    data = df.reindex(df[column].abs().sort_values(ascending=False).index).head(top)
    names = [label(n if len(str(n)) < 70 else str(n)[:67] + "...") for n in data.index]
    fig = go.Figure(go.Bar(x=data[column], y=names, orientation="h", hovertext=labels(data.index)))
    fig.update_layout(
        title=title,
        xaxis_title=title,
        yaxis={"autorange": "reversed"},
        height=max(300, 22 * len(names) + 120),
    )
    return fig
