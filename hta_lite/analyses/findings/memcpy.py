"""Copies from pageable host memory on the critical path.

A copy from (or to) pageable memory is staged by the driver through a pinned buffer: it runs
slower than a pinned one and the host call does not return until it is done. Model: in each
rank's step graphs each pageable copy takes half its time (``SPEEDUP``: pinned transfers run at
about twice the rate; an assumption, stated as such). The host call of an upload (host to
device) returns at once (``non_blocking``: its span, which was the wait, takes no time); the
call of a read back (device to host: ``.cpu()``, ``.item()``) still waits for the work queued
before the copy, since the host needs the data, and is shorter only by the time the copy saves.
The graphs are replayed (the copy's stream still runs it before what follows there), then the
job. The low end shortens the copies by a quarter and keeps the host waiting.

Blind spots: the 2x is typical of PCIe hosts, not measured on this machine; a read back's wait
for the queue is a sync, which pinning does not remove (avoid the read instead).
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_us
from ..critical_path.events import Events
from ..critical_path.graph import OPERATOR, SYNC
from .context import Context
from .finding import Finding

SPEEDUP = 2.0
PAGEABLE = "Pageable"
#: in the name of a copy from device to host ("Memcpy DtoH (Device -> Pageable)")
READ_BACK = "Device -> Pageable"


def find(ctx: Context) -> list[Finding]:
    ev = ctx.events
    names_of = {r: _pageable_names(t) for r, t in ctx.traces.items()}
    ranks = [r for r, names in names_of.items() if names]
    if ev.empty or not ranks:
        return []
    half = 1 - 1 / SPEEDUP
    copies = {r: _copies(Events.of(ctx.traces[r]), half) for r in ranks}
    copy_ev, call_share = np.zeros(len(ev), bool), np.zeros(len(ev))
    for rank, (copy, share) in copies.items():
        mine = np.flatnonzero((ev["rank"] == rank).to_numpy())
        number = ev["event"].to_numpy(np.int64)[mine]
        copy_ev[mine], call_share[mine] = copy[number], share[number]
    call_ev = call_share > 0
    if not (copy_ev | call_ev).any():
        return []

    def change_of(fraction, unblock):
        def change(rank):
            copy, share = copies[rank]
            upload = share >= 1.0  # the calls of uploads (a read back's share is below 1)

            def apply(graph, events):
                weight = graph.weight.astype(np.float64)
                edge = (graph.kind == OPERATOR) & (graph.event >= 0)
                event = np.maximum(graph.event, 0)
                weight[edge & copy[event]] *= 1 - fraction
                if not unblock:
                    return weight.astype(np.int64), None
                weight[edge] *= 1 - share[event[edge]]
                # an upload's call no longer waits for its copy (a read back's still does)
                waits = (graph.kind == SYNC) & upload[graph.node_event[graph.dst]]
                return weight.astype(np.int64), ~waits

            return apply

        return change

    duration = ev["duration"].to_numpy(np.float64)
    on_path = ctx.per_segment(copy_ev, duration * half) + ctx.per_segment(
        call_ev, duration * call_share
    )
    if not on_path.any():
        return []
    pageable = copy_ev | call_ev
    steps = max(ctx.replay.n_steps, 1)
    names = sorted({n for r in ranks for n in names_of[r]})
    evidence = (
        f"{fmt_us(ctx.per_segment(pageable).sum() / 1e3 / steps)} per step of pageable copies"
        f" and the host calls waiting for them on the ranks' paths ({', '.join(names[:2])})"
    )
    return [
        Finding(
            "pageable_memcpy",
            names[0],
            evidence,
            f"pageable copies {SPEEDUP:g}x faster, uploads not waited for by the host, in each"
            " rank's step graph (critical path replayed), then the job replayed",
            "pin the host memory (DataLoader(pin_memory=True), tensor.pin_memory()) and copy"
            " with .to(device, non_blocking=True)",
            ctx.graph_cut(on_path, change_of(half, True)),
            ctx.graph_cut(
                ctx.per_segment(copy_ev, duration * half / 2), change_of(half / 2, False)
            ),
            ctx.main_rank(on_path),
        )
    ]


def _pageable_names(trace) -> list[str]:
    gpu = trace.gpu
    if not len(gpu):
        return []
    names = gpu["name"].astype(str)
    return sorted(set(names[names.str.contains(PAGEABLE)]))


def _copies(events, half: float) -> tuple[np.ndarray, np.ndarray]:
    """Per event of the rank: a pageable copy on the GPU; of a host call that issued one, the
    share of its time the fix removes (an upload's all of it; a read back's the ``half`` of
    its copy's time, of its own; 0: not such a call)."""
    copy = events.name.where(lambda n: PAGEABLE in n) & (events.stream >= 0)
    back = events.name.where(lambda n: READ_BACK in n)
    share = np.zeros(len(copy))
    rows = np.flatnonzero(copy & (events.launch >= 0))
    calls = events.launch[rows]
    own = np.maximum(events.end[calls] - events.ts[calls], 1)
    copied = (events.end[rows] - events.ts[rows]) * half
    share[calls] = np.where(back[rows], np.minimum(copied / own, 1.0), 1.0)
    return copy, share
