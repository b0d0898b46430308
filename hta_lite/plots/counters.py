"""Figures of the counters and launches: queue length, copy bandwidth, launch statistics, kernel
sequences."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from ..classify import short_name
from .budget import MAX_POINTS


def _texts(values) -> list[str]:
    return [str(v) for v in values]


def plot_launch_stats(
    df: pd.DataFrame, rank: int, runtime_cutoff: float = 50, launch_delay_cutoff: float = 100
) -> list[go.Figure]:
    """Short kernels (GPU time below CPU launch time), runtime outliers, launch-delay outliers.
    The scatters' hovers name kernels short (:func:`~hta_lite.classify.short_name`); their data,
    with whole names, is the figures' :func:`.budget.full_data` when they are drawn reduced."""
    full = df
    names = df["kernel_name"].astype("category")
    short = names.map({n: short_name(str(n)) for n in names.cat.categories})
    df = df.assign(kernel_name=_texts(short), launch_name=_texts(df["launch_name"]))
    short = df[(df["cpu_duration"] <= runtime_cutoff) & (df["gpu_duration"] < df["cpu_duration"])]
    figs = [
        px.histogram(
            short,
            x="gpu_duration",
            title=f"Rank {rank}: kernels shorter than their launch ({len(short)})",
            labels={"gpu_duration": "GPU duration (µs)"},
            hover_data=["kernel_name"],
        ),
        px.scatter(
            df,
            x="correlation",
            y="cpu_duration",
            color=df["cpu_duration"] > runtime_cutoff,
            hover_data=["launch_name", "kernel_name"],
            title=f"Rank {rank}: launch call duration (outliers > {runtime_cutoff} µs)",
            labels={"cpu_duration": "Launch call duration (µs)", "color": "outlier"},
        ),
        px.scatter(
            df,
            x="correlation",
            y="launch_delay",
            color=df["launch_delay"] > launch_delay_cutoff,
            hover_data=["launch_name", "kernel_name"],
            title=f"Rank {rank}: launch delay (outliers > {launch_delay_cutoff} µs)",
            labels={"launch_delay": "Launch end to GPU start (µs)", "color": "outlier"},
        ),
    ]
    if len(df) > MAX_POINTS:
        figs[1]._hta_full_data = figs[2]._hta_full_data = full
    return figs


def plot_queue_length(series: pd.DataFrame, rank: int) -> go.Figure:
    fig = go.Figure()
    for stream, part in series.groupby("stream"):
        fig.add_trace(
            go.Scatter(
                x=(part["ts"] - series["ts"].min()) / 1000,
                y=part["queue_length"],
                mode="lines",
                line_shape="hv",
                name=f"stream {stream}",
            )
        )
    fig.update_layout(
        title=f"Rank {rank}: launch queue length per stream",
        xaxis_title="Time since first launch (µs)",
        yaxis_title="Queued operations",
    )
    return fig


def plot_memory_bw(series: pd.DataFrame, rank: int) -> go.Figure:
    fig = go.Figure()
    for name, part in series.groupby("name"):
        fig.add_trace(
            go.Scatter(
                x=(part["ts"] - series["ts"].min()) / 1000,
                y=part["memory_bw_gbps"],
                mode="lines",
                line_shape="hv",
                name=str(name),
            )
        )
    fig.update_layout(
        title=f"Rank {rank}: memory bandwidth by copy kind",
        xaxis_title="Time since first copy (µs)",
        yaxis_title="Bandwidth (GB/s)",
    )
    return fig


def plot_frequent_sequences(patterns: pd.DataFrame) -> go.Figure:
    names = [str(p if len(p) < 80 else p[:77] + "...") for p in patterns["pattern"]]
    fig = px.bar(
        x=names,
        y=patterns["count"],
        title="Most frequent kernel sequences",
        labels={"x": "Pattern", "y": "Occurrences"},
    )
    return fig


def plot_cupti_counters(df: pd.DataFrame, counter: str = "flops", top: int = 15) -> go.Figure:
    """Bar per operator (the innermost ``cpu_op`` that launched the kernels): the sum of a CUPTI
    counter (``flops`` by default) over its profiled kernels, the ``top`` largest."""
    per_op = df.groupby("bottom_level_op")[counter].sum().sort_values(ascending=False).head(top)
    fig = go.Figure(go.Bar(x=_texts(per_op.index), y=per_op.to_numpy()))
    fig.update_layout(
        title=f"CUPTI counter {str(counter)} by operator (sum over its kernels)",
        xaxis_title="operator (innermost cpu_op of the launch)",
        yaxis_title=str(counter),
    )
    return fig
