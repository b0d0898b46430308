"""Kernel sequences a CUDA / HIP graph replay can be matched against (:mod:`.graph_replays`).

A :class:`KernelSequence` is a run of launch calls in the order the host issued them, each with
the name of the kernel it enqueued (None where the trace does not say) and so, through the op
tree, the operator that issued it:

- :func:`captures`: one per graph capture, the launches on the capturing thread between
  ``cudaStreamBeginCapture`` and ``cudaStreamEndCapture``. A captured launch runs nothing, so
  its kernel is named only by the runtime event's ``kernel`` arg, which ROCm writes and CUDA
  does not;
- :func:`eager`: the GPU events operators launched one by one (not through a graph), in launch
  order: an eager run of the same model issues the kernel sequence its graph replays.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ...kineto import (
    GPU_WORK_CATEGORIES,
    GRAPH_CAPTURE_BEGIN_NAMES,
    GRAPH_CAPTURE_END_NAMES,
    LAUNCH_NAMES,
)
from ...load.rank_trace import RankTrace
from ..common import one_of, text_values

CAPTURE, EAGER = "capture", "eager"
_FAR = np.iinfo(np.int64).max


@dataclass
class KernelSequence:
    """``launch``: ``trace.cpu`` rows of the launch calls, in issue order; ``names``: the kernel
    each enqueued (object array, None where not recorded); ``lo`` / ``hi`` (ns): the region the
    sequence was issued in (an event around a launch is part of the sequence only inside it)."""

    trace: RankTrace
    kind: str
    launch: np.ndarray
    names: np.ndarray
    lo: int
    hi: int

    @property
    def source(self) -> str:
        """How a table names the sequence: ``"capture in bs_32_rank0.json.gz"``."""
        return f"{self.kind} in {Path(self.trace.path).name}"

    @property
    def has_names(self) -> bool:
        return any(n is not None for n in self.names)

    def bounds(self, start: int, length: int) -> tuple[int, int]:
        """The times (ns) an event enclosing launches ``start .. start + length - 1`` must lie
        strictly between to belong to them alone: the launches just outside, or the region."""
        ts = self.trace.cpu["ts"].to_numpy()
        end = start + length
        lo = int(ts[self.launch[start - 1]]) if start > 0 else self.lo
        hi = int(ts[self.launch[end]]) if end < len(self.launch) else self.hi
        return lo, hi


def sequences(trace: RankTrace) -> list[KernelSequence]:
    """A trace's captures, then its eager sequence (when it has one)."""
    out = captures(trace)
    run = eager(trace)
    return out + [run] if len(run.launch) else out


def capture_calls(trace: RankTrace) -> list[tuple[int, int]]:
    """(row of each ``BeginCapture`` call, row of the next ``EndCapture`` call of its thread)."""
    cpu = trace.cpu
    if not len(cpu):
        return []
    begins = np.flatnonzero(one_of(cpu["name"], GRAPH_CAPTURE_BEGIN_NAMES))
    ends = np.flatnonzero(one_of(cpu["name"], GRAPH_CAPTURE_END_NAMES))
    if not len(begins) or not len(ends):
        return []

    def calls(rows):
        table = cpu.iloc[rows][["ts", "pid", "tid"]].astype("int64").assign(row=rows)
        return table.sort_values("ts", kind="stable")

    pairs = pd.merge_asof(calls(begins), calls(ends), on="ts", by=["pid", "tid"],
                          direction="forward", suffixes=("", "_end"))  # fmt: skip
    pairs = pairs.dropna(subset=["row_end"])
    return list(zip(pairs["row"].tolist(), pairs["row_end"].astype("int64").tolist()))


def captures(trace: RankTrace) -> list[KernelSequence]:
    """One sequence per capture (:func:`capture_calls`): the launches of its thread between its
    two calls."""
    pairs = capture_calls(trace)
    if not pairs:
        return []
    cpu = trace.cpu
    ts, pid, tid = (cpu[c].to_numpy() for c in ("ts", "pid", "tid"))
    launches = np.flatnonzero(one_of(cpu["name"], LAUNCH_NAMES))
    launches = launches[np.argsort(ts[launches], kind="stable")]
    out = []
    for begin, end in pairs:
        inside = launches[
            (ts[launches] >= ts[begin]) & (ts[launches] <= ts[end])
            & (pid[launches] == pid[begin]) & (tid[launches] == tid[begin])
        ]  # fmt: skip
        names = text_values(cpu["launched_kernel"], inside)
        names = np.where(np.equal(names, names), names, None)  # NaN (not recorded) -> None
        out.append(KernelSequence(trace, CAPTURE, inside, names, int(ts[begin]), int(ts[end])))
    return out


def eager(trace: RankTrace) -> KernelSequence:
    """The GPU work events launched one by one by an operator, by launch time."""
    cpu, gpu = trace.cpu, trace.gpu
    if not len(gpu) or not len(cpu):
        return KernelSequence(trace, EAGER, np.zeros(0, np.int64), np.zeros(0, object), 0, _FAR)
    launch = gpu["launch_row"].to_numpy()
    work = one_of(gpu["cat"], GPU_WORK_CATEGORIES) & (launch >= 0)
    launched = work & one_of(cpu["name"], LAUNCH_NAMES)[np.maximum(launch, 0)]
    launched &= cpu["op_row"].to_numpy()[np.maximum(launch, 0)] >= 0
    rows = np.flatnonzero(launched)
    rows = rows[np.argsort(cpu["ts"].to_numpy()[launch[rows]], kind="stable")]
    names = text_values(gpu["name"], rows)
    return KernelSequence(trace, EAGER, launch[rows], names, 0, _FAR)


def for_rank(traces: list[RankTrace], rank: int) -> list[RankTrace]:
    """The graph captures / eager traces given for one rank (``graph_capture=``): those of that
    rank, else all of them."""
    own = [t for t in traces if t.rank == rank]
    return own or traces
