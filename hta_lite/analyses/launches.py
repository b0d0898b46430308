"""Kernel launches: how long each launch took on the CPU and how late the GPU started it.

``launch_stats``: one row per GPU event launched by a kernel launch call
(``kineto.KERNEL_LAUNCH_NAMES``) and, with ``include_memory_events``, by a copy or set call
(``kineto.COPY_LAUNCH_NAMES``): ``correlation``, ``cpu_duration`` (µs of the runtime call),
``gpu_duration`` (µs of the GPU event), ``launch_delay`` (µs from the end of the call to the
start of the GPU event, clipped at 0), plus ``launch_name`` and ``kernel_name``.

``aten_op_kernels``: per ATen operator instance, the GPU events it launched (runtime calls
nested under it on its thread); grouped by operator name and kernel sequence with the
occurrence count, the mean delay from operator start to its first launch call and from that
call to the GPU start (µs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from ..kineto import ATEN_PREFIX, COPY_LAUNCH_NAMES, KERNEL_LAUNCH_NAMES, LAUNCH_NAMES
from ..load.rank_trace import RankTrace
from ..rows import gather, nearest_ancestor
from .common import select, starts_with, us, wanted

STATS_COLUMNS = [
    "correlation",
    "cpu_duration",
    "gpu_duration",
    "launch_delay",
    "launch_name",
    "kernel_name",
]


def _launched(trace: RankTrace, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """GPU rows launched by one of ``names`` and their launch rows in the CPU table."""
    launch = trace.gpu["launch_row"].to_numpy()
    is_named = np.asarray(trace.cpu["name"].isin(names))
    rows = np.flatnonzero(gather(is_named, launch, False))
    return rows, launch[rows]


def launch_stats(trace: RankTrace, include_memory_events: bool = True) -> pd.DataFrame:
    names = KERNEL_LAUNCH_NAMES + (COPY_LAUNCH_NAMES if include_memory_events else ())
    gpu_rows, cpu_rows = _launched(trace, names)
    cpu_ts = trace.cpu["ts"].to_numpy()[cpu_rows]
    cpu_dur = trace.cpu["dur"].to_numpy()[cpu_rows]
    gpu_ts = trace.gpu["ts"].to_numpy()[gpu_rows]
    return pd.DataFrame(
        {
            "correlation": trace.gpu["correlation"].to_numpy()[gpu_rows],
            "cpu_duration": us(cpu_dur),
            "gpu_duration": us(trace.gpu["dur"].to_numpy()[gpu_rows]),
            "launch_delay": us(np.maximum(gpu_ts - (cpu_ts + cpu_dur), 0)),
            "launch_name": trace.cpu["name"].array[cpu_rows].astype(str),
            "kernel_name": trace.gpu["name"].array[gpu_rows].astype(str),
        },
        columns=STATS_COLUMNS,
    )


def cuda_kernel_launch_stats(
    traces: Mapping[int, RankTrace],
    ranks: Iterable[int] | None = None,
    include_memory_events: bool = True,
) -> dict[int, pd.DataFrame]:
    return {t.rank: launch_stats(t, include_memory_events) for t in select(traces, ranks)}


ATEN_COLUMNS = [
    "aten_op_name",
    "kernel_sequence",
    "occurrence_count",
    "avg_aten_op_launch_delay",
    "avg_runtime_delay",
]


def aten_op_kernels(trace: RankTrace) -> pd.DataFrame:
    columns = ATEN_COLUMNS
    cpu = trace.cpu
    gpu_rows, cpu_rows = _launched(trace, LAUNCH_NAMES)
    is_aten = starts_with(cpu["name"], ATEN_PREFIX)
    op_rows = nearest_ancestor(cpu["parent_row"].to_numpy(), is_aten, cpu_rows)
    keep = op_rows >= 0
    if not keep.any():
        return pd.DataFrame(columns=columns)
    launches = pd.DataFrame(
        {
            "op": op_rows[keep],
            "launch_ts": cpu["ts"].to_numpy()[cpu_rows[keep]],
            "gpu_ts": trace.gpu["ts"].to_numpy()[gpu_rows[keep]],
            "kernel": trace.gpu["name"].array[gpu_rows[keep]].astype(str),
        }
    ).sort_values(["op", "launch_ts"], kind="stable")
    per_op = launches.groupby("op", sort=False).agg(
        kernel_sequence=("kernel", " -> ".join),
        first_launch=("launch_ts", "first"),
        first_gpu=("gpu_ts", "first"),
    )
    op_index = per_op.index.to_numpy()
    per_op["aten_op_name"] = cpu["name"].array[op_index].astype(str)
    per_op["aten_op_delay"] = us(per_op["first_launch"].to_numpy() - cpu["ts"].to_numpy()[op_index])
    per_op["runtime_delay"] = us(per_op["first_gpu"].to_numpy() - per_op["first_launch"].to_numpy())
    out = (
        per_op.groupby(["aten_op_name", "kernel_sequence"])
        .agg(
            occurrence_count=("runtime_delay", "size"),
            avg_aten_op_launch_delay=("aten_op_delay", "mean"),
            avg_runtime_delay=("runtime_delay", "mean"),
        )
        .reset_index()
        .round({"avg_aten_op_launch_delay": 3, "avg_runtime_delay": 3})
    )
    return out[columns]


def aten_op_kernels_and_delay(
    traces: Mapping[int, RankTrace],
    ranks: Iterable[int] | None = None,
    sort_by: list[str] | None = None,
) -> dict[int, pd.DataFrame]:
    sort_by = wanted(sort_by or ["occurrence_count"], ATEN_COLUMNS, "sort_by column(s)")
    return {
        t.rank: aten_op_kernels(t).sort_values(sort_by, ascending=False, ignore_index=True)
        for t in select(traces, ranks)
    }
