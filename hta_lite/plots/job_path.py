"""Figure of the job critical path: one lane per rank, the path's rows over time coloured by
what bounds them, a line at every hop between ranks."""

from __future__ import annotations

import plotly.express as px
import plotly.graph_objects as go

from .budget import bucketed_bars, bucketed_note
from .critical_path import COLORS

JOB_COLORS = {**COLORS, "communication": "#b279a2", "untracked": "#d3d7dc"}


def plot_job_critical_path(path, title: str | None = None) -> go.Figure:
    """``path``: a :class:`~hta_lite.analyses.job_path.JobCriticalPath`. x: ms from the first
    step's start; y: ``rank N``; hops: dashed lines from the rank that arrived last to the one
    that waited. More rows than a browser draws at once are drawn by
    time bucket (:func:`.budget.bucketed_bars`, said in the title; the rows: the figure's
    :func:`.budget.full_data`)."""
    rows = path.path()
    origin = float(path.steps()["start_us"].min()) if len(rows) else 0.0
    full = rows.assign(
        start_ms=(rows["start_us"] - origin) / 1e3,
        end_ms=(rows["start_us"] + rows["duration_us"] - origin) / 1e3,
        lane="rank " + rows["rank"].astype(str),
    )
    data, width = bucketed_bars(full, ["lane", "bound_by"], "duration_us")
    data = data.assign(duration_ms=data["end_ms"] - data["start_ms"])
    total = float(path.steps()["step_us"].sum()) / 1e3
    fig = px.bar(
        data,
        x="duration_ms",
        base="start_ms",
        y="lane",
        color="bound_by",
        color_discrete_map=JOB_COLORS,
        orientation="h",
        hover_data=["step", "name", "category", "start_ms", "duration_ms"],
        labels={"duration_ms": "Time (ms)", "lane": ""},
        title=(title or "Job critical path")
        + f": {len(path.steps())} step(s), {total:,.1f} ms, {len(path.hops())} hop(s)"
        + bucketed_note(len(full), len(data), width, "rows"),
    )
    if len(data) < len(full):
        fig._hta_full_data = full
    for hop in path.hops().itertuples(index=False):
        at = (hop.at_us - origin) / 1e3
        fig.add_trace(go.Scatter(
            x=[at, at], y=[f"rank {hop.from_rank}", f"rank {hop.to_rank}"], mode="lines",
            line={"dash": "dash", "color": "#333"}, showlegend=False,
            hovertext=f"{hop.collective}: rank {hop.to_rank} waited {hop.wait_us:,.0f} µs",
        ))  # fmt: skip
    ranks = sorted(rows["rank"].unique().tolist()) if len(rows) else []
    fig.update_layout(
        barmode="overlay",
        xaxis_title="Time from the first step's start (ms)",
        yaxis={"categoryorder": "array", "categoryarray": [f"rank {r}" for r in ranks]},
    )
    return fig
