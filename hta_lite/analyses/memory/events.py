"""The ``[memory]`` events of one rank as a typed table, each with the operator, annotation and
``nn.Module`` active on its thread when it happened.

Columns (:data:`MEMORY_COLUMNS`): ``ts`` (ns), ``device`` (``cuda:0``, ``cpu``),
``device_type`` / ``device_id`` (as written), ``bytes`` (signed: > 0 allocates, < 0 frees),
``addr``, ``total_allocated`` / ``total_reserved`` (bytes, the allocator's running totals as
written; ``<NA>`` when absent), ``pid``, ``tid``, ``op_row`` (``cpu`` row of the innermost
``cpu_op`` enclosing it, -1 none), ``operator`` (its name, ``""`` none), ``annotation``
(innermost ``user_annotation``), ``module`` (``nn.Module`` path), ``step`` (profiled
ProfilerStep, -1 outside, and in the last step when the loader left it out). Rows in trace
order (time, then file order); every event is kept, so allocations pair with frees even across
that step.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...kineto import (
    CPU_ANNOTATION_CATEGORY,
    CPU_OP_CATEGORY,
    DEVICE_TYPES,
    MEMORY_EVENT_NAME,
)
from ...load.links import iteration_of, nesting
from ...load.rank_trace import RankTrace
from ...rows import gather, nearest_ancestor
from ..operators.shapes import module_paths
from ..steps import profiled_steps

MEMORY_COLUMNS = [
    "ts", "device", "device_type", "device_id", "bytes", "addr", "total_allocated",
    "total_reserved", "pid", "tid", "op_row", "operator", "annotation", "module", "step",
]  # fmt: skip


def device_label(device_type: np.ndarray, device_id: np.ndarray) -> np.ndarray:
    """``cuda:0`` / ``cpu`` (``type<N>`` for an unknown type), made once per distinct device."""
    pairs, inverse = np.unique(
        np.stack([device_type, device_id], axis=1), axis=0, return_inverse=True
    )
    labels = []
    for t, i in pairs.tolist():
        name = DEVICE_TYPES.get(t, f"type{t}")
        labels.append(name if i < 0 else f"{name}:{i}")
    return (
        np.array(labels, dtype=object)[inverse.reshape(-1)] if len(pairs) else np.zeros(0, object)
    )


def memory_events(trace: RankTrace) -> pd.DataFrame:
    """The rank's ``[memory]`` events (module docstring)."""
    inst = trace.instants
    rows = np.flatnonzero(np.asarray(inst["name"] == MEMORY_EVENT_NAME)) if len(inst) else []
    mem = inst.iloc[rows]
    mem = mem.iloc[np.argsort(mem["ts"].to_numpy(), kind="stable")]
    ts = mem["ts"].to_numpy()
    device_type = mem["mem_device_type"].fillna(-1).to_numpy(np.int64)
    device_id = mem["mem_device_id"].fillna(-1).to_numpy(np.int64)
    op, annotation, module = _context(trace, ts, mem["pid"].to_numpy(), mem["tid"].to_numpy())
    cpu_names = trace.cpu["name"].astype(str).to_numpy() if len(trace.cpu) else np.array([])
    return pd.DataFrame(
        {
            "ts": ts,
            "device": device_label(device_type, device_id),
            "device_type": device_type,
            "device_id": device_id,
            "bytes": mem["mem_bytes"].fillna(0).to_numpy(np.int64),
            "addr": mem["mem_addr"].to_numpy(),
            "total_allocated": mem["mem_total_allocated"].array,
            "total_reserved": mem["mem_total_reserved"].array,
            "pid": mem["pid"].to_numpy(),
            "tid": mem["tid"].to_numpy(),
            "op_row": op,
            "operator": gather(cpu_names.astype(object), op, ""),
            "annotation": gather(cpu_names.astype(object), annotation, ""),
            "module": module,
            "step": iteration_of(ts, profiled_steps(trace)),
        },
        columns=MEMORY_COLUMNS,
    ).reset_index(drop=True)


def _innermost(cpu: pd.DataFrame, rows: np.ndarray, ts, pid, tid) -> np.ndarray:
    """Per instant, the ``cpu`` row among ``rows`` whose span on the instant's thread holds it,
    innermost first (-1 none). Nested among those events only: Python-function events, which
    often overlap without nesting, cannot hide an enclosing operator."""
    n, m = len(rows), len(ts)
    both = pd.DataFrame(
        {
            "ts": np.concatenate([cpu["ts"].to_numpy()[rows], ts]),
            "dur": np.concatenate([cpu["dur"].to_numpy()[rows], np.zeros(m, np.int64)]),
            "pid": np.concatenate([cpu["pid"].to_numpy()[rows], pid]),
            "tid": np.concatenate([cpu["tid"].to_numpy()[rows], tid]),
        }
    )
    _, parent = nesting(both)
    found = nearest_ancestor(parent, np.arange(n + m) < n, np.arange(n, n + m))
    return gather(rows, found, -1)


def _context(trace: RankTrace, ts, pid, tid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per instant: the ``cpu`` rows of the innermost enclosing ``cpu_op`` and
    ``user_annotation`` on its thread (-1 none), and its ``nn.Module`` path (``""`` none)."""
    cpu = trace.cpu
    if len(ts) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, object)
    cats = cpu["cat"].astype(str).to_numpy()
    op = _innermost(cpu, np.flatnonzero(cats == CPU_OP_CATEGORY), ts, pid, tid)
    annotation = _innermost(cpu, np.flatnonzero(cats == CPU_ANNOTATION_CATEGORY), ts, pid, tid)
    _, paths = module_paths(trace)
    modules = np.flatnonzero(np.not_equal(paths, None))
    module_row = _innermost(cpu, modules, ts, pid, tid)
    module = gather(np.where(np.equal(paths, None), "", paths).astype(object), module_row, "")
    return op, annotation, module
