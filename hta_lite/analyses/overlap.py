"""Communication / computation overlap per rank.

``comp_comm_overlap_pctg`` = 100 x (time where merged COMMUNICATION and merged
COMPUTATION intervals overlap) / (total merged COMMUNICATION time), rounded to 2
decimals. A rank without communication gets NaN (nothing to overlap; no warning).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from .. import intervals
from ..classify import COMMUNICATION, COMPUTATION
from ..load.rank_trace import RankTrace
from .common import GpuIntervals, select


def overlap_ratio(gpu: GpuIntervals) -> float:
    comm = gpu.of_type(COMMUNICATION)
    comm_time = intervals.total(*comm)
    if comm_time == 0:
        return np.nan
    return intervals.overlap(comm, gpu.of_type(COMPUTATION)) / comm_time


def comm_comp_overlap(
    traces: Mapping[int, RankTrace], ranks: Iterable[int] | None = None
) -> pd.DataFrame:
    rows = []
    for trace in select(traces, ranks):
        ratio = np.nan if trace.is_cpu_only else overlap_ratio(GpuIntervals.of(trace))
        rows.append((trace.rank, round(100.0 * ratio, 2) if ratio == ratio else np.nan))
    return pd.DataFrame(rows, columns=["rank", "comp_comm_overlap_pctg"]).astype(
        {"rank": "int64", "comp_comm_overlap_pctg": "float64"}
    )
