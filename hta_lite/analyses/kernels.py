"""GPU kernel breakdown: time by kernel type (with overlaps) and per-kernel statistics.

``kernel_type_df`` (summed over the selected ranks): ``kernel_type``, ``sum`` (µs
of wall time during which exactly that combination of types was running, e.g.
"COMPUTATION overlapping COMMUNICATION"), ``percentage`` (of the total, 1 decimal).

``kernel_df``: per rank and kernel type, kernels grouped by name with ``sum (us)``,
``max (us)``, ``min (us)``, ``mean (us)`` and ``stddev`` (µs, sample std, 0 for
one event) of the event durations. When a type has more than ``num_kernels``
names, names past the ``duration_ratio`` quantile of the cumulative time or past
the top ``num_kernels`` are pooled as ``others``; the statistics are always
computed over the individual events (the reference collapses them to the sum).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from .. import intervals
from ..classify import COMMUNICATION, COMPUTATION, MEMORY
from ..load.rank_trace import RankTrace
from .common import GpuIntervals, select, us

KERNEL_DF_COLUMNS = [
    "name",
    "sum (us)",
    "max (us)",
    "min (us)",
    "stddev",
    "mean (us)",
    "kernel_type",
    "rank",
]


def _types(include_memory_kernels: bool) -> list[str]:
    return [COMPUTATION, COMMUNICATION] + ([MEMORY] if include_memory_kernels else [])


def kernel_type_time_ns(gpu: GpuIntervals, types: list[str]) -> dict[str, int]:
    """ns during which each combination of ``types`` was running (names as the reference)."""
    coverage = intervals.coverage_by_combination([gpu.of_type(t) for t in types])
    return {
        " overlapping ".join(t for i, t in enumerate(types) if mask & (1 << i)): ns
        for mask, ns in coverage.items()
    }


def pooled_names(
    sums: np.ndarray, num_kernels: int, duration_ratio: float, keep: np.ndarray | None = None
) -> np.ndarray:
    """Which names (given their total times) go to "others", with the reference's rule:
    beyond the top ``num_kernels``, or past the ``duration_ratio`` quantile of the
    cumulative time of names sorted by time; never the names where ``keep`` is True."""
    pooled = np.zeros(len(sums), bool)
    if len(sums) <= num_kernels:
        return pooled
    order = np.argsort(-sums, kind="stable")
    cumsum = np.cumsum(sums[order])
    pooled[order] = (cumsum > np.quantile(cumsum, duration_ratio)) | (
        np.arange(len(sums)) >= num_kernels
    )
    return pooled & ~keep if keep is not None else pooled


def duration_stats(
    names: pd.Categorical,
    dur_ns: np.ndarray,
    num_kernels: int,
    duration_ratio: float,
    keep_names: np.ndarray | None = None,
) -> pd.DataFrame:
    """Per-name statistics of event durations (µs), small names pooled as "others" (never
    those where ``keep_names``, a mask over the used categories, is True)."""
    names = pd.Categorical(names).remove_unused_categories()
    codes = names.codes.astype(np.int64)
    dur = us(dur_ns)
    pooled = pooled_names(
        np.bincount(codes, weights=dur, minlength=len(names.categories)),
        num_kernels,
        duration_ratio,
        keep_names,
    )
    labels = np.append(np.asarray(names.categories, dtype=object), "others")
    group = np.where(pooled[codes], len(labels) - 1, codes)
    stats = pd.Series(dur).groupby(group).agg(["sum", "max", "min", "std", "mean"])
    stats["std"] = stats["std"].fillna(0.0)
    stats.insert(0, "name", labels[stats.index.to_numpy()])
    stats.columns = KERNEL_DF_COLUMNS[:6]
    return stats.reset_index(drop=True)


def gpu_kernel_breakdown(
    traces: Mapping[int, RankTrace],
    ranks: Iterable[int] | None = None,
    duration_ratio: float = 0.8,
    num_kernels: int = 10,
    include_memory_kernels: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    types = _types(include_memory_kernels)
    totals: dict[str, int] = {}
    per_kernel = []
    for trace in select(traces, ranks):
        if trace.is_cpu_only:
            continue
        gpu = GpuIntervals.of(trace)
        for name, ns in kernel_type_time_ns(gpu, types).items():
            totals[name] = totals.get(name, 0) + ns
        for kernel_type in types:
            rows = gpu.rows[gpu.kernel_type == kernel_type]
            if len(rows) == 0:
                continue
            stats = duration_stats(
                trace.gpu["name"].array[rows],
                trace.gpu["dur"].to_numpy()[rows],
                num_kernels,
                duration_ratio,
            )
            per_kernel.append(stats.assign(kernel_type=kernel_type, rank=trace.rank))
    type_df = _shares(list(totals), [us(v) for v in totals.values()])
    kernel_df = (
        pd.concat(per_kernel, ignore_index=True)
        if per_kernel
        else pd.DataFrame(columns=KERNEL_DF_COLUMNS).astype(
            {c: np.float64 for c in KERNEL_DF_COLUMNS[1:6]} | {"rank": np.int64}
        )
    )
    kernel_df = kernel_df[KERNEL_DF_COLUMNS].sort_values(
        ["kernel_type", "name", "rank"], ignore_index=True
    )
    return type_df, kernel_df


def _shares(kernel_types: list, sums: list) -> pd.DataFrame:
    """``kernel_type, sum`` (µs), most first, and ``percentage`` of their total."""
    type_df = pd.DataFrame({"kernel_type": kernel_types, "sum": sums})
    type_df = type_df.sort_values("sum", ascending=False, ignore_index=True)
    grand = type_df["sum"].sum()
    type_df["percentage"] = (
        (100.0 * type_df["sum"] / grand).round(1) if grand else pd.Series(dtype=float)
    )
    return type_df


def types_across_ranks(per_rank: pd.DataFrame) -> pd.DataFrame:
    """:func:`gpu_kernel_breakdown`'s table of kernel types of all ranks from each rank's
    (``per_rank``: their rows, with a ``rank`` column, as the batch keeps them)."""
    sums = per_rank.groupby("kernel_type", sort=False)["sum"].sum()
    return _shares(sums.index.tolist(), sums.tolist())
