"""What-if replay of one rank's critical path: change edges of each step's graph, recompute.

Each step's graph is HTA's (:mod:`..critical_path.graph`), over the step's bounds as the job
path cuts them, with three kinds of edge added (weight 0, each only where the trace's times
agree): each kernel on a stream depends on the end of the kernel before it there, and on the
call that launched it (its end where the kernel started after it, else its start: weighing the
launch latency, or the whole wait of a kernel held, launched and with the GPU idle, by something
the trace does not show — :func:`..idle.queued_after_launch`; no host fix removes that); and a
blocking call (a synchronization, a blocking copy) with no GPU -> CPU edge — a trace recorded
without GPU-side sync events — waits for the latest GPU event that ended inside it. HTA's
graph leaves the first out where the stream was idle when the kernel was launched, and the
second where the kernel waited on its stream instead; a replay that makes the host or the
stream faster needs both, or kernels would overlap on their stream, or run before they were
launched. A change gives new edge weights (never larger) and the edges to keep;
the saving of a step is its longest path's length minus the changed graph's, both over the
graph with the added edges. A change that touches no edge of the step's longest path
saves nothing (weights only shrink), so that step is not replayed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ...kineto import BLOCKING_SYNC_NAMES
from ...load.rank_trace import RankTrace
from ..critical_path.events import Events
from ..critical_path.graph import DEPENDENCY, KERNEL_KERNEL_DELAY, LAUNCH_DELAY, SYNC, Graph, build
from ..critical_path.path import longest_distances, path_to
from ..critical_path.window import event_index
from ..idle import queued_waits
from ..job_path.segments import between, step_bounds, whole_trace

#: ``change(graph, events) -> (weight, keep)``: new weights (ns) and the edges kept (None: all)
Change = Callable[[Graph, Events], tuple[np.ndarray, np.ndarray | None]]


class RankGraphs:
    """The step graphs of one rank, built once and replayed under changes."""

    def __init__(self, trace: RankTrace, patterns: list[str] | None = None):
        self.trace = trace
        self.events = Events.of(trace)
        self.queued = np.r_[np.zeros(len(trace.cpu), np.int64), queued_waits(trace)]
        index = event_index(trace)
        self.steps = {  # the graph only: the longest paths are the replay's own (with_order_edges)
            number: build(trace, self.events, between(trace, start, end), index, patterns)
            for number, start, end in (step_bounds(trace) or [whole_trace(trace)])
        }
        self._base: dict[int, tuple[Graph, int, np.ndarray]] = {}

    def savings(self, change: Change) -> dict[int, float]:
        """ns each step's critical path gets shorter under ``change``."""
        out = {}
        for number, graph in self.steps.items():
            if not len(graph.node_ts) or not len(graph.src):
                out[number] = 0.0
                continue
            ordered, length, path = self._base_of(number, graph)
            weight, keep = change(ordered, self.events)
            out[number] = _saving(ordered, length, path, weight, keep)
        return out

    def _base_of(self, number: int, g: Graph) -> tuple[Graph, int, np.ndarray]:
        """The step's graph with the added edges, its longest path's length and edges."""
        if number not in self._base:
            ordered = with_order_edges(g, self.events, self.queued)
            dist, best, _ = longest_distances(len(g.node_ts), ordered, Counter())
            end = int(np.argmax(dist))
            path = np.asarray(path_to(end, best.tolist(), ordered.src.tolist()))
            self._base[number] = (ordered, int(dist.max()), path)
        return self._base[number]


def _saving(ordered: Graph, length: int, path, weight, keep) -> float:
    """ns the longest path of ``ordered`` (``length`` ns along ``path``) gets shorter with the
    new weights and the edges kept."""
    weight = np.minimum(weight, ordered.weight)
    keep = np.ones(len(ordered.src), bool) if keep is None else keep
    if not ((weight[path] < ordered.weight[path]).any() or not keep[path].all()):
        return 0.0
    smaller = replace(
        ordered, src=ordered.src[keep], dst=ordered.dst[keep], kind=ordered.kind[keep],
        weight=weight[keep], event=ordered.event[keep], health=Counter(),
    )  # fmt: skip
    dist, _, _ = longest_distances(len(ordered.node_ts), smaller, Counter())
    return float(max(length - int(dist.max()), 0))


