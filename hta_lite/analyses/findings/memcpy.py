"""Copies from pageable host memory on the critical path.

A copy from (or to) pageable memory is staged by the driver through a pinned buffer: it runs
slower than a pinned one and the host call does not return until it is done. Model: in each
rank's step graphs each pageable copy takes half its time (``SPEEDUP``: pinned transfers run at
about twice the rate; an assumption, stated as such) and the host call that issued it returns at
once (``non_blocking``: its span, which was the wait, takes no time); the graphs are replayed
(the copy's stream still runs it before what follows there), then the job. The low end
shortens the copies by a quarter and keeps the host waiting.

Blind spots: the 2x is typical of PCIe hosts, not measured on this machine; a copy whose data
the host needs at once (``.cpu()`` of a result) still waits.
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_us
from ..critical_path.events import Events
from ..critical_path.graph import OPERATOR
from .context import Context
from .finding import Finding

SPEEDUP = 2.0
PAGEABLE = "Pageable"


def find(ctx: Context) -> list[Finding]:
    ev = ctx.events
    ranks = [r for r, t in ctx.traces.items() if _has_pageable(t)]
    if ev.empty or not ranks:
        return []
    copies = {r: _copies(Events.of(ctx.traces[r])) for r in ranks}
    copy_ev, call_ev = np.zeros(len(ev), bool), np.zeros(len(ev), bool)
    for rank, (copy, call) in copies.items():
        mine = np.flatnonzero((ev["rank"] == rank).to_numpy())
        number = ev["event"].to_numpy(np.int64)[mine]
        copy_ev[mine], call_ev[mine] = copy[number], call[number]
    if not (copy_ev | call_ev).any():
        return []

    def change_of(fraction, unblock):
        def change(rank):
            copy, call = copies[rank]

            def apply(graph, events):
                weight = graph.weight.astype(np.float64)
                edge = (graph.kind == OPERATOR) & (graph.event >= 0)
                event = np.maximum(graph.event, 0)
                weight[edge & copy[event]] *= 1 - fraction
                if unblock:
                    weight[edge & call[event]] = 0
                return weight.astype(np.int64), None

            return apply

        return change

    half = 1 - 1 / SPEEDUP
    duration = ev["duration"].to_numpy(np.float64)
    on_path = ctx.per_segment(copy_ev, duration * half) + ctx.per_segment(call_ev)
    pageable = copy_ev | call_ev
    steps = max(ctx.replay.n_steps, 1)
    names = sorted({n for t in ctx.traces.values() for n in _pageable_names(t)})
    evidence = (
        f"{fmt_us(ctx.per_segment(pageable).sum() / 1e3 / steps)} per step of pageable copies"
        f" and the host calls waiting for them on the ranks' paths ({', '.join(names[:2])})"
    )
    return [
        Finding(
            "pageable_memcpy",
            names[0],
            evidence,
            f"pageable copies {SPEEDUP:g}x faster and not waited for by the host in each rank's"
            " step graph (critical path replayed), then the job replayed",
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


def _has_pageable(trace) -> bool:
    return bool(_pageable_names(trace))


def _copies(events) -> tuple[np.ndarray, np.ndarray]:
    """Per event of the rank: a pageable copy on the GPU; the host call that issued one."""
    copy = events.name.where(lambda n: PAGEABLE in n) & (events.stream >= 0)
    call = np.zeros(len(copy), bool)
    launch = events.launch[np.flatnonzero(copy)]
    call[launch[launch >= 0]] = True
    return copy, call
