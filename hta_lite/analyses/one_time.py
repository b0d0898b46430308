"""One-time work inside a profile: JIT compilation (torch.compile, nvFuser, Triton's JIT) and
CUDA / HIP graph capture, and the steps that do it for the first time (warm-up) or again (a
recompile, a recapture).

A rank's *ranges* are ``{tid: (n, 2) merged, sorted [start, end) ns}``: the host ranges named as
compilation (``kineto.COMPILE_PATTERNS``), or each capture (a ``BeginCapture`` call to the next
``EndCapture`` call of its thread) with the calls that instantiate a graph. A step does the work
*again* when it compiles and runs a torch.compile'd frame whose compile number is not 0
(``Torch-Compiled Region: 0/3``: a guard failed, the frame was compiled again), or, for work
that names no number (other compilers, captures), when it is not the rank's first step that
does it. Any other step that does it does it for the first time: warm-up.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..intervals import merge, overlap, total
from ..kineto import COMPILE_PATTERNS, COMPILED_REGION, GRAPH_INSTANTIATE_NAMES
from ..load.rank_trace import RankTrace
from .common import GpuIntervals, one_of, ranges_named
from .operators.graph_sources import capture_calls

COMPILING = re.compile("|".join(f"(?:{p})" for p in COMPILE_PATTERNS.values()))


def compile_ranges(trace: RankTrace) -> dict[int, np.ndarray]:
    """The rank's compile ranges (module docstring)."""
    return ranges_named(trace, COMPILING)


def capture_ranges(trace: RankTrace) -> dict[int, np.ndarray]:
    """The rank's graph captures, each from its ``BeginCapture`` call's start to its
    ``EndCapture`` call's end, and the calls that instantiate a captured graph."""
    pairs = np.array(capture_calls(trace), np.int64).reshape(-1, 2)
    made = np.flatnonzero(one_of(trace.cpu["name"], GRAPH_INSTANTIATE_NAMES)) if len(
        trace.cpu) else np.zeros(0, np.int64)  # fmt: skip
    if not len(pairs) and not len(made):
        return {}
    ts, dur = trace.cpu["ts"].to_numpy(), trace.cpu["dur"].to_numpy()
    start = np.r_[ts[pairs[:, 0]], ts[made]]
    end = np.r_[ts[pairs[:, 1]] + dur[pairs[:, 1]], ts[made] + dur[made]]
    tids = trace.cpu["tid"].to_numpy()[np.r_[pairs[:, 0], made]]
    out = {}
    for tid in np.unique(tids).tolist():
        lo, hi = merge(start[tids == tid], end[tids == tid])
        out[int(tid)] = np.stack([lo, hi], axis=1)
    return out


def compiled_regions(trace: RankTrace) -> np.ndarray:
    """``(n, 3)`` ts, frame, compile number of the rank's torch.compile'd frame runs."""
    cpu = trace.cpu
    names = cpu["name"].astype("category")
    rows = []
    for code, name in enumerate(names.cat.categories):
        match = COMPILED_REGION.match(str(name))
        if match:
            for ts in cpu["ts"].to_numpy()[names.cat.codes.to_numpy() == code].tolist():
                rows.append((ts, int(match.group(1)), int(match.group(2))))
    return np.array(rows, np.int64).reshape(-1, 3)


def time_per_step(ranges: dict[int, np.ndarray], bounds: pd.DataFrame) -> dict[int, float]:
    """``{step: ns}`` of the ranges within each step of ``bounds`` (``step``, ``start``, ``end``
    ns): their union per thread, summed over threads (0.0 for a step without any)."""
    out = {}
    for step, start, end in bounds[["step", "start", "end"]].itertuples(index=False):
        out[int(step)] = sum(float((np.clip(m[:, 1], start, end) - np.clip(m[:, 0], start, end))
                                   .sum()) for m in ranges.values())  # fmt: skip
    return out


def again(trace: RankTrace, doing, bounds: pd.DataFrame, numbered: bool) -> set[int]:
    """The steps of ``doing`` (steps that do the work) that do it again (module docstring);
    ``numbered``: the work is compilation, whose torch.compile numbers say it where written."""
    regions = compiled_regions(trace) if numbered else np.zeros((0, 3), np.int64)
    out, first = set(), True
    for step, start, end in bounds.sort_values("start")[["step", "start", "end"]].itertuples(
        index=False
    ):
        if int(step) not in doing:
            continue
        ids = regions[(regions[:, 0] >= start) & (regions[:, 0] < end), 2]
        if (ids > 0).any() or (not len(regions) and not first):
            out.add(int(step))
        first = False
    return out


def warmup_steps(trace: RankTrace, bounds: pd.DataFrame) -> set[int]:
    """The steps of ``bounds`` that compile or capture for the first time."""
    out = set()
    for ranges, numbered in ((compile_ranges(trace), True), (capture_ranges(trace), False)):
        if ranges:
            doing = {step for step, ns in time_per_step(ranges, bounds).items() if ns > 0}
            out |= doing - again(trace, doing, bounds, numbered)
    return out


def compiler(trace: RankTrace) -> str:
    """The compiler whose ranges hold the most time on the rank."""
    names = trace.cpu["name"].astype("category")
    ns = np.bincount(names.cat.codes.to_numpy() + 1, trace.cpu["dur"].to_numpy(np.float64),
                     minlength=len(names.cat.categories) + 1)[1:]  # fmt: skip
    per = {compiler: sum(float(ns[i]) for i, n in enumerate(names.cat.categories)
                         if re.search(pattern, str(n)))
           for compiler, pattern in COMPILE_PATTERNS.items()}  # fmt: skip
    return max(per, key=per.get)


def idle_while_compiling(trace: RankTrace) -> tuple[float, str]:
    """(ns during which the rank's GPU runs nothing, between its first and last work, while a
    host thread is in a compile range; the compiler), ``(0.0, "")`` where it never compiles."""
    ranges = compile_ranges(trace)
    gpu = GpuIntervals.of(trace)
    if not ranges or not len(gpu.ts):
        return 0.0, ""
    spans = np.concatenate(list(ranges.values()))
    lo = np.clip(spans[:, 0], gpu.ts.min(), gpu.end.max())
    hi = np.clip(spans[:, 1], gpu.ts.min(), gpu.end.max())
    idle = total(lo, hi) - overlap((lo, hi), (gpu.ts, gpu.end))
    return float(max(idle, 0)), compiler(trace)
