"""Shared helpers of the analyses."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import RankNotFoundError, SelectionError
from ..intervals import merge
from ..kineto import GPU_WORK_CATEGORIES
from ..load.rank_trace import RankTrace

NS_PER_US = 1000.0


def us(ns) -> float | np.ndarray:
    """Nanoseconds -> microseconds (float)."""
    return np.asarray(ns, dtype=np.float64) / NS_PER_US if not np.isscalar(ns) else ns / NS_PER_US


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of integers by a sort: numpy 2's hash table is 3-4x slower on the
    few tens of thousands of keys of an operator summary."""
    ordered = np.sort(values)
    return ordered[np.append(True, ordered[1:] != ordered[:-1])] if len(ordered) else ordered


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


def text_array(column: pd.Series, rows: np.ndarray | None = None):
    """:func:`text_values` as a column for a table: with pandas' Arrow string dtype (pandas 3)
    taken by Arrow from the categories (no Python string per row, 5-10x faster than converting
    objects); otherwise the object array."""
    categories = column.cat.categories if isinstance(column.dtype, pd.CategoricalDtype) else None
    dtype = getattr(categories, "dtype", None)
    if not (isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow"):
        return text_values(column, rows)
    codes = column.cat.codes.to_numpy()
    codes = codes if rows is None else codes[rows]
    taken = pa.array(categories.array).take(pa.array(codes, mask=codes < 0))
    return pd.array(taken, dtype=dtype)


def text_column(values, codes: np.ndarray):
    """``values[codes]`` (``values``: a few strings; codes >= 0) as a column for a table, of the
    dtype :func:`text_array` gives (pandas' Arrow strings where that is the default)."""
    if not _ARROW_TEXT:
        return np.asarray(values, dtype=object)[codes]
    return pd.array(pa.array(values, pa.large_string()).take(codes), dtype=_TEXT_DTYPE)


_TEXT_DTYPE = pd.Series(["text"]).dtype  # the dtype pandas infers for strings
_ARROW_TEXT = isinstance(_TEXT_DTYPE, pd.StringDtype) and _TEXT_DTYPE.storage == "pyarrow"


def starts_with(column: pd.Series, prefix: str) -> np.ndarray:
    """Per row of a categorical text ``column``: does it start with ``prefix`` (missing: False);
    tested once per distinct value, not per row."""
    categories = column.cat.categories
    hit = (
        np.asarray(categories.str.startswith(prefix), bool)
        if len(categories)
        else np.zeros(0, bool)
    )
    return np.append(hit, False)[column.cat.codes.to_numpy()]


def one_of(column: pd.Series, values) -> np.ndarray:
    """Per row of a categorical text ``column``: is its value among ``values`` (missing: False);
    looked up once per value, 4-11x faster than ``Series.isin`` (which other columns take)."""
    if not isinstance(column.dtype, pd.CategoricalDtype):  # e.g. tables concatenated by hand
        return np.asarray(column.isin(values), bool)
    categories = column.array.categories
    hit = np.zeros(len(categories) + 1, bool)  # the last: missing (code -1)
    for value in values:
        if value in categories:
            hit[categories.get_loc(value)] = True
    return hit[column.array.codes]


def select(traces: Mapping[int, RankTrace], ranks: Iterable[int] | int | None) -> list[RankTrace]:
    """The rank traces asked for, in rank order (all when ``ranks`` is None); an empty list
    selects nothing, which is a :class:`SelectionError`, never an empty answer."""
    if ranks is None:
        return [traces[r] for r in sorted(traces)]
    if isinstance(ranks, (int, np.integer)):
        ranks = [int(ranks)]
    ranks = list(ranks)
    if not ranks:
        raise SelectionError(None, f"ranks=[] selects no rank; loaded ranks: {sorted(traces)}")
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
    (``cuda_sync``: the device waiting, not working) are left out. ``window``: the profiled
    window of each (:mod:`hta_lite.load.series`; all 0 for a single file)."""

    ts: np.ndarray
    end: np.ndarray
    kernel_type: np.ndarray  # object array of type names
    rows: np.ndarray
    window: np.ndarray

    @classmethod
    def of(cls, trace: RankTrace) -> GpuIntervals:
        gpu = trace.gpu
        rows = np.flatnonzero(one_of(gpu["cat"], GPU_WORK_CATEGORIES))
        ts = gpu["ts"].to_numpy()[rows]
        end = ts + gpu["dur"].to_numpy()[rows]
        return cls(ts, end, text_values(gpu["kernel_type"], rows), rows, windows_of(gpu, rows))

    def subset(self, mask: np.ndarray) -> GpuIntervals:
        parts = (self.ts, self.end, self.kernel_type, self.rows, self.window)
        return GpuIntervals(*(part[mask] for part in parts))

    def span_ns(self) -> int:
        """First start to last end, summed over the profiled windows (the known gaps between
        windows are not part of it)."""
        if not len(self.ts):
            return 0
        if self.window.max() == self.window.min():
            return int(self.end.max() - self.ts.min())
        n = int(self.window.max()) + 1
        first = np.full(n, np.iinfo(np.int64).max)
        last = np.full(n, np.iinfo(np.int64).min)
        np.minimum.at(first, self.window, self.ts)
        np.maximum.at(last, self.window, self.end)
        held = first <= last
        return int((last[held] - first[held]).sum())

    def of_type(self, kernel_type: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        if kernel_type is None:
            return self.ts, self.end
        mask = self.kernel_type == kernel_type
        return self.ts[mask], self.end[mask]


def windows_of(table: pd.DataFrame, rows: np.ndarray | None = None) -> np.ndarray:
    """The ``window`` column of a table (at ``rows``), zeros for a trace of one file."""
    n = len(table) if rows is None else len(rows)
    if "window" not in table.columns:
        return np.zeros(n, np.int64)
    values = table["window"].to_numpy()
    return values if rows is None else values[rows]


def wanted(asked, present, what: str, where: str | None = None) -> list | None:
    """The values of a filter argument (``None`` = no filter; one value or an iterable), checked
    against the values the trace has: any value absent is a :class:`SelectionError` naming it,
    ``what`` it is and the values there are (a filter never silently matches nothing)."""
    if asked is None:
        return None
    values = [asked] if isinstance(asked, (int, np.integer, str)) else list(asked)
    have = sorted(set(present), key=str)
    if not values:
        raise SelectionError(None, f"an empty list of {what} selects nothing; there are: {have}")
    missing = [v for v in values if v not in set(have)]
    if missing:
        shown = have if len(have) <= 20 else [*have[:20], "..."]
        place = f" in {where}" if where else ""
        raise SelectionError(None, f"{what} {missing} not found{place}; there are: {shown}")
    return values


def ranges_named(trace, regex: re.Pattern) -> dict[int, np.ndarray]:
    """``{tid: (n, 2) merged, sorted [start, end) ns}`` of the rank's CPU events whose name
    ``regex`` finds."""
    cpu = trace.cpu
    if not len(cpu):
        return {}
    names = cpu["name"].astype("category")
    hit = np.isin(names.cat.codes, [i for i, n in enumerate(names.cat.categories)
                                    if regex.search(str(n))])  # fmt: skip
    if not hit.any():
        return {}
    out = {}
    for tid, part in cpu[hit].groupby("tid", sort=False):
        starts, ends = merge(part["ts"].to_numpy(), (part["ts"] + part["dur"]).to_numpy())
        out[int(tid)] = np.stack([starts, ends], axis=1)
    return out


def median_of_the_others(values: np.ndarray) -> np.ndarray:
    """For each value, the median of all the other values (vectorised leave-one-out)."""
    n = len(values)
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    position = np.empty(n, np.int64)
    position[order] = np.arange(n)

    def rest(j: int) -> np.ndarray:  # the j-th smallest of the others, for every value
        return np.where(j < position, ranked[j], ranked[min(j + 1, n - 1)])

    middle = (n - 1) // 2
    return rest(middle) if (n - 1) % 2 else (rest(middle - 1) + rest(middle)) / 2.0
