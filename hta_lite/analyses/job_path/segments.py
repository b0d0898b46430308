"""One rank's part of the job critical path: its local critical path between collectives.

A rank's step is cut at its collective calls. For every *target* — the arrival (start) of each
collective call of the step, and the step's end — the *segment* before it runs from the end of
the rank's latest call that ended by then (``prev``; the step's start when there is none) to
the target. The segment's local critical path is the rank's own critical path
(:mod:`..critical_path`, HTA's graph) over the events that start in it, its edges clipped to the
segment. That is all the job path needs of a rank: this is a per-rank partial, computed where
the rank is loaded; no other rank's data is needed.

Step bounds (ns): from the ProfilerStep's start to the later of its end and the end of the
last GPU event launched in it (the GPU may finish a step after the CPU has left it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...intervals import merge
from ...kineto import DATA_LOADING_PATTERN
from ...load.rank_trace import RankTrace
from ..collectives.calls import collective_calls
from ..critical_path.events import Events
from ..critical_path.graph import EDGE_TYPES, build
from ..critical_path.path import (
    _bound_by,
    _short_names,
    is_communication,
    last_node,
    longest_distances,
    path_to,
)
from ..critical_path.window import between, event_index
from ..steps import earlier_ends, step_extents

#: columns of :func:`segments`' ``segments`` table (ns ints; call keys -1 for none;
#: ``after``: the end of the rank's earlier steps, :data:`NO_EARLIER_STEP` for its first)
SEGMENT_COLUMNS = [
    "rank", "step", "step_start", "step_end", "after", "target_ts", "target_tid",
    "target_stream", "start", "end", "prev_ts", "prev_tid", "prev_stream", "length",
]  # fmt: skip
NO_EARLIER_STEP = np.iinfo(np.int64).min  # as :func:`..steps.earlier_ends` gives it
#: columns of :func:`segments`' ``events`` table: one row per event on a segment's local path
EVENT_COLUMNS = [
    "rank", "step", "target_ts", "target_tid", "target_stream", "name", "category", "bound_by",
    "start", "duration", "tid", "stream", "event",
]  # fmt: skip
#: columns of :func:`segments`' ``gaps`` table: the parts of a segment that its local path's
#: edges do not weigh (``start`` / ``end`` ns; ``tid``: the host thread the path is on there,
#: -1 where neither end is a host event; ``launch_latency``: 1 for the time from the launch
#: call of a kernel the path starts at to the kernel's start, which no host fix removes)
GAP_COLUMNS = [
    "rank", "step", "target_ts", "target_tid", "target_stream", "start", "end", "tid",
    "launch_latency",
]  # fmt: skip
#: a call is identified on its rank by where it ran and when it started
CALL_KEY = ("ts", "tid", "stream")
END_OF_STEP = (-1, -1, -1)


def segments(
    trace: RankTrace, data_load_events: list[str] | None = None, steps=None, whole=False
) -> dict:
    """``{"segments": ..., "events": ..., "gaps": ...}`` of the rank (columns
    :data:`SEGMENT_COLUMNS`, :data:`EVENT_COLUMNS`, :data:`GAP_COLUMNS`). ``segments``: per step
    and target (``target_*``: the call's
    :data:`CALL_KEY`, ``-1`` for the step's end), the segment's ``start`` / ``end`` (ns), the
    call it starts after (``prev_*``, -1: the step's start) and ``length`` (ns: its local
    path's). ``events``: the events of that local path, one row per event and segment
    (``bound_by`` as in HTA's critical path; ``start``: its first moment on the path,
    ``duration`` ns on the path; ``event``: its number in the rank's
    :class:`~..critical_path.events.Events`, cpu rows then gpu rows). ``gaps``: the time of
    each local path that no edge weighs (HTA's dependencies of zero weight: Python between
    operators, a range with no operator in it, waits the trace does not link). A step's graph
    spans its extent; ``after`` (the end of the rank's earlier steps: where the GPU runs behind
    the CPU, a step's extent starts before it) is where the step table's step starts, and the
    job path's walk cuts its steps there (:mod:`.walk`).

    The local path of a segment is the part inside the segment of the rank's longest path (over
    the step's graph) that ends at the target: at the collective kernel's start, or for a call
    that is no node of the graph (a gloo range on a worker thread) at the node with the longest
    path among those up to the call's start; at the step's end, the step's critical path.
    ``steps``: the ProfilerStep numbers to cut (default: every profiled step); ``whole``: a
    trace without ProfilerSteps is one step, numbered -1, from its first event to its last."""
    patterns = data_load_events if data_load_events is not None else [DATA_LOADING_PATTERN]
    calls = collective_calls(trace)
    extents = step_extents(trace)
    bounds = _chosen(extents, steps)
    if whole and not bounds and not len(trace.steps):
        bounds = [whole_trace(trace)]
    seg_rows: list[list] = []
    if not bounds:
        return _tables(trace, None, patterns, seg_rows, [])
    after = dict(zip(extents["step"].tolist(), earlier_ends(extents["end"]).tolist()))
    events, index = Events.of(trace), event_index(trace)
    event_of = _call_events(trace, events, calls)
    parts = []  # per segment: (segment id, event, kind, start, weight) of its path's edges
    gaps = []  # per segment: (segment id, start, end, tid, launch_latency) of its unweighted time
    for number, start, end in bounds:
        local = StepPaths(trace, events, index, start, end, patterns)
        mine = calls[(calls["step"] == number) & (calls["ts"] >= start)]
        keys = list(zip(*(mine[k].tolist() for k in CALL_KEY)))
        targets = [(key, key[0]) for key in keys] + [(END_OF_STEP, end)]
        ends = mine["end"].to_numpy()
        for target, at in targets:
            done = np.flatnonzero(ends <= at)
            prev = keys[done[np.argmax(ends[done])]] if len(done) else END_OF_STEP
            seg_start = min(int(ends[done].max()) if len(done) else start, at)
            event = event_of.get(target, -1) if target != END_OF_STEP else None
            edges, unweighted = local.edges(event, seg_start, at)
            parts.append((np.full(len(edges[0]), len(seg_rows)), *edges))
            gaps.append((np.full(len(unweighted[0]), len(seg_rows)), *unweighted))
            seg_rows.append([trace.rank, number, start, end, after.get(number, NO_EARLIER_STEP),
                             *target, seg_start, at,
                             *prev, int(edges[3].sum())])  # fmt: skip
    return _tables(trace, events, patterns, seg_rows, parts, gaps)


def step_bounds(trace: RankTrace, steps=None) -> list[tuple[int, int, int]]:
    """``(step, start, end)`` ns of the rank's profiled steps (``steps``: those numbers only):
    from the ProfilerStep's start to the later of its end and the end of the last GPU event
    launched in it (:func:`..steps.step_extents`), in time order."""
    return _chosen(step_extents(trace), steps)


def _chosen(extents: pd.DataFrame, steps=None) -> list[tuple[int, int, int]]:
    """``(step, start, end)`` of the :func:`..steps.step_extents` rows numbered ``steps``."""
    if steps is not None:
        extents = extents[extents["step"].isin(list(steps))]
    return [(int(s), int(a), int(b)) for s, a, b in extents.itertuples(index=False)]


def whole_trace(trace: RankTrace) -> tuple[int, int, int]:
    """``(-1, start, end)`` ns: the trace's span as one step (the events outside any step are
    numbered -1)."""
    starts = [t["ts"].min() for t in (trace.cpu, trace.gpu) if len(t)]
    ends = [(t["ts"] + t["dur"]).max() for t in (trace.cpu, trace.gpu) if len(t)]
    return -1, int(min(starts)), int(max(ends))


def _call_events(trace: RankTrace, events: Events, calls: pd.DataFrame) -> dict:
    """:data:`CALL_KEY` of each call -> its event (in :class:`Events`' numbering)."""
    out = {}
    for table, offset, source in ((trace.cpu, 0, "cpu"), (trace.gpu, events.n_cpu, "gpu")):
        mine = calls[calls["source"] == source]
        if not len(table) or mine.empty:
            continue
        lane = "stream" if source == "gpu" else "tid"
        rows = pd.DataFrame({"ts": table["ts"].to_numpy(), lane: table[lane].to_numpy(),
                             "event": offset + np.arange(len(table))})  # fmt: skip
        found = mine[list(CALL_KEY)].merge(rows, on=["ts", lane], how="inner")
        found = found.drop_duplicates(list(CALL_KEY))
        out.update(zip(zip(*(found[k].tolist() for k in CALL_KEY)), found["event"].tolist()))
    return out


class StepPaths:
    """The longest paths of one step's graph, ending at any node (one pass over the graph)."""

    def __init__(self, trace, events, index, start: int, end: int, patterns):
        self.trace, self.events, self.patterns = trace, events, patterns
        graph = self.graph = build(trace, events, between(trace, start, end), index, patterns)
        n = len(graph.node_ts)
        self.empty = n == 0 or len(graph.src) == 0
        if self.empty:
            return
        self.dist, best, order = longest_distances(n, graph, graph.health)
        self.best, self.src = best.tolist(), graph.src.tolist()
        self.last = last_node(self.dist, order)  # the step's critical path ends here
        self.start_node = np.full(len(events.ts), -1, np.int64)
        starts = np.flatnonzero(graph.node_start)
        self.start_node[graph.node_event[starts]] = starts
        # per node: the host thread of its event (-1 for a GPU event), for the path's gaps
        self.node_tid = np.where(events.stream < 0, events.tid, -1)[graph.node_event]

    def edges(self, event: int | None, start: int, end: int) -> tuple[tuple, tuple]:
        """``(event, kind, start, weight)`` of the edges of the longest path ending at
        ``event``'s start (None: the step's critical path; -1 or no node: at the node up to
        ``end`` with the longest path), clipped to ``[start, end]``, those left with time; and
        ``(start, end, tid, launch_latency)`` of the segment's time no edge weighs
        (:data:`GAP_COLUMNS`; ``tid``: the host thread of the edge's source event, else of its
        destination's, else -1)."""
        none = (np.zeros(0, np.int64),) * 4, (np.zeros(0, np.int64),) * 4
        if self.empty or end <= start:
            return none
        g = self.graph
        if event is None:
            node = self.last
        else:
            node = int(self.start_node[event]) if event >= 0 else -1
            if node < 0:
                upto = np.flatnonzero(g.node_ts <= end)
                if not len(upto):
                    return none
                node = int(upto[np.argmax(self.dist[upto])])
        path = np.asarray(path_to(node, self.best, self.src), np.int64)
        if not len(path):
            return none
        src, dst = g.src[path], g.dst[path]
        src_ts = np.clip(g.node_ts[src], start, end)
        dst_ts = np.clip(g.node_ts[dst], start, end)
        weight = np.maximum(np.minimum(g.weight[path], dst_ts - src_ts), 0)
        gaps = self._gaps(src, dst, src_ts, dst_ts, weight, start, end)
        timed = weight > 0
        path = path[timed]
        # the event an edge's time belongs to: the attributed one, else (a launch delay) its
        # source, the launch call
        event_of = np.where(g.event[path] >= 0, g.event[path], g.node_event[src[timed]])
        return (event_of, g.kind[path].astype(np.int64), src_ts[timed], weight[timed]), gaps

    def _gaps(self, src, dst, src_ts, dst_ts, weight, start: int, end: int) -> tuple:
        """``(start, end, tid, launch_latency)`` of the time a path's edges (``src`` /
        ``dst`` nodes, clipped times, weights) do not weigh, within ``[start, end]``: the
        dependencies of zero weight, and the time before its first node and after its last (a
        path that starts at a kernel starts, on the host, at its launch call)."""
        lo = src_ts + weight
        sel = np.flatnonzero(lo < dst_ts)
        tid = self.node_tid[src[sel]]
        tid = np.where(tid >= 0, tid, self.node_tid[dst[sel]])
        first, last = int(np.argmin(src_ts)), int(np.argmax(dst_ts))
        head, head_tid = int(src_ts[first]), int(self.node_tid[src[first]])
        call = int(self.events.launch[self.graph.node_event[src[first]]])
        call_ts = max(start, min(head, int(self.events.ts[call]))) if call >= 0 else head
        if call >= 0:
            head_tid = int(self.events.tid[call])
        gaps = (
            np.r_[lo[sel], start, call_ts, dst_ts[last]],
            np.r_[dst_ts[sel], call_ts, head, end],
            np.r_[tid, head_tid, head_tid, self.node_tid[dst[last]]].astype(np.int64),
            np.r_[np.zeros(len(sel), np.int64), 0, 1, 0],
        )
        keep = gaps[1] > gaps[0]
        return tuple(g[keep] for g in gaps)


def _in_ranges(trace, patterns, tid: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per (thread, time): inside an event of the thread named as data loading."""
    import re

    cpu = trace.cpu
    out = np.zeros(len(t), bool)
    if not len(cpu) or not patterns:
        return out
    regex = re.compile("|".join(f"(?:{p})" for p in patterns))
    names = cpu["name"].astype("category")
    hit = np.array([bool(regex.search(str(n))) for n in names.cat.categories] + [False])
    rows = np.flatnonzero(hit[names.cat.codes.to_numpy()])
    for thread in np.unique(cpu["tid"].to_numpy()[rows]).tolist():
        mine = rows[cpu["tid"].to_numpy()[rows] == thread]
        lo, hi = merge(cpu["ts"].to_numpy()[mine], (cpu["ts"] + cpu["dur"]).to_numpy()[mine])
        queries = np.flatnonzero(tid == thread)
        j = np.searchsorted(lo, t[queries], side="right") - 1
        out[queries] = (j >= 0) & (t[queries] < hi[np.maximum(j, 0)])
    return out


def _tables(trace, events, patterns, seg_rows: list, parts: list, gaps: list = ()) -> dict:
    """The segments, their paths' edges as one row per segment and event, and their gaps."""
    segments_table = pd.DataFrame(seg_rows, columns=SEGMENT_COLUMNS)
    keys = segments_table[["rank", "step", "target_ts", "target_tid", "target_stream"]]
    gap_seg, gap_start, gap_end, gap_tid, latency = (
        (np.concatenate(p) for p in zip(*gaps)) if gaps else (np.zeros(0, np.int64),) * 5
    )
    gap_table = pd.DataFrame(
        {**{k: keys[k].to_numpy(np.int64)[gap_seg] for k in keys.columns}, "start": gap_start,
         "end": gap_end, "tid": gap_tid, "launch_latency": latency}, dtype="int64",
    )[GAP_COLUMNS]  # fmt: skip
    seg, event, kind, start, weight = (
        (np.concatenate(p) for p in zip(*parts)) if parts else (np.zeros(0, np.int64),) * 5
    )
    if not len(seg):
        return {"segments": segments_table, "events": pd.DataFrame(columns=EVENT_COLUMNS),
                "gaps": gap_table}  # fmt: skip
    names, stream = events.name[event], events.stream[event]
    category = np.array([EDGE_TYPES[k].removeprefix("critical_path_") for k in range(5)])[kind]
    bound_by = np.asarray(
        _bound_by(kind, stream, names, is_communication(trace, events, event), patterns),
        dtype=object,
    )
    # host work inside a data-loading range (the batch's random numbers, its copies) is data
    # loading too, not cpu_bound
    inside = _in_ranges(trace, patterns, events.tid[event], start)
    bound_by[(bound_by == "cpu_bound") & inside] = "data_loading"
    frame = pd.DataFrame({
        "seg": seg, "event": event,
        "bound_by": bound_by,
        "name": _short_names(names),
        "category": np.where(category == "operator", events.cat[event], category),
        "start": start, "duration": weight, "tid": events.tid[event], "stream": stream,
    })  # fmt: skip
    grouped = frame.groupby(["seg", "event", "bound_by"], sort=False, as_index=False).agg(
        name=("name", "first"), category=("category", "first"), start=("start", "min"),
        duration=("duration", "sum"), tid=("tid", "first"), stream=("stream", "first"),
    )  # fmt: skip
    grouped = pd.concat(
        [keys.iloc[grouped["seg"].to_numpy()].reset_index(drop=True), grouped], axis=1
    ).sort_values(["seg", "start"], kind="stable", ignore_index=True)
    return {"segments": segments_table, "events": grouped[EVENT_COLUMNS], "gaps": gap_table}
