"""The longest path through the dependency graph, and what bounds each of its edges.

The longest path is one pass over a topological order of the array-backed edges (Kahn's
algorithm; each node takes its longest incoming path, the first such edge in the order edges
were added, as the reference's networkx call does). A cycle can only come from an inconsistent
trace: the edges among the nodes left over that do not run forward in node order are cut, counted
in ``health["cp_cycle_edge_cut"]``, and the pass goes on.

``bound_by`` of an edge (the reference's classes): ``gpu_kernel_kernel_overhead`` /
``gpu_kernel_launch_overhead`` for those delays; ``""`` for dependencies (weight 0); for an
operator / kernel span, ``cpu_bound`` on the CPU (``data_loading`` when the event matches
``data_load_events``), ``gpu_communication_bound`` for communication kernels, else
``gpu_compute_bound``.
"""

from __future__ import annotations

import os
from collections import Counter, deque
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...classify import short_name
from ...load.rank_trace import RankTrace
from ..common import us
from .events import Events, data_load_pattern, is_communication
from .graph import DEPENDENCY, EDGE_TYPES, KERNEL_KERNEL_DELAY, LAUNCH_DELAY, SYNC, Graph, build
from .window import event_index, select

try:  # the optional C pass (setup.py); the same pass in Python below without it
    from . import _longest_path
except ImportError:  # pragma: no cover - depends on the build
    _longest_path = None
if os.environ.get("HTA_LITE_NO_C"):  # as for the trace decoder: rule the C code out
    _longest_path = None

BOUND_TYPES = (
    "cpu_bound", "data_loading", "gpu_compute_bound", "gpu_communication_bound",
    "gpu_kernel_kernel_overhead", "gpu_kernel_launch_overhead",
)  # fmt: skip
#: columns of :meth:`CriticalPath.get_critical_path_breakdown` (the reference's)
BREAKDOWN_COLUMNS = [
    "event_idx", "duration", "type", "s_name", "cat", "pid", "tid", "stream", "index", "bound_by",
]  # fmt: skip


def longest_path(n_nodes: int, graph: Graph, health: Counter) -> list[int]:
    """Edge ids of the longest path (by weight), in order."""
    if n_nodes == 0 or len(graph.src) == 0:
        return []
    dist, best, order = longest_distances(n_nodes, graph, health)
    return path_to(last_node(dist, order), best.tolist(), graph.src.tolist())


def last_node(dist: np.ndarray, order: np.ndarray) -> int:
    """The first node, in the pass's order, with the longest path: where the path ends."""
    return int(order[np.argmax(dist[order])])


def path_to(node: int, best: list[int], src: list[int]) -> list[int]:
    """Edge ids of the longest path ending at ``node`` (``best``: each node's longest incoming
    edge, -1 for none), in order."""
    path = []
    while best[node] >= 0:
        path.append(best[node])
        node = src[best[node]]
    return path[::-1]


def longest_distances(n_nodes: int, graph: Graph, health: Counter):
    """``(dist, best, order)``: per node the length of the longest path ending there (ns) and
    its last edge (-1: none), and the topological order the pass took (int64 arrays).

    In C where it was built (``_longest_path.c``: the same pass), else :func:`_distances`."""
    edges = (graph.src, graph.dst, graph.weight)
    src, dst, weight = (np.ascontiguousarray(a, np.int64) for a in edges)
    if _longest_path is not None:
        dist, best, order, cut = _longest_path.longest(n_nodes, src, dst, weight)
        dist, best, order = (np.frombuffer(b, np.int64) for b in (dist, best, order))
    else:
        dist, best, order, cut = _distances(n_nodes, src, dst, weight)
    if cut:
        health["cp_cycle_edge_cut"] += cut
    return dist, best, order


