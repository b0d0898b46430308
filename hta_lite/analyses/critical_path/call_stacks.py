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

from ...kineto import CPU_OP_CATEGORY
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
        kinds = ev.cat.isin((CPU_OP_CATEGORY, "user_annotation"))[rows]
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
        who = np.concatenate([rows, rows])[order].tolist()
        starts = is_start[order].tolist()
        # the call tree (a stack), then a depth-first walk over it, as the reference does
        children: dict[int, list[int]] = {-1: []}
        parent: dict[int, int] = {}
        stack: list[int] = []
        consistent = True  # every end closes the start on top of the stack
        for e, s in zip(who, starts):
            if s:
                p = stack[-1] if stack else -1
                parent[e] = p
                children.setdefault(p, []).append(e)
                children.setdefault(e, [])
                stack.append(e)
            elif stack:
                consistent &= stack.pop() == e
            else:
                consistent = False
        if consistent:
            self._walk_in_order(np.array(who, np.int64), np.array(starts, bool), parent)
        else:
            self._walk_tree(children, parent)

    def _walk_in_order(self, who: np.ndarray, starts: np.ndarray, parent: dict) -> None:
        """The depth-first walk of a call tree whose every end closed its own start: the points
        in time order (the same edges as :meth:`_walk_tree`, computed on arrays)."""
        node = np.where(starts, self.start_node[who], self.end_node[who])
        keep = node >= 0
        who, starts, node = who[keep], starts[keep], node[keep]
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
        owner_parent = np.array([parent[e] for e in who[:-1].tolist()], np.int64)
        owner = np.where(
            self.node_start[u], ev_u, np.where(~self.node_start[v], ev_v, owner_parent)
        )
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
