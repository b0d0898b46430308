"""Figure of a critical path: its edges on a timeline, one lane per CPU thread / GPU stream,
coloured by what bounds them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go


def critical_path_segments(cp) -> pd.DataFrame:
    """One row per timed edge of the path: ``start_ms`` / ``end_ms`` from the path's start,
    ``lane`` (``CPU tid N`` / ``GPU stream S``), ``bound_by``, ``name``."""
    g = cp.graph
    path = np.asarray(cp.path, np.int64)
    table = cp.get_critical_path_breakdown()
    if not len(path):
        return pd.DataFrame(columns=["start_ms", "end_ms", "lane", "bound_by", "name"])
    start, end = g.node_ts[g.src[path]], g.node_ts[g.dst[path]]
    origin = start.min()
    stream, tid = table["stream"].to_numpy(), table["tid"].to_numpy()
    lane = [f"GPU stream {s}" if s >= 0 else f"CPU tid {t}" for s, t in zip(stream, tid)]
    frame = pd.DataFrame(
        {
            "start_ms": (start - origin) / 1e6,
            "end_ms": (end - origin) / 1e6,
            "lane": lane,
            "bound_by": table["bound_by"].replace("", "dependency").to_numpy(),
            "name": table["s_name"].fillna(table["type"]).to_numpy(),
        }
    )
    return frame[frame["end_ms"] > frame["start_ms"]]


def plot_critical_path(cp) -> go.Figure:
    """The path's edges over time (ms), per CPU thread / GPU stream, coloured by ``bound_by``."""
    data = critical_path_segments(cp)
    fig = px.bar(
        data.assign(duration_ms=data["end_ms"] - data["start_ms"]),
        x="duration_ms",
        base="start_ms",
        y="lane",
        color="bound_by",
        orientation="h",
        hover_data=["name", "start_ms", "end_ms"],
        labels={"duration_ms": "Time (ms)", "lane": ""},
        title=f"Critical path of rank {cp.rank}: {cp.length_us / 1000:.3f} ms",
    )
    fig.update_layout(barmode="overlay", xaxis_title="Time from the path's start (ms)")
    return fig
