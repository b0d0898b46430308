"""GPU user annotations (``gpu_user_annotation``: record_function / NVTX ranges on the GPU timeline)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..links import nesting_depth
from ..rank_trace import RankTrace
from .kernels import duration_stats


def kernels_with_user_annotations(trace: RankTrace) -> pd.DataFrame:
    """GPU table plus ``user_annotation`` (name of the innermost covering GPU annotation, NaN if none)."""
    gpu = trace.gpu.copy()
    anno = trace.gpu_annotations
    found = np.full(len(gpu), -1, np.int64)
    if len(anno) and len(gpu):
        depth = nesting_depth(anno.assign(pid=0, tid=0))
        ts = gpu["ts"].to_numpy()
        for level in range(int(depth.max()) + 1):  # few nesting levels; each level is disjoint
            rows = np.flatnonzero(depth == level)
            rows = rows[np.argsort(anno["ts"].to_numpy()[rows], kind="stable")]
            starts = anno["ts"].to_numpy()[rows]
            ends = starts + anno["dur"].to_numpy()[rows]
            idx = np.searchsorted(starts, ts, side="right") - 1
            inside = (idx >= 0) & (ts < ends[np.maximum(idx, 0)])
            found = np.where(inside, rows[np.maximum(idx, 0)], found)
    names = anno["name"].astype(str).to_numpy() if len(anno) else np.array([], dtype=object)
    gpu["user_annotation"] = pd.Categorical(
        np.where(found >= 0, names[np.maximum(found, 0)] if len(names) else None, None)
    )
    return gpu


def user_annotation_breakdown(
    traces: list[RankTrace], duration_ratio: float = 0.8, num_kernels: int = 1000
) -> pd.DataFrame:
    """Per rank and annotation name: ``sum/max/min/mean (us)``, ``stddev`` of the annotation ranges."""
    parts = [
        duration_stats(
            t.gpu_annotations["name"].array,
            t.gpu_annotations["dur"].to_numpy(),
            num_kernels,
            duration_ratio,
        ).assign(rank=t.rank)
        for t in traces
        if len(t.gpu_annotations)
    ]
    if not parts:
        return pd.DataFrame(
            columns=["name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)", "rank"]
        )
    return pd.concat(parts, ignore_index=True).sort_values(
        ["rank", "sum (us)"], ascending=[True, False], ignore_index=True
    )
