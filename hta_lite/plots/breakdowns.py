"""Figures of the breakdowns: temporal, idle time, overlap, kernels, user annotations, steps."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go


def _texts(values) -> list[str]:
    return [str(v) for v in values]


def plot_temporal_breakdown(df: pd.DataFrame) -> go.Figure:
    """Stacked bar per rank: idle / compute / non-compute share of the GPU span."""
    long = df.melt(
        id_vars=["rank"],
        value_vars=["idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"],
        var_name="category",
        value_name="percent",
    )
    long["category"] = long["category"].str.replace("_time_pctg", "", regex=False)
    fig = px.bar(
        long,
        x="rank",
        y="percent",
        color="category",
        title="Temporal breakdown across ranks",
        labels={"rank": "Rank", "percent": "Share of GPU span (%)", "category": "Time"},
    )
    fig.update_layout(barmode="stack", xaxis={"type": "category"})
    return fig


def plot_idle_time_breakdown(df: pd.DataFrame, pctg: bool = True) -> go.Figure:
    """Bars per (rank, stream) split by idle category."""
    data = df.assign(stream_label=df["rank"].astype(str) + ":" + df["stream"].astype(str))
    y = "idle_time_ratio" if pctg else "idle_time"
    fig = px.bar(
        data,
        x="stream_label",
        y=y,
        color="idle_category",
        hover_data=["rank", "stream", "idle_time", "idle_time_ratio"],
        title="Idle time breakdown per stream",
        labels={
            "stream_label": "rank:stream",
            "idle_time_ratio": "Share of stream idle time",
            "idle_time": "Idle time (µs)",
        },
    )
    if pctg:
        fig.update_layout(yaxis_tickformat=".0%")
    return fig


def plot_gpu_idle_by_cause(df: pd.DataFrame) -> go.Figure:
    """Per rank, the idle time of the whole GPU (no stream busy) by cause (ms), stacked."""
    fig = px.bar(
        df.assign(idle_ms=df["idle_time"] / 1e3, rank=df["rank"].astype(str)),
        x="rank",
        y="idle_ms",
        color="idle_category",
        hover_data=["idle_time", "idle_time_pctg"],
        title="GPU idle time by cause (no stream busy)",
        labels={"rank": "Rank", "idle_ms": "Idle time (ms)", "idle_time": "Idle time (µs)"},
    )
    fig.update_layout(xaxis={"type": "category"})
    return fig


def plot_comm_comp_overlap(df: pd.DataFrame) -> go.Figure:
    fig = px.bar(
        df,
        x="rank",
        y="comp_comm_overlap_pctg",
        title="Communication hidden under computation",
        labels={"rank": "Rank", "comp_comm_overlap_pctg": "Comm time overlapped by compute (%)"},
    )
    fig.update_layout(xaxis={"type": "category"}, yaxis_range=[0, 100])
    return fig


def plot_kernel_type_pie(type_df: pd.DataFrame) -> go.Figure:
    """GPU time by kernel type; slices under 2 % keep their share for the hover and legend only
    (their labels would overlap)."""
    data = type_df[type_df["sum"] > 0]
    share = data["sum"] / data["sum"].sum()
    fig = px.pie(
        data,
        values="sum",
        names="kernel_type",
        title="GPU time by kernel type (all ranks)",
        hover_data=["percentage"],
    )
    fig.update_traces(
        hovertemplate="%{label}<br>%{value:,.0f} µs<br>%{percent}",
        texttemplate=[("%{percent}" if s >= 0.02 else "") for s in share],
        textposition="inside",
    )
    return fig


def plot_kernel_type_pies_per_rank(kernel_df: pd.DataFrame, kernel_type: str) -> go.Figure:
    from plotly.subplots import make_subplots

    data = kernel_df[kernel_df["kernel_type"] == kernel_type]
    ranks = sorted(data["rank"].unique())
    cols = min(2, max(1, len(ranks)))
    rows = max(1, (len(ranks) + cols - 1) // cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        specs=[[{"type": "domain"}] * cols] * rows,
        subplot_titles=[f"Rank {r}" for r in ranks],
    )
    for i, rank in enumerate(ranks):
        part = data[data["rank"] == rank]
        fig.add_trace(
            go.Pie(labels=_texts(part["name"]), values=part["sum (us)"], name=f"rank {rank}"),
            i // cols + 1,
            i % cols + 1,
        )
    fig.update_layout(
        title_text=f"{kernel_type} kernels: time by kernel on each rank", height=350 * rows
    )
    return fig


def plot_kernel_distribution(kernel_df: pd.DataFrame, top: int = 10) -> list[go.Figure]:
    """Per kernel type: mean duration per rank with min/max error bars, one trace per kernel."""
    figs = []
    for kernel_type, part in kernel_df.groupby("kernel_type"):
        part = part[part["name"] != "others"]
        names = part.groupby("name")["sum (us)"].sum().nlargest(top).index
        fig = go.Figure()
        for name in names:
            k = part[part["name"] == name]
            fig.add_trace(
                go.Bar(
                    x=k["rank"].astype(str),
                    y=k["mean (us)"],
                    name=str(name[:60]),
                    hovertext=[str(name)] * len(k),
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": k["max (us)"] - k["mean (us)"],
                        "arrayminus": k["mean (us)"] - k["min (us)"],
                    },
                )
            )
        fig.update_layout(
            title=f"{kernel_type}: kernel duration across ranks (mean, min-max)",
            xaxis_title="Rank",
            yaxis_title="Duration (µs)",
            barmode="group",
        )
        figs.append(fig)
    return figs


def plot_user_annotation_breakdown(df: pd.DataFrame) -> go.Figure:
    fig = px.bar(
        df.assign(name=_texts(df["name"])),
        x="name",
        y="sum (us)",
        color=df["rank"].astype(str),
        barmode="group",
        title="GPU time per user annotation",
        labels={"sum (us)": "Time (µs)", "name": "Annotation", "color": "Rank"},
    )
    return fig


def step_segments(df: pd.DataFrame) -> pd.DataFrame:
    """The per-step breakdown as parts that do not overlap, in ms, per ``rank:step``: compute,
    communication not under compute, other GPU work (copies, sets) under neither, GPU idle.
    They add up to the GPU span; the CPU step time is beside them."""
    exposed = df["communication"] - df["comm_overlapped"]
    other = (df["gpu_busy"] - df["compute"] - exposed).clip(lower=0)
    return pd.DataFrame(
        {
            "rank:step": df["rank"].astype(str) + ":" + df["step"].astype(str),
            "compute": df["compute"] / 1e3,
            "communication (not under compute)": exposed / 1e3,
            "other GPU work (copies, sets)": other / 1e3,
            "GPU idle": df["gpu_idle"] / 1e3,
            "step_time": df["step_time"] / 1e3,  # the step's length, GPU work included
        }
    )


def plot_step_breakdown(df: pd.DataFrame) -> go.Figure:
    """Per step and rank, the GPU span split into parts that do not overlap (stacked: they add
    up to the span), and the step's length (its CPU and GPU work) as a marker."""
    parts = step_segments(df)
    fig = go.Figure()
    for name in parts.columns[1:-1]:
        fig.add_trace(go.Bar(x=parts["rank:step"], y=parts[name], name=name))
    fig.add_trace(
        go.Scatter(
            x=parts["rank:step"], y=parts["step_time"], name="step time", mode="markers",
            marker={"symbol": "line-ew-open", "size": 28, "line": {"width": 3}},
        )
    )  # fmt: skip
    fig.update_layout(
        barmode="stack",
        title="Per-step GPU time (parts do not overlap; they add up to the GPU span)",
        xaxis={"title": "rank:step", "type": "category"},
        yaxis_title="Time (ms)",
    )
    return fig
