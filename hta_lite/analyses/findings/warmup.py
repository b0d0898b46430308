"""Warm-up inside the profile: first launches that load their kernel's module.

A kernel's first launch loads its module where modules load lazily (`CUDA_MODULE_LOADING=LAZY`;
HIP the same): milliseconds to seconds inside that one call. A profile of the first
iterations holds them, and its steps are longer than the run's steady state. No step time of
the steady state is saved (:mod:`.launch_overhead` counts each call at most its rank's median,
so it does not claim this time either): the finding says the profile holds warm-up.

Found: a kernel launch call longer than ``LONG_NS`` and ``LONG_TIMES`` x its rank's median
launch call that is the first launch of its kernel (by name). Long launches that are not first
ones (a full launch queue) are not this.
"""

from __future__ import annotations

import numpy as np

from ...classify import short_name
from ...kineto import KERNEL_LAUNCH_NAMES
from ...units import fmt_pct, fmt_us
from .context import Context
from .finding import Finding

LONG_NS, LONG_TIMES = 1_000_000, 100


def find(ctx: Context) -> list[Finding]:
    found = {rank: _first_long_launches(trace) for rank, trace in ctx.traces.items()}
    found = {rank: rows for rank, rows in found.items() if len(rows[0])}
    if not found:
        return []
    for rank, (_, _, spans) in found.items():  # not host work of the steady state
        ctx.claim(rank, spans)
    found = {rank: (d, n) for rank, (d, n, _) in found.items()}
    durations = np.concatenate([d for d, _ in found.values()])
    longest_rank = max(found, key=lambda r: found[r][0].max())
    names = found[longest_rank][1]
    longest = names[int(np.argmax(found[longest_rank][0]))]
    profiled = ctx.replay.base * len(found) / max(len(ctx.traces), 1)
    share = 100 * durations.sum() / profiled if profiled > 0 else np.nan
    ranks = sorted(found)
    evidence = (
        f"{len(durations)} first launch call(s) of a kernel on rank(s)"
        f" {', '.join(map(str, ranks[:8]))}{' ...' if len(ranks) > 8 else ''} took"
        f" {fmt_us(durations.sum() / 1e3)} ({fmt_pct(share)} of the profiled time; the longest"
        f" {fmt_us(durations.max() / 1e3)}, of {short_name(longest)}): modules loaded inside the"
        " profile"
    )
    return [
        Finding(
            "warmup",
            "first kernel launches",
            evidence,
            "no step time: launch calls far longer than their rank's median that are their"
            " kernel's first launch",
            "profile after warm-up (torch.profiler.schedule(wait=1, warmup=1, active=...), or"
            " skip the first iterations): their steps are longer than the run's;"
            " CUDA_MODULE_LOADING=EAGER loads every module at start-up instead",
            rank=ranks[0] if len(ranks) == 1 else None,
        )
    ]


def _first_long_launches(trace) -> tuple[np.ndarray, list[str], list[tuple[int, int]]]:
    """(ns, kernel name, [start, end) ns) of the rank's long first launches (module docstring)."""
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
