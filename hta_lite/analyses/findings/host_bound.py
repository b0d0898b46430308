"""The host-bound GPU, in general: the GPU waits for the host on the critical path, and where the
host's time goes.

The host time on each rank's path (``cpu_bound``: operators, runtime calls and what runs between
them) that no specific kind prices (a loop's reads or launches, data loading, a blocking wait) is
attributed to its code site (:mod:`.code_sites`: the user's Python frame, a
``record_function`` range, else the operator), with the path's GPU waits for a launch (the
site: what the launching thread ran then), and the host time the path joins with dependencies
of zero weight (:mod:`.path_gaps`: Python between operators, a range with no operator in it;
the site: what the path's thread ran then, "host code outside any event" where nothing); of
it, only the time the GPU is idle counts (host work under running kernels costs the step
nothing). Model: that host time takes none — the host keeps up with the GPU — and the GPU's
waits for the host there are gone (each kernel still follows its launch by the launch
latency); each rank's step graphs are replayed, then the job (the zero-weight time, on no edge
of the graphs, is cut from its segments as it is). This is a bound: what any fix of the host
side can save; the sites say where to look. The low end is half of it.

Blind spots: the bound is reached only when all of that host work leaves the step (overlapped
with the GPU, moved to other threads or processes, or removed); the sites name where the time
is spent, not why.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...kineto import BLOCKING_SYNC_NAMES, CPU_COLLECTIVE, CPU_OP_CATEGORY
from ...units import fmt_us
from ..idle import held_spans
from .code_sites import PYTHON_CATEGORY, UNRECORDED, sites, sites_at
from .context import Context, within
from .finding import Finding
from .graph_replay import covered, gaps_before, thread_overlap
from .path_gaps import idle_gaps

#: the path's GPU waits for a launch (HTA's names): the host was late
GPU_WAITS = ("gpu_kernel_kernel_overhead", "gpu_kernel_launch_overhead")
#: the host time on the paths is reported when it is at least this share of them
MIN_SHARE = 0.2
TOP_SITES = 3


def find(ctx: Context) -> list[Finding]:
    ev = ctx.events
    if ev.empty:
        return []
    loading = re.compile("|".join(f"(?:{p})" for p in ctx.patterns))
    names = ev["name"].astype(str)
    host = (ev["bound_by"] == "cpu_bound").to_numpy() & (ev["stream"] < 0).to_numpy()
    host &= ~names.isin(BLOCKING_SYNC_NAMES).to_numpy()  # waiting, not host work
    distinct = names.astype("category")
    # data loading (its own finding) and collective calls (communication, not host work)
    skipped = np.array(
        [bool(loading.search(n) or CPU_COLLECTIVE.match(n)) for n in distinct.cat.categories]
        + [False]
    )
    host &= ~skipped[distinct.cat.codes.to_numpy()]
    claimed = ctx.claimed_events()
    host &= ~claimed
    waits = ev["bound_by"].isin(GPU_WAITS).to_numpy() & ~claimed  # the GPU waiting to launch
    host_time = host | waits
    # of that time, what the GPU spends idle: host work under running kernels costs nothing, nor
    # does a wait of a kernel held, once launched, by what the trace does not show
    duration = _gpu_idle_part(ctx, host_time)
    every = ev["duration"].to_numpy(np.float64)
    host_time &= duration > 0
    site = np.full(len(ev), "", dtype=object)
    ranks, number = ev["rank"].to_numpy(), ev["event"].to_numpy(np.int64)
    middle = ev["start"].to_numpy() + ev["duration"].to_numpy() // 2
    for rank, trace in ctx.traces.items():
        n_cpu = len(trace.cpu)
        # host events, and GPU waits carried by a launch call's edge: the call's site
        mine = np.flatnonzero(host_time & (ranks == rank) & (number >= 0) & (number < n_cpu))
        site[mine] = sites(trace, number[mine])
        site[np.flatnonzero(host_time & (ranks == rank) & (number < 0))] = "(no event)"
        gap = np.flatnonzero(waits & (ranks == rank) & (number >= n_cpu))
        launch = trace.gpu["launch_row"].to_numpy()[number[gap] - n_cpu]
        known = launch >= 0  # the host thread that launched the kernel the GPU waited for
        tid = trace.cpu["tid"].to_numpy()[np.maximum(launch, 0)]
        site[gap[known]] = sites_at(trace, tid[known], middle[gap][known])
        site[gap[~known]] = "host (no launch call in the trace)"
    # the GPU waiting while the host sat in a collective call is communication, not host work
    codes, labels = pd.factorize(site)
    in_collective = np.array([bool(CPU_COLLECTIVE.match(str(s))) for s in labels], bool)
    host = host_time & ~in_collective[codes]
    gaps, untracked = idle_gaps(ctx)
    gap_site = _gap_sites(ctx, gaps)
    codes, labels = pd.factorize(gap_site)
    waiting = np.array([bool(loading.search(s) or CPU_COLLECTIVE.match(s)) or s in
                        BLOCKING_SYNC_NAMES for s in labels.astype(str)], bool)  # fmt: skip
    gaps, gap_site = gaps[~waiting[codes]], gap_site[~waiting[codes]]
    gap_ns = (gaps["end"] - gaps["start"]).to_numpy(np.float64)
    whole = every.sum() + untracked  # the segments' time: the paths' edges and their gaps
    total = duration[host].sum() + gap_ns.sum()
    if total <= 0 or total < MIN_SHARE * whole:
        return []
    codes, labels = pd.factorize(np.concatenate([site[host], gap_site]))
    per_site = np.bincount(codes, np.r_[duration[host], gap_ns], minlength=len(labels))
    best = np.argsort(-per_site, kind="stable")[:TOP_SITES]
    top = [(str(labels[k]), float(per_site[k])) for k in best]
    on_path = ctx.per_segment(host, duration)
    in_gaps = np.bincount(gaps["segment"].to_numpy(), gap_ns, minlength=len(ctx.segments))

    def change_of(fraction):
        def change(rank):
            trace = ctx.traces[rank]
            claimed = ctx.claimed(rank)
            spans = _unclaimed_threads(trace, claimed)
            kernels = _kernels_outside(trace, claimed)

            def apply(graph, events):
                weight = graph.weight - fraction * thread_overlap(graph, events, spans)
                if fraction >= 1:
                    weight[gaps_before(graph, kernels)] = 0
                return np.maximum(weight, 0).astype(np.int64), None

            return apply

        return change

    steps = max(ctx.replay.n_steps, 1)
    listed = "; ".join(f"{s} {fmt_us(d / 1e3 / steps)}" for s, d in top)
    unseen = (
        f", {fmt_us(gap_ns.sum() / 1e3 / steps)} of it in host time no operator records"
        " (between operators, or in a range with none)"
        if gap_ns.sum() >= 0.01 * total
        else ""
    )
    evidence = (
        f"the GPU waits for the host on the path: {fmt_us(total / 1e3 / steps)} per step of host"
        f" time and GPU waits for launches, the GPU idle ({100.0 * total / max(whole, 1):.0f}"
        f" % of the steps' time){unseen}, that no other finding prices, by code site: {listed}"
    )
    return [
        Finding(
            "host_bound",
            top[0][0],
            evidence,
            "that host time made free and the GPU's waits for it removed in each rank's step"
            " graph (the host keeps up with the GPU: a bound on any host-side fix), critical"
            " path and job replayed",
            _advice(ctx, [s for s, _ in top]),
            ctx.graph_cut(on_path, change_of(1.0), extra=in_gaps),
            None,  # the low end: half of the cut (Finding's default)
            ctx.main_rank(on_path + in_gaps),
        )
    ]


def _gap_sites(ctx: Context, gaps) -> np.ndarray:
    """The code site of each gap (:func:`.path_gaps.idle_gaps`): what its thread ran at its
    middle."""
    out = np.zeros(len(gaps), object)
    ranks = gaps["rank"].to_numpy()
    middle = ((gaps["start"] + gaps["end"]) // 2).to_numpy()
    for rank in np.unique(ranks).tolist():
        mine = np.flatnonzero(ranks == rank)
        out[mine] = sites_at(ctx.traces[rank], gaps["tid"].to_numpy()[mine], middle[mine])
    return out


def _gpu_idle_part(ctx: Context, rows: np.ndarray) -> np.ndarray:
    """Per path event: ns of its time on the path during which its rank's GPU runs nothing and
    holds no launched work (:func:`...idle.held_spans`; 0 for the events not in ``rows``)."""
    from ...intervals import merge

    ev = ctx.events
    out = np.zeros(len(ev))
    start = ev["start"].to_numpy()
    end = start + ev["duration"].to_numpy()
    ranks = ev["rank"].to_numpy()
    for rank, trace in ctx.traces.items():
        mine = np.flatnonzero(rows & (ranks == rank))
        gpu = trace.gpu[trace.gpu["stream"].to_numpy() >= 0]
        if not len(mine) or gpu.empty:  # a rank without a GPU: nothing waits for its host
            continue
        held_lo, held_hi = held_spans(trace)  # launched work held by what the trace does not show
        ends = (gpu["ts"] + gpu["dur"]).to_numpy()
        lo, hi = merge(np.r_[gpu["ts"].to_numpy(), held_lo], np.r_[ends, held_hi])
        busy = np.stack([lo, hi], axis=1)
        out[mine] = (end[mine] - start[mine]) - (
            covered(busy, end[mine]) - covered(busy, start[mine])
        )
    return np.maximum(out, 0)


def _advice(ctx: Context, top_sites: list[str]) -> str:
    """What to try, for the trace at hand: framework overhead (operators) or the user's code;
    CUDA graphs only where the run does not replay graphs already; where the time is in code no
    event records, how to record it."""
    code = [s for s in top_sites if "(" in s and "): " in s]
    parts = []
    if UNRECORDED in top_sites:
        nsys = any(t.source_format == "nsys" for t in ctx.traces.values())
        how = (
            "NVTX ranges around the code, torch.cuda.nvtx.range; the operators with emit_nvtx"
            if nsys
            else "torch.profiler.profile(with_stack=True), or record_function ranges"
        )
        parts.append(f"part of the host time is code no event records: record it ({how}) to see"
                     " where it goes")  # fmt: skip
    if code:
        parts.append(
            f"the Python code at {code[0]} runs while the GPU waits: move it off the step (a"
            " DataLoader worker, a background thread, precompute it), batch it, or run it less"
            " often"
        )
    if ctx.replays_graphs:
        parts.append(
            "the run already replays CUDA / HIP graphs: the host time is outside them (the"
            " scheduler, input preparation between replays); overlap it with the replays or"
            " capture more of the step"
        )
    elif not any((t.cpu["cat"] == CPU_OP_CATEGORY).any() for t in ctx.traces.values()):
        parts.append(
            "no PyTorch operator is recorded around it: move that host work out of the step"
            " (before the timed loop, another thread), or overlap it with GPU work"
        )
    else:
        parts.append(
            "operator overhead of eager PyTorch: capture the step in a CUDA graph"
            " (torch.compile(mode='reduce-overhead'), torch.cuda.graphs), fewer and larger"
            " operations (larger batches, fused ops)"
        )
    return "; ".join(parts)


def _unclaimed_threads(trace, claimed: np.ndarray) -> dict[int, np.ndarray]:
    """``{tid: (n, 2)}`` every host thread's whole time less the claimed spans."""
    cpu = trace.cpu
    if not len(cpu):
        return {}
    first, last = int(cpu["ts"].min()), int((cpu["ts"] + cpu["dur"]).max()) + 1
    edges = [first]
    for a, b in claimed.tolist():
        edges += [a, b]
    edges.append(last)
    pieces = np.array([(a, b) for a, b in zip(edges[::2], edges[1::2]) if b > a], np.int64).reshape(
        -1, 2
    )
    cats = cpu["cat"].to_numpy()
    threads = np.unique(cpu["tid"].to_numpy()[cats != PYTHON_CATEGORY]).tolist()
    return {int(t): pieces for t in threads}


def _kernels_outside(trace, claimed: np.ndarray) -> np.ndarray:
    """Per event of the rank: a GPU event launched outside the claimed spans."""
    cpu, gpu = trace.cpu, trace.gpu
    out = np.zeros(len(cpu) + len(gpu), bool)
    launch = gpu["launch_row"].to_numpy()
    has = np.flatnonzero(launch >= 0)
    out[len(cpu) + has] = ~within(claimed, cpu["ts"].to_numpy()[launch[has]])
    return out