def with_order_edges(graph: Graph, events: Events, queued: np.ndarray | None = None) -> Graph:
    """``graph`` with the edges of the module docstring appended after HTA's: from each GPU
    event's end to the start of the next one on its stream, and from its launch call's end
    (start) to its start; ``queued``: per event, ns it waited held by what the trace does not
    show (:func:`..idle.queued_waits`; None: none)."""
    node_event, start = graph.node_event, graph.node_start
    start_node = np.full(len(events.ts), -1, np.int64)
    end_node = np.full(len(events.ts), -1, np.int64)
    start_node[node_event[start]] = np.flatnonzero(start)
    end_node[node_event[~start]] = np.flatnonzero(~start)
    starts = np.flatnonzero((events.stream[node_event] >= 0) & start)
    ev = node_event[starts]
    order = np.lexsort((events.ts[ev], events.stream[ev]))
    starts, ev = starts[order], ev[order]
    same = events.stream[ev][1:] == events.stream[ev][:-1]
    src, dst = end_node[ev[:-1]][same], starts[1:][same]
    ok = (src >= 0) & (graph.node_ts[np.maximum(src, 0)] <= graph.node_ts[dst])
    src, dst = src[ok], dst[ok]
    launch = events.launch[ev]
    call = np.maximum(launch, 0)
    call_end = np.where(launch >= 0, end_node[call], -1)
    call_start = np.where(launch >= 0, start_node[call], -1)
    returned = (call_end >= 0) & (graph.node_ts[np.maximum(call_end, 0)] <= events.ts[ev])
    after = np.where(returned, call_end, call_start)
    ok = (after >= 0) & (graph.node_ts[np.maximum(after, 0)] <= events.ts[ev])
    # a launch edge weighs the device's launch latency (no more than this kernel waited): a
    # replay that makes the host faster still starts a kernel that long after its launch
    waited_for = events.ts[ev][ok] - graph.node_ts[after[ok]]
    latency = np.where(returned[ok], np.minimum(waited_for, launch_latency(graph)), 0)
    if queued is not None:  # held by something unseen: a faster host does not start it sooner
        latency = np.where(returned[ok] & (queued[ev[ok]] > 0), waited_for, latency)
    weight = np.concatenate([np.zeros(len(src), np.int64), latency.astype(np.int64)])
    src, dst = np.concatenate([src, after[ok]]), np.concatenate([dst, starts[ok]])
    kind = np.full(len(src), DEPENDENCY, graph.kind.dtype)
    waited, sync_end = _inferred_syncs(graph, events, end_node)
    src, dst = np.concatenate([src, waited]), np.concatenate([dst, sync_end])
    kind = np.concatenate([kind, np.full(len(waited), SYNC, graph.kind.dtype)])
    weight = np.concatenate([weight, np.zeros(len(waited), np.int64)])
    return replace(
        graph,
        src=np.concatenate([graph.src, src]), dst=np.concatenate([graph.dst, dst]),
        kind=np.concatenate([graph.kind, kind]),
        weight=np.concatenate([graph.weight, weight.astype(graph.weight.dtype)]),
        event=np.concatenate([graph.event, np.full(len(src), -1, graph.event.dtype)]),
    )  # fmt: skip


def launch_latency(graph: Graph) -> int:
    """ns from a launch call's return to its kernel's start on an idle stream: the median of
    the step's launch delays (HTA's ``kernel_launch_delay`` edges), 0 without one."""
    delays = graph.weight[graph.kind == LAUNCH_DELAY]
    return int(np.median(delays)) if len(delays) else 0


