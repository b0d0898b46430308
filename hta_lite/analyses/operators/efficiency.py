"""Kernel launch efficiency from the args CUPTI writes on NVIDIA kernels: ``blocks per SM``,
``warps per SM``, ``est. achieved occupancy %``, ``registers per thread``, ``shared memory``
(bytes per block). Absent on ROCm traces: the tables then say so by ``kernels_with_args`` 0.

Per kernel name or per operator (the innermost one that launched it), each value is the mean
over the kernels that carry it, weighted by kernel time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...errors import SelectionError
from ..common import text_values, us
from .attribution import UNOWNED_LABELS, Attribution

VALUES = ("blocks_per_sm", "warps_per_sm", "occupancy_pct", "registers_per_thread", "shared_memory")


def kernel_efficiency(attrs: list[Attribution], by: str = "kernel") -> pd.DataFrame:
    """One row per kernel name (``by="kernel"``) or operator name (``by="operator"``):
    ``kernels``, ``gpu_time(us)``, ``kernels_with_args``, and the time-weighted mean of each of
    ``VALUES`` (NaN where no kernel carries it); sorted by ``gpu_time(us)``."""
    if by not in ("kernel", "operator"):
        raise SelectionError(None, f"by must be 'kernel' or 'operator', not {by!r}")
    frames = []
    for attr in attrs:
        gpu = attr.trace.gpu
        rows = attr.kernels
        frame = pd.DataFrame({v: gpu[v].to_numpy(dtype=np.float64)[rows] for v in VALUES})
        for column in ("registers_per_thread", "shared_memory"):  # -1: not written
            frame[column] = frame[column].where(frame[column] >= 0)
        if by == "kernel":
            frame["key"] = text_values(gpu["name"], rows)
        else:
            names = text_values(attr.trace.cpu["name"])
            owner = attr.owner
            frame["key"] = np.where(
                owner >= 0,
                names[np.maximum(owner, 0)],
                [UNOWNED_LABELS.get(k, "") for k in attr.owner_kind],
            )
        frame["dur"] = attr.dur
        frames.append(frame)
    if not frames:
        return pd.DataFrame()
    frame = pd.concat(frames, ignore_index=True)
    frame["has_args"] = frame[list(VALUES)].notna().any(axis=1)
    grouped = frame.groupby("key", sort=False)
    out = pd.DataFrame(
        {
            "kernels": grouped.size(),
            "gpu_time(us)": us(grouped["dur"].sum()),
            "kernels_with_args": grouped["has_args"].sum(),
        }
    )
    for value in VALUES:
        known = frame[value].notna()
        weight = frame["dur"].where(known, 0).astype(np.float64)
        weighted = (frame[value].fillna(0.0) * weight).groupby(frame["key"]).sum()
        total = weight.groupby(frame["key"]).sum()
        out[value] = (weighted / total.where(total > 0)).reindex(out.index)
    out.index.name = "kernel" if by == "kernel" else "operator"
    return out.sort_values("gpu_time(us)", ascending=False).reset_index()
