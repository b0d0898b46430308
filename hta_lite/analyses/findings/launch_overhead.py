"""GPU idle waiting for the host: launch delays and gaps between dependent kernels.

Model: in each rank's step graphs the kernel launch delays and kernel-to-kernel gaps take no
time, and the launch calls' own host time none either — what capturing the step in a CUDA
graph gives (one launch; the kernels back to back); the graphs are replayed, then the job. The
low end removes half of the gaps and keeps the launch calls.

Blind spots: a step that cannot be captured (dynamic shapes, host logic between kernels) gets
less; a graph launch has a cost of its own (a few µs), not modelled.
"""

from __future__ import annotations

import numpy as np

from ...kineto import KERNEL_LAUNCH_NAMES
from ...units import fmt_us
from ..critical_path.graph import KERNEL_KERNEL_DELAY, LAUNCH_DELAY, OPERATOR
from .context import Context
from .finding import Finding

OVERHEAD = ("gpu_kernel_launch_overhead", "gpu_kernel_kernel_overhead")


def find(ctx: Context) -> list[Finding]:
    ev = ctx.events
    if ev.empty:
        return []
    gaps = ev["bound_by"].isin(OVERHEAD).to_numpy()
    launches = (ev["name"].isin(KERNEL_LAUNCH_NAMES) & (ev["bound_by"] == "cpu_bound")).to_numpy()
    on_path = ctx.per_segment(gaps | launches)
    if not on_path.any():
        return []

    def change(fraction, with_launches):
        def apply(graph, events):
            weight = graph.weight.astype(np.float64)
            delay = (graph.kind == LAUNCH_DELAY) | (graph.kind == KERNEL_KERNEL_DELAY)
            weight[delay] *= 1 - fraction
            if with_launches:
                launch = (graph.kind == OPERATOR) & (graph.event >= 0)
                launch &= events.name.isin(KERNEL_LAUNCH_NAMES)[np.maximum(graph.event, 0)]
                weight[launch] = 0
            return weight.astype(np.int64), None

        return apply

    steps = max(ctx.replay.n_steps, 1)
    gap_us = ctx.per_segment(gaps).sum() / 1e3 / steps
    launch_us = ctx.per_segment(launches).sum() / 1e3 / steps
    evidence = (
        f"{fmt_us(gap_us)} per step of launch delays and kernel-to-kernel gaps on the ranks'"
        f" paths, and {fmt_us(launch_us)} of kernel launch calls"
    )
    return [
        Finding(
            "launch_overhead",
            "kernel launches",
            evidence,
            "launch delays, kernel gaps and launch calls made free in each rank's step graph (as"
            " a CUDA graph of the step would), critical path and job replayed",
            "capture the step (or its steady part) in a CUDA graph: torch.compile("
            "mode='reduce-overhead') or torch.cuda.graphs; fuse small kernels; larger batches",
            ctx.graph_cut(on_path, lambda rank: change(1.0, True)),
            ctx.graph_cut(ctx.per_segment(gaps) * 0.5, lambda rank: change(0.5, False)),
            ctx.main_rank(on_path),
        )
    ]
