"""Figures of collectives across ranks: bus bandwidth vs message size, who waited in which
collective, arrival skew over time."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from .base import bytes_axis


def plot_bus_bandwidth(instances: pd.DataFrame) -> go.Figure:
    """One point per matched collective that the summary counts (``consistent``: every rank
    agrees on collective, dtype and size) with a known bandwidth: bus bandwidth (GB/s) against
    message size (log x, binary units), coloured by collective; hover gives the group, step
    and transfer time."""
    data = instances[
        instances["consistent"] & instances["busbw_gbps"].notna() & (instances["bytes"] > 0)
    ]
    left_out = len(instances) - len(data)
    fig = px.scatter(
        data,
        x="bytes",
        y="busbw_gbps",
        color="collective",
        hover_data=["pg", "step", "instance", "dtype", "transfer_us", "group_size"],
        labels={"bytes": "Message size", "busbw_gbps": "Bus bandwidth (GB/s)"},
        title="Collectives: bus bandwidth vs message size"
        + (f" ({left_out} without a known size or agreed metadata not drawn)" if left_out else ""),
    )
    fig.update_layout(xaxis=bytes_axis(data["bytes"]))
    return fig


def plot_wait_heatmap(calls: pd.DataFrame) -> go.Figure:
    """Rank x matched collective: the time each rank waited (µs) for the last one to arrive."""
    matched = calls[calls["instance"] >= 0]
    grid = matched.pivot_table(index="rank", columns="instance", values="wait", aggfunc="sum")
    fig = go.Figure(
        go.Heatmap(
            z=grid.to_numpy() / 1000.0,
            x=[str(c) for c in grid.columns],
            y=[str(r) for r in grid.index],
            colorscale="Reds",
            colorbar={"title": "wait (µs)"},
        )
    )
    fig.update_layout(
        title="Wait per rank in each collective",
        xaxis_title="Collective (instance)",
        yaxis_title="Rank",
    )
    return fig


def plot_arrival_skew(instances: pd.DataFrame) -> go.Figure:
    """Arrival skew (latest - earliest start, µs) of each matched collective over time (s from
    the first), coloured by the rank that arrived last."""
    data = instances[instances["ranks_present"] >= 2].copy()
    data["time_s"] = (data["first_start"] - data["first_start"].min()) / 1e9
    data["last rank"] = data["last_rank"].astype(str)
    return px.scatter(
        data,
        x="time_s",
        y="arrival_skew_us",
        color="last rank",
        hover_data=["collective", "pg", "step", "instance"],
        labels={"time_s": "Time (s)", "arrival_skew_us": "Arrival skew (µs)"},
        title="Collectives: arrival skew over time",
    )
