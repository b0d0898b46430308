"""Long-run figures: step time per step and rank, anomalies marked, periodic steps shaded."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .base import step_axis


def plot_step_anomalies(scored: pd.DataFrame, periods: pd.DataFrame | None = None) -> go.Figure:
    """Step time (ms) per step, one line per rank (``get_step_anomalies``); anomalous steps as
    red markers with their cause on hover; the steps of each recurring pattern
    (``get_step_periodicity``) shaded."""
    fig = go.Figure()
    for rank, part in scored.groupby("rank", sort=True):
        fig.add_scatter(x=part["step"], y=part["step_time"] / 1e3, mode="lines+markers",
                        name=f"rank {rank}", marker={"size": 4})  # fmt: skip
        odd = part[part["anomalous"]]
        if len(odd):
            fig.add_scatter(
                x=odd["step"], y=odd["step_time"] / 1e3, mode="markers",
                marker={"size": 11, "color": "red", "symbol": "circle-open"},
                name=f"anomalous, rank {rank}",
                hovertext=[f"step {s}: {c} +{e / 1e3:.1f} ms (origin rank {o})" for s, c, e, o
                           in zip(odd["step"], odd["cause"], odd["cause_excess(us)"],
                                  odd["origin_rank"])],
                hoverinfo="text",
            )  # fmt: skip
    for row in (periods if periods is not None else pd.DataFrame()).itertuples():
        for step in (int(s) for s in row.steps.split(", ")):
            fig.add_vrect(x0=step - 0.5, x1=step + 0.5, fillcolor="orange", opacity=0.12,
                          line_width=0)  # fmt: skip
    fig.update_layout(title="Step time per step (anomalies circled, periodic steps shaded)",
                      xaxis=step_axis(scored["step"]), yaxis_title="step time (ms)")  # fmt: skip
    return fig