def _distances(n_nodes: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray):
    """:func:`longest_distances`' pass in Python, and the edges it cut (``(dist, best, order,
    cut)``). Kahn's algorithm, first in first out; a cycle (an inconsistent trace) cuts the
    edges among the nodes left that do not run forward in node order, and the pass goes on."""
    alive = [True] * len(src)
    by_dst = np.argsort(dst, kind="stable")  # incoming edges, each node's in added order
    in_start = np.searchsorted(dst[by_dst], np.arange(n_nodes + 1))
    by_src = np.argsort(src, kind="stable")
    out_start = np.searchsorted(src[by_src], np.arange(n_nodes + 1))
    indegree = np.bincount(dst, minlength=n_nodes)
    done = [False] * n_nodes
    order: list[int] = []
    src_l, dst_l, w_l = src.tolist(), dst.tolist(), weight.tolist()
    in_l, out_l = by_dst.tolist(), by_src.tolist()
    in_s, out_s = in_start.tolist(), out_start.tolist()
    deg = indegree.tolist()
    dist_l, best_l = [0] * n_nodes, [-1] * n_nodes
    ready = deque(i for i in range(n_nodes) if deg[i] == 0)
    cut_edges = 0
    while True:
        while ready:
            v = ready.popleft()
            done[v] = True
            order.append(v)
            top, pick = 0, -1
            for k in range(in_s[v], in_s[v + 1]):
                e = in_l[k]
                if alive[e]:
                    d = dist_l[src_l[e]] + w_l[e]
                    if pick < 0 or d > top:
                        top, pick = d, e
            dist_l[v], best_l[v] = top, pick
            for k in range(out_s[v], out_s[v + 1]):
                e = out_l[k]
                if alive[e]:
                    w = dst_l[e]
                    deg[w] -= 1
                    if deg[w] == 0:
                        ready.append(w)
        if len(order) == n_nodes:
            break
        left = ~np.array(done)
        cut = np.array(alive) & left[src] & left[dst] & (src >= dst)
        cut_edges += int(cut.sum())
        for e in np.flatnonzero(cut).tolist():
            alive[e] = False
            deg[dst_l[e]] -= 1
        ready.extend(v for v in np.flatnonzero(left).tolist() if deg[v] == 0)
        if not ready:  # cannot happen: what is left runs forward in node order
            break
    as_array = lambda values: np.asarray(values, np.int64)  # noqa: E731
    return as_array(dist_l), as_array(best_l), as_array(order), cut_edges


