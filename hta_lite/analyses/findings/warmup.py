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
from ...intervals import merge
from ...units import fmt_pct, fmt_us
from ..one_time import first_long_launches, module_loads, startup_calls, time_per_step
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
    said, inside = [], []  # the evidence's parts; ns of each kind's calls inside the steps
    durations = np.concatenate([launches[r][0] for r in ranks])
    if len(durations):
        longest_rank = max((r for r in ranks if len(launches[r][0])),
                           key=lambda r: launches[r][0].max())  # fmt: skip
        names = launches[longest_rank][1]
        longest = names[int(np.argmax(launches[longest_rank][0]))]
        share = _share(ctx, {r: launches[r][2] for r in ranks}, durations.sum(), inside)
        said.append(
            f"{len(durations)} first launch call(s) of a kernel {listed} took"
            f" {fmt_us(durations.sum() / 1e3)} ({share}; the"
            f" longest {fmt_us(durations.max() / 1e3)}, of {short_name(longest)})"
        )
    loaded = np.concatenate([loads[r][0] for r in ranks])
    if len(loaded):
        where = "" if said else f" {listed}"
        said.append(
            f"{len(loaded)} module-load call(s){where} took {fmt_us(loaded.sum() / 1e3)}"
            f" ({_share(ctx, {r: loads[r][1] for r in ranks}, loaded.sum(), inside)})"
        )
    started = np.concatenate([startup[r][0] for r in ranks])
    if len(started):
        names = sorted({n for r in ranks for n in startup[r][2]})
        said.append(
            f"{len(started)} start-up call(s){'' if said else ' ' + listed}"
            f" ({', '.join(names[:4])}) took {fmt_us(started.sum() / 1e3)}"
            f" ({_share(ctx, {r: startup[r][1] for r in ranks}, started.sum(), inside)})"
        )
    label = ("first kernel launches" if len(durations) else
             "module loads" if len(loaded) else "start-up calls")  # fmt: skip
    outside = sum(inside) <= 0
    where = "warm-up outside the steps" if outside else "warm-up inside the profile"
    return [
        Finding(
            "warmup",
            label,
            "; ".join(said) + ": " + where,
            "no step time: launch calls far longer than their rank's median that are their"
            " kernel's first launch, the calls that load a compiled module, and start-up calls"
            " (MPI and NCCL initialization, the call that creates the device context)",
            OUTSIDE_ADVICE if outside else INSIDE_ADVICE,
            rank=ranks[0] if len(ranks) == 1 else None,
        )
    ]


#: where warm-up is in the steps, and where none of it is
INSIDE_ADVICE = (
    "profile after warm-up (torch.profiler.schedule(wait=1, warmup=1, active=...), or skip the"
    " first iterations; in Nsight Systems, a capture range such as"
    " --capture-range=cudaProfilerApi, or --step-range here): their steps are longer than the"
    " run's; CUDA_MODULE_LOADING=EAGER loads every module at start-up instead"
)
OUTSIDE_ADVICE = (
    "nothing to change for the steps, which hold none of it; a capture range"
    " (--capture-range=cudaProfilerApi) keeps start-up out of the capture"
)


def _share(ctx: Context, spans: dict[int, list], ns: float, inside: list[float]) -> str:
    """How much of the calls' ``ns`` (``spans``: ``{rank: [(start, end) ns]}``) is in the
    ranks' steps (appended to ``inside``), as a share of the profiled time (the job's time on
    each of those ranks)."""
    held = 0.0
    for rank, calls in spans.items():
        at = np.asarray(calls, np.int64).reshape(-1, 2)
        union = np.column_stack(merge(at[:, 0], at[:, 1]))  # calls of several threads may overlap
        held += sum(time_per_step({0: union}, ctx.step_bounds(rank)).values())
    inside.append(held)
    if held <= 0:
        return "outside the steps"
    profiled = ctx.replay.base * len(spans)
    share = f"{fmt_pct(100 * held / profiled if profiled > 0 else np.nan)} of the profiled time"
    return share if held >= 0.99 * ns else f"{fmt_us(held / 1e3)} of it in the steps, {share}"
