"""Synchronizations on the path: the host waits for the device, or every rank for every other.

Two fixes, two models:

- **host syncs** (``cudaDeviceSynchronize`` / ``cudaStreamSynchronize`` / ``cudaEventSynchronize``,
  what ``.item()``, ``.cpu()`` and ``print(tensor)`` call): the GPU -> CPU dependency edges of
  each rank's step graphs are removed (the host no longer waits; it goes on launching), the
  graphs replayed, then the job;
- **synchronizing collectives** (``barrier``, and all_reduce / broadcast of at most
  ``TINY_BYTES``: a logged loss or a flag): the instance is dropped (no rank waits for the
  others there), with the host work that only issues it (its dispatch, and the code between
  two such calls), and the job replayed.

The low end keeps half of the time. Blind spots: a sync the program needs (its value decides
what runs next) cannot be removed, only moved later or made less frequent; a dropped collective
may only move the wait to the next one, which the replay shows (it is what it measures).
"""

from __future__ import annotations

import numpy as np

from ...kineto import BLOCKING_SYNC_NAMES
from ...units import fmt_us
from ..critical_path.graph import SYNC
from ..job_path.segments import CALL_KEY
from .context import Context
from .finding import Finding
from .replay import Cut

#: a collective of at most this many bytes synchronizes more than it moves data
TINY_BYTES = 64
SYNC_COLLECTIVES = ("barrier",)
HOST_SYNC_NAMES = tuple(n for n in BLOCKING_SYNC_NAMES if "Memcpy" not in n and "Query" not in n)


def find(ctx: Context) -> list[Finding]:
    return [f for f in (_collectives(ctx), _host(ctx)) if f is not None]


def _collectives(ctx: Context) -> Finding | None:
    inst = ctx.instances
    if inst.empty:
        return None
    tiny = inst["collective"].isin(SYNC_COLLECTIVES) | (
        inst["collective"].isin(["all_reduce", "broadcast"]) & inst["bytes"].between(0, TINY_BYTES)
    )
    chosen = inst[tiny & (inst["ranks_present"] >= 2)]
    if chosen.empty:
        return None
    ids = chosen["instance"].astype(int).tolist()
    names = chosen["collective"].value_counts()
    per_step = len(ids) / max(ctx.replay.n_steps, 1)
    waits = chosen["wait_us"].sum() / max(ctx.replay.n_steps, 1)
    evidence = (
        f"{per_step:g} synchronizing collective(s) per step"
        f" ({', '.join(f'{n} x{c}' for n, c in names.items())}); ranks wait"
        f" {fmt_us(waits)} per step in them"
    )
    half = ids[: len(ids) // 2]
    return Finding(
        "sync",
        ", ".join(names.index),
        evidence,
        "the synchronizing collectives dropped (no rank waits there), job replayed",
        "remove barriers the program does not need; log losses every N steps, or reduce them"
        " asynchronously (async_op=True) and read them later",
        Cut(_issuing(ctx, set(ids)), dropped=frozenset(ids)),
        Cut(_issuing(ctx, set(half)), dropped=frozenset(half)),
    )


def _issuing(ctx: Context, dropped: set[int]) -> np.ndarray:
    """ns per segment of host work that only issues the dropped collectives: the call's own
    dispatch (from its op's start to its arrival), and all of a segment between two of them
    (the code between two syncs, e.g. a logger's loop)."""
    seg = ctx.segments
    target = ctx.instance_of_segment()
    prev_keys = zip(seg["rank"].tolist(), *(seg[f"prev_{k}"].tolist() for k in CALL_KEY))
    prev = np.array([ctx.call_instance.get(k, -1) for k in prev_keys], np.int64)
    issued = {
        (r, i): v for r, i, v in zip(ctx.calls["rank"].tolist(), ctx.calls["instance"].tolist(),
                                     ctx.calls["issued"].tolist())
    }  # fmt: skip
    cut = np.zeros(len(seg))
    ends, spans = seg["end"].to_numpy(), ctx.replay.spans
    for i in np.flatnonzero(np.isin(target, list(dropped))).tolist():
        if prev[i] in dropped:
            cut[i] = spans[i]
            continue
        start = issued.get((int(seg["rank"].iat[i]), int(target[i])), -1)
        if start >= 0:
            cut[i] = min(spans[i], max(float(ends[i] - start), 0.0))
    return cut


def _host(ctx: Context) -> Finding | None:
    seg = ctx.segments
    waits = np.zeros(len(seg))
    counts: dict[str, int] = {}
    for rank, trace in ctx.traces.items():
        cpu = trace.cpu
        if not len(cpu):
            continue
        syncs = cpu[cpu["name"].isin(HOST_SYNC_NAMES)]
        if syncs.empty:
            continue
        rows = np.flatnonzero((seg["rank"] == rank).to_numpy())
        mid = (syncs["ts"] + syncs["dur"] // 2).to_numpy()
        order = np.argsort(mid, kind="stable")
        mid, before = mid[order], np.append(0, np.cumsum(syncs["dur"].to_numpy()[order]))
        # the syncs whose middle is in [start, end) of each segment, summed by prefix sums
        first = np.searchsorted(mid, seg["start"].to_numpy()[rows])
        stop = np.searchsorted(mid, seg["end"].to_numpy()[rows])
        waits[rows] = before[stop] - before[first]
        names = syncs["name"].astype(str).to_numpy()[order]
        for name in np.unique(names):  # the calls in the steps, by name
            seen = np.append(0, np.cumsum(names == name))
            counts[name] = counts.get(name, 0) + int((seen[stop] - seen[first]).sum())
    if not waits.any():
        return None

    def remove(fraction):
        def apply(graph, events):
            to_cpu = (graph.kind == SYNC) & (events.stream[graph.node_event[graph.dst]] < 0)
            if fraction >= 1:
                return graph.weight, ~to_cpu
            return graph.weight, ~(to_cpu & (np.arange(len(to_cpu)) % 2 == 0))

        return apply

    n_steps = max(ctx.replay.n_steps, 1)
    per_step = waits.sum() / 1e3 / n_steps
    top = max(counts, key=counts.get)
    evidence = (
        f"the host waits {fmt_us(per_step)} per step in device synchronizations"
        f" ({', '.join(f'{n} x{c / n_steps:g}' for n, c in counts.items() if c)} per step)"
    )
    return Finding(
        "host_sync",
        top,
        evidence,
        "GPU -> CPU sync edges removed from each rank's step graph (critical path replayed),"
        " then the job replayed",
        "avoid .item() / .cpu() / print(tensor) / torch.cuda.synchronize() inside the step:"
        " keep values on the device, read them every N steps, use non_blocking copies",
        ctx.graph_cut(waits, lambda rank: remove(1.0)),
        ctx.graph_cut(waits / 2, lambda rank: remove(0.5)),
        ctx.main_rank(waits),
    )
