"""Warm-up inside the profile: first launches that load their kernel's module, the calls that
load a compiled module, and start-up calls (MPI and NCCL initialization, the call that creates the
device context: an Nsight Systems export of a whole run holds them).

A kernel's first launch loads its module where modules load lazily (`CUDA_MODULE_LOADING=LAZY`;
HIP the same): milliseconds to seconds inside that one call. A JIT (NVRTC, Triton, nvFuser)
loads what it compiled with a driver call (``kineto.MODULE_LOAD_NAMES``), once per module. A
profile of the first iterations holds them, and its steps are longer than the run's steady
state. No step time of the steady state is saved (:mod:`.launch_overhead` counts each call at
most its rank's median, so it does not claim this time either): the finding says the profile
holds warm-up, and the time is claimed, so that no general kind (host_bound) prices it.

Found: :func:`..one_time.first_long_launches`, :func:`..one_time.module_loads` and
:func:`..one_time.startup_calls`.
"""

from __future__ import annotations

import numpy as np

from ...classify import short_name
from ...units import fmt_pct, fmt_us
from ..one_time import first_long_launches, module_loads, startup_calls
from .context import Context
from .finding import Finding


def find(ctx: Context) -> list[Finding]:
    launches = {rank: first_long_launches(trace) for rank, trace in ctx.traces.items()}
    loads = {rank: module_loads(trace) for rank, trace in ctx.traces.items()}
    startup = {rank: startup_calls(trace) for rank, trace in ctx.traces.items()}
    ranks = sorted(r for r in ctx.traces
                   if len(launches[r][0]) or len(loads[r][0]) or len(startup[r][0]))  # fmt: skip
    if not ranks:
        return []
    for rank in ranks:  # not host work of the steady state
        ctx.claim(rank, launches[rank][2] + loads[rank][1] + startup[rank][1])
    listed = f"on rank(s) {', '.join(map(str, ranks[:8]))}{' ...' if len(ranks) > 8 else ''}"
    said = []
    durations = np.concatenate([launches[r][0] for r in ranks])
    if len(durations):
        longest_rank = max((r for r in ranks if len(launches[r][0])),
                           key=lambda r: launches[r][0].max())  # fmt: skip
        names = launches[longest_rank][1]
        longest = names[int(np.argmax(launches[longest_rank][0]))]
        said.append(
            f"{len(durations)} first launch call(s) of a kernel {listed} took"
            f" {fmt_us(durations.sum() / 1e3)} ({_share(ctx, durations.sum(), ranks)}; the"
            f" longest {fmt_us(durations.max() / 1e3)}, of {short_name(longest)})"
        )
    loaded = np.concatenate([loads[r][0] for r in ranks])
    if len(loaded):
        where = "" if said else f" {listed}"
        said.append(
            f"{len(loaded)} module-load call(s){where} took {fmt_us(loaded.sum() / 1e3)}"
            f" ({_share(ctx, loaded.sum(), ranks)})"
        )
    started = np.concatenate([startup[r][0] for r in ranks])
    if len(started):
        names = sorted({n for r in ranks for n in startup[r][2]})
        said.append(
            f"{len(started)} start-up call(s){'' if said else ' ' + listed}"
            f" ({', '.join(names[:4])}) took {fmt_us(started.sum() / 1e3)}"
            f" ({_share(ctx, started.sum(), ranks)})"
        )
    label = ("first kernel launches" if len(durations) else
             "module loads" if len(loaded) else "start-up calls")  # fmt: skip
    return [
        Finding(
            "warmup",
            label,
            "; ".join(said) + ": warm-up inside the profile",
            "no step time: launch calls far longer than their rank's median that are their"
            " kernel's first launch, the calls that load a compiled module, and start-up calls"
            " (MPI and NCCL initialization, the call that creates the device context)",
            "profile after warm-up (torch.profiler.schedule(wait=1, warmup=1, active=...), or"
            " skip the first iterations; in Nsight Systems, a capture range such as"
            " --capture-range=cudaProfilerApi, or --step-range here): their steps are longer"
            " than the run's; CUDA_MODULE_LOADING=EAGER loads every module at start-up instead",
            rank=ranks[0] if len(ranks) == 1 else None,
        )
    ]


def _share(ctx: Context, ns: float, ranks: list[int]) -> str:
    """``ns`` as a share of the profiled time of ``ranks``."""
    profiled = ctx.replay.base * len(ranks)  # the job's time on each of those ranks
    return f"{fmt_pct(100 * ns / profiled if profiled > 0 else np.nan)} of the profiled time"
