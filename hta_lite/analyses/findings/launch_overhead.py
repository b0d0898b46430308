"""GPU idle waiting for the host: launch delays and gaps between dependent kernels.

Model: in each rank's step graphs the kernel launch delays and kernel-to-kernel gaps take no
time, and each launch call loses up to the rank's median launch call (its typical host cost)
— what capturing the step in a CUDA graph gives (one launch; the kernels back to back); the
graphs are replayed, then the job. A call longer than the median keeps the rest: a first
launch that loads its module (seconds at a trace's start), a launch waiting on a full launch
queue (the GPU is the bound) or a profiler's counter replay are not removed by a CUDA graph.
The low end removes half of the gaps and keeps the launch calls.

Blind spots: a step that cannot be captured (dynamic shapes, host logic between kernels) gets
less; a graph launch has a cost of its own (a few µs), not modelled; where most launches wait
on a full queue the median overstates a launch's own cost (the replay then finds the GPU
bound, so the saving stays small).
"""

from __future__ import annotations

import numpy as np

from ...kineto import KERNEL_LAUNCH_NAMES
from ...units import fmt_us
from ..critical_path.graph import KERNEL_KERNEL_DELAY, LAUNCH_DELAY, OPERATOR
from .context import Context, within
from .finding import Finding

OVERHEAD = ("gpu_kernel_launch_overhead", "gpu_kernel_kernel_overhead")


def find(ctx: Context) -> list[Finding]:
    ev = ctx.events
    if ev.empty:
        return []
    mine = ~ctx.claimed_events()  # a loop or a read priced by its own kind is left to it
    gaps = ev["bound_by"].isin(OVERHEAD).to_numpy() & mine
    launches = (
        mine & (ev["name"].isin(KERNEL_LAUNCH_NAMES) & (ev["bound_by"] == "cpu_bound")).to_numpy()
    )
    typical = {}  # rank -> ns of its median launch call
    share = np.ones(len(ev))  # of each path event's time, what a CUDA graph removes
    ranks, event = ev["rank"].to_numpy(), ev["event"].to_numpy(np.int64)
    for rank, trace in ctx.traces.items():
        typical[rank] = _median_launch(trace)
        mine = np.flatnonzero(launches & (ranks == rank))
        whole = trace.cpu["dur"].to_numpy()[event[mine]]  # launch calls are CPU rows
        share[mine] = np.minimum(1.0, typical[rank] / np.maximum(whole, 1))
    duration = ev["duration"].to_numpy(np.float64)
    removable = ctx.per_segment(launches, duration * share)
    on_path = ctx.per_segment(gaps) + removable
    if not on_path.any():
        return []

    def change(fraction, rank, shorten_launches=True):
        claimed = ctx.claimed(rank)

        def apply(graph, events):
            weight = graph.weight.astype(np.float64)
            free = ~within(claimed, graph.node_ts[graph.src])  # the claimed time is left as is
            delay = free & ((graph.kind == LAUNCH_DELAY) | (graph.kind == KERNEL_KERNEL_DELAY))
            weight[delay] *= 1 - fraction
            if shorten_launches:  # the launch calls, each less its rank's median call
                launch = free & (graph.kind == OPERATOR) & (graph.event >= 0)
                launch &= events.name.isin(KERNEL_LAUNCH_NAMES)[np.maximum(graph.event, 0)]
                whole = (events.end - events.ts)[graph.event[launch]]
                weight[launch] *= 1 - np.minimum(1.0, typical[rank] / np.maximum(whole, 1))
                # a launch delay keeps what its call keeps: the kernel still waits for that
                held = np.flatnonzero(free & (graph.kind == LAUNCH_DELAY))
                call = graph.node_event[graph.src[held]]
                kept = np.maximum((events.end - events.ts)[call] - typical[rank], 0)
                weight[held] = np.minimum(graph.weight[held], kept)
            return weight.astype(np.int64), None

        return apply

    steps = max(ctx.replay.n_steps, 1)
    gap_us = ctx.per_segment(gaps).sum() / 1e3 / steps
    launch_us = ctx.per_segment(launches).sum() / 1e3 / steps
    evidence = (
        f"{fmt_us(gap_us)} per step of launch delays and kernel-to-kernel gaps on the ranks'"
        f" paths, and {fmt_us(launch_us)} of kernel launch calls, of which"
        f" {fmt_us(removable.sum() / 1e3 / steps)} up to the median call"
        f" ({fmt_us(np.median(list(typical.values())) / 1e3)}) each"
    )
    return [
        Finding(
            "launch_overhead",
            "kernel launches",
            evidence,
            "launch delays and kernel gaps made free, and each launch call shortened by up to"
            " the median call, in each rank's step graph (as a CUDA graph of the step would),"
            " critical path and job replayed",
            (
                "the run already replays CUDA / HIP graphs: capture the launches still outside"
                " them (the steps between replays); fuse small kernels; larger batches"
                if ctx.replays_graphs
                else "capture the step (or its steady part) in a CUDA graph: torch.compile("
                "mode='reduce-overhead') or torch.cuda.graphs; fuse small kernels; larger batches"
            ),
            ctx.graph_cut(on_path, lambda rank: change(1.0, rank)),
            ctx.graph_cut(ctx.per_segment(gaps) * 0.5, lambda rank: change(0.5, rank, False)),
            ctx.main_rank(on_path),
        )
    ]


def _median_launch(trace) -> float:
    """ns of the rank's median kernel launch call (0 without one)."""
    cpu = trace.cpu
    if not len(cpu):
        return 0.0
    durations = cpu.loc[cpu["name"].isin(KERNEL_LAUNCH_NAMES), "dur"].to_numpy()
    return float(np.median(durations)) if len(durations) else 0.0