def launched_within(trace: RankTrace, spans: dict[int, np.ndarray]) -> np.ndarray:
    """Per event of the rank (cpu rows, then gpu rows): a GPU event whose launch call started
    inside ``spans`` (``{tid: (n, 2) [start, end) ns}``) on its thread."""
    cpu, gpu = trace.cpu, trace.gpu
    out = np.zeros(len(cpu) + len(gpu), bool)
    launch = gpu["launch_row"].to_numpy()
    has = np.flatnonzero(launch >= 0)
    ts, tid = cpu["ts"].to_numpy()[launch[has]], cpu["tid"].to_numpy()[launch[has]]
    for thread, span in spans.items():
        mine = tid == thread
        if len(span) and mine.any():
            j = np.searchsorted(span[:, 0], ts[mine], side="right") - 1
            inside = (j >= 0) & (ts[mine] < span[np.maximum(j, 0), 1])
            out[len(cpu) + has[mine][inside]] = True
    return out


def gaps_before(graph: Graph, kernels: np.ndarray) -> np.ndarray:
    """Per edge: a wait of the GPU for the host before one of ``kernels`` (a bool per event):
    the ``kernel_kernel_delay`` or ``kernel_launch_delay`` edge into its start. A replay that
    makes the host faster sets them to 0: the added edges (its launch call's end plus the launch
    latency, the kernel before it on its stream) then say when it can start."""
    into = kernels[graph.node_event[graph.dst]] & graph.node_start[graph.dst]
    return into & ((graph.kind == KERNEL_KERNEL_DELAY) | (graph.kind == LAUNCH_DELAY))


def _inferred_syncs(graph: Graph, events: Events, end_node: np.ndarray):
    """``(src, dst)`` nodes of GPU -> CPU edges a trace without GPU-side sync events lacks: a
    blocking call (a stream or device synchronization, a blocking copy) that ends after a GPU
    event ended inside its span waited for that event (the latest such). Calls already the
    target of a sync edge are left as they are."""
    blocking = events.name.isin(BLOCKING_SYNC_NAMES) & (events.stream < 0)
    calls = np.flatnonzero(blocking & (end_node >= 0))
    has_sync = np.zeros(len(graph.node_ts), bool)
    has_sync[graph.dst[graph.kind == SYNC]] = True
    calls = calls[~has_sync[end_node[calls]]]
    gpu = np.flatnonzero((events.stream >= 0) & (end_node >= 0))
    if not len(calls) or not len(gpu):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    gpu = gpu[np.argsort(events.end[gpu], kind="stable")]
    ends = events.end[gpu]
    last = np.searchsorted(ends, events.end[calls], side="right") - 1  # ended by the call's end
    ok = (last >= 0) & (ends[np.maximum(last, 0)] >= events.ts[calls])  # ...and inside it
    return end_node[gpu[last[ok]]], end_node[calls[ok]]


def thread_overlap(graph: Graph, events: Events, ranges: dict[int, np.ndarray]) -> np.ndarray:
    """ns of each edge's time span that lies inside ``ranges`` (``{tid: (n, 2) merged, sorted
    [start, end) ns}``) on the thread of the edge's source event; 0 for GPU edges."""
    src_event = graph.node_event[graph.src]
    tid = events.tid[src_event]
    cpu = events.stream[src_event] < 0
    a, b = graph.node_ts[graph.src], graph.node_ts[graph.dst]
    out = np.zeros(len(graph.src), np.int64)
    for thread, spans in ranges.items():
        mine = np.flatnonzero(cpu & (tid == thread))
        if len(mine) and len(spans):
            out[mine] = covered(spans, b[mine]) - covered(spans, a[mine])
    return np.maximum(out, 0)


def covered(spans: np.ndarray, t: np.ndarray) -> np.ndarray:
    """ns of the merged, sorted ``spans`` that lie before each time ``t``."""
    starts, ends = spans[:, 0], spans[:, 1]
    before = np.concatenate([[0], np.cumsum(ends - starts)])
    j = np.searchsorted(starts, t, side="right")  # spans starting at or before t
    last = np.maximum(j - 1, 0)
    partial = np.where(j > 0, np.minimum(t, ends[last]) - starts[last], 0)
    return before[np.maximum(j - 1, 0)] * (j > 0) + np.maximum(partial, 0)
