"""Test helper: reproduce the reference's known input defects on our tables.

Used only to show that where our numbers differ from traceinsight 0.6.1 the
difference comes from these defects (docs/differences-from-hta.md), not from
the analysis formulas:
1. when any ts is fractional, timestamps rounded to whole µs: ``ts`` up (ceil), ``ts + dur``
   down (floor); events shorter than their rounding shrink to zero (the reference: negative) length;
2. CPU operators that carry an ``args.stream`` (Triton launches) counted as GPU events;
3. in the temporal breakdown only (:func:`syncs_as_work`), GPU-side synchronizations
   (``cuda_sync``) on a stream other than -1 counted as GPU work;
4. collective kernels that are not NCCL's (symmetric memory, custom all-reduce) counted as
   computation (:func:`nccl_only_communication`).
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pandas as pd

from hta_lite.classify import COMMUNICATION, COMPUTATION, kernel_types
from hta_lite.kineto import OTHER_COLLECTIVE_KERNELS

_OTHER_COLLECTIVE = re.compile("|".join(p for p, _ in OTHER_COLLECTIVE_KERNELS))


def nccl_only_communication(trace):
    """A shallow copy of ``trace`` whose collective kernels that are not NCCL's are computation
    (defect 4)."""
    t = copy.copy(trace)
    gpu = trace.gpu
    other = (gpu["kernel_type"] == COMMUNICATION) & gpu["name"].astype(str).str.contains(
        _OTHER_COLLECTIVE
    )
    if other.any():
        t.gpu = gpu.assign(kernel_type=gpu["kernel_type"].where(~other, COMPUTATION))
    return t


def emulate_reference(trace):
    t = copy.copy(trace)
    gpu = nccl_only_communication(trace).gpu
    cpu_with_stream = trace.cpu[(trace.cpu["stream"] >= 0) & (trace.cpu["cat"] == "cpu_op")]
    if len(cpu_with_stream):
        extra = cpu_with_stream[["ts", "dur", "name", "cat", "stream", "correlation"]].assign(
            launch_row=-1,
            kernel_type=kernel_types(cpu_with_stream["name"]).astype(str),
            cat="kernel",  # counted as GPU work
        )
        gpu = pd.concat(
            [gpu.assign(kernel_type=gpu["kernel_type"].astype(str)), extra], ignore_index=True
        )
        gpu["kernel_type"] = gpu["kernel_type"].astype("category")
    fractional = (trace.gpu["ts"] % 1000 != 0).any() or (trace.cpu["ts"] % 1000 != 0).any()
    if not fractional:  # the reference rounds only when some ts in the file is fractional
        t.gpu = gpu
        return t
    t.gpu = _round_to_us(gpu)
    t.cpu = _round_to_us(trace.cpu)
    return t


def _round_to_us(table: pd.DataFrame) -> pd.DataFrame:
    ts = np.ceil(table["ts"].to_numpy() / 1000.0)
    end = np.floor((table["ts"].to_numpy() + table["dur"].to_numpy()) / 1000.0)
    return table.assign(
        ts=(ts * 1000).astype(np.int64), dur=np.maximum(end - ts, 0).astype(np.int64) * 1000
    )


def syncs_as_work(analysis):
    """A shallow copy of ``analysis`` whose GPU-side syncs on a stream count as GPU work
    (defect 3)."""
    out = copy.copy(analysis)
    out.traces = {}
    for rank, trace in analysis.traces.items():
        gpu = trace.gpu
        synced = (gpu["cat"] == "cuda_sync") & (gpu["stream"] != -1)
        out.traces[rank] = copy.copy(trace)
        out.traces[rank].gpu = gpu.assign(
            cat=gpu["cat"].astype(str).where(~synced, "kernel").astype("category")
        )
    return out
