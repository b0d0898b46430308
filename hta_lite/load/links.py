"""Links between rows of one rank's tables, all computed with sorts and searchsorted.

Columns added:
- ``steps`` table: ``step`` (N of ``ProfilerStep#N``), ``ts``, ``dur`` (ns), ``name``.
- ``cpu.iteration`` / ``gpu.iteration``: the ProfilerStep a CPU event starts in;
  a GPU event inherits the iteration of its launching call (-1 when none).
- ``gpu.launch_row``: row (position) in ``cpu`` of the runtime/driver call with the
  same correlation id, -1 when the trace has none.
- ``cpu.op_row``: for runtime/driver calls, the row of the innermost ``cpu_op`` that
  encloses the call on its thread (the operator that launched it), -1 otherwise.
- ``cpu.parent_row``: the enclosing event one level up on the same (pid, tid), -1 if none.
- ``cpu.depth``: nesting depth of the event on its (pid, tid), 0 for outermost.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from ..kineto import STEP_PATTERN, STEP_PREFIX
from ..rows import (  # noqa: F401 - the readers' links use them too
    ancestors_where,
    first_row_by_key,
    gather,
    lookup,
    nearest_ancestor,
)

#: step numbers are ``0 <= N < STEP_LIMIT``; a trace naming another step is refused
STEP_LIMIT = 2**31


def profiler_steps(cpu: pd.DataFrame) -> pd.DataFrame:
    """ProfilerStep#N ranges on the CPU, sorted by start; duplicates of a step kept once
    (the longest of those starting first). A step number past ``STEP_LIMIT`` is a
    :class:`TraceFormatError` (without a path: the caller names the file). Plain numpy: this
    runs once per load, where pandas' first-use costs showed (10 ms of a 0.15 s load)."""
    names = cpu["name"].array
    if not isinstance(names, pd.Categorical):
        names = pd.Categorical(names)
    categories = names.categories
    step_of_code = np.full(len(categories) + 1, -1, np.int64)  # last slot: missing names (code -1)
    for code in np.flatnonzero(np.asarray(categories.str.startswith(STEP_PREFIX), bool)).tolist():
        match = STEP_PATTERN.match(categories[code])
        if match:
            digits = match.group(1).lstrip("0") or "0"
            if len(digits) > 10 or int(digits) >= STEP_LIMIT:
                raise TraceFormatError(
                    None, f"step {categories[code][:40]!r}: a step number is an integer from 0"
                    f" to {STEP_LIMIT - 1}"
                )  # fmt: skip
            step_of_code[code] = int(digits)
    step = step_of_code[names.codes]
    ts, dur = cpu["ts"].to_numpy(), cpu["dur"].to_numpy()
    rows = np.flatnonzero(step >= 0)
    order = rows[np.lexsort((-dur[rows], ts[rows]))]  # by start, longest first
    _, first = np.unique(step[order], return_index=True)
    keep = order[np.sort(first)]  # the first of each step, still by start
    return pd.DataFrame(
        {
            "step": step[keep],
            "ts": ts[keep],
            "dur": dur[keep],
            "name": np.asarray(names[keep]).astype(str),
        }
    )


