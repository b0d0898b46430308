"""When each gloo collective was issued: the ``c10d::*`` op that enqueued its worker range.

gloo runs a process group's collectives on worker threads that take them from a queue in the
order they were issued; the ``gloo:*`` range a worker records starts when it takes one. Two
workers freed at the same moment take two queued collectives at once, and the one that took the
second may record its start a fraction of a µs first (issue #37: two gradient buckets issued
2.3 ms apart, their ranges 0.3 µs apart in the reverse order). Pairing by the ranges' starts then
pairs different collectives across ranks; pairing in issue order does not.

Each range is linked to the earliest op not yet linked that issued the same collective before
the range started, one whose tensors have the range's element count first (the sizes tell two
buckets apart), else one of the same collective. A range without such an op keeps its own start.
"""

from __future__ import annotations

import numpy as np

from ...collective_names import collective_kind
from ...kineto import C10D_PREFIX
from ...load.inputs import arg_tensors
from ...load.rank_trace import RankTrace


def issue_times(
    trace: RankTrace, rows: np.ndarray, collective: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per worker range (``trace.cpu`` rows ``rows`` of ``collective`` kinds): the start (ns) of
    the op that issued it, its own start where none is found, and that op's row (-1: none). A
    loop over the rank's collective calls and ops (a few per step), not over its events."""
    cpu = trace.cpu
    names = cpu["name"].astype("category")
    # the last slot answers for missing names (code -1), and there is one with no names at all
    issuing = np.append(np.asarray(names.cat.categories.str.startswith(C10D_PREFIX), bool), False)
    op_rows = np.flatnonzero(issuing[names.cat.codes.to_numpy()])
    ts = cpu["ts"].to_numpy()
    issued = ts[rows].copy()
    issuer = np.full(len(rows), -1, np.int64)
    if not len(op_rows):
        return issued, issuer
    op_rows = op_rows[np.argsort(ts[op_rows], kind="stable")]
    dims = cpu["input_dims"].astype(object).to_numpy()
    types = cpu["input_types"].astype(object).to_numpy()
    op_ts = ts[op_rows]
    op_names = names.to_numpy()[op_rows]
    op_kind = np.array([collective_kind(str(n)) for n in op_names], dtype=object)
    op_numels = [_numels(dims[r], types[r]) for r in op_rows]
    taken = np.zeros(len(op_rows), bool)
    for i in np.argsort(ts[rows], kind="stable"):
        own = _numels(dims[rows[i]], types[rows[i]])
        candidates = np.flatnonzero(~taken & (op_kind == collective[i]) & (op_ts <= ts[rows[i]]))
        if not len(candidates):
            continue
        sized = [c for c in candidates if own and own[0] in op_numels[c]]
        chosen = sized[0] if sized else candidates[0]
        taken[chosen] = True
        issued[i] = op_ts[chosen]
        issuer[i] = op_rows[chosen]
    return issued, issuer


def _numels(dims, types) -> list[int]:
    """Elements of each tensor argument of an op (``Input Dims`` / ``Input type`` texts)."""
    texts = [v if isinstance(v, str) else "" for v in (dims, types)]
    return [n for n, _ in arg_tensors(*texts) if n >= 0]
