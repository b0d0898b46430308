"""Edges of the critical-path graph from each CPU thread's call stack (HTA 0.6.1's rules).

Per thread (the backward thread merged into the forward one when each is unique), the start and
end points of nested operators in depth-first order: an ``operator`` edge between consecutive
points inside an operator (weight: the time between them), a ``dependency`` between top-level
ones; a blocking synchronization's own span weighs 0; runtime calls sharing the lock are left
to the runtime-lock pass. When every end closes the start on top of the stack (a consistent
call stack) the depth-first order is the time order and the edges are computed on arrays;
otherwise the reference's tree walk runs as is.
"""

from __future__ import annotations

import numpy as np

from ...kineto import CPU_ANNOTATION_CATEGORY, CPU_OP_CATEGORY
from .edge_types import DEPENDENCY, OPERATOR


class CallStacks:
    """The call-stack pass of the graph builder (a mixin: it uses the builder's nodes, event
    masks and ``add`` / ``add_many``)."""

    def call_stacks(self) -> None:
        ev, rows = self.ev, self.window_cpu
        tid = ev.tid[rows].copy()
        forward, backward = self._thread_of("forward"), self._thread_of("autograd")
        if forward is not None and backward is not None and forward != backward:
            tid[tid == backward] = forward  # the backward pass continues the forward thread
        thread_key = ev.pid[rows] * (int(tid.max(initial=0)) + 1 + 2**20) + tid
        for key in np.unique(thread_key):
            self._one_thread(rows[thread_key == key])

    def _thread_of(self, word: str) -> int | None:
        rows = self.window_cpu
        ev = self.ev
        named = ev.name.where(lambda n: word in n)[rows]
        kinds = ev.cat.isin((CPU_OP_CATEGORY, CPU_ANNOTATION_CATEGORY))[rows]
        tids = np.unique(ev.tid[rows][named & kinds])
        return int(tids[0]) if len(tids) == 1 else None

    def _one_thread(self, rows: np.ndarray) -> None:
        ev, index = self.ev, self.index
        ts, end = ev.ts[rows], ev.end[rows]
        dur = end - ts
        n = len(rows)
        # the reference's order of start / end points on one thread (hta compare_events)
        time = np.concatenate([ts, end])
        is_start = np.concatenate([np.ones(n, bool), np.zeros(n, bool)])
        d = np.concatenate([dur, dur])
        i = np.concatenate([index[rows], index[rows]])
        order = np.lexsort((np.where(is_start, i, -i), np.where(is_start, -d, d), is_start, time))
        who, starts = np.concatenate([rows, rows])[order], is_start[order]
        parent = _stack_parents(who, starts)
        if parent is not None:
            self._walk_in_order(who, starts, parent)
        else:
            self._walk_tree(*_call_tree(who.tolist(), starts.tolist()))

    def _walk_in_order(self, who: np.ndarray, starts: np.ndarray, parent: np.ndarray) -> None:
        """The depth-first walk of a call tree whose every end closed its own start: the points
        in time order (the same edges as :meth:`_walk_tree`, computed on arrays); ``parent``:
        the event each point's event is a child of (-1: top level)."""
        node = np.where(starts, self.start_node[who], self.end_node[who])
        keep = node >= 0
        who, starts, node, parent = who[keep], starts[keep], node[keep], parent[keep]
        if len(node) < 2:
            return
        depth = np.cumsum(np.where(starts, 1, -1)) - np.where(starts, 1, -1)  # before each point
        u, v = node[:-1], node[1:]
        into_start = starts[1:]
        kind = np.where(into_start & (depth[1:] == 0), DEPENDENCY, OPERATOR)
        ev_u, ev_v = self.node_event[u], self.node_event[v]
        locked = (
            self.is_lock[ev_u] & self.is_lock[ev_v] & (self.node_start[u] | ~self.node_start[v])
        )
        owner = np.where(self.node_start[u], ev_u, np.where(~self.node_start[v], ev_v, parent[:-1]))
        zero = ~into_start & self.is_blocking[who[1:]]
        ok = ~locked
        self.add_many(u[ok], v[ok], kind[ok], zero[ok], owner[ok])

    def _walk_tree(self, children: dict, parent: dict) -> None:
        """The reference's depth-first walk over a call tree (any shape)."""
        last, last_parent, depth = -1, -1, 0
        work = [(c, False) for c in reversed(children[-1])]
        while work:
            e, leaving = work.pop()
            begin, finish = int(self.begin_[e]), int(self.finish_[e])
            if not leaving:
                work.append((e, True))
                work.extend((c, False) for c in reversed(children[e]))
                if begin < 0:
                    continue
                if last >= 0 and not self.shares_lock(last, begin):
                    kind = DEPENDENCY if depth == 0 else OPERATOR
                    owner = self.attributed(last, begin, kind, last_parent)
                    self.add(last, begin, kind, event=owner)
                last, last_parent = begin, parent[e]
                depth += 1
            else:
                if begin < 0:
                    continue
                if last >= 0 and not self.shares_lock(last, finish):
                    self.add(
                        last, finish, OPERATOR, zero=bool(self.blocking_[e]),
                        event=self.attributed(last, finish, OPERATOR, last_parent),
                    )  # fmt: skip
                last, last_parent = finish, parent[e]
                depth -= 1


def _stack_parents(who: np.ndarray, starts: np.ndarray) -> np.ndarray | None:
    """The parent event of each point's event (-1: top level) when the points (events ``who``,
    a start where ``starts``, in the reference's order) make a consistent call stack -- every
    end closes the start on top of the stack -- else None.

    No stack is built: a point's level is the number of events open before it (less one for
    an end: the level it pops), and the event on the stack at level L at a point is the last
    start at level L before it (a start at L after it would have replaced it)."""
    step = np.where(starts, 1, -1)
    depth = np.cumsum(step) - step  # events open before each point
    level = np.where(starts, depth, depth - 1)
    if len(level) and level.min() < 0:
        return None  # an end with nothing open
    span = len(who) + 1
    at = np.flatnonzero(starts)
    keys = level[at] * span + at  # the starts by (level, position)
    by_key = np.argsort(keys, kind="stable")
    keys, at = keys[by_key], at[by_key]

    def top(levels: np.ndarray, points: np.ndarray) -> np.ndarray:
        """Position of the start on the stack at ``levels`` before ``points`` (-1: none)."""
        found = at[np.maximum(np.searchsorted(keys, levels * span + points) - 1, 0)]
        return np.where((levels >= 0) & (level[found] == levels) & (found < points), found, -1)

    ends, mine = np.flatnonzero(~starts), np.flatnonzero(starts)
    opened = top(level[ends], ends)  # the start each end closes
    if (opened < 0).any() or (who[opened] != who[ends]).any():
        return None
    parent_at = np.full(len(who), -1, np.int64)  # per point, where its parent started
    parent_at[mine] = top(level[mine] - 1, mine)
    parent_at[ends] = parent_at[opened]
    return np.where(parent_at >= 0, who[parent_at], -1).astype(np.int64)


def _call_tree(who: list[int], starts: list[bool]) -> tuple[dict, dict]:
    """``(children, parent)`` of an inconsistent call stack, built as the reference does (a
    stack: a start is a child of the top; an end pops the top, whatever it is)."""
    children: dict[int, list[int]] = {-1: []}
    parent: dict[int, int] = {}
    stack: list[int] = []
    for e, s in zip(who, starts):
        if s:
            p = stack[-1] if stack else -1
            parent[e] = p
            children.setdefault(p, []).append(e)
            children.setdefault(e, [])
            stack.append(e)
        elif stack:
            stack.pop()
    return children, parent
