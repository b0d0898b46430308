"""Steps of a trace without ProfilerSteps (any format: the finishing step asks), from its ranges.

The outermost range (NVTX, ``record_function``) that repeats with a similar length, one
occurrence after another (a training loop's ``step`` or ``iteration`` range): among the ranges
no other range on their thread encloses, the name seen at least twice whose occurrences do not
overlap in time (ranges of concurrent requests on several threads are not steps), in which
at least :data:`MIN_COVER` of the GPU work is launched (a data loader's fetches follow one
another too, but launch nothing), whose durations after the first vary by at most
:data:`MAX_SPREAD` (standard deviation over mean), whose median is at least
:data:`~.steps_from_gpu_work.MIN_STEP_NS` (a range around each element of a loop is no
iteration) and which together cover at least :data:`MIN_COVER` of the capture, the one covering
the most time;
else the repetitions of the GPU work, each with a host wait (Megatron-LM's ``--profile`` pushes
no range of its own: :mod:`.steps_from_gpu_work`), named :data:`REPEATS`; else, where the
format has no step of its own (an Nsight Systems capture), the whole capture as one step. Which
one was taken is said in health (``steps_from_range:<name>``, ``steps_from_kernels:<kernel>``,
``steps_whole_capture``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from .contract import REPEATS, WHOLE_CAPTURE
from .health_items import note
from .steps_from_gpu_work import MIN_STEP_NS, repeating_steps, work_in_launch_order

#: how much a repeating range's durations may vary to be taken for steps (std / mean)
MAX_SPREAD = 1.0
#: how much of the capture (first to last event) the steps must cover together, and how much
#: of its GPU work must be launched in them
MIN_COVER = 0.5


def steps(
    cpu: pd.DataFrame, gpu: pd.DataFrame, problems: Counter, whole_capture: bool
) -> pd.DataFrame | None:
    """The ``steps`` table of a rank without ProfilerSteps (columns of the contract); where
    nothing repeats, the whole capture as one step (``whole_capture``), else None."""
    if not len(gpu):
        return None  # a CPU-only trace keeps no steps, as the reference
    ranges = cpu[np.asarray(cpu["cat"] == "user_annotation")]
    starts = [t["ts"].to_numpy() for t in (cpu, gpu) if len(t)]
    ends = [(t["ts"] + t["dur"]).to_numpy() for t in (cpu, gpu) if len(t)]
    first, last = int(min(s.min() for s in starts)), int(max(e.max() for e in ends))
    chosen = _repeating_outermost(ranges, MIN_COVER * (last - first), cpu, gpu)
    if chosen is not None:
        name, picked = chosen
        note(problems, "steps_from_range", 1, name)
        return pd.DataFrame({"step": np.arange(len(picked), dtype=np.int64),
                             "ts": picked["ts"].to_numpy(), "dur": picked["dur"].to_numpy(),
                             "name": pd.array([name] * len(picked), dtype="str")})  # fmt: skip
    repeats = repeating_steps(cpu, gpu)
    if repeats is not None:
        kernel, bounds = repeats
        note(problems, "steps_from_kernels", 1, kernel if len(kernel) <= 60 else kernel[:59] + "…")
        # numbered after the repetition each follows: the first repetition, 0, has no step
        return pd.DataFrame({"step": np.arange(1, len(bounds) + 1, dtype=np.int64),
                             "ts": bounds[:, 0],
                             "dur": bounds[:, 1] - bounds[:, 0],
                             "name": pd.array([REPEATS] * len(bounds), dtype="str")})  # fmt: skip
    if not whole_capture:
        return None
    note(problems, "steps_whole_capture", 1)
    return pd.DataFrame({"step": np.zeros(1, np.int64), "ts": [first], "dur": [last - first],
                         "name": pd.array([WHOLE_CAPTURE], dtype="str")})  # fmt: skip


def last_is_whole(cpu: pd.DataFrame, steps: pd.DataFrame) -> bool:
    """Whether the last of ``steps`` (ranges) ended before the capture did: a CPU event starts
    after its end, so the program closed it. A ``record_function`` range still open when the
    profiler stops is closed there, cut short like the profiler's last step; an Nsight Systems
    capture leaves such a range out (``nvtx_range_without_end``)."""
    if len(steps) < 2 or not len(cpu):
        return False
    return int(cpu["ts"].max()) > int(steps["ts"].iloc[-1] + steps["dur"].iloc[-1])


def _outermost(ranges: pd.DataFrame) -> pd.DataFrame:
    """The ranges no earlier range of their thread still holds at their start (ranges that only
    touch, one ending where the next starts, are both outermost)."""
    order = ranges.sort_values(["pid", "tid", "ts", "dur"], ascending=[True, True, True, False],
                               kind="stable")  # fmt: skip
    end = order["ts"] + order["dur"]
    thread = order.groupby(["pid", "tid"], sort=False).ngroup()
    held = end.groupby(thread.to_numpy()).cummax().groupby(thread.to_numpy()).shift(1)
    return order[(held.isna() | (order["ts"] >= held)).to_numpy()]


def _repeating_outermost(
    ranges: pd.DataFrame, cover: float, cpu: pd.DataFrame, gpu: pd.DataFrame
) -> tuple[str, pd.DataFrame] | None:
    """(name, its ranges in time order) of the module docstring's range, ``cover`` ns at least
    together, of the ``ranges`` of a rank whose tables are ``cpu`` and ``gpu``."""
    if ranges.empty:
        return None
    outer = _outermost(ranges).assign(name=lambda t: t["name"].astype(object))
    candidates = []  # (total ns, name, its ranges): the name sort's last first among equals
    for name, group in reversed(list(outer.groupby("name", sort=True))):
        if len(group) < 2:
            continue
        group = group.sort_values("ts", kind="stable")
        ends = (group["ts"] + group["dur"]).to_numpy()
        if np.any(group["ts"].to_numpy()[1:] < np.maximum.accumulate(ends)[:-1]):
            continue  # concurrent (requests on several threads), not one after another
        rest = group["dur"].to_numpy()[1:].astype(float)  # the first one warms up
        spread = rest.std() / rest.mean() if len(rest) > 1 and rest.mean() > 0 else 0.0
        total = int(group["dur"].sum())
        long_enough = np.median(group["dur"].to_numpy()) >= MIN_STEP_NS  # not one element's
        if spread <= MAX_SPREAD and total >= cover and long_enough:
            candidates.append((total, str(name), group))
    if not candidates:
        return None
    launches = work_in_launch_order(cpu, gpu)[0]  # sorted; read only where a range may be a step
    for _, name, group in sorted(candidates, key=lambda c: -c[0]):
        starts, ends = group["ts"].to_numpy(), (group["ts"] + group["dur"]).to_numpy()
        held = np.searchsorted(launches, ends) - np.searchsorted(launches, starts)
        if held.sum() >= MIN_COVER * len(launches):  # not a data loader's fetches: no launch
            return name, group
    return None
