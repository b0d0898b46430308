"""Where on the host a finding's time is spent: the code site of a CPU event, and the host time
of a set of time ranges.

A *code site* is what a user edits: the innermost Python frame of their own code around the
event (``train.py(42): step``; frames of PyTorch, installed packages and built-ins are not
theirs), else the innermost ``record_function`` range (a ProfilerStep excepted), else the
outermost operator (``aten::item``), else the event's own name.
"""

from __future__ import annotations

import weakref

import numpy as np

from ...kineto import (
    CPU_ANNOTATION_CATEGORY,
    CPU_OP_CATEGORY,
    PYTHON_FUNCTION_CATEGORY,
    STEP_PREFIX,
)
from ...load.rank_trace import RankTrace
from ...rows import nearest_ancestor

PYTHON_CATEGORY = PYTHON_FUNCTION_CATEGORY
#: the site of host time no event of its thread covers
UNRECORDED = "host code outside any event"
#: frames that are not the user's code
LIBRARY = ("torch/", "site-packages", "dist-packages", "<built-in", "<frozen", "threading.py",
           "runpy.py", "<string>", "contextlib.py", "functools.py")  # fmt: skip


def is_user_frame(name: str) -> bool:
    return not any(part in name for part in LIBRARY)


def outermost_ops(trace: RankTrace) -> np.ndarray:
    """Per CPU row, its outermost enclosing operator (itself when it is one; -1: none)."""
    return _index(trace).top


def sites(trace: RankTrace, rows: np.ndarray) -> np.ndarray:
    """The code site (module docstring) of each CPU row of ``rows``, as text."""
    index = _index(trace)
    rows = np.asarray(rows, np.int64)
    return index.text[index.codes[index.site_row[rows]]] if len(rows) else np.zeros(0, object)


class _Index:
    """Per CPU row of a rank: its outermost operator (``top``) and the row whose name is its code
    site (``site_row``); built once per trace (:func:`_index`)."""

    def __init__(self, trace: RankTrace):
        cpu = trace.cpu
        parent, rows = cpu["parent_row"].to_numpy(), np.arange(len(cpu))
        names = cpu["name"].astype("category")
        text = [str(c) for c in names.cat.categories]
        self.text = np.array([t or "(an event without a name)" for t in text] + ["?"], object)
        self.codes = names.cat.codes.to_numpy().astype(np.int64)
        cat = cpu["cat"].to_numpy()
        user = np.array([is_user_frame(t) for t in text] + [False], bool)[self.codes]
        step = np.array([t.startswith(STEP_PREFIX) for t in text] + [False], bool)[self.codes]
        is_op = cat == CPU_OP_CATEGORY
        top = is_op & (nearest_ancestor(parent, is_op, rows) < 0)
        self.top = np.where(top, rows, nearest_ancestor(parent, top, rows))
        site = np.where(self.top >= 0, self.top, rows)
        for marks in ((cat == CPU_ANNOTATION_CATEGORY) & ~step, (cat == PYTHON_CATEGORY) & user):
            chosen = np.where(marks, rows, nearest_ancestor(parent, marks, rows))
            site = np.where(chosen >= 0, chosen, site)  # a user frame, else a range, else the op
        self.site_row = site


_INDEXES: dict[int, tuple] = {}  # id(trace) -> (weak reference, index)


def _index(trace: RankTrace) -> _Index:
    """The trace's :class:`_Index`, kept while the trace lives (the kinds ask for it often)."""
    key = id(trace)
    hit = _INDEXES.get(key)
    if hit is not None and hit[0]() is trace:
        return hit[1]
    index = _Index(trace)
    ref = weakref.ref(trace, lambda _, k=key: _INDEXES.pop(k, None))
    _INDEXES[key] = (ref, index)
    return index


def ranges_by_thread(trace: RankTrace, rows: np.ndarray) -> dict[int, np.ndarray]:
    """``{tid: (n, 2) merged, sorted [start, end) ns}`` of the CPU rows ``rows``."""
    from ...intervals import merge

    cpu = trace.cpu
    out = {}
    ts, end, tid = cpu["ts"].to_numpy(), (cpu["ts"] + cpu["dur"]).to_numpy(), cpu["tid"].to_numpy()
    rows = np.asarray(rows, np.int64)
    for thread in np.unique(tid[rows]).tolist():
        mine = rows[tid[rows] == thread]
        starts, ends = merge(ts[mine], end[mine])
        out[int(thread)] = np.stack([starts, ends], axis=1)
    return out


def sites_at(trace: RankTrace, tid: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The code site (as :func:`sites`) of what thread ``tid`` ran at time ``t`` (ns), per
    query: the innermost event covering it there; "host code outside any event" where none
    (a ProfilerStep, which covers everything, is none)."""
    cpu = trace.cpu
    out = np.full(len(t), UNRECORDED, dtype=object)
    if not len(cpu) or not len(t):
        return out
    ts, end = cpu["ts"].to_numpy(), (cpu["ts"] + cpu["dur"]).to_numpy()
    parent, threads = cpu["parent_row"].to_numpy(), cpu["tid"].to_numpy()
    found = np.full(len(t), -1, np.int64)
    for thread in np.unique(tid).tolist():
        rows = np.flatnonzero(threads == thread)
        queries = np.flatnonzero(tid == thread)
        if not len(rows):
            continue
        rows = rows[np.argsort(ts[rows], kind="stable")]
        j = np.searchsorted(ts[rows], t[queries], side="right") - 1
        cand = np.where(j >= 0, rows[np.maximum(j, 0)], -1)
        for _ in range(64):  # up the nesting to an event still running at t (depth is small)
            done = (cand < 0) | (end[np.maximum(cand, 0)] > t[queries])
            if done.all():
                break
            cand = np.where(done, cand, parent[np.maximum(cand, 0)])
        found[queries] = np.where((cand >= 0) & (end[np.maximum(cand, 0)] > t[queries]), cand, -1)
    names = cpu["name"].astype("category")
    steps = [str(c).startswith(STEP_PREFIX) for c in names.cat.categories]
    step = np.array(steps + [False], bool)[names.cat.codes.to_numpy()[np.maximum(found, 0)]]
    has = (found >= 0) & ~step
    out[has] = sites(trace, found[has])
    return out