@dataclass
class CriticalPath:
    """The critical path of one rank's region, with the reference's methods.

    ``events``: the rank's events in one numbering; ``graph``: nodes and edges
    (:class:`~.graph.Graph`); ``path``: edge ids on the longest path, in order; ``success``;
    ``health``: edges repaired (``cp_negative_edge``: weight set to 0) or cut
    (``cp_cycle_edge_cut``) because the trace was inconsistent (also added to the rank's health
    report by ``TraceAnalysis.critical_path_analysis``)."""

    rank: int
    trace: RankTrace
    events: Events
    graph: Graph
    path: list[int]
    event_idx: np.ndarray
    data_load_events: list[str] | None
    success: bool
    health: Counter

    @property
    def critical_path_nodes(self) -> list[int]:
        """Node ids along the path."""
        if not self.path:
            return []
        return [int(self.graph.src[self.path[0]])] + [int(self.graph.dst[e]) for e in self.path]

    @property
    def critical_path_events_set(self) -> set[int]:
        """``event_idx`` (rows of ``analysis.t.get_trace(rank)``) of the events on the path."""
        events = self.graph.node_event[self.critical_path_nodes]
        return {int(i) for i in self.event_idx[events]}

    @property
    def critical_path_edges_set(self) -> set[int]:
        return set(self.path)

    @property
    def length_us(self) -> float:
        """Sum of the path's edge weights (µs)."""
        return float(us(int(self.graph.weight[self.path].sum()))) if self.path else 0.0

    def get_critical_path_breakdown(self) -> pd.DataFrame:
        """One row per edge of the path, in path order: ``event_idx`` (the event its time is
        attributed to: its row in ``analysis.t.get_trace(rank)``; NaN for dependencies and
        launch delays), ``duration`` (µs), ``type``, ``s_name``, ``cat``, ``pid``, ``tid``,
        ``stream``, ``index``, ``bound_by``."""
        g, ev = self.graph, self.events
        edges = np.asarray(self.path, np.int64)
        event = g.event[edges] if len(edges) else np.zeros(0, np.int64)
        kind = g.kind[edges] if len(edges) else np.zeros(0, np.int8)
        has = event >= 0
        pick = np.where(has, event, 0)

        def of(values, fill):
            return np.where(has, values[pick] if len(values) else fill, fill)

        names = np.where(has, ev.name[pick], None) if len(pick) else np.array([], object)
        stream = of(ev.stream, -1)
        bound = _bound_by(kind, stream, names, is_communication(self.trace, ev, pick) & has,
                          self.data_load_events)  # fmt: skip
        index = np.where(has, self.event_idx[pick] if len(self.event_idx) else -1, -1)
        frame = pd.DataFrame(
            {
                "event_idx": pd.array(np.where(has, index, 0), dtype="Int64"),
                "duration": us(g.weight[edges]) if len(edges) else np.zeros(0),
                "type": [EDGE_TYPES[k] for k in kind],
                "s_name": _short_names(names),
                "cat": np.where(has, ev.cat[pick], None) if len(pick) else [],
                "pid": of(ev.pid, -1),
                "tid": of(ev.tid, -1),
                "stream": stream,
                "bound_by": bound,
            }
        )
        frame.loc[~has, "event_idx"] = pd.NA
        frame.insert(8, "index", frame["event_idx"])
        return frame[BREAKDOWN_COLUMNS]

    def summary(self) -> pd.Series:
        """Percent of the path's duration per ``bound_by``."""
        table = self.get_critical_path_breakdown()
        total = table["duration"].sum()
        by = table.groupby("bound_by")["duration"].sum()
        return by / total * 100 if total else by

    def bound_by_us(self) -> pd.Series:
        """µs of the path per ``bound_by``."""
        return self.get_critical_path_breakdown().groupby("bound_by")["duration"].sum()

    def bound_by_table(self) -> pd.DataFrame:
        """Indexed by ``bound_by``: ``duration_us``, ``pctg`` (of the path)."""
        table = self.bound_by_us().rename("duration_us").to_frame()
        total = table["duration_us"].sum()
        table["pctg"] = table["duration_us"] / total * 100 if total else 0.0
        return table


def _short_names(names: np.ndarray) -> list:
    """``short_name`` of each name, computed once per distinct name (None stays None)."""
    short = {n: short_name(n) for n in set(names.tolist()) if n is not None}
    return [short.get(n) if n is not None else None for n in names.tolist()]


def _bound_by(kind, stream, names, communication, data_load_events) -> list[str]:
    pattern = data_load_pattern(data_load_events)
    out = []
    for k, s, n, c in zip(kind.tolist(), stream.tolist(), names, communication.tolist()):
        if k == KERNEL_KERNEL_DELAY:
            out.append("gpu_kernel_kernel_overhead")
        elif k == LAUNCH_DELAY:
            out.append("gpu_kernel_launch_overhead")
        elif k in (DEPENDENCY, SYNC):
            out.append("")
        elif s < 0:
            loading = pattern is not None and n is not None and pattern.search(n)
            out.append("data_loading" if loading else "cpu_bound")
        else:
            out.append("gpu_communication_bound" if c else "gpu_compute_bound")
    return out


def critical_path(
    trace: RankTrace,
    annotation: str,
    instance_id=None,
    data_load_events: list[str] | None = None,
) -> CriticalPath:
    """The critical path of ``trace`` over the region of the ``instance_id``-th event whose name
    contains ``annotation`` (an ``(first, last)`` pair: from the first to the last instance;
    ``annotation=""``: the whole trace)."""
    window = select(trace, annotation, instance_id)
    index = event_index(trace)
    events = Events.of(trace)
    graph = build(trace, events, window, index, data_load_events)
    health = Counter(graph.health)
    path = longest_path(len(graph.node_ts), graph, health)
    return CriticalPath(
        trace.rank, trace, events, graph, path, index, data_load_events, bool(path), health
    )
