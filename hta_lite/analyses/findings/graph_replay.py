"""What-if replay of one rank's critical path: change edges of each step's graph, recompute.

Each step's graph is HTA's (:mod:`..critical_path.graph`), over the step's bounds as the job
path cuts them. A change gives new edge weights (never larger) and the edges to keep; the
saving of a step is its longest path's length minus the changed graph's. A change that touches
no edge of the step's longest path saves nothing (weights only shrink), so that step is not
replayed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ...load.rank_trace import RankTrace
from ..critical_path.events import Events
from ..critical_path.graph import Graph
from ..critical_path.path import longest_distances, path_to
from ..critical_path.window import event_index
from ..job_path.segments import StepPaths, step_bounds

#: ``change(graph, events) -> (weight, keep)``: new weights (ns) and the edges kept (None: all)
Change = Callable[[Graph, Events], tuple[np.ndarray, np.ndarray | None]]


class RankGraphs:
    """The step graphs of one rank, built once and replayed under changes."""

    def __init__(self, trace: RankTrace, patterns: list[str] | None = None):
        self.trace = trace
        self.events = Events.of(trace)
        index = event_index(trace)
        self.steps = {
            number: StepPaths(trace, self.events, index, start, end, patterns)
            for number, start, end in step_bounds(trace)
        }

    def savings(self, change: Change) -> dict[int, float]:
        """ns each step's critical path gets shorter under ``change``."""
        out = {}
        for number, local in self.steps.items():
            out[number] = 0.0 if local.empty else _saving(local, change(local.graph, self.events))
        return out


def _saving(local: StepPaths, changed: tuple[np.ndarray, np.ndarray | None]) -> float:
    g = local.graph
    weight, keep = changed
    weight = np.minimum(weight, g.weight)
    path = np.asarray(path_to(local.last, local.best, local.src), np.int64)
    touched = bool((weight[path] < g.weight[path]).any()) or (
        keep is not None and not bool(keep[path].all())
    )
    if not touched:
        return 0.0
    keep = np.ones(len(g.src), bool) if keep is None else keep
    smaller = replace(
        g, src=g.src[keep], dst=g.dst[keep], kind=g.kind[keep], weight=weight[keep],
        event=g.event[keep], health=Counter(),
    )  # fmt: skip
    dist, _, _ = longest_distances(len(g.node_ts), smaller, Counter())
    return float(max(local.dist.max() - max(dist), 0))


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
