"""Figures of the operator view: time per operator group, module sunburst, roofline, MFU."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..analyses.operators.work import MATRIX_KINDS
from .base import step_axis

KIND_COLORS = {
    "matmul": "#1f77b4", "conv": "#17becf", "attention": "#9467bd", "norm": "#2ca02c",
    "softmax": "#bcbd22", "elementwise": "#ff7f0e", "reduction": "#8c564b", "copy": "#7f7f7f",
    "embedding": "#e377c2",
}  # fmt: skip


def _texts(values) -> list[str]:
    return [str(v) for v in values]


def _group_label(row: pd.Series, keys: list[str]) -> str:
    parts = [str(row[k]) for k in keys if str(row[k])]
    return str(" ".join(parts) if parts else "(none)")


def plot_operator_summary(summary: pd.DataFrame, top: int = 20) -> go.Figure:
    """Horizontal bars of ``device_self_sum(us)`` (launched by the group's calls themselves) and
    of the rest of ``device_total_sum(us)`` (launched by operators they call), the ``top`` groups
    and the graph / no-operator rows."""
    keys = [c for c in ("name", "input_dims", "input_types", "stack") if c in summary.columns]
    shown = summary.head(top)
    shown = pd.concat([shown, summary.iloc[top:][summary.iloc[top:][keys[0]].str.startswith("[")]])
    names = [_group_label(row, keys) for _, row in shown.iterrows()][::-1]
    own = shown["device_self_sum(us)"].to_numpy()[::-1]
    below = (shown["device_total_sum(us)"] - shown["device_self_sum(us)"]).clip(lower=0)
    fig = go.Figure(
        [
            go.Bar(y=names, x=own, orientation="h", name="launched itself"),
            go.Bar(
                y=names, x=below.to_numpy()[::-1], orientation="h", name="by operators it calls"
            ),
        ]
    )
    fig.update_layout(
        barmode="stack",
        title=f"GPU time by operator ({', '.join(keys)}), top {min(top, len(summary))}",
        xaxis_title="GPU time (µs)",
        height=max(400, 22 * len(names) + 150),
        yaxis={"automargin": True},
    )
    return fig


def plot_module_sunburst(modules: pd.DataFrame) -> go.Figure:
    """Sunburst of ``device_total_sum(us)`` by module path (inner rings: outer modules)."""
    tree = modules[~modules["module"].str.startswith("[")]
    ids = tree["module"].tolist()
    parents = [m.rsplit(".", 1)[0] if "." in m else "" for m in ids]
    fig = go.Figure(
        go.Sunburst(
            ids=_texts(ids),
            labels=_texts(m.rsplit(".", 1)[-1] for m in ids),
            parents=_texts(parents),
            values=tree["device_total_sum(us)"],
            branchvalues="total",
            hovertemplate="%{id}<br>%{value:.1f} µs<extra></extra>",
        )
    )
    fig.update_layout(title="GPU time by nn.Module (µs)", height=650)
    return fig


def plot_roofline(table: pd.DataFrame, title: str = "Roofline") -> go.Figure:
    """Log-log roofline: one point per operator group (x: FLOP/byte, y: achieved TFLOP/s, size:
    GPU time, colour: kind), the device's memory slope and compute ceilings. Groups without FLOPs
    (copies, fills) cannot sit on a log axis and are counted in the title."""
    drawn = table[(table["flops"] > 0) & (table["bytes"] > 0)]
    fig = go.Figure()
    size = np.sqrt(drawn["gpu_time(us)"] / max(drawn["gpu_time(us)"].max(), 1e-9)) * 40 + 4
    for kind, part in drawn.groupby("kind", sort=False):
        hover = [
            f"{str(r['name'])}\n{r['input_dims']}\n{r['input_types']}"
            f"\n{r['calls']} calls, {r['gpu_time(us)']:.1f} µs, {r['precision']}"
            f"\n{r['achieved_tflops']:.3g} TFLOP/s, {r['roof_pctg']} % of roof ({r['bound']})"
            for _, r in part.iterrows()
        ]
        fig.add_trace(
            go.Scatter(
                x=part["intensity"], y=part["achieved_tflops"], mode="markers", name=kind,
                marker={"size": size[part.index], "color": KIND_COLORS.get(kind), "opacity": 0.7},
                hovertext=hover, hoverinfo="text",
            )
        )  # fmt: skip
    _add_roofs(fig, drawn)
    skipped = len(table) - len(drawn)
    fig.update_layout(
        title=title + (f" ({skipped} groups without FLOPs not drawn)" if skipped else ""),
        xaxis={"type": "log", "title": "arithmetic intensity (FLOP/byte)"},
        yaxis={"type": "log", "title": "achieved TFLOP/s"},
        legend={"orientation": "h", "y": -0.18},
        height=650,
    )
    return fig


def _add_roofs(fig: go.Figure, drawn: pd.DataFrame) -> None:
    """Per device: one ceiling per distinct peak (matrix units per precision, or the vector
    units), each meeting the memory slope at its ridge."""
    known = drawn[drawn["memory_tbps"].notna()]
    if known.empty:
        return
    high = max(known["intensity"].max() * 3, 2 * known["ridge"].max())
    x = np.logspace(np.log10(max(known["intensity"].min() / 3, 1e-3)), np.log10(high), 200)
    for device, part in known.groupby("device", sort=False):
        bandwidth = part["memory_tbps"].iloc[0]
        units = np.where(part["kind"].isin(MATRIX_KINDS), "matrix", "vector")
        ceilings = pd.DataFrame(
            {"peak": part["peak_tflops"], "what": part["precision"] + " " + units}
        )
        for peak, whats in ceilings.groupby("peak")["what"]:
            fig.add_trace(
                go.Scatter(
                    x=x, y=np.minimum(x * bandwidth, peak), mode="lines",
                    name=f"{device}: {peak:g} TFLOP/s ({', '.join(sorted(set(whats)))}),"
                    f" {bandwidth:g} TB/s", line={"dash": "dash", "width": 1},
                )
            )  # fmt: skip


def plot_mfu(table: pd.DataFrame) -> go.Figure:
    """MFU (%) per ProfilerStep, one line per rank; hover gives the modelled share of GPU time."""
    fig = go.Figure()
    for rank, part in table.groupby("rank"):
        fig.add_trace(
            go.Scatter(
                x=part["step"], y=part["mfu_pctg"], mode="lines+markers", name=f"rank {rank}",
                customdata=part[["modelled_gpu_pctg", "achieved_tflops"]],
                hovertemplate="step %{x}: MFU %{y} %<br>%{customdata[1]:.3g} TFLOP/s"
                "<br>modelled: %{customdata[0]} % of GPU time<extra></extra>",
            )
        )  # fmt: skip
    fig.update_layout(title="Model FLOPs utilization per step", xaxis=step_axis(table["step"]),
                      yaxis_title="MFU (%)")  # fmt: skip
    return fig
