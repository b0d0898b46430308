"""Which range could mark a step, said by the caveat of findings over a trace without steps.

Where the whole trace is one step (no ProfilerStep, no repeating range, no loop found), one-time
work counts as step time. A benchmark that wraps its measured loop in one range names the step
its user wants: cs336's Nsight Systems export has a ``benchmark_loop`` range (and a 30.7 s
``init_model`` one, which host_bound prices as host time to save over the whole trace). The
hint is the outermost range that launches the most GPU work, where it launches at least
:data:`MIN_SHARE` of it and spans at most :data:`MAX_SPAN` of the trace.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...kineto import CPU_ANNOTATION_CATEGORY
from ...load.rank_trace import RankTrace
from ...load.series import time_range
from ...units import fmt_pct

#: the share of the GPU work (launches) the range must launch ...
MIN_SHARE = 0.5
#: ... and the share of the trace it may span at most (else it is the whole run)
MAX_SPAN = 0.9


def step_range_hint(traces: Mapping[int, RankTrace]) -> str:
    """`` Here, perhaps step_range='NAME': ...`` for the first rank with GPU work, or ``""``."""
    trace = next((t for _, t in sorted(traces.items()) if len(t.gpu)), None)
    if trace is None:
        return ""
    cpu, gpu = trace.cpu, trace.gpu
    rows = gpu["launch_row"].to_numpy()
    launched = np.sort(cpu["ts"].to_numpy()[rows[rows >= 0]])
    outer = cpu[np.asarray(cpu["cat"] == CPU_ANNOTATION_CATEGORY) & (cpu["depth"] == 0)]
    if not len(launched) or outer.empty:
        return ""
    start, end = outer["ts"].to_numpy(), (outer["ts"] + outer["dur"]).to_numpy()
    held = np.searchsorted(launched, end) - np.searchsorted(launched, start)
    best = int(np.argmax(held))
    first, last = time_range(trace)
    share = held[best] / len(launched)
    if share < MIN_SHARE or end[best] - start[best] > MAX_SPAN * (last - first):
        return ""
    name = str(outer["name"].iloc[best])
    return (
        f" Here, perhaps step_range={name!r} (--step-range {name!r}): that range launches"
        f" {fmt_pct(100 * share)} of the GPU work."
    )
