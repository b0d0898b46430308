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

Module loads are warm-up too: the calls that load a compiled module, and a kernel's first launch
that loads its module lazily (:func:`first_long_launches`); and so is start-up
(:func:`startup_calls`: MPI and NCCL initialization, the call that creates the device context).
:func:`warmup_delay`: the warm-up by which a rank's next work started late, which the straggler
report takes off its arrivals.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..intervals import merge, overlap, subtract, total
from ..kineto import (
    BLOCKING_SYNC_NAMES,
    COMPILE_PATTERNS,
    COMPILED_REGION,
    GRAPH_INSTANTIATE_NAMES,
    KERNEL_LAUNCH_NAMES,
    MODULE_LOAD_NAMES,
    RUNTIME_CATEGORIES,
    STARTUP_NAMES,
)
from ..load.rank_trace import RankTrace
from .common import GpuIntervals, one_of, ranges_named
from .operators.graph_sources import capture_calls
from .steps import profiled_steps

LONG_NS, LONG_TIMES = 1_000_000, 100

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


def module_loads(trace: RankTrace) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """(ns, [start, end) ns) of the rank's module-load calls."""
    cpu = trace.cpu
    if not len(cpu):
        return np.zeros(0), []
    rows = np.flatnonzero(one_of(cpu["name"], MODULE_LOAD_NAMES))
    ts, dur = cpu["ts"].to_numpy()[rows], cpu["dur"].to_numpy()[rows]
    return dur.astype(np.float64), list(zip(ts.tolist(), (ts + dur).tolist()))


def startup_calls(trace: RankTrace) -> tuple[np.ndarray, list[tuple[int, int]], list[str]]:
    """(ns, [start, end) ns, name) of the rank's start-up calls longer than ``LONG_NS``:
    ``kineto.STARTUP_NAMES`` (MPI_Init, NCCL communicator creation), and the call that creates
    the device context — the earliest runtime call (not a launch, not a wait) that is the first
    of its name and ``LONG_TIMES`` x its name's median call (pipit_cloverleaf's first
    cudaMalloc: 234 ms, the other 75 about 0.2 ms)."""
    cpu = trace.cpu
    if not len(cpu):
        return np.zeros(0), [], []
    durations = cpu["dur"].to_numpy()
    rows = np.flatnonzero(one_of(cpu["name"], STARTUP_NAMES) & (durations > LONG_NS))
    calls = one_of(cpu["cat"], RUNTIME_CATEGORIES) & (durations > LONG_NS)
    calls &= ~one_of(cpu["name"], KERNEL_LAUNCH_NAMES + BLOCKING_SYNC_NAMES)
    calls &= cpu["name"].notna().to_numpy()  # a call without a name has no median of its name
    if calls.any():
        runtime = cpu[one_of(cpu["cat"], RUNTIME_CATEGORIES)]
        median = runtime.groupby("name", observed=True)["dur"].median()
        first = runtime.sort_values("ts", kind="stable").drop_duplicates("name").index
        long = [row for row in np.flatnonzero(calls) if cpu.index[row] in first
                and durations[row] > LONG_TIMES * median[cpu["name"].iat[row]]]  # fmt: skip
        if long:
            rows = np.union1d(rows, [min(long, key=lambda r: cpu["ts"].iat[r])])
    ts, dur = cpu["ts"].to_numpy()[rows], durations[rows]
    names = cpu["name"].astype(str).to_numpy()[rows].tolist()
    return dur.astype(np.float64), list(zip(ts.tolist(), (ts + dur).tolist())), names


