"""User annotations: ``record_function`` / NVTX ranges, as the GPU ran them
(``gpu_user_annotation``, one range per device and stream) or on the CPU (``user_annotation``)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..classify import short_name
from ..errors import SelectionError
from ..kineto import CPU_ANNOTATION_CATEGORY
from ..load.links import nesting_depth
from ..load.rank_trace import RankTrace
from .kernels import KERNEL_DF_COLUMNS, duration_stats

BREAKDOWN_COLUMNS = [c for c in KERNEL_DF_COLUMNS if c != "kernel_type"]


def kernels_with_user_annotations(
    trace: RankTrace, expand_names: bool = True, shorten_names: bool = True
) -> pd.DataFrame:
    """The ``gpu`` table of a rank plus ``user_annotation``: the name of the innermost GPU
    annotation of the same device and stream (``pid``, ``tid``) whose range holds the event's
    start (missing when none). With ``expand_names`` also ``s_name`` and ``s_user_annotation``,
    the names shortened (templates and arguments cut) when ``shorten_names``, as the reference
    writes them."""
    gpu = trace.gpu.copy()
    anno = trace.gpu_annotations
    found = np.full(len(gpu), -1, np.int64)
    if len(anno) and len(gpu):
        depth = nesting_depth(anno)  # nesting within each (pid, tid)
        lanes = pd.MultiIndex.from_frame(anno[["pid", "tid"]]).unique()
        for pid, tid in lanes:  # a few device streams
            mine = np.flatnonzero((gpu["pid"].to_numpy() == pid) & (gpu["tid"].to_numpy() == tid))
            theirs = (anno["pid"].to_numpy() == pid) & (anno["tid"].to_numpy() == tid)
            ts = gpu["ts"].to_numpy()[mine]
            for level in range(int(depth[theirs].max()) + 1):  # each level is disjoint
                rows = np.flatnonzero(theirs & (depth == level))
                rows = rows[np.argsort(anno["ts"].to_numpy()[rows], kind="stable")]
                starts = anno["ts"].to_numpy()[rows]
                ends = starts + anno["dur"].to_numpy()[rows]
                idx = np.maximum(np.searchsorted(starts, ts, side="right") - 1, 0)
                inside = (np.searchsorted(starts, ts, side="right") > 0) & (ts < ends[idx])
                found[mine] = np.where(inside, rows[idx], found[mine])
    names = anno["name"].astype(str).to_numpy() if len(anno) else np.array([], dtype=object)
    labels = np.where(found >= 0, names[np.maximum(found, 0)] if len(names) else None, None)
    gpu["user_annotation"] = pd.Categorical(labels)
    if expand_names:
        rename = short_name if shorten_names else str
        for column in ("name", "user_annotation"):
            names = gpu[column].array
            renamed = np.array([rename(n) for n in names.categories] + [None], dtype=object)
            gpu[f"s_{column}"] = pd.Categorical(renamed[names.codes])  # code -1: missing
    return gpu


def matching_names(names: np.ndarray, patterns: list[str] | None) -> np.ndarray:
    """Which ``names`` match any pattern, as text or as a regular expression (``re.search``)."""
    keep = np.zeros(len(names), bool)
    for pattern in patterns or []:
        try:
            regex = re.compile(pattern)
        except re.error:
            regex = None
        keep |= np.array([pattern in n or bool(regex and regex.search(n)) for n in names], bool)
    return keep


def user_annotation_breakdown(
    traces: list[RankTrace],
    use_gpu_annotation: bool = True,
    duration_ratio: float = 0.8,
    num_kernels: int = 1000,
    allowlist_patterns: list[str] | None = None,
) -> pd.DataFrame:
    """Per rank and annotation name: ``sum``, ``max``, ``min``, ``mean (us)`` and ``stddev`` of
    the durations of the ranges (µs), names beyond ``num_kernels`` or the ``duration_ratio``
    share pooled as ``others`` unless they match ``allowlist_patterns``. GPU ranges
    (``gpu_user_annotation``) with ``use_gpu_annotation``, else CPU ranges (``user_annotation``,
    ProfilerStep included). No rows (same columns) when the ranks have no such range; an
    allowlist pattern that matches no name is a :class:`SelectionError`."""
    parts, matched = [], np.zeros(len(allowlist_patterns or []), bool)
    for trace in traces:
        table = trace.gpu_annotations if use_gpu_annotation else trace.cpu
        if not use_gpu_annotation:
            table = table[table["cat"] == CPU_ANNOTATION_CATEGORY]
        if table.empty:
            continue
        names = pd.Categorical(table["name"].array).remove_unused_categories()
        categories = np.asarray(names.categories, dtype=object)
        keep = matching_names(categories, allowlist_patterns)
        for i, pattern in enumerate(allowlist_patterns or []):
            matched[i] |= matching_names(categories, [pattern]).any()
        stats = duration_stats(
            names, table["dur"].to_numpy(), num_kernels, duration_ratio, keep_names=keep
        )
        parts.append(stats.assign(rank=trace.rank))
    if allowlist_patterns and not matched.all():
        unmatched = [p for p, m in zip(allowlist_patterns, matched) if not m]
        raise SelectionError(None, f"allowlist_patterns {unmatched} match no annotation name")
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "name" else float) for c in
                             BREAKDOWN_COLUMNS}).astype({"rank": "int64"})  # fmt: skip
    return pd.concat(parts, ignore_index=True)[BREAKDOWN_COLUMNS].sort_values(
        ["rank", "sum (us)"], ascending=[True, False], ignore_index=True
    )
