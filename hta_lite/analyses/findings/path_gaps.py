"""Host time the critical path does not see, while the GPU waits.

HTA's construction joins consecutive top-level CPU events of a thread by a dependency of zero
weight, so the time between them is on no weighted edge: Python between operators, code inside
a ``record_function`` / NVTX range with no operator in it (a JIT compile, post-processing), host
work no event records. When the rank's GPU runs nothing meanwhile, the step waits for that host
time all the same. An *idle gap* here is such time of a segment's local path (the job path
partials' ``gaps``, less a kernel's launch latency, which the host keeps paying), during which
the rank's GPU runs nothing, no other finding has claimed the time and the host is not inside a
blocking call (a synchronization, a blocking copy: waiting for the GPU, not working) and no
launched work waits on the GPU for what the trace does not show (:func:`...idle.held_spans`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...intervals import merge
from ...kineto import BLOCKING_SYNC_NAMES
from ..idle import held_spans
from .context import Context

#: columns of :func:`idle_gaps`: ``segment`` (row of the context's segments), ``rank``,
#: ``start`` / ``end`` (ns), ``tid`` (the host thread the path is on there: the thread that ran
#: the most events where the path's edges do not say)
IDLE_GAP_COLUMNS = ["segment", "rank", "start", "end", "tid"]


def idle_gaps(ctx: Context) -> tuple[pd.DataFrame, float]:
    """(the idle gaps, :data:`IDLE_GAP_COLUMNS`; ns of all the paths' unweighted time, the GPU idle
    or not)."""
    empty = pd.DataFrame({c: np.zeros(0, np.int64) for c in IDLE_GAP_COLUMNS})
    if ctx.gaps is None or ctx.gaps.empty:
        return empty, 0.0
    lo, hi = ctx.gaps["start"].to_numpy(np.int64), ctx.gaps["end"].to_numpy(np.int64)
    tid, segment = ctx.gaps["tid"].to_numpy(np.int64), ctx.gap_segment
    known = (segment >= 0) & (ctx.gaps["launch_latency"].to_numpy() == 0)
    lo, hi, tid, segment = lo[known], hi[known], tid[known], segment[known]
    rank_of = ctx.segments["rank"].to_numpy()[segment]
    parts = []
    for rank, trace in ctx.traces.items():
        mine = np.flatnonzero(rank_of == rank)
        gpu = trace.gpu[trace.gpu["stream"].to_numpy() >= 0]
        if not len(mine) or gpu.empty:  # a rank without a GPU: nothing waits for its host
            continue
        claimed = ctx.claimed(rank)
        blocking = trace.cpu[trace.cpu["name"].isin(BLOCKING_SYNC_NAMES).to_numpy()]
        held_lo, held_hi = held_spans(trace)
        starts = np.concatenate([
            gpu["ts"].to_numpy(np.int64), claimed[:, 0], blocking["ts"].to_numpy(np.int64), held_lo
        ])  # fmt: skip
        ends = np.concatenate([
            (gpu["ts"] + gpu["dur"]).to_numpy(np.int64), claimed[:, 1],
            (blocking["ts"] + blocking["dur"]).to_numpy(np.int64), held_hi,
        ])  # fmt: skip
        busy_lo, busy_hi = merge(starts, ends)
        a, b, which = _minus(lo[mine], hi[mine], busy_lo, busy_hi)
        threads = tid[mine][which]
        if (threads < 0).any() and len(trace.cpu):
            threads = np.where(threads < 0, trace.cpu["tid"].value_counts().index[0], threads)
        parts.append(pd.DataFrame({"segment": segment[mine][which], "rank": rank, "start": a,
                                   "end": b, "tid": threads}))  # fmt: skip
    gaps = pd.concat(parts, ignore_index=True).astype("int64") if parts else empty
    return gaps, float(np.maximum(hi - lo, 0).sum())


def _minus(lo, hi, busy_lo, busy_hi):
    """The parts of the intervals [lo, hi) outside the merged, sorted busy intervals: (start,
    end, index of the interval each part is of)."""
    free_lo = np.r_[np.iinfo(np.int64).min, busy_hi]
    free_hi = np.r_[busy_lo, np.iinfo(np.int64).max]
    first = np.searchsorted(free_hi, lo, side="right")  # free intervals ending after lo
    stop = np.searchsorted(free_lo, hi, side="left")  # ... and starting before hi
    count = np.maximum(stop - first, 0)
    which = np.repeat(np.arange(len(lo)), count)
    offset = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    j = np.repeat(first, count) + offset
    a = np.maximum(lo[which], free_lo[j])
    b = np.minimum(hi[which], free_hi[j])
    keep = b > a
    return a[keep], b[keep], which[keep]
