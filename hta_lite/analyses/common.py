"""Shared helpers of the analyses."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import RankNotFoundError
from ..rank_trace import RankTrace

NS_PER_US = 1000.0


def us(ns) -> float | np.ndarray:
    """Nanoseconds -> microseconds (float)."""
    return np.asarray(ns, dtype=np.float64) / NS_PER_US if not np.isscalar(ns) else ns / NS_PER_US


def select(traces: Mapping[int, RankTrace], ranks: Iterable[int] | int | None) -> list[RankTrace]:
    """The rank traces asked for, in rank order (all when ``ranks`` is None)."""
    if ranks is None:
        return [traces[r] for r in sorted(traces)]
    if isinstance(ranks, (int, np.integer)):
        ranks = [int(ranks)]
    missing = [r for r in ranks if r not in traces]
    if missing:
        raise RankNotFoundError(
            None, f"rank(s) {missing} not loaded; loaded ranks: {sorted(traces)}"
        )
    return [traces[r] for r in sorted(set(ranks))]


@dataclass(frozen=True)
class GpuIntervals:
    """Start/end (ns) and kernel type of every GPU event of a rank, as numpy arrays."""

    ts: np.ndarray
    end: np.ndarray
    kernel_type: np.ndarray  # object array of type names

    @classmethod
    def of(cls, trace: RankTrace, rows: np.ndarray | None = None) -> GpuIntervals:
        gpu = trace.gpu
        ts = gpu["ts"].to_numpy()
        end = ts + gpu["dur"].to_numpy()
        kinds = gpu["kernel_type"].to_numpy(dtype=object)
        if rows is not None:
            return cls(ts[rows], end[rows], kinds[rows])
        return cls(ts, end, kinds)

    def of_type(self, kernel_type: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        if kernel_type is None:
            return self.ts, self.end
        mask = self.kernel_type == kernel_type
        return self.ts[mask], self.end[mask]
