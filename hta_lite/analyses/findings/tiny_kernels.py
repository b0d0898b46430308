"""Many tiny kernels on the path: fusion bound.

A kernel that runs a few µs spends a fixed part of it starting and draining the GPU whatever it
computes (2-4 µs is the figure commonly quoted for an empty kernel on recent NVIDIA parts;
not measured here); fusing a chain of
elementwise kernels (torch.compile, a fused optimizer, fused norms / activations) runs their
work in one kernel and pays that cost once.

Model: every compute kernel on a rank's path shorter than ``TINY_NS`` is shortened by
``FIXED_NS`` (never below zero) in each rank's step graphs, when a step has at least
``MIN_PER_STEP`` of them; the graphs are replayed, then the job. The low end removes half of it.
The gaps between the kernels are :mod:`.launch_overhead`'s (a CUDA graph removes them; fusion
removes them too, so the two overlap and are discounted against each other when made together).

Blind spots: the fixed cost is a constant, not measured on the trace's device; kernels that
cannot be fused (different shapes, a reduction in the chain, library kernels) save nothing; a
kernel shorter than ``FIXED_NS`` is counted as all overhead.
"""

from __future__ import annotations

import numpy as np

from ...classify import short_name
from ...units import fmt_us
from ..critical_path.graph import OPERATOR
from .context import Context
from .finding import Finding

TINY_NS, FIXED_NS, MIN_PER_STEP = 10_000, 3_000, 20


def find(ctx: Context) -> list[Finding]:
    ev = ctx.events
    if ev.empty:
        return []
    duration = ev["duration"].to_numpy(np.float64)
    tiny = (ev["bound_by"] == "gpu_compute_bound").to_numpy() & (duration < TINY_NS)
    tiny &= (ev["category"] == "kernel").to_numpy()  # copies and sets are not fused
    steps = max(ctx.replay.n_steps, 1)
    count = int(tiny.sum())
    if count < MIN_PER_STEP * steps:
        return []
    removed = np.minimum(duration, FIXED_NS)

    def cut(fraction):
        on_path = ctx.per_segment(tiny, removed * fraction)

        def change_of(rank):
            short = ev.loc[tiny & (ev["rank"] == rank).to_numpy(), "event"].to_numpy()

            def apply(graph, _events):
                weight = graph.weight.astype(np.float64)
                hit = (graph.kind == OPERATOR) & np.isin(graph.event, short)
                weight[hit] = np.maximum(weight[hit] - FIXED_NS * fraction, 0)
                return weight.astype(np.int64), None

            return apply

        return ctx.graph_cut(on_path, change_of), on_path

    nominal, on_path = cut(1.0)
    low, _ = cut(0.5)
    names = ev.loc[tiny, "name"].astype(str).value_counts()
    evidence = (
        f"{count / steps:,.0f} compute kernels under {fmt_us(TINY_NS / 1e3)} per step on the"
        f" ranks' paths, {fmt_us(duration[tiny].sum() / 1e3 / steps)} in all (most:"
        f" {names.index[0]}, {int(names.iloc[0] / steps)} per step)"
    )
    return [
        Finding(
            "tiny_kernels",
            ", ".join(dict.fromkeys(short_name(n) for n in names.index[:3])),
            evidence,
            f"each of those kernels shortened by a fixed {fmt_us(FIXED_NS / 1e3)} (what fusing"
            " it into its neighbours saves) in each rank's step graph, then the job replayed",
            "fuse the chains of small kernels: torch.compile, "
            + ("fused optimizers (foreach / fused=True), " if ctx.training else "")
            + "fused norms and activations; fewer, larger tensors",
            nominal,
            low,
            ctx.main_rank(on_path),
        )
    ]
