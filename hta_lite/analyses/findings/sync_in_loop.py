"""A read of device data inside a loop: ``.item()``, ``.cpu()``, ``.tolist()`` or a
synchronization per iteration, each making the host wait for the GPU.

A *read* is the outermost operator (or a bare runtime call) holding a blocking call: a stream,
event or device synchronization, a blocking copy (``cudaMemcpy``), a copy to pageable host
memory. Reads of one code site (:mod:`.code_sites`) repeated ``MIN_READS`` times or more in a
step are a loop's (in a trace without steps, in the whole trace, where they come at a loop's
pace: :func:`_at_a_pace`). The fix a user makes: read once, after the loop (stack the values and
copy them in one ``.cpu()``), or move the read out. What-if, in each rank's step graphs: the
loop's reads but the last take no host time, their GPU -> CPU waits are gone and their copies
take no time (one bulk copy costs about one of them); the graphs are replayed, then the job. The
low end is half of that.

Blind spots: a read whose value decides what the next iteration runs (a loop that stops on a
condition) cannot be deferred, only made less frequent; a bulk copy of much data costs more than
one small copy.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from ...kineto import BLOCKING_SYNC_NAMES, MEMCPY_CATEGORIES
from ...load.rank_trace import RankTrace
from ...units import fmt_us
from ..critical_path.graph import OPERATOR, SYNC
from .code_sites import outermost_ops, ranges_by_thread, sites
from .context import Context
from .finding import Finding
from .graph_replay import gaps_before, launched_within, thread_overlap

MIN_READS = 8
#: in a trace without steps, how many times their median interval two reads of a loop may be
#: apart
MAX_PACE = 10
#: a copy into pageable host memory: its call returns when the copy is done
READ_BACK = "Device -> Pageable"


@dataclass
class Loops:
    """The reads of one rank's loops: ``rows`` (the reads' CPU rows), ``site`` and ``step`` of
    each, ``last`` (the last read of its loop in its step), ``syncs`` (per CPU row: a blocking
    call of a read), ``inside`` (per CPU row: under a read), ``copies`` (per GPU row: a copy
    launched by a read), ``waits`` (ns the host waited in each read's blocking calls)."""

    rows: np.ndarray
    site: np.ndarray
    step: np.ndarray
    last: np.ndarray
    syncs: np.ndarray
    inside: np.ndarray
    copies: np.ndarray
    waits: np.ndarray


def loops(trace: RankTrace) -> Loops | None:
    """The reads of the rank that repeat ``MIN_READS`` times or more per step from one site
    (in a trace without steps, in the whole trace)."""
    cpu, gpu = trace.cpu, trace.gpu
    if not len(cpu) or not len(gpu):
        return None
    blocking = np.array(cpu["name"].isin(BLOCKING_SYNC_NAMES) & ~cpu["name"].isin(
        ["cudaEventQuery", "hipEventQuery", "cudaMemcpyAsync", "hipMemcpyAsync"]))  # fmt: skip
    launch = gpu["launch_row"].to_numpy()
    names = gpu["name"].astype("category")
    reads_back = np.array([READ_BACK in str(n) for n in names.cat.categories] + [False])[
        names.cat.codes.to_numpy()
    ]
    blocking[launch[reads_back & (launch >= 0)]] = True  # a copy to pageable memory waits
    calls = np.flatnonzero(blocking)
    iteration = cpu["iteration"].to_numpy()
    if trace.steps.empty:  # no step: the whole trace is one, as the findings price it
        iteration = np.zeros_like(iteration)
    steps = iteration[calls]
    if not len(calls) or np.bincount(steps[steps >= 0], minlength=1).max() < MIN_READS:
        return None  # no step has enough blocking calls for a loop
    top = outermost_ops(trace)
    owner = np.where(top[calls] >= 0, top[calls], calls)
    rows = np.unique(owner)
    site, step = sites(trace, rows), iteration[rows]
    counts = Counter(zip(site.tolist(), step.tolist()))
    looped = np.array([counts[(s, k)] >= MIN_READS and k >= 0 for s, k in zip(site, step)], bool)
    if trace.steps.empty:  # no step to hold a loop: the reads must come at a loop's pace
        looped &= _at_a_pace(cpu["ts"].to_numpy()[rows], site)
    if not looped.any():
        return None
    rows, site, step = rows[looped], site[looped], step[looped]
    order = np.lexsort((cpu["ts"].to_numpy()[rows], step, site))
    rows, site, step = rows[order], site[order], step[order]
    last = np.append((site[1:] != site[:-1]) | (step[1:] != step[:-1]), True)
    inside = np.isin(np.where(top >= 0, top, np.arange(len(cpu))), rows)
    syncs = blocking & inside
    wait_of = np.zeros(len(cpu))
    owner_all = np.where(top >= 0, top, np.arange(len(cpu)))
    np.add.at(wait_of, owner_all[syncs], cpu["dur"].to_numpy()[syncs])
    copies = (launch >= 0) & inside[np.maximum(launch, 0)] & np.asarray(
        gpu["cat"].isin(MEMCPY_CATEGORIES))  # fmt: skip
    return Loops(rows, site, step, last, syncs, inside, copies, wait_of[rows])


def _at_a_pace(ts: np.ndarray, site: np.ndarray) -> np.ndarray:
    """Per read, whether its site's reads follow one another at a loop's pace: no interval
    between two of them longer than :data:`MAX_PACE` times their median (16 syncs of a harness
    spread over start-up and a model's passes are no loop)."""
    out = np.zeros(len(ts), bool)
    for name in np.unique(site):
        mine = np.flatnonzero(site == name)
        apart = np.diff(np.sort(ts[mine]))
        out[mine] = len(apart) > 0 and apart.max() <= MAX_PACE * max(np.median(apart), 1)
    return out


def find(ctx: Context) -> list[Finding]:
    found = {rank: loops(t) for rank, t in ctx.traces.items()}
    found = {rank: lp for rank, lp in found.items() if lp is not None}
    ev = ctx.events
    if not found or ev.empty:
        return []
    out = []
    sites_all = Counter(s for lp in found.values() for s in lp.site.tolist())
    for site, _ in sites_all.most_common(3):
        finding = _finding(ctx, found, site)
        if finding is not None:
            out.append(finding)
    return out


def _finding(ctx: Context, found: dict, site: str) -> Finding | None:
    ev = ctx.events
    removed_by_rank, on_path_mask = {}, np.zeros(len(ev), bool)
    steps = max(ctx.replay.n_steps, 1)
    reads = waited = 0
    for rank, lp in found.items():
        mine = lp.site == site
        if not mine.any():
            continue
        trace = ctx.traces[rank]
        removed = lp.rows[mine & ~lp.last]
        removed_by_rank[rank] = removed
        reads += int(mine.sum())
        waited += float(lp.waits[mine & ~lp.last].sum())
        n_cpu = len(trace.cpu)
        under = _under(trace, lp, removed)
        copy_events = n_cpu + np.flatnonzero(lp.copies & under[0][np.maximum(
            trace.gpu["launch_row"].to_numpy(), 0)])  # fmt: skip
        rows_ev = np.flatnonzero((ev["rank"] == rank).to_numpy())
        number = ev["event"].to_numpy(np.int64)[rows_ev]
        hit = np.zeros(len(rows_ev), bool)
        cpu_ev = number < n_cpu
        hit[cpu_ev] = under[0][number[cpu_ev]]
        hit[~cpu_ev] = np.isin(number[~cpu_ev], copy_events)
        on_path_mask[rows_ev] = hit
    if not removed_by_rank:
        return None
    for rank, lp in found.items():  # the loops' time is this kind's to price
        if rank in removed_by_rank:
            ctx.claim(rank, [tuple(s) for s in np.concatenate(
                list(_loop_spans(ctx.traces[rank], lp, site).values()))])  # fmt: skip
    on_path = ctx.per_segment(on_path_mask)
    if not on_path.any():
        return None

    def change_of():
        def change(rank):
            if rank not in removed_by_rank:
                return lambda graph, events: (graph.weight, None)
            trace, lp = ctx.traces[rank], found[rank]
            gone = removed_by_rank[rank]
            inside, syncs = _under(trace, lp, gone)
            spans = ranges_by_thread(trace, gone)
            launch = trace.gpu["launch_row"].to_numpy()
            copies = lp.copies & inside[np.maximum(launch, 0)]
            copy_event = np.concatenate([np.zeros(len(trace.cpu), bool), copies])
            sync_event = np.concatenate([syncs, np.zeros(len(trace.gpu), bool)])
            in_loop = launched_within(trace, _loop_spans(trace, lp, site))

            def apply(graph, events):
                weight = graph.weight - thread_overlap(graph, events, spans)
                span = (graph.kind == OPERATOR) & (graph.event >= 0)
                weight[span & copy_event[np.maximum(graph.event, 0)]] = 0
                weight[gaps_before(graph, in_loop)] = 0  # the GPU no longer waits for the reads
                waits = (graph.kind == SYNC) & sync_event[graph.node_event[graph.dst]]
                return np.maximum(weight, 0), ~waits

            return apply

        return change

    per_step = reads / steps
    evidence = (
        f"{per_step:,.0f} blocking reads of device data per step from {site}, the host waiting"
        f" {fmt_us(waited / 1e3 / steps)} per step in their synchronizations; each waits for"
        " the GPU work queued before it"
    )
    return Finding(
        "sync_in_loop",
        site,
        evidence,
        "the loop's reads but the last made free in each rank's step graph (no host time, no"
        " GPU -> CPU wait, copies of no time: one bulk read after the loop), critical path and"
        " job replayed",
        "read once after the loop: keep the values on the device and copy them together"
        " (torch.stack(values).cpu(), .tolist() once), or read every N iterations; a value that"
        " decides the next iteration cannot be deferred",
        ctx.graph_cut(on_path, change_of()),
        None,  # the low end: half of the cut (Finding's default)
        ctx.main_rank(on_path),
    )


def _loop_spans(trace: RankTrace, lp: Loops, site: str) -> dict[int, np.ndarray]:
    """``{tid: [start, end) ns}`` of each loop of ``site``: its first read's start to its last
    read's end, per step."""
    cpu = trace.cpu
    mine = np.flatnonzero(lp.site == site)
    rows = lp.rows[mine]
    ts, end = cpu["ts"].to_numpy()[rows], (cpu["ts"] + cpu["dur"]).to_numpy()[rows]
    tid, step = cpu["tid"].to_numpy()[rows], lp.step[mine]
    out: dict[int, list] = {}
    for key in set(zip(tid.tolist(), step.tolist())):
        part = (tid == key[0]) & (step == key[1])
        out.setdefault(key[0], []).append((ts[part].min(), end[part].max()))
    return {t: np.array(sorted(v), np.int64) for t, v in out.items()}


def _under(trace: RankTrace, lp: Loops, reads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per CPU row: under one of ``reads``; and a blocking call of one of them."""
    top = outermost_ops(trace)
    owner = np.where(top >= 0, top, np.arange(len(trace.cpu)))
    inside = np.isin(owner, reads)
    return inside, lp.syncs & inside
