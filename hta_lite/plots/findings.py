"""Figure of the key findings: the wall-clock ones as a share of the step."""

from __future__ import annotations

import textwrap

import pandas as pd
import plotly.graph_objects as go

from .base import label

KIND_LABELS = {
    "gpu_idle": "GPU idle",
    "straggler": "waiting for a late rank",
    "exposed_communication": "exposed communication",
}


def plot_key_findings(table: pd.DataFrame) -> go.Figure:
    """One bar per finding that is wall-clock time of the step (``step_pctg`` of
    ``get_key_findings``), largest first; the finding's line on hover. The bars are not
    additive: idle time can be the wait for a late rank, which can be exposed communication."""
    timed = table.dropna(subset=["step_pctg"]).iloc[::-1]
    hover = ["<br>".join(textwrap.wrap(label(t), 90)) for t in timed["finding"]]
    fig = go.Figure(
        go.Bar(
            x=timed["step_pctg"],
            y=[KIND_LABELS.get(k, k) for k in timed["kind"]],
            orientation="h",
            text=[f"{v:.1f} %" for v in timed["step_pctg"]],
            textposition="auto",
            hovertext=hover,
            hoverinfo="text",
        )
    )
    fig.update_layout(
        title="Key findings: share of the step (not additive: they can overlap)",
        xaxis={"title": "% of the step (GPU idle: of the GPU span)", "range": [0, 100]},
        height=120 + 50 * max(len(timed), 1),
    )
    return fig
