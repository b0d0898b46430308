"""Figure of a critical path: its edges on a timeline, one lane per CPU thread / GPU stream,
coloured by what bounds them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from .budget import bucketed_bars, bucketed_note

ZERO_WEIGHT = "dependency (zero weight)"
COLORS = {
    "cpu_bound": "#4c78a8", "gpu_compute_bound": "#54a24b", "gpu_communication_bound": "#b279a2",
    "gpu_kernel_launch_overhead": "#f58518", "gpu_kernel_kernel_overhead": "#e45756",
    "data_loading": "#eeca3b", ZERO_WEIGHT: "#d3d7dc",
}  # fmt: skip


def critical_path_segments(cp) -> pd.DataFrame:
    """One row per edge of the path that spans time: ``start_ms`` / ``end_ms`` from the path's
    start, ``lane`` (``CPU thread N`` / ``GPU stream S``: where the edge's event ran; a launch
    delay on the stream it launches to; dependencies, which carry no weight, on a lane of their
    own), ``bound_by`` (``dependency (zero weight)`` for those), ``weight_ms``, ``name``."""
    g = cp.graph
    path = np.asarray(cp.path, np.int64)
    table = cp.get_critical_path_breakdown()
    if not len(path):
        columns = ["start_ms", "end_ms", "lane", "bound_by", "weight_ms", "name"]
        return pd.DataFrame(columns=columns)
    start, end = g.node_ts[g.src[path]], g.node_ts[g.dst[path]]
    origin = start.min()
    target = g.node_event[g.dst[path]]  # the launched kernel, for a launch delay
    stream = np.where(table["stream"] >= 0, table["stream"], cp.events.stream[target])
    bound_by = table["bound_by"].replace("", ZERO_WEIGHT).to_numpy()
    lane = np.where(
        bound_by == ZERO_WEIGHT,
        "dependencies",
        np.where(
            stream >= 0,
            "GPU stream " + stream.astype(str),
            "CPU thread " + table["tid"].astype(str).to_numpy(),
        ),
    )
    frame = pd.DataFrame(
        {
            "start_ms": (start - origin) / 1e6,
            "end_ms": (end - origin) / 1e6,
            "lane": lane,
            "bound_by": bound_by,
            "weight_ms": table["duration"].to_numpy() / 1e3,
            "name": table["s_name"].fillna(table["type"]).to_numpy(),
        }
    )
    return frame[frame["end_ms"] > frame["start_ms"]]


def plot_critical_path(cp, title: str | None = None) -> go.Figure:
    """The path's edges over time (ms), per CPU thread / GPU stream, coloured by ``bound_by``
    (:func:`plot_path_segments` of its :func:`critical_path_segments`)."""
    return plot_path_segments(
        critical_path_segments(cp), cp.length_us, title or f"Critical path of rank {cp.rank}"
    )


def plot_path_segments(segments: pd.DataFrame, length_us: float, title: str) -> go.Figure:
    """A path's edges (:func:`critical_path_segments`) over time. The title gives the path's
    length (``length_us``: the sum of its weighted edges) and the time it spans: the difference
    is dependencies of zero weight (gaps between top-level CPU operators, waits), drawn grey on
    their own lane. A path of more edges than a browser draws at once is drawn by time bucket,
    each lane's edges of one colour in a bucket as one bar as long as they are together
    (:func:`.budget.bucketed_bars`, said in the title: each colour's total stays the table's);
    the edges as they were are the figure's :func:`.budget.full_data`."""
    data, width = bucketed_bars(segments, ["lane", "bound_by"], "weight_ms")
    span = float(segments["end_ms"].max() - segments["start_ms"].min()) if len(data) else 0.0
    fig = px.bar(
        data.assign(duration_ms=data["end_ms"] - data["start_ms"]),
        x="duration_ms",
        base="start_ms",
        y="lane",
        color="bound_by",
        color_discrete_map=COLORS,
        orientation="h",
        hover_data=["name", "start_ms", "end_ms", "weight_ms"],
        labels={"duration_ms": "Time (ms)", "lane": ""},
        title=title
        + f": {length_us / 1000:,.1f} ms of weighted edges over {span:,.1f} ms"
        + bucketed_note(len(segments), len(data), width, "edges"),
    )
    fig.update_layout(barmode="overlay", xaxis_title="Time from the path's start (ms)")
    if len(data) < len(segments):
        fig._hta_full_data = segments
    return fig
