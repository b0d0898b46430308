"""Figure builders: DataFrame in, ``plotly.graph_objects.Figure`` out (no computation).

``show(fig)`` displays a figure only inside a notebook kernel, so that
``visualize=True`` never opens a browser or blocks a batch script.
"""

from __future__ import annotations

import html

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go


def label(name) -> str:
    """A kernel/op name as plotly text: plotly reads a subset of HTML in labels, so ``<`` and ``&``
    are escaped to show names such as ``kernel<float, 4>`` literally (and never as markup)."""
    return html.escape(str(name), quote=False)


def labels(values) -> list[str]:
    return [label(v) for v in values]


def in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def show(fig: go.Figure) -> None:
    if in_notebook():
        fig.show()


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
    data = type_df[type_df["sum"] > 0]
    fig = px.pie(
        data,
        values="sum",
        names="kernel_type",
        title="GPU time by kernel type (all ranks)",
        hover_data=["percentage"],
    )
    fig.update_traces(hovertemplate="%{label}<br>%{value:.1f} µs<br>%{percent}")
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
            go.Pie(labels=labels(part["name"]), values=part["sum (us)"], name=f"rank {rank}"),
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
                    name=label(name[:60]),
                    hovertext=[label(name)] * len(k),
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
        df.assign(name=labels(df["name"])),
        x="name",
        y="sum (us)",
        color=df["rank"].astype(str),
        barmode="group",
        title="GPU time per user annotation",
        labels={"sum (us)": "Time (µs)", "name": "Annotation", "color": "Rank"},
    )
    return fig


def plot_launch_stats(
    df: pd.DataFrame, rank: int, runtime_cutoff: float = 50, launch_delay_cutoff: float = 100
) -> list[go.Figure]:
    """Short kernels (GPU time below CPU launch time), runtime outliers, launch-delay outliers."""
    df = df.assign(kernel_name=labels(df["kernel_name"]), launch_name=labels(df["launch_name"]))
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
    names = [label(p if len(p) < 80 else p[:77] + "...") for p in patterns["pattern"]]
    fig = px.bar(
        x=names,
        y=patterns["count"],
        title="Most frequent kernel sequences",
        labels={"x": "Pattern", "y": "Occurrences"},
    )
    return fig


def plot_diff(df: pd.DataFrame, column: str, title: str, top: int = 30) -> go.Figure:
    """Horizontal bars of the largest changes of a ``TraceDiff.compare_traces`` column."""
    data = df.reindex(df[column].abs().sort_values(ascending=False).index).head(top)
    names = [label(n if len(str(n)) < 70 else str(n)[:67] + "...") for n in data.index]
    fig = go.Figure(go.Bar(x=data[column], y=names, orientation="h", hovertext=labels(data.index)))
    fig.update_layout(
        title=title,
        xaxis_title=title,
        yaxis={"autorange": "reversed"},
        height=max(300, 22 * len(names) + 120),
    )
    return fig


def plot_step_breakdown(df: pd.DataFrame) -> go.Figure:
    """Per step and rank: GPU busy split by kind, and idle, stacked."""
    long = df.melt(
        id_vars=["rank", "step"],
        value_vars=["compute", "communication", "memory", "gpu_idle"],
        var_name="kind",
        value_name="us",
    )
    long["rank:step"] = long["rank"].astype(str) + ":" + long["step"].astype(str)
    fig = px.bar(
        long,
        x="rank:step",
        y="us",
        color="kind",
        title="Per-step GPU time",
        labels={"us": "Time (µs)"},
    )
    fig.update_layout(barmode="stack")
    return fig


def plot_timers_minmax(table: pd.DataFrame) -> go.Figure:
    """Per timer, the fastest and slowest rank (ms): the gap is the imbalance."""
    names = labels(table.index)
    fig = go.Figure(
        [
            go.Bar(
                x=names,
                y=table["min_ms"],
                name="min across ranks",
                hovertext=[f"rank {r}" for r in table["fastest_rank"]],
            ),
            go.Bar(
                x=names,
                y=table["max_ms"],
                name="max across ranks",
                hovertext=[f"rank {r}" for r in table["slowest_rank"]],
            ),
        ]
    )
    fig.update_layout(
        title="Timers: (min, max) across ranks", yaxis_title="Time (ms)", barmode="group"
    )
    return fig


def plot_timer_heatmap(tidy: pd.DataFrame, name: str | None = None) -> go.Figure:
    """Rank x step heatmap of one timer (ProfilerStep by default, else the first timer)."""
    names = tidy["name"].unique().tolist()
    name = name or ("ProfilerStep" if "ProfilerStep" in names else (names[0] if names else ""))
    grid = tidy[tidy["name"] == name].pivot_table(
        index="rank", columns="step", values="elapsed_ms", aggfunc="sum"
    )
    fig = go.Figure(
        go.Heatmap(
            z=grid.to_numpy(),
            x=[str(c) for c in grid.columns],
            y=[str(r) for r in grid.index],
            colorbar={"title": "ms"},
            hovertemplate="rank %{y}, step %{x}: %{z:.2f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"{label(name)}: time per rank and step", xaxis_title="Step", yaxis_title="Rank"
    )
    return fig


def plot_rank_lateness(lateness: pd.DataFrame) -> go.Figure:
    fig = px.bar(
        lateness,
        x=lateness["rank"].astype(str),
        y="lateness_us",
        hover_data=["max_skew_us", "last_arrivals", "collectives"],
        title="How late each rank reaches its collectives",
        labels={"x": "Rank", "lateness_us": "Lateness per step (µs)"},
    )
    return fig
