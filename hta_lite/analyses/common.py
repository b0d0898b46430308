"""Shared helpers of the analyses."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import RankNotFoundError, SelectionError
from ..kineto import GPU_WORK_CATEGORIES
from ..load.rank_trace import RankTrace

NS_PER_US = 1000.0


def us(ns) -> float | np.ndarray:
    """Nanoseconds -> microseconds (float)."""
    return np.asarray(ns, dtype=np.float64) / NS_PER_US if not np.isscalar(ns) else ns / NS_PER_US


def text_values(column: pd.Series, rows: np.ndarray | None = None) -> np.ndarray:
    """``column.to_numpy(dtype=object)`` (at ``rows`` if given; missing: NaN), taken through the
    codes of a categorical column: each distinct string is made once, not once per row (pandas
    converts every row through Arrow, 10x slower)."""
    if not isinstance(column.dtype, pd.CategoricalDtype):
        values = column.to_numpy(dtype=object)
        return values if rows is None else values[rows]
    codes = column.cat.codes.to_numpy()
    if rows is not None:
        codes = codes[rows]
    return np.append(np.asarray(column.cat.categories, dtype=object), np.nan)[codes]


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
    """Start/end (ns) and kernel type of the GPU *work* of a rank (kernels, copies, sets) as
    numpy arrays; ``rows`` are their positions in ``trace.gpu``. GPU-side synchronizations
    (``cuda_sync``: the device waiting, not working) are left out."""

    ts: np.ndarray
    end: np.ndarray
    kernel_type: np.ndarray  # object array of type names
    rows: np.ndarray

    @classmethod
    def of(cls, trace: RankTrace) -> GpuIntervals:
        gpu = trace.gpu
        rows = np.flatnonzero(np.asarray(gpu["cat"].isin(GPU_WORK_CATEGORIES)))
        ts = gpu["ts"].to_numpy()[rows]
        end = ts + gpu["dur"].to_numpy()[rows]
        return cls(ts, end, text_values(gpu["kernel_type"], rows), rows)

    def subset(self, mask: np.ndarray) -> GpuIntervals:
        return GpuIntervals(self.ts[mask], self.end[mask], self.kernel_type[mask], self.rows[mask])

    def of_type(self, kernel_type: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        if kernel_type is None:
            return self.ts, self.end
        mask = self.kernel_type == kernel_type
        return self.ts[mask], self.end[mask]


def wanted(asked, present, what: str, where: str | None = None) -> list | None:
    """The values of a filter argument (``None`` = no filter; one value or an iterable), checked
    against the values the trace has: any value absent is a :class:`SelectionError` naming it,
    ``what`` it is and the values there are (a filter never silently matches nothing)."""
    if asked is None:
        return None
    values = [asked] if isinstance(asked, (int, np.integer, str)) else list(asked)
    have = sorted(set(present), key=str)
    missing = [v for v in values if v not in set(have)]
    if missing:
        shown = have if len(have) <= 20 else [*have[:20], "..."]
        place = f" in {where}" if where else ""
        raise SelectionError(None, f"{what} {missing} not found{place}; there are: {shown}")
    return values


def factorize_rows(frame: pd.DataFrame) -> tuple[np.ndarray, list[tuple]]:
    """Each row's code among the distinct rows of ``frame`` (first seen first; missing values are
    values), and those rows as tuples (an empty frame: no codes, no rows). Each column is
    factorized alone and the codes combined in numpy: no tuple per row."""
    if len(frame) == 0:
        return np.zeros(0, np.int64), []
    key, size = np.zeros(len(frame), np.int64), 1
    for name in frame.columns:
        codes, uniques = pd.factorize(frame[name], use_na_sentinel=False)
        size *= max(len(uniques), 1)
        if size >= 2**62:  # the combined key would overflow
            codes, uniques = pd.MultiIndex.from_frame(frame).factorize()
            return np.asarray(codes, np.int64), list(uniques)
        key = key * len(uniques) + codes
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    rows = frame.iloc[first[order]]
    return rank[inverse.ravel()], list(rows.itertuples(index=False, name=None))
