"""Shared helpers of the analyses."""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from ..classify import COMMUNICATION, COMPUTATION
from ..rank_trace import RankTrace

NS_PER_US = 1000.0


def us(ns) -> float | np.ndarray:
    """Nanoseconds -> microseconds (float)."""
    return np.asarray(ns, dtype=np.float64) / NS_PER_US if not np.isscalar(ns) else ns / NS_PER_US


def select(traces: Mapping[int, RankTrace], ranks: Iterable[int] | None) -> list[RankTrace]:
    """The rank traces asked for, in rank order (all when ``ranks`` is None)."""
    from ..errors import RankNotFoundError

    if ranks is None:
        return [traces[r] for r in sorted(traces)]
    if isinstance(ranks, (int, np.integer)):
        ranks = [int(ranks)]
    missing = [r for r in ranks if r not in traces]
    if missing:
        raise RankNotFoundError(None, f"rank(s) {missing} not loaded; loaded ranks: {sorted(traces)}")
    return [traces[r] for r in sorted(set(ranks))]


def gpu_with_types(trace: RankTrace) -> pd.DataFrame:
    """The GPU table with ``end`` (ns) and ``kernel_type`` columns."""
    gpu = trace.gpu
    return gpu.assign(end=gpu["ts"].to_numpy() + gpu["dur"].to_numpy())


def intervals_of(gpu: pd.DataFrame, kernel_type: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    rows = gpu if kernel_type is None else gpu[gpu["kernel_type"] == kernel_type]
    return rows["ts"].to_numpy(), rows["end"].to_numpy()


__all__ = ["COMMUNICATION", "COMPUTATION", "us", "select", "gpu_with_types", "intervals_of"]
