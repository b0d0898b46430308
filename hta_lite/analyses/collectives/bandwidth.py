"""Algorithm and bus bandwidth with the conventions of NCCL-tests (``doc/PERFORMANCE.md``).

``algbw = size / time`` with ``size`` the bytes of the collective's buffer on one rank as
NCCL-tests counts it — the larger of the input and output message (all_reduce: the buffer;
all_gather: the gathered output; reduce_scatter: the full input; all_to_all: what one rank sends)
— and ``time`` the transfer time (the shortest duration across ranks, i.e. without the wait for
the last arrival). ``busbw = algbw x factor(n)``, ``n`` the group size, which makes the figure
comparable to the link's peak whatever the collective:

=============================================  ==========
all_reduce                                     2(n-1)/n
all_gather, reduce_scatter, all_to_all         (n-1)/n
broadcast, reduce, send, recv, send_recv,      1
gather, scatter
barrier                                        no data: NaN
=============================================  ==========

GB/s are decimal (1e9 bytes per second): bytes per nanosecond.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def bus_factor(collective: str, n: int) -> float:
    """The NCCL-tests bus bandwidth factor for ``n`` ranks (NaN for a barrier or n < 1)."""
    if n < 1 or collective == "barrier" or not collective:
        return float("nan")
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def add_bandwidth(instances: pd.DataFrame) -> pd.DataFrame:
    """``algbw_gbps`` and ``busbw_gbps`` from ``bytes``, ``transfer`` (ns), ``collective`` and
    ``group_size`` (NaN without a size or a duration)."""
    size = instances["bytes"].to_numpy(np.float64)
    time = instances["transfer"].to_numpy(np.float64)
    ok = (size > 0) & (time > 0)
    algbw = np.where(ok, size / np.where(ok, time, 1.0), np.nan)
    factor = np.array(
        [bus_factor(c, int(n)) for c, n in zip(instances["collective"], instances["group_size"])],
        np.float64,
    )
    return instances.assign(algbw_gbps=algbw, busbw_gbps=algbw * factor)
