"""Figure of the key findings: the wall-clock ones as a share of the step."""

from __future__ import annotations

import textwrap

import pandas as pd
import plotly.graph_objects as go

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
    gpu = (timed["kind"] == "gpu_idle").any()  # no GPU words on a CPU-only run's chart
    hover = ["\n".join(textwrap.wrap(str(t), 90)) for t in timed["finding"]]
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
        xaxis={
            "title": "% of the step" + (" (GPU idle: of the GPU span)" if gpu else ""),
            "range": [0, 100],
        },  # fmt: skip
        height=120 + 50 * max(len(timed), 1),
    )
    return fig


def plot_findings(table: pd.DataFrame) -> go.Figure:
    """One bar per timed finding of ``get_findings``: its estimated saving (ms per step, also in
    its label) with the low-high range as an error bar, largest at the top, and the cumulative
    saving of it and every finding above it as a line (the fixes made together, overlaps
    discounted)."""
    timed = table[table["saving_ms_per_step"] > 0].iloc[::-1]
    names = [  # the saving in the label, not on the bar, where the range's line would cross it
        f"{k} · {str(w)[:40]}  {v:.2f} ms ({p:.1f} %)"
        for k, w, v, p in zip(
            timed["kind"], timed["where"], timed["saving_ms_per_step"], timed["saving_pctg"]
        )
    ]
    hover = ["\n".join(textwrap.wrap(str(t), 90)) for t in timed["evidence"]]
    fig = go.Figure(
        go.Bar(
            x=timed["saving_ms_per_step"],
            y=names,
            orientation="h",
            name="saving of the fix alone",
            error_x={
                "type": "data",
                "symmetric": False,
                "array": timed["saving_high_ms"] - timed["saving_ms_per_step"],
                "arrayminus": timed["saving_ms_per_step"] - timed["saving_low_ms"],
            },  # fmt: skip
            hovertext=hover,
            hoverinfo="text",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=timed["cumulative_ms"],
            y=names,
            mode="lines+markers",
            name="cumulative (this and all above, together)",
        )  # fmt: skip
    )
    fig.update_layout(
        title="Findings: step time each fix would save (replayed critical path)",
        xaxis={"title": "ms per step"},
        height=160 + 50 * max(len(timed), 1),
    )
    return fig
