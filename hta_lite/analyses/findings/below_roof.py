"""GEMMs and convolutions far below their roofline.

Model: every kernel whose operator is a matrix product or convolution of the roofline view
(``get_operator_roofline``: achieved against attainable TFLOP/s, by operator name, time-weighted
over its shapes) running under ``FRACTION`` of its roof is made to run at ``FRACTION`` of it —
its time scaled by ``roof_pctg / (100 x FRACTION)`` — in each rank's step graphs; the graphs
are replayed, then the job. The low end brings them to ``LOW_FRACTION``.

Blind spots: the roof is the device's peak for the precision (a small or skinny GEMM cannot
reach it: raising the batch or fusing helps, tuning alone may not); kernels inside CUDA-graph
replays that map to no operator are not counted; the FLOP model's coverage is the roofline
view's.
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_pct, fmt_us
from ..critical_path.graph import OPERATOR
from ..operators.attribution import Attribution
from .context import Context
from .finding import Finding

FRACTION, LOW_FRACTION = 0.6, 0.4
KINDS = ("matmul", "conv")


def find(ctx: Context) -> list[Finding]:
    roof = ctx.roofline
    if roof is None or roof.empty or ctx.events.empty:
        return []
    slow = roof[roof["kind"].isin(KINDS) & (roof["roof_pctg"] < 100 * FRACTION)]
    slow = slow[slow["gpu_time(us)"] > 0]
    if slow.empty:
        return []
    time = slow.groupby("name")["gpu_time(us)"].sum()
    pctg = (slow["roof_pctg"] * slow["gpu_time(us)"]).groupby(slow["name"]).sum() / time
    kernels = {rank: _kernel_pctg(trace, pctg) for rank, trace in ctx.traces.items()}
    ev = ctx.events
    ranks, events = ev["rank"].to_numpy(), ev["event"].to_numpy(np.int64)
    at = np.full(len(ev), np.nan)
    for rank, table in kernels.items():
        mine = np.flatnonzero(ranks == rank)
        at[mine] = table[np.clip(events[mine], 0, len(table) - 1)]
    on = np.isfinite(at) & (ev["bound_by"] == "gpu_compute_bound").to_numpy()
    if not on.any():
        return []
    duration = ev["duration"].to_numpy(np.float64)

    def cut(fraction):
        kept = np.where(on, np.minimum(np.nan_to_num(at) / (100 * fraction), 1.0), 1.0)
        on_path = ctx.per_segment(on, duration * (1 - kept))

        def change_of(rank):
            table = kernels[rank]

            def apply(graph, events):
                weight = graph.weight.astype(np.float64)
                edge = (graph.kind == OPERATOR) & (graph.event >= 0)
                scale = table[np.clip(graph.event, 0, len(table) - 1)]
                hit = edge & np.isfinite(scale)
                weight[hit] *= np.minimum(scale[hit] / (100 * fraction), 1.0)
                return weight.astype(np.int64), None

            return apply

        return ctx.graph_cut(on_path, change_of), on_path

    nominal, on_path = cut(FRACTION)
    low, _ = cut(LOW_FRACTION)
    steps = max(ctx.replay.n_steps, 1)
    worst = pctg.idxmin()
    spread = fmt_pct(float(pctg.min()))
    if len(pctg) > 1:
        spread += f" to {fmt_pct(float(pctg.max()))}"
    evidence = (
        f"{fmt_us(ctx.per_segment(on).sum() / 1e3 / steps)} per step of matrix-product /"
        f" convolution kernels on the ranks' paths run at {spread} of their roof ({worst}:"
        f" {fmt_pct(float(pctg[worst]))}, {slow['device'].iat[0]})"
    )
    return [
        Finding(
            "below_roof",
            ", ".join(time.sort_values(ascending=False).index[:3]),
            evidence,
            f"those kernels brought to {FRACTION:.0%} of their roof in each rank's step graph"
            " (critical path replayed), then the job replayed",
            "larger or better-shaped GEMMs (dimensions multiple of 64 / 128, bigger batch),"
            " bf16 / fp16 or TF32 (torch.backends.cuda.matmul.allow_tf32), torch.compile /"
            " cuBLASLt autotuning; fuse the small ones",
            nominal,
            low,
            ctx.main_rank(on_path),
        )
    ]


def _kernel_pctg(trace, pctg) -> np.ndarray:
    """Per event of the rank's critical-path numbering (cpu rows, then gpu rows): the roof
    percentage of the kernel's operator, NaN for other events."""
    attr = Attribution.of(trace)
    out = np.full(len(trace.cpu) + len(trace.gpu), np.nan)
    owned = attr.owner >= 0
    names = trace.cpu["name"].to_numpy()[attr.owner[owned]]
    values = pctg.reindex(names.astype(str)).to_numpy(np.float64)
    out[len(trace.cpu) + attr.kernels[owned]] = values
    return out
