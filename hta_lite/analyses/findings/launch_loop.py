"""A loop of small kernels launched one at a time: the GPU idle between them while the host
issues the next (a Python loop over elements, slices or layers).

A *loop* is a run of ``MIN_LAUNCHES`` or more consecutive launches of a thread in a step, each
repeating the code site (:mod:`.code_sites`) and kernel of one of the ``PERIOD`` before it (a
body of up to ``PERIOD`` kernels), the kernels short (median under ``SHORT_NS``) and the GPU busy
under half of the run's span. The fix a user makes: vectorise or batch (one operation over the
stacked tensors, ``torch._foreach_*``, horizontal fusion), ``torch.compile``, a CUDA graph.
What-if, in each rank's step graphs: the loop runs as one kernel of their summed work — its host
time free, its kernels back to back (nominal); the low end issues them back to back at the cost
of one launch call each (the host's other time in the loop free). The graphs are replayed, then
the job.

Blind spots: a vectorised kernel is usually faster than the loop's kernels summed (their fixed
costs are paid once), so the nominal saving is a floor of the vectorised fix's; a loop whose
iterations depend on each other's values on the host cannot be vectorised.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...classify import short_name
from ...kineto import KERNEL_LAUNCH_NAMES
from ...load.rank_trace import RankTrace
from ...units import fmt_us
from .code_sites import sites
from .context import Context
from .finding import Finding
from .graph_replay import gaps_before, launched_within, thread_overlap

MIN_LAUNCHES = 16
SHORT_NS = 20_000
MAX_BUSY = 0.5
PERIOD = 4  # the most kernels a loop's body may launch


@dataclass
class Loop:
    """One loop of one rank and step: ``site``, ``kernel`` name, its ``kernels`` (GPU rows) and
    ``calls`` (their launch calls' CPU rows), ``tid``, ``start`` / ``end`` ns (the first call's
    start to the last kernel's end), ``busy`` (ns of kernel time)."""

    site: str
    kernel: str
    step: int
    kernels: np.ndarray
    calls: np.ndarray
    tid: int
    start: int
    end: int
    busy: int


def loops(trace: RankTrace) -> list[Loop]:
    """The launch-bound loops of a rank (module docstring): maximal runs of consecutive launches
    on a thread, in a step, whose (site, kernel) each repeats one of the ``PERIOD`` before it (a
    loop body of up to ``PERIOD`` kernels), of ``MIN_LAUNCHES`` or more short kernels keeping the
    GPU busy under ``MAX_BUSY`` of the run's span."""
    cpu, gpu = trace.cpu, trace.gpu
    if not len(gpu) or not len(cpu):
        return []
    launch = gpu["launch_row"].to_numpy()
    kernels = np.flatnonzero((launch >= 0) & np.asarray(gpu["cat"] == "kernel"))
    kernels = kernels[np.asarray(cpu["name"].isin(KERNEL_LAUNCH_NAMES))[launch[kernels]]]
    if len(kernels) < MIN_LAUNCHES:
        return []
    calls = launch[kernels]
    tid, step = cpu["tid"].to_numpy()[calls], cpu["iteration"].to_numpy()[calls]
    order = np.lexsort((cpu["ts"].to_numpy()[calls], step, tid))
    kernels, calls, tid, step = kernels[order], calls[order], tid[order], step[order]
    lane = pd.factorize(pd.Series(tid.astype(str) + ":" + step.astype(str)))[0]
    # kernel names alone first (cheap): no run of repeats, no loop whatever the sites
    by_name = gpu["name"].array.codes[kernels] if hasattr(gpu["name"].array, "codes") else (
        pd.factorize(gpu["name"].to_numpy()[kernels])[0])  # fmt: skip
    if _runs(_repeats(by_name, lane)).size == 0:
        return []
    site = sites(trace, calls)
    name = gpu["name"].astype(str).to_numpy()[kernels]
    label = pd.factorize(pd.Series(site + "\x00" + name))[0]
    repeat = _repeats(label, lane)
    out = []
    ts, dur = gpu["ts"].to_numpy(), gpu["dur"].to_numpy()
    for first, stop in _runs(repeat).reshape(-1, 2):
        members = set(label[first:stop].tolist())
        begin = first  # the first period: the launches before the run whose kernels it repeats
        while (
            begin > max(first - PERIOD, 0)
            and label[begin - 1] in members
            and (lane[begin - 1] == lane[first])
        ):
            begin -= 1
        run = np.arange(begin, stop)
        if len(run) < MIN_LAUNCHES or step[first] < 0:
            continue
        rows = kernels[run]
        if np.median(dur[rows]) >= SHORT_NS:
            continue
        start = int(cpu["ts"].to_numpy()[calls[run]].min())
        end = int((ts[rows] + dur[rows]).max())
        busy = int(dur[rows].sum())
        if busy >= MAX_BUSY * max(end - start, 1):
            continue
        top = Counter(label[run].tolist()).most_common(1)[0][0]
        at = run[label[run] == top][0]
        out.append(Loop(str(site[at]), str(name[at]), int(step[first]), rows, calls[run],
                        int(tid[first]), start, end, busy))  # fmt: skip
    return out


def _repeats(label: np.ndarray, lane: np.ndarray) -> np.ndarray:
    """Per launch: its label is one of the ``PERIOD`` labels before it in its lane."""
    repeat = np.zeros(len(label), bool)
    for k in range(1, PERIOD + 1):
        repeat[k:] |= (label[k:] == label[:-k]) & (lane[k:] == lane[:-k])
    return repeat


def _runs(repeat: np.ndarray) -> np.ndarray:
    """``[first, stop, first, stop, ...]`` of the runs of ``repeat`` at least
    ``MIN_LAUNCHES - PERIOD`` long (a loop's first period is not a repeat)."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], repeat.astype(np.int8), [0]])))
    long = (edges[1::2] - edges[::2]) >= MIN_LAUNCHES - PERIOD
    return np.stack([edges[::2][long], edges[1::2][long]], axis=1).ravel()


def find(ctx: Context) -> list[Finding]:
    found = {rank: loops(t) for rank, t in ctx.traces.items()}
    found = {rank: v for rank, v in found.items() if v}
    if not found or ctx.events.empty:
        return []
    by_site = Counter()
    for lps in found.values():
        for lp in lps:
            by_site[(lp.site, lp.kernel)] += len(lp.kernels)
    return [f for key, _ in by_site.most_common(3) if (f := _finding(ctx, found, key))]


def _finding(ctx: Context, found: dict, key: tuple[str, str]) -> Finding | None:
    ev = ctx.events
    mine = {r: [lp for lp in lps if (lp.site, lp.kernel) == key] for r, lps in found.items()}
    mine = {r: lps for r, lps in mine.items() if lps}
    inside = np.zeros(len(ev), bool)
    ranks, start = ev["rank"].to_numpy(), ev["start"].to_numpy()
    for rank, lps in mine.items():
        for lp in lps:
            inside |= (ranks == rank) & (start >= lp.start) & (start < lp.end)
        ctx.claim(rank, [(lp.start, lp.end) for lp in lps])  # the loops are this kind's
    on_path = ctx.per_segment(inside)
    if not on_path.any():
        return None

    def change_of(keep_launches: bool):
        def change(rank):
            if rank not in mine:
                return lambda graph, events: (graph.weight, None)
            trace, lps = ctx.traces[rank], mine[rank]
            spans = {lp.tid: [] for lp in lps}
            for lp in lps:
                spans[lp.tid] += _host_pieces(trace, lp, keep_launches)
            spans = {t: np.array(sorted(v), np.int64).reshape(-1, 2) for t, v in spans.items()}
            loop_spans = {}
            for lp in lps:
                loop_spans.setdefault(lp.tid, []).append((lp.start, lp.end))
            kernels = launched_within(trace, {t: np.array(sorted(v), np.int64)
                                              for t, v in loop_spans.items()})  # fmt: skip

            def apply(graph, events):
                weight = graph.weight - thread_overlap(graph, events, spans)
                weight[gaps_before(graph, kernels)] = 0
                return np.maximum(weight, 0), None

            return apply

        return change

    steps = max(ctx.replay.n_steps, 1)
    count = sum(len(lp.kernels) for lps in mine.values() for lp in lps)
    busy = sum(lp.busy for lps in mine.values() for lp in lps)
    span = sum(lp.end - lp.start for lps in mine.values() for lp in lps)
    site, kernel = key
    evidence = (
        f"{count / steps:,.0f} launches of {kernel} per step from {site}, one at a time: the loop"
        f" spans {fmt_us(span / 1e3 / steps)} per step of which the GPU computes"
        f" {fmt_us(busy / 1e3 / steps)} ({100.0 * busy / max(span, 1):.1f} %)"
    )
    return Finding(
        "launch_bound_loop",
        f"{site}: {short_name(kernel)}",  # the whole name is in the evidence
        evidence,
        "the loop as one kernel of the loop's summed work (its host time free, its kernels back"
        " to back) in each rank's step graph, critical path and job replayed; low: the kernels"
        " issued back to back at the cost of one launch call each",
        "vectorise the loop: one operation over the stacked tensors or a batched / foreach"
        " variant (torch._foreach_*), horizontal fusion, torch.compile; or capture it in a"
        " CUDA graph",
        ctx.graph_cut(on_path, change_of(False)),
        ctx.graph_cut(on_path / 2, change_of(True)),
        ctx.main_rank(on_path),
    )


def _host_pieces(trace: RankTrace, lp: Loop, keep_launches: bool) -> list[tuple[int, int]]:
    """The host time of the loop made free: its whole span, or with ``keep_launches`` the span
    less its launch calls (each still costs a launch)."""
    if not keep_launches:
        return [(lp.start, lp.end)]
    cpu = trace.cpu
    ts = np.sort(cpu["ts"].to_numpy()[lp.calls])
    end = np.sort((cpu["ts"] + cpu["dur"]).to_numpy()[lp.calls])
    starts = np.concatenate([[lp.start], end])
    stops = np.concatenate([ts, [lp.end]])
    return [(int(a), int(b)) for a, b in zip(starts, stops) if b > a]