def first_long_launches(trace: RankTrace) -> tuple[np.ndarray, list[str], list[tuple[int, int]]]:
    """(ns, kernel name, [start, end) ns) of the rank's long first launches: kernel launch calls
    longer than ``LONG_NS`` and ``LONG_TIMES`` x its rank's median launch call that are the
    first launch of their kernel (by name), where a lazily loaded module loads. Long launches
    that are not first ones (a full launch queue) are not this."""
    cpu, gpu = trace.cpu, trace.gpu
    if not len(cpu) or not len(gpu):
        return np.zeros(0), [], []
    launch = cpu["name"].isin(KERNEL_LAUNCH_NAMES).to_numpy()
    durations = cpu["dur"].to_numpy()
    if not launch.any():
        return np.zeros(0), [], []
    long = launch & (durations > LONG_NS) & (durations > LONG_TIMES * np.median(durations[launch]))
    if not long.any():
        return np.zeros(0), [], []
    kernels = gpu[gpu["launch_row"].to_numpy() >= 0].sort_values("ts", kind="stable")
    first = kernels[~kernels["name"].duplicated()]
    rows = first["launch_row"].to_numpy()
    rows = rows[long[rows]]
    ts = cpu["ts"].to_numpy()[rows]
    spans = list(zip(ts.tolist(), (ts + durations[rows]).tolist()))
    names = first["name"].astype(str).to_numpy()[long[first["launch_row"].to_numpy()]].tolist()
    return durations[rows], names, spans


def warmup_delay(trace: RankTrace) -> np.ndarray:
    """``(n, 2)`` sorted, disjoint [start, end) ns: the rank's warm-up work — its compiles and
    captures in the steps that do them for the first time (:func:`warmup_steps` of its profiled
    steps), its long first launches, its module loads and its start-up calls — while its GPU
    runs nothing (all of it on a rank without GPU work): the time by which what it did next
    started later than it will once warm. A rank's arrival at a collective less this delay
    since its previous call is its arrival once warm
    (:func:`hta_lite.analyses.stragglers.discount_warmup`)."""
    spans = [np.zeros((0, 2), np.int64)]
    one_time = [r for r in (compile_ranges(trace), capture_ranges(trace)) if r]
    if one_time:
        steps = profiled_steps(trace)
        bounds = pd.DataFrame({"step": steps["step"], "start": steps["ts"],
                               "end": steps["ts"] + steps["dur"]})  # fmt: skip
        first = bounds[bounds["step"].isin(list(warmup_steps(trace, bounds)))]
        for ranges in one_time:
            for merged in ranges.values():
                for start, end in first[["start", "end"]].itertuples(index=False):
                    spans.append(np.clip(merged, start, end))
    spans += [np.array(s, np.int64).reshape(-1, 2)
              for s in (first_long_launches(trace)[2], module_loads(trace)[1],
                        startup_calls(trace)[1])]  # fmt: skip
    work = np.concatenate(spans)
    if not len(work):
        return work
    gpu = GpuIntervals.of(trace)
    lo, hi = subtract((work[:, 0], work[:, 1]), (gpu.ts, gpu.end))
    return np.stack([lo, hi], axis=1)


def compiler(trace: RankTrace) -> str:
    """The compiler whose ranges hold the most time on the rank."""
    names = trace.cpu["name"].astype("category")
    ns = np.bincount(names.cat.codes.to_numpy() + 1, trace.cpu["dur"].to_numpy(np.float64),
                     minlength=len(names.cat.categories) + 1)[1:]  # fmt: skip
    per = {compiler: sum(float(ns[i]) for i, n in enumerate(names.cat.categories)
                         if re.search(pattern, str(n)))
           for compiler, pattern in COMPILE_PATTERNS.items()}  # fmt: skip
    return max(per, key=per.get)


def idle_while_one_time(trace: RankTrace) -> tuple[float, str]:
    """(ns during which the rank's GPU runs nothing, between its first and last work, while a
    host thread compiles or captures a graph; what it does: ``compiles (torch.compile)``,
    ``captures a CUDA graph``, or both joined by "or"), ``(0.0, "")`` where it does neither."""
    compiles, captures = compile_ranges(trace), capture_ranges(trace)
    gpu = GpuIntervals.of(trace)
    if not (compiles or captures) or not len(gpu.ts):
        return 0.0, ""
    spans = np.concatenate([*compiles.values(), *captures.values()])
    lo = np.clip(spans[:, 0], gpu.ts.min(), gpu.end.max())
    hi = np.clip(spans[:, 1], gpu.ts.min(), gpu.end.max())
    idle = total(lo, hi) - overlap((lo, hi), (gpu.ts, gpu.end))
    doing = ([f"compiles ({compiler(trace)})"] if compiles else []) + (
        ["captures a CUDA graph"] if captures else []
    )
    return float(max(idle, 0)), " or ".join(doing)