def iteration_of(ts: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """ProfilerStep number whose [ts, ts + dur) holds each time, -1 outside every step."""
    if steps.empty or len(ts) == 0:
        return np.full(len(ts), -1, np.int64)
    starts = steps["ts"].to_numpy()
    ends = starts + steps["dur"].to_numpy()
    idx = np.searchsorted(starts, ts, side="right") - 1
    inside = (idx >= 0) & (ts < ends[np.maximum(idx, 0)])
    return np.where(inside, steps["step"].to_numpy()[np.maximum(idx, 0)], -1)


def nesting_depth(cpu: pd.DataFrame) -> np.ndarray:
    """Depth of each CPU event among the events of its (pid, tid) that enclose its start."""
    return nesting(cpu)[0]


def nesting(cpu: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(depth, parent_row)`` of each event on its (pid, tid); parent -1 for outermost."""
    n = len(cpu)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pid, tid = (pd.factorize(cpu[name].to_numpy())[0] for name in ("pid", "tid"))
    thread = pid.astype(np.int64) * (int(tid.max()) + 1) + tid
    order, sorted_thread, sorted_depth = _depth_in_start_order(
        thread, cpu["ts"].to_numpy(), cpu["dur"].to_numpy()
    )
    depth = np.empty(n, np.int64)
    depth[order] = sorted_depth
    parent = np.empty(n, np.int64)
    parent[order] = gather(order, _parent_in_start_order(sorted_depth, sorted_thread), -1)
    return depth, parent


# Each step is a function of its own so that its temporaries (a dozen arrays of one int64 per
# event) are freed when it returns: its peak is about half (11 -> 6 MB on a 35 MB trace).


def _depth_in_start_order(thread: np.ndarray, ts: np.ndarray, dur: np.ndarray):
    """``(order, thread[order], depth[order])``: the events sorted by (thread, start), parents
    before their children, and the depth of each in that order."""
    n = len(ts)
    end = ts + dur
    # one int64 key per (thread, time): the time since the first, or where thread x span would
    # overflow, the time's rank among all times (a sort more)
    first = int(min(ts.min(), end.min()))
    width = int(max(ts.max(), end.max())) - first + 1
    if (int(thread.max()) + 1) * width < 2**62:
        start_at, end_at = ts - first, end - first
    else:
        times, inverse = np.unique(np.concatenate([ts, end]), return_inverse=True)
        width = len(times) + 1
        start_at, end_at = inverse[:n], inverse[n:]
    start_key = thread * width + start_at
    end_key = np.sort(thread * width + end_at, kind="stable")  # timsort: ends come almost sorted
    del start_at, end_at
    order = _by_start_longest_first(start_key, end)  # parents before their children
    sorted_thread = thread[order]
    starts_before = np.arange(n) - np.searchsorted(sorted_thread, sorted_thread, side="left")
    ends_before = np.searchsorted(end_key, start_key[order], side="right") - np.searchsorted(
        end_key, sorted_thread * width, side="left"
    )
    del start_key, end_key
    ends_before -= _zero_length_at_start(sorted_thread, ts[order], (end == ts)[order])
    return order, sorted_thread, np.maximum(starts_before - ends_before, 0)


def _zero_length_at_start(sorted_thread, sorted_ts, zero) -> np.ndarray:
    """Zero-length events end where they start: per event (sorted by thread and start), those at
    its start that sort at or after it (they sort last among the events starting there), which
    have not ended before it."""
    n = len(sorted_ts)
    new_start = np.ones(n, bool)
    new_start[1:] = (sorted_thread[1:] != sorted_thread[:-1]) | (sorted_ts[1:] != sorted_ts[:-1])
    group = np.cumsum(new_start) - 1
    group_end = np.append(np.flatnonzero(new_start)[1:], n)
    zero_length = np.bincount(group, weights=zero, minlength=len(group_end))
    return np.minimum(zero_length[group].astype(np.int64), group_end[group] - np.arange(n))


def _parent_in_start_order(sorted_depth: np.ndarray, sorted_thread: np.ndarray) -> np.ndarray:
    """The parent of each event in (thread, start) order, as a position in that order (-1): the
    last event before it one level up, in its thread. One search among all events keyed (depth,
    position) for (its depth - 1, its position)."""
    n = len(sorted_depth)
    small = sorted_depth.astype(np.uint16) if sorted_depth.max() < 2**16 else sorted_depth
    by_level = np.argsort(small, kind="stable")  # a radix sort for 16-bit depths
    del small
    keys = sorted_depth[by_level] * n + by_level
    before = np.empty(n, np.int64)
    before[by_level] = np.searchsorted(keys, keys - n) - 1  # sorted queries: a fast search
    del keys
    found = by_level[np.maximum(before, 0)]
    is_parent = (
        (sorted_depth > 0)
        & (before >= 0)
        & (sorted_depth[found] == sorted_depth - 1)
        & (sorted_thread[found] == sorted_thread)
    )
    return np.where(is_parent, found, -1)


def _by_start_longest_first(start_key: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``np.lexsort((-end, start_key))``: a stable sort by start (fast on the almost sorted starts
    of a trace), then each group of events sharing a start put longest first."""
    order = np.argsort(start_key, kind="stable")
    tied = np.flatnonzero(start_key[order][1:] == start_key[order][:-1])
    if len(tied):
        at = np.union1d(tied, tied + 1)  # the positions of every group of equal starts
        rows = order[at]
        order[at] = rows[np.lexsort((-end[rows], start_key[rows]))]
    return order
