"""Memory snapshot figures: memory over time with the peak marked, the segment map, and who holds
the memory at the peak (:class:`hta_lite.MemorySnapshot`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

GIB = 2**30


def plot_snapshot_timeline(line: pd.DataFrame, peaks: pd.DataFrame) -> go.Figure:
    """Active (and, where the trace records segments, reserved) GiB after each trace entry, per
    device (``timeline()``), over ms from the first entry, or over the entries' indices where
    the trace records no times (PyTorch 2.0); each device's peak marked (``peaks()``)."""
    fig = go.Figure()
    by_index = bool((line["time_us"] < 0).any())
    for device, part in line.groupby("device", sort=True):
        origin = part["index"].min() - 1 if by_index else part["time_us"].min()
        x = part["index"] - origin if by_index else (part["time_us"] - origin) / 1e3
        fig.add_scatter(x=x, y=part["active_bytes"].astype(float) / GIB, mode="lines",
                        line_shape="hv", name=f"in use, device {device}")  # fmt: skip
        if part["reserved_bytes"].notna().any():
            fig.add_scatter(x=x, y=part["reserved_bytes"] / GIB, mode="lines", line_shape="hv",
                            name=f"reserved, device {device}")  # fmt: skip
        peak = peaks[peaks["device"] == device].iloc[0]
        at = peak["index"] - origin if by_index else (peak["time_us"] - origin) / 1e3
        fig.add_scatter(
            x=[at], y=[float(peak["active_bytes"]) / GIB],
            mode="markers+text", marker={"size": 11, "symbol": "x"},
            text=[f"peak {float(peak['active_bytes']) / GIB:.2f} GiB"], textposition="top center",
            name=f"peak, device {device}",
        )  # fmt: skip
    fig.update_layout(
        title="Memory in use over the allocator's trace (walked back from the snapshot)",
        xaxis_title="trace entry (no times recorded)" if by_index
        else "time (ms from the first entry)",
        yaxis_title="GiB",
    )  # fmt: skip
    return fig


def plot_segment_map(by_segment: pd.DataFrame, top: int = 60) -> go.Figure:
    """The ``top`` largest segments (``summary(by="segment")``), each a bar of its allocated
    (requested), internal-free (rounding) and external-free (cached, unused) bytes."""
    rows = by_segment.iloc[
        np.argsort(-by_segment["reserved_bytes"].to_numpy(dtype=float), kind="stable")[:top]
    ]
    labels = [f"{int(a):#x}" for a in rows["address"]]
    fig = go.Figure()
    for column, name in (("allocated_bytes", "allocated"), ("free_internal_bytes", "internal free"),
                         ("free_external_bytes", "external free")):  # fmt: skip
        fig.add_bar(x=labels, y=rows[column].to_numpy(dtype=float) / 2**20, name=name)
    fig.update_layout(
        barmode="stack", title=f"Segment map: the {len(rows)} largest segments",
        xaxis_title="segment (address)", yaxis_title="MiB",
    )  # fmt: skip
    return fig


def plot_peak_sites(by_site: pd.DataFrame, top: int = 15) -> go.Figure:
    """Who holds the memory at the peak: the ``top`` allocation sites (``peak().by_site``)."""
    rows = by_site.head(top).iloc[::-1]
    fig = go.Figure(
        go.Bar(x=[float(b) / GIB for b in rows["bytes"]], y=rows["site"], orientation="h",
               text=[f"{c} allocations" for c in rows["count"]], hoverinfo="x+y+text")
    )  # fmt: skip
    fig.update_layout(
        title="Memory live at the peak, by allocation site", xaxis_title="GiB",
        height=140 + 28 * max(len(rows), 1),
    )  # fmt: skip
    return fig
