"""Steps of a capture without step ranges, from the GPU work that repeats in it.

A capture of a training loop often has no range per iteration (Megatron-LM's ``--profile``
pushes none to Nsight Systems; a Kineto trace recorded without ``prof.step()`` has no
ProfilerStep). Its iterations still launch the same GPU
work each time, and the host waits for the GPU once in each (a loss read back, an optimizer's
norm, a ``cudaStreamSynchronize``). The GPU work (kernels, copies, sets) in launch order, each by
name: a name launched ``c`` >= 2 times at positions that come every ``L`` >= 2 launches (to
:data:`TOLERANCE` of ``L``; the first period may run up to :data:`FIRST_LONGER` longer: it warms
up) marks ``c`` repetitions when each launches the same work (to :data:`MIN_SAME` by name; the
last one, which the capture may cut short or which may run into what follows the loop, only
where it is the only other one), together they hold :data:`MIN_COVER` of the capture's
GPU work, the host waits for the GPU in each (a ``cuda_sync`` event that is not a stream's
wait, a device-to-host copy, or a ``...Synchronize`` call), and the steps they give take
similar time (the longest at most :data:`MAX_RATIO` times the shortest: a loop's iterations
do; three calls of a test spread over start-up do not) and, at the median, at least
:data:`MIN_STEP_NS` (a loop that reads a result back per element — a kernel and an ``.item()``
each time, tens of µs — is a sync in a loop, not the program's iterations: where nothing coarser
repeats, the whole capture is one step, and the findings see every sync of the loop in it). Of
the names that qualify, the one with the most repetitions (the finest unit with a host wait: a
timestep, not two) and then the earliest is taken; a layer repeats too, but without a host wait
of its own, so a single forward pass stays one step.

Each step ends where the host resumes after the longest wait of its repetition (the end of
the iteration: a loss read back, an optimizer's sync) and starts where the step before it ended:
every step runs from one such resume to the next, a whole iteration, its host work included.
The first repetition is in no step: where its iteration began on the host is not known (the
host's work for it comes before its first launch, and follows start-up), so the steps are
numbered from 1, each after the repetition it follows. Work before the first step (start-up,
model initialization, the first repetition) and after the last (what follows the loop) is in no
step, and stays in the trace: no step is cut short, so none is left out as the profiler's last
one is.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..kineto import (
    BLOCKING_SYNC_NAMES,
    GPU_SYNC_CATEGORY,
    GPU_WORK_CATEGORIES,
    STREAM_WAIT_EVENT,
)

#: how far the periods after the first may differ from their median (share of it)
TOLERANCE = 0.1
#: how much longer than the others the first period may be (it may warm up)
FIRST_LONGER = 1.5
#: the share of a repetition's GPU work (by name) the others must launch too
MIN_SAME = 0.9
#: the share of the capture's GPU work the repetitions must hold together
MIN_COVER = 0.5
#: how many times the shortest step the longest may take
MAX_RATIO = 10
#: the shortest median step (ns): a training or inference iteration takes longer
MIN_STEP_NS = 200_000
#: the host's calls that wait for the GPU to finish (not those that may only enqueue)
HOST_WAIT_CALLS = tuple(name for name in BLOCKING_SYNC_NAMES if "Synchronize" in name)


def repeating_steps(cpu: pd.DataFrame, gpu: pd.DataFrame) -> tuple[str, np.ndarray] | None:
    """(the name that marks the repetitions, ``(n, 2)`` ns: each step's start and end on the
    host's clock, one fewer than the repetitions), or None where no GPU work repeats as the
    module docstring says."""
    launch_at, names = work_in_launch_order(cpu, gpu)
    if len(names) < 4:
        return None
    named, codes = np.unique(names.codes, return_inverse=True)  # -1, a missing name, is one too
    unique = np.append(np.asarray(names.categories.astype(str), dtype=object), "(no name)")[named]
    waits = _host_waits(cpu, gpu)
    counts = np.bincount(codes)
    by_name = np.argsort(codes, kind="stable")  # each name's positions, in order: one slice
    first = np.concatenate([[0], np.cumsum(counts)])
    for count in sorted(set(counts[counts >= 2].tolist()), reverse=True):
        found = []  # (first position, name, step bounds) of the names launched `count` times
        for code in np.flatnonzero(counts == count):
            starts = _periodic(by_name[first[code] : first[code + 1]], len(codes))
            if (
                starts is not None
                and _waits_in_each(launch_at, starts, waits)
                and _alike(codes, starts, len(unique))
            ):
                bounds = _bounds(launch_at, starts, waits)
                took = bounds[:, 1] - bounds[:, 0]
                alike = len(took) and took.max() <= MAX_RATIO * took.min()
                if alike and np.median(took) >= MIN_STEP_NS:
                    found.append((int(starts[0]), int(code), bounds))
        if found:
            _, code, bounds = min(found, key=lambda f: f[0])
            return str(unique[code]), bounds
    return None


def work_in_launch_order(cpu: pd.DataFrame, gpu: pd.DataFrame) -> tuple[np.ndarray, Any]:
    """Each GPU work event's launch time (its runtime call's start, else its own start) and
    name (a ``pd.Categorical``), in launch order."""
    work = np.asarray(gpu["cat"].isin(GPU_WORK_CATEGORIES))
    correlation, launch_at = gpu["correlation"].to_numpy()[work], gpu["ts"].to_numpy()[work]
    calls, first = np.unique(cpu["correlation"].to_numpy(), return_index=True)  # sorted
    if len(calls):
        at = np.searchsorted(calls, correlation).clip(max=len(calls) - 1)
        linked = (correlation >= 0) & (calls[at] == correlation)
        launch_at = np.where(linked, cpu["ts"].to_numpy()[first[at]], launch_at)
    order = np.argsort(launch_at, kind="stable")
    return launch_at.astype(np.int64)[order], pd.Categorical(gpu["name"])[work][order]


def _host_waits(cpu: pd.DataFrame, gpu: pd.DataFrame) -> pd.DataFrame:
    """``start``, ``end`` (ns) of each time the host waits for the GPU, in time order: the
    GPU-side synchronizations (not a stream's wait for an event), the device-to-host copies, and
    the host's synchronizing calls (where the capture holds no synchronization records)."""
    names = pd.Categorical(gpu["name"])  # each test once per name; code -1 (none): the last
    labels = pd.Index(names.categories.astype(str))
    read_back = np.append(labels.str.contains("DtoH", regex=False), False)[names.codes]
    not_a_wait = np.append(labels != STREAM_WAIT_EVENT, True)[names.codes]
    sync = (gpu["cat"] == GPU_SYNC_CATEGORY).to_numpy() & not_a_wait
    calls = cpu[np.asarray(cpu["name"].isin(HOST_WAIT_CALLS))]
    start = np.concatenate([gpu["ts"].to_numpy()[sync | read_back], calls["ts"].to_numpy()])
    dur = np.concatenate([gpu["dur"].to_numpy()[sync | read_back], calls["dur"].to_numpy()])
    table = pd.DataFrame({"start": start.astype(np.int64), "end": (start + dur).astype(np.int64)})
    return table.sort_values("start", kind="stable", ignore_index=True)


def _periodic(at: np.ndarray, n: int) -> np.ndarray | None:
    """The positions where each repetition starts, and where the last one ends (the capture's
    end, of ``n`` launches, where it cuts it short), of a name launched at positions ``at``;
    None where they do not come every ``L`` launches or hold too little (module docstring)."""
    period = np.diff(at)
    length = int(np.median(period[1:])) if len(period) > 1 else int(period[0])
    if length < 2 or np.any(np.abs(period[1:] - length) > TOLERANCE * length):
        return None
    if not (1 - TOLERANCE) * length <= period[0] <= FIRST_LONGER * length:
        return None
    starts = np.append(at, min(int(at[-1]) + length, n))
    return starts if starts[-1] - starts[0] >= MIN_COVER * n else None


def _alike(codes: np.ndarray, starts: np.ndarray, k: int) -> bool:
    """Whether the repetitions launch the same work: each holds :data:`MIN_SAME` of a whole
    one's (the last but one), by name; the last is checked only where it is the only other one
    (the capture may cut it short, or it may run into what follows the loop)."""
    rep = np.repeat(np.arange(len(starts) - 1), np.diff(starts))
    key = rep * k + codes[starts[0] : starts[-1]]
    pairs, counts = np.unique(key, return_counts=True)
    reference = np.bincount(codes[starts[-3] : starts[-2]], minlength=k)
    same = np.bincount(pairs // k, np.minimum(counts, reference[pairs % k]), len(starts) - 1)
    whole = np.full(len(same), starts[-2] - starts[-3], dtype=np.float64)
    whole[-1] = starts[-1] - starts[-2]
    checked = len(same) if len(same) == 2 else len(same) - 1
    return bool(np.all(same[:checked] >= MIN_SAME * whole[:checked]))


def _edges(launch_at: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The host times (ns) the repetitions span: each from its first launch to the next one's;
    the last to the next launch after it, or on to the capture's end."""
    after = launch_at[starts[-1]] if starts[-1] < len(launch_at) else np.iinfo(np.int64).max
    return np.append(launch_at[starts[:-1]], after)


def _waits_in_each(launch_at: np.ndarray, starts: np.ndarray, waits: pd.DataFrame) -> bool:
    """Whether the host waits for the GPU in every repetition (:func:`_edges`)."""
    edges = _edges(launch_at, starts)
    held = np.searchsorted(waits["start"].to_numpy(), edges)
    return bool(np.all(np.diff(held) > 0))


def _bounds(launch_at: np.ndarray, starts: np.ndarray, waits: pd.DataFrame) -> np.ndarray:
    """Each step's start and end (ns): from where the host resumes after one repetition's
    longest wait to where it resumes after the next one's (the first repetition has no step:
    module docstring)."""
    edges = _edges(launch_at, starts)
    begin = waits["start"].to_numpy()
    end, span = waits["end"].to_numpy(), (waits["end"] - waits["start"]).to_numpy()
    lo, hi = np.searchsorted(begin, edges[:-1]), np.searchsorted(begin, edges[1:])
    resumes = np.array([end[a + int(np.argmax(span[a:b]))] for a, b in zip(lo, hi)], np.int64)
    ends = np.maximum.accumulate(resumes)
    return np.column_stack([ends[:-1], ends[1:]]).astype(np.int64)
