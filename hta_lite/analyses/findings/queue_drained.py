"""Short kernels issued onto a drained launch queue, while a long kernel of the step waits its
turn behind them.

A kernel is *drained* when its stream idled before it (over ``IDLE_NS``): its launch arrived
after the kernel before it there had ended, so the GPU runs at the host's issue rate. A stretch
of ``MIN_DRAINED`` or more consecutive short (under
``SHORT_NS``) drained kernels, followed in the step by a kernel on the same stream long enough to
cover their issue time, is this finding. The fix: issue the long kernel first (the short ones
then queue behind it and run back to back while it runs), or capture the sequence in a CUDA
graph. What-if, in each rank's step graphs: the stretch's host time free and the GPU's waits
before its kernels gone (the kernels back to back); replayed, then the job. The low end is half
of it.

Blind spots: the reordering must keep the data dependencies (the long kernel may need the
short ones' results: then only a CUDA graph or fusing the short kernels helps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...classify import short_name
from ...load.rank_trace import RankTrace
from ...units import fmt_us
from .context import Context
from .finding import Finding
from .graph_replay import gaps_before, launched_within, thread_overlap

MIN_DRAINED = 8
SHORT_NS = 50_000
IDLE_NS = 1_000  # a gap before a kernel longer than this: the stream waited for its launch


@dataclass
class Stretch:
    """``kernels`` (GPU rows, in order), ``tid`` of their launches, ``start`` (the first launch
    call's start) / ``end`` (the last kernel's end) ns, ``busy`` ns, ``long`` (the GPU row of the
    long kernel after them)."""

    kernels: np.ndarray
    tid: int
    start: int
    end: int
    busy: int
    long: int


def stretches(trace: RankTrace) -> list[Stretch]:
    cpu, gpu = trace.cpu, trace.gpu
    if not len(gpu) or not len(cpu):
        return []
    launch = gpu["launch_row"].to_numpy()
    rows = np.flatnonzero((launch >= 0) & np.asarray(gpu["cat"] == "kernel"))
    if len(rows) < MIN_DRAINED + 1:
        return []
    stream, ts, dur = (gpu[c].to_numpy()[rows] for c in ("stream", "ts", "dur"))
    order = np.lexsort((ts, stream))
    rows, stream, ts, dur = rows[order], stream[order], ts[order], dur[order]
    end = ts + dur
    step = gpu["iteration"].to_numpy()[rows]
    same = np.append(False, (stream[1:] == stream[:-1]) & (step[1:] == step[:-1]))
    prev_end = np.append(0, end[:-1])
    # the stream idled before it (its launch arrived after the kernel before it ended)
    drained = same & (ts - prev_end > IDLE_NS) & (dur < SHORT_NS) & (step >= 0)
    out = []
    k, n = 0, len(rows)
    while k < n:
        if not drained[k]:
            k += 1
            continue
        first = k
        while k < n and drained[k]:
            k += 1
        run = np.arange(first, k)
        if len(run) < MIN_DRAINED:
            continue
        calls = launch[rows[run]]
        start = int(cpu["ts"].to_numpy()[calls].min())
        busy, span = int(dur[run].sum()), int(end[run].max()) - start
        later = np.flatnonzero(
            (stream == stream[first]) & (step == step[first]) & (ts > end[run].max())
        )
        longs = later[dur[later] >= span - busy]
        if len(longs):
            tids, counts = np.unique(cpu["tid"].to_numpy()[calls], return_counts=True)
            out.append(Stretch(rows[run], int(tids[np.argmax(counts)]), start,
                               int(end[run].max()), busy, int(rows[longs[0]])))  # fmt: skip
    return out


def find(ctx: Context) -> list[Finding]:
    found = {rank: stretches(t) for rank, t in ctx.traces.items()}
    found = {r: v for r, v in found.items() if v}
    ev = ctx.events
    if not found or ev.empty:
        return []
    inside = np.zeros(len(ev), bool)
    ranks, start = ev["rank"].to_numpy(), ev["start"].to_numpy()
    claimed = ctx.claimed_events()
    for rank, runs in found.items():
        for s in runs:
            inside |= (ranks == rank) & (start >= s.start) & (start < s.end)
    inside &= ~claimed  # a loop's launches are the loop finding's
    on_path = ctx.per_segment(inside)
    if not on_path.any():
        return []
    for rank, runs in found.items():
        ctx.claim(rank, [(s.start, s.end) for s in runs])

    def change_of(fraction):
        def change(rank):
            runs = found.get(rank, [])
            if not runs:
                return lambda graph, events: (graph.weight, None)
            trace = ctx.traces[rank]
            spans = {}
            for s in runs:
                spans.setdefault(s.tid, []).append((s.start, s.end))
            spans = {t: np.array(sorted(v), np.int64) for t, v in spans.items()}
            kernels = launched_within(trace, spans)

            def apply(graph, events):
                weight = graph.weight - fraction * thread_overlap(graph, events, spans)
                weight[gaps_before(graph, kernels)] *= 1 - fraction
                return np.maximum(weight, 0).astype(np.int64), None

            return apply

        return change

    runs = [s for v in found.values() for s in v]
    steps = max(ctx.replay.n_steps, 1)
    count = sum(len(s.kernels) for s in runs)
    span = sum(s.end - s.start for s in runs)
    busy = sum(s.busy for s in runs)
    first = runs[0]
    long_name = short_name(str(ctx.traces[next(iter(found))].gpu["name"].iat[first.long]))
    evidence = (
        f"{count / steps:,.0f} short kernels per step launched one by one onto an idle stream"
        f" (each after the one before it ended): {fmt_us(span / 1e3 / steps)} per step of which"
        f" the GPU computes {fmt_us(busy / 1e3 / steps)}; a kernel after them ({long_name}) runs"
        " long enough to hide their issue"
    )
    return [
        Finding(
            "queue_drained",
            f"{count / steps:,.0f} short kernels before {long_name}",
            evidence,
            "the stretch's host time free and the GPU's waits before its kernels removed (they"
            " queue behind the long kernel and run back to back) in each rank's step graph,"
            " critical path and job replayed",
            f"issue the long kernel ({long_name}) first, so that the short ones queue behind it"
            " while it runs; or capture the sequence in a CUDA graph",
            ctx.graph_cut(on_path, change_of(1.0)),
            None,  # the low end: half of the cut (Finding's default)
            ctx.main_rank(on_path),
        )
    ]
