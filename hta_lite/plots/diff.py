"""Figures of a trace diff."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go


def _texts(values) -> list[str]:
    return [str(v) for v in values]


def plot_diff(df: pd.DataFrame, column: str, title: str, top: int = 30) -> go.Figure:
    """Horizontal bars of the largest changes of a ``TraceDiff.compare_traces`` column."""
    data = df.reindex(df[column].abs().sort_values(ascending=False).index).head(top)
    names = [str(n if len(str(n)) < 70 else str(n)[:67] + "...") for n in data.index]
    fig = go.Figure(go.Bar(x=data[column], y=names, orientation="h", hovertext=_texts(data.index)))
    fig.update_layout(
        title=title,
        xaxis_title=title,
        yaxis={"autorange": "reversed"},
        height=max(300, 22 * len(names) + 120),
    )
    return fig
