"""Which operator launched each GPU event, and the operator tree above it.

Every GPU work event (kernel, copy, set) of a rank gets exactly one *owner*:

- ``operator``: the innermost ``cpu_op`` enclosing its launch call on the launching thread;
- ``graph replay``: launched by ``cudaGraphLaunch`` / ``hipGraphLaunch`` (a captured graph
  replays many kernels under one call, so they cannot be split by operator);
- ``no operator``: no launch call in the trace, or a launch call outside every operator.

Through the op tree (``parent_op``: the nearest ``cpu_op`` ancestor) each kernel also belongs to
every ancestor operator; :attr:`Attribution.pairs` lists those (kernel, operator) pairs, which is
what inclusive ("total") times are built from. Times are int64 ns.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ...kineto import (
    CPU_OP_CATEGORY,
    CROSSING_MEMCPY_KINDS,
    GPU_WORK_CATEGORIES,
    GRAPH_LAUNCH_NAMES,
    MEMCPY_CATEGORIES,
    memcpy_kind,
)
from ...load.rank_trace import RankTrace
from ...rows import ancestors_where, gather, nearest_ancestor
from ..common import one_of

OPERATOR, GRAPH_REPLAY, NO_OPERATOR = "operator", "graph replay", "no operator"
#: how tables name the GPU events no operator owns
UNOWNED_LABELS = {GRAPH_REPLAY: "[graph replay]", NO_OPERATOR: "[no operator]"}


@dataclass
class Attribution:
    """The kernels of one rank and their owners.

    ``kernels``: rows of ``trace.gpu`` holding GPU work; ``ts`` / ``end`` (ns) and ``owner``
    (the ``cpu`` row of the innermost operator, -1 when none) per kernel; ``owner_kind`` per
    kernel (:data:`OPERATOR`, :data:`GRAPH_REPLAY`, :data:`NO_OPERATOR`). ``parent_op``: per
    ``cpu`` row, the row of its nearest enclosing operator (-1: none).
    """

    trace: RankTrace
    kernels: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    owner: np.ndarray
    owner_kind: np.ndarray
    is_op: np.ndarray
    parent_op: np.ndarray

    @classmethod
    def of(cls, trace: RankTrace) -> Attribution:
        cpu, gpu = trace.cpu, trace.gpu
        kernels = np.flatnonzero(one_of(gpu["cat"], GPU_WORK_CATEGORIES))
        ts = gpu["ts"].to_numpy()[kernels]
        end = ts + gpu["dur"].to_numpy()[kernels]
        launch = gpu["launch_row"].to_numpy()[kernels]
        by_graph = gather(one_of(cpu["name"], GRAPH_LAUNCH_NAMES), launch, False)
        op = gather(cpu["op_row"].to_numpy(), launch, -1)
        owner = np.where(by_graph, -1, op)
        kind = np.where(by_graph, GRAPH_REPLAY, np.where(owner >= 0, OPERATOR, NO_OPERATOR))
        is_op = np.asarray(cpu["cat"] == CPU_OP_CATEGORY)
        parent_op = np.full(len(cpu), -1, np.int64)
        rows = np.flatnonzero(is_op)
        parent_op[rows] = nearest_ancestor(cpu["parent_row"].to_numpy(), is_op, rows)
        return cls(trace, kernels, ts, end, owner, kind.astype(object), is_op, parent_op)

    @property
    def ops(self) -> np.ndarray:
        """``cpu`` rows of the operators."""
        return np.flatnonzero(self.is_op)

    @property
    def dur(self) -> np.ndarray:
        return self.end - self.ts

    @cached_property
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(kernel, op)``: each owned kernel (index into :attr:`kernels`) with its owner and
        every ancestor operator of the owner, once each."""
        kernel = np.flatnonzero(self.owner >= 0)
        op = self.owner[kernel]
        kernels, ops = [kernel], [op]
        while len(op):
            op = self.parent_op[op]
            keep = op >= 0
            kernel, op = kernel[keep], op[keep]
            kernels.append(kernel)
            ops.append(op)
        return np.concatenate(kernels), np.concatenate(ops)

    @cached_property
    def is_transfer(self) -> np.ndarray:
        """Per kernel: a copy between host and device or between devices (its roof is the link,
        not the device memory)."""
        copies = one_of(self.trace.gpu["cat"], MEMCPY_CATEGORIES)[self.kernels]
        names = self.trace.gpu["name"].array
        codes = names.codes[self.kernels]
        crossing = np.zeros(len(names.categories) + 1, bool)  # the names copies have, once each
        for code in np.unique(codes[copies]).tolist():
            kind = memcpy_kind(str(names.categories[code])) if code >= 0 else None
            crossing[code] = kind in CROSSING_MEMCPY_KINDS
        return copies & crossing[codes]

    @cached_property
    def op_depth(self) -> np.ndarray:
        """Per ``cpu`` row: how many operators enclose it (0 for an outermost operator)."""
        return ancestors_where(self.parent_op, self.is_op)
