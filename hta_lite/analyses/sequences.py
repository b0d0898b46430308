"""Frequent GPU kernel sequences launched under a CPU operator.

Roots are the CPU events whose name contains ``operator_name`` at the smallest nesting
depth among them; a root's pattern is its name followed by the names of the GPU events
launched from inside it (runtime calls among its descendants), in GPU start order. Roots
with fewer than ``min_pattern_len`` GPU events are ignored. Patterns are counted with the
total GPU time of their events and CPU time of their roots (µs).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import SelectionError
from ..load.rank_trace import RankTrace
from ..rows import nearest_ancestor
from .common import us

COLUMNS = [
    "pattern",
    "count",
    "GPU kernel duration (us)",
    "CPU op duration (us)",
    "pattern_indices",
]


def kernels_under_roots(trace: RankTrace, operator_name: str) -> pd.DataFrame:
    """One row per GPU event launched under a root: ``root`` (cpu row), ``gpu_row``, ``name``,
    ``ts``, ``dur``. No CPU event named with ``operator_name`` is a :class:`SelectionError`."""
    cpu, gpu = trace.cpu, trace.gpu
    names = cpu["name"].astype(str)
    candidates = (
        np.asarray(names.str.contains(operator_name, regex=False))
        if len(cpu)
        else np.zeros(0, bool)
    )
    if not candidates.any():
        raise SelectionError(trace.path, f"no CPU event name contains {operator_name!r}")
    depth = cpu["depth"].to_numpy()
    is_root = candidates & (depth == depth[candidates].min())
    gpu_rows = np.flatnonzero(gpu["launch_row"].to_numpy() >= 0)
    launch_rows = gpu["launch_row"].to_numpy()[gpu_rows]
    roots = nearest_ancestor(cpu["parent_row"].to_numpy(), is_root, launch_rows)
    keep = roots >= 0
    return pd.DataFrame(
        {
            "root": roots[keep],
            "gpu_row": gpu_rows[keep],
            "name": gpu["name"].array[gpu_rows[keep]].astype(str),
            "ts": gpu["ts"].to_numpy()[gpu_rows[keep]],
            "dur": gpu["dur"].to_numpy()[gpu_rows[keep]],
        }
    ).sort_values(["root", "ts"], kind="stable")


def frequent_sequences(
    trace: RankTrace, operator_name: str, min_pattern_len: int = 3
) -> pd.DataFrame:
    """Patterns sorted by count (desc) then pattern; ``pattern_indices`` lists the GPU rows."""
    launched = kernels_under_roots(trace, operator_name)
    if launched.empty:
        return pd.DataFrame(columns=COLUMNS)
    per_root = launched.groupby("root", sort=False).agg(
        kernels=("name", "|".join),
        n=("name", "size"),
        gpu_dur=("dur", "sum"),
        rows=("gpu_row", list),
    )
    per_root = per_root[per_root["n"] >= min_pattern_len]
    if per_root.empty:
        return pd.DataFrame(columns=COLUMNS)
    root_rows = per_root.index.to_numpy()
    per_root["pattern"] = trace.cpu["name"].array[root_rows].astype(str) + "|" + per_root["kernels"]
    per_root["cpu_dur"] = trace.cpu["dur"].to_numpy()[root_rows]
    out = per_root.groupby("pattern").agg(
        count=("n", "size"),
        gpu=("gpu_dur", "sum"),
        cpu=("cpu_dur", "sum"),
        pattern_indices=("rows", lambda r: sorted(sum(r, []))),
    )
    out = out.reset_index()
    out["GPU kernel duration (us)"] = us(out.pop("gpu").to_numpy())
    out["CPU op duration (us)"] = us(out.pop("cpu").to_numpy())
    return out[COLUMNS].sort_values(
        ["count", "pattern"], ascending=[False, True], ignore_index=True
    )
