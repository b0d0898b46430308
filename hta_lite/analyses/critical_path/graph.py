"""The critical-path dependency graph of one rank's window (HTA 0.6.1's construction).

Nodes: a start and an end per event that matters: CPU operators and runtime / driver calls (and
the user's data-loading events), GPU events with a launch call. They are ordered by (time, event
index). Edges, in the order the reference adds them (a later edge between the same two nodes
replaces an earlier one):

1. **runtime lock**: launch / copy / host-alloc calls hold one lock across threads; the order in
   which they finish chains them (``dependency``), each one's own span is an ``operator`` edge;
2. **call stacks**: per CPU thread (the backward thread merged into the forward one when each is
   unique), consecutive start / end points of nested operators (``operator`` edges, weighted by
   the time between them; ``dependency`` between top-level ones); a blocking synchronization's
   span weighs 0 (its time is waiting, carried by the GPU -> CPU edge instead);
3. **kernels**, in start order: each kernel's span (``operator``); a ``kernel_launch_delay`` from
   its launch call when the stream was idle and nothing else queued (or, for a graph launch, to
   the first kernel it releases on each stream: the reference drops every graph-launched kernel
   but one from its window, docs/differences-from-hta.md row 20), else a
   ``kernel_kernel_delay`` from the previous kernel on the stream (gap < 1.5 ms); a
   ``sync_dependency`` from the kernel a ``Stream Wait Event`` waits on (the last launch before
   the ``cudaEventRecord`` on the recorded stream) to the next kernel launched on the waiting
   stream; and GPU -> CPU ``sync_dependency`` edges to the end of ``cudaStreamSynchronize``
   (last kernel of the stream), ``cudaDeviceSynchronize`` (of every stream) and
   ``cudaEventSynchronize`` (the recorded kernel).

Weights are exact ns: the time between the two points, or 0 for dependencies. An edge whose
points run backwards in time (a trace whose call stack is out of order) gets weight 0 and is
counted (``cp_negative_edge``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ...kineto import (
    BLOCKING_SYNC_NAMES,
    CONTEXT_SYNC,
    CPU_OP_CATEGORY,
    EVENT_SYNC,
    GPU_SYNC_CATEGORY,
    GRAPH_LAUNCH_NAMES,
    RUNTIME_CATEGORIES,
    RUNTIME_LOCK_NAMES,
    STREAM_SYNC,
    STREAM_WAIT_EVENT,
)
from ...load.rank_trace import RankTrace
from ..counters import queue_changes
from .call_stacks import CallStacks
from .edge_types import (  # noqa: F401 (re-exported: the graph's vocabulary)
    DEPENDENCY,
    EDGE_TYPES,
    KERNEL_KERNEL_DELAY,
    KERNEL_KERNEL_DELAY_THRESHOLD_NS,
    LAUNCH_DELAY,
    OPERATOR,
    SYNC,
)
from .events import Events, Records, data_load_pattern
from .window import Window


@dataclass
class Graph:
    """Nodes (``node_event``, ``node_start``, ``node_ts``, in (time, event index) order) and
    edges (``src``, ``dst`` node ids, ``kind``, ``weight`` ns, ``event``: the event the edge's
    time is attributed to, -1 for none)."""

    node_event: np.ndarray
    node_start: np.ndarray
    node_ts: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    kind: np.ndarray
    weight: np.ndarray
    event: np.ndarray
    health: Counter = field(default_factory=Counter)


class _Builder(CallStacks):
    def __init__(self, trace: RankTrace, events: Events, index: np.ndarray, window: Window,
                 data_load_events: list[str] | None):  # fmt: skip
        self.trace, self.ev, self.index = trace, events, index
        n_cpu = events.n_cpu
        cpu_rows, gpu_rows = window.cpu, window.gpu + n_cpu
        is_op = events.cat.isin((CPU_OP_CATEGORY, *RUNTIME_CATEGORIES))[cpu_rows]
        pattern = data_load_pattern(data_load_events)
        if pattern is not None:
            is_op |= events.name.where(pattern.search)[cpu_rows]
        gpu_nodes = gpu_rows[(events.stream[gpu_rows] != -1) & (events.launch[gpu_rows] >= 0)]
        node_events = np.concatenate([cpu_rows[is_op], gpu_nodes])
        self.window_cpu, self.window_gpu = cpu_rows, gpu_rows
        # nodes: (ts, event index), a start before an end at the same point
        ts = np.concatenate([events.ts[node_events], events.end[node_events]])
        start = np.concatenate([np.ones(len(node_events), bool), np.zeros(len(node_events), bool)])
        both = np.concatenate([node_events, node_events])
        order = np.lexsort((~start, index[both], ts))
        self.node_event, self.node_start, self.node_ts = both[order], start[order], ts[order]
        n_events = len(events.ts)
        self.start_node = np.full(n_events, -1, np.int64)
        self.end_node = np.full(n_events, -1, np.int64)
        ids = np.arange(len(order))
        self.start_node[self.node_event[self.node_start]] = ids[self.node_start]
        self.end_node[self.node_event[~self.node_start]] = ids[~self.node_start]
        self.is_lock = events.name.isin(RUNTIME_LOCK_NAMES)
        self.is_blocking = events.name.isin(BLOCKING_SYNC_NAMES)
        self.is_graph_launch = events.name.isin(GRAPH_LAUNCH_NAMES)
        self.is_sync = events.cat.isin((GPU_SYNC_CATEGORY,))
        # plain lists for the per-edge lookups below (numpy scalar indexing is slow)
        self.ts_, self.start_ = self.node_ts.tolist(), self.node_start.tolist()
        self.event_ = self.node_event.tolist()
        self.begin_, self.finish_ = self.start_node.tolist(), self.end_node.tolist()
        self.lock_, self.blocking_ = self.is_lock.tolist(), self.is_blocking.tolist()
        self.sync_, self.graph_launch_ = self.is_sync.tolist(), self.is_graph_launch.tolist()
        # edges in the order they are added: Python lists from the loops, array chunks from the
        # vectorized call-stack walk; graph() computes weights and keeps the last of duplicates
        self.chunks: list[tuple[np.ndarray, ...]] = []
        self._src: list[int] = []
        self._dst: list[int] = []
        self._kind: list[int] = []
        self._zero: list[bool] = []
        self._event: list[int] = []
        self.health: Counter = Counter()

    # ---- edges -------------------------------------------------------------------------------
    def add(self, u: int, v: int, kind: int, zero: bool = False, event: int = -1) -> None:
        self._src.append(u)
        self._dst.append(v)
        self._kind.append(kind)
        self._zero.append(zero)
        self._event.append(event)

    def add_many(self, src, dst, kind, zero, event) -> None:
        self._flush()
        self.chunks.append((src, dst, kind.astype(np.int64), zero, event))

    def _flush(self) -> None:
        if self._src:
            self.chunks.append(
                (np.array(self._src, np.int64), np.array(self._dst, np.int64),
                 np.array(self._kind, np.int64), np.array(self._zero, bool),
                 np.array(self._event, np.int64))
            )  # fmt: skip
            self._src, self._dst, self._kind, self._zero, self._event = [], [], [], [], []

    def attributed(self, u: int, v: int, kind: int, parent: int) -> int:
        """The event an operator / kernel-kernel edge's time belongs to (the reference's rule):
        the source when it is a start (or the previous kernel), the destination when both are
        ends, else (end -> start) the parent of the source."""
        if kind == KERNEL_KERNEL_DELAY or self.start_[u]:
            return int(self.event_[u])
        if not self.start_[v]:
            return int(self.event_[v])
        return parent

    def shares_lock(self, u: int, v: int) -> bool:
        return bool(
            self.lock_[self.event_[u]]
            and self.lock_[self.event_[v]]
            and (self.start_[u] or not self.start_[v])
        )

    # ---- 1. runtime lock ---------------------------------------------------------------------
    def runtime_lock(self) -> None:
        pending: list[int] = []
        last = -1
        for node in np.flatnonzero(self.is_lock[self.node_event]).tolist():
            if self.start_[node]:
                pending.append(node)
            else:
                while pending:
                    begin = pending.pop()
                    if self.event_[begin] == self.event_[node]:
                        self.add(begin, node, OPERATOR, event=int(self.event_[node]))
                    else:
                        self.add(begin, node, DEPENDENCY)
                if last >= 0 and not self.start_[last]:
                    self.add(last, node, DEPENDENCY)
            last = node

    # ---- 3. kernels --------------------------------------------------------------------------
    def kernels(self) -> None:
        ev, trace = self.ev, self.trace
        n_cpu = ev.n_cpu
        rows = self.window_gpu
        syncs = ev.name.isin((EVENT_SYNC, CONTEXT_SYNC))[rows]
        rows = rows[((ev.stream[rows] != -1) | syncs) & (ev.launch[rows] >= 0)]
        is_sync = self.is_sync[rows]
        sort_by = np.where(is_sync, ev.end[rows], ev.ts[rows])
        rows = rows[np.lexsort((self.index[rows], sort_by))]
        after_enqueue, after_start = self._queue()
        records = Records(trace, ev)
        last: dict[int, int] = {}  # stream -> end node of its last kernel
        waits: dict[int, int] = {}  # kernel event -> the event it must wait for
        graphs: set[tuple[int, int]] = set()  # (graph launch call, stream) already released
        streams, launches, ts = ev.stream.tolist(), ev.launch.tolist(), ev.ts.tolist()
        after_enqueue, after_start = after_enqueue.tolist(), after_start.tolist()
        for e in rows.tolist():
            if self.sync_[e]:
                self._sync(e, records, last, waits)
                continue
            begin, finish = self.begin_[e], self.finish_[e]
            if begin < 0:
                continue
            self.add(begin, finish, OPERATOR, event=e)
            stream, runtime = streams[e], launches[e]
            launched = ts[runtime]
            previous = last.get(stream, -1)
            waited = waits.pop(e, None)
            wait_end = self.finish_[waited] if waited is not None else -1
            if waited is not None and wait_end >= 0:
                self.add(wait_end, begin, SYNC)
            elif waited is not None:
                waited = None
            g = e - n_cpu
            # a graph launch releases its kernels: the first on each stream waits for the call
            released = self.graph_launch_[runtime] and (runtime, stream) not in graphs
            graphs.add((runtime, stream))
            alone = released or (after_enqueue[g] == 1 and after_start[g] == 0)
            if (
                alone
                and (previous < 0 or self.ts_[previous] < launched)
                and (waited is None or self.ts_[wait_end] < launched)
            ):
                runtime_start = self.begin_[runtime]
                if runtime_start >= 0:
                    self.add(runtime_start, begin, LAUNCH_DELAY)
            elif (
                previous >= 0
                and self.ts_[begin] - self.ts_[previous] < KERNEL_KERNEL_DELAY_THRESHOLD_NS
                and (waited is None or self.ts_[wait_end] < self.ts_[previous])
            ):
                self.add(previous, begin, KERNEL_KERNEL_DELAY, event=self.event_[previous])
            last[stream] = finish

    def _queue(self) -> tuple[np.ndarray, np.ndarray]:
        """Queue length of each GPU event's stream right after its enqueue and after its start
        (-1 for events not queued)."""
        queued, order, length = queue_changes(self.trace)
        n_gpu = len(self.trace.gpu)
        by_change = np.empty(2 * len(queued), np.int64)
        by_change[order] = length
        after_enqueue = np.full(n_gpu, -1, np.int64)
        after_start = np.full(n_gpu, -1, np.int64)
        after_enqueue[queued] = by_change[: len(queued)]
        after_start[queued] = by_change[len(queued) :]
        return after_enqueue, after_start

    def _sync(self, e: int, records: Records, last: dict, waits: dict) -> None:
        ev = self.ev
        name, runtime = ev.name[e], int(ev.launch[e])  # one lookup
        if name in (STREAM_WAIT_EVENT, EVENT_SYNC):
            waited = records.recorded_kernel(e)
            if waited < 0:
                return
            if name == STREAM_WAIT_EVENT:
                target = records.next_kernel(runtime, int(ev.stream[e]))
                if target >= 0:
                    waits[target] = waited
            elif self.finish_[waited] >= 0 and self.finish_[runtime] >= 0:
                self.add(int(self.finish_[waited]), int(self.finish_[runtime]), SYNC)
            return
        if self.finish_[runtime] < 0:
            return
        ends = list(last.values()) if name == CONTEXT_SYNC else [last.get(int(ev.stream[e]), -1)]
        if name in (STREAM_SYNC, CONTEXT_SYNC):
            for node in ends:
                if node >= 0:
                    self.add(node, int(self.finish_[runtime]), SYNC)

    def graph(self) -> Graph:
        self._flush()
        parts = list(zip(*self.chunks)) if self.chunks else [[np.zeros(0, np.int64)]] * 5
        src, dst, kind, zero, event = (np.concatenate(p) for p in parts)
        zero = zero.astype(bool)
        # a later edge between the same two nodes replaces an earlier one (and takes its place)
        key = src * (len(self.node_ts) + 1) + dst
        _, last = np.unique(key[::-1], return_index=True)
        keep = np.sort(len(key) - 1 - last)
        src, dst, kind, zero, event = src[keep], dst[keep], kind[keep], zero[keep], event[keep]
        timed = ~zero & (kind != DEPENDENCY) & (kind != SYNC)
        weight = np.where(timed, self.node_ts[dst] - self.node_ts[src], 0)
        backwards = int((weight < 0).sum())
        if backwards:
            self.health["cp_negative_edge"] += backwards
        weight = np.maximum(weight, 0)
        spans = (kind == OPERATOR) | (kind == KERNEL_KERNEL_DELAY)
        return Graph(
            node_event=self.node_event,
            node_start=self.node_start,
            node_ts=self.node_ts,
            src=src,
            dst=dst,
            kind=kind.astype(np.int8),
            weight=weight.astype(np.int64),
            event=np.where(spans, event, -1),  # only spans and kernel gaps are some event's time
            health=self.health,
        )


def build(
    trace: RankTrace, events: Events, window: Window, index: np.ndarray, data_load_events=None
) -> Graph:
    """The graph of the events in ``window`` (edges in the reference's order)."""
    builder = _Builder(trace, events, index, window, data_load_events)
    builder.runtime_lock()
    builder.call_stacks()
    builder.kernels()
    return builder.graph()
