"""The finishing step every reader's output goes through: one rank's tables as read ->
a linked :class:`~hta_lite.load.rank_trace.RankTrace`; a memory snapshot's tables -> the tables
:class:`hta_lite.MemorySnapshot` reads (:func:`finish_snapshot`).

Both first check the reader's tables against the contract (:mod:`hta_lite.load.contract`:
every column there, none else, each of its dtype): a reader that breaks it is an error naming
the file, never tables an analysis misreads. A trace reader (:mod:`hta_lite.load.readers`)
gives a :class:`ReadRank` per rank its file holds: the tables before linking, the file's
metadata and what it counted. :func:`finish` then, the same for every format:

- finds the steps (the reader's ``steps`` table when it gives one, else the ``ProfilerStep#``
  ranges of the CPU table, else a repeating range or the repeating GPU work:
  :mod:`.steps_from_ranges`);
- keeps the profiled iterations (the step window, as the reference does; where the steps are
  ranges and the last ended before the capture did, everything);
- links rows: each CPU row's iteration, depth, parent and enclosing operator, and a backward
  operator's forward one; each GPU row's launching call and iteration;
- names each kernel's type.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..classify import kernel_types
from ..errors import SelectionError, SnapshotError, TraceError, TraceFormatError
from ..intervals import overlapping_by_group, sorted_by_group
from ..kineto import (
    CPU_OP_CATEGORY,
    DEPENDENT_LAUNCH_NAMES,
    GPU_WORK_CATEGORIES,
    GRAPH_LAUNCH_NAMES,
    LAUNCH_NAMES,
    RECORD_WINDOW_END,
    RUNTIME_CATEGORIES,
    STEP_PREFIX,
)
from . import contract, steps_from_ranges
from .forward_links import forward_rows
from .health_items import note
from .links import (
    first_row_by_key,
    gather,
    iteration_of,
    lookup,
    nearest_ancestor,
    nesting,
    profiler_steps,
)


@dataclass(frozen=True)
class StepRule:
    """What a step is: ``step_range``, the name of the range that marks one (its occurrences in
    time order are the steps; None: the reader's steps, else ``ProfilerStep#N``), and whether
    the last of several is kept (``include_last``; the profiler usually cuts it short)."""

    include_last: bool = False
    step_range: str | None = None

    @classmethod
    def of(cls, rule: StepRule | bool) -> StepRule:
        """A rule, from a rule or the ``include_last_profiler_step`` flag alone."""
        return rule if isinstance(rule, StepRule) else cls(include_last=bool(rule))

    @property
    def key(self) -> str:
        """The rule as the cache's key spells it."""
        last = str(self.include_last)
        return last if self.step_range is None else f"{last}:step_range={self.step_range!r}"


@dataclass
class ReadRank:
    """One rank as a reader gives it, before linking.

    Attributes:
        tables: ``{name: DataFrame}`` of the contract's tables (``gpu``, ``cpu``,
            ``gpu_annotations``, ``instants``, ``flows``, ``counters``, ``meta_events``,
            ``kernel_counters``; ``steps`` optional: found from ``ProfilerStep#`` when absent).
        metadata: the file's top-level fields (Kineto's header: ``distributedInfo``,
            ``deviceProperties``, ...), ``{}`` where the format has none.
        events_read: events read, by phase / category.
        problems: health counts by code (:mod:`hta_lite.load.health_items`).
        rank: the rank the file says this is (None: not said; the loader then takes the file
            name's, else assigns one).
        source_format: the format read (``kineto``, ``kineto (fused)``, ...).
    """

    tables: dict[str, pd.DataFrame]
    metadata: dict[str, Any]
    events_read: dict[str, int]
    problems: Counter = field(default_factory=Counter)
    rank: int | None = None
    source_format: str = "kineto"


def finish(read: ReadRank, path: str | Path, include_last_profiler_step: StepRule | bool = False):
    """The linked trace of one rank read from ``path`` (``include_last_profiler_step``: the
    :class:`StepRule`, or whether to keep the last step)."""
    from .rank_trace import RankTrace

    rule = StepRule.of(include_last_profiler_step)
    tables, health = read.tables, read.problems
    checked(tables, path, TraceFormatError, "reader")
    cpu, gpu = tables["cpu"], tables["gpu"]
    steps = tables.get("steps")
    ranges = rule.step_range is not None  # the steps are ranges the program opened and closed
    if ranges:
        steps = _named_steps(cpu, rule.step_range, path)
        note(health, "steps_named", 1, rule.step_range)
    elif steps is None:
        _cut_steps_at_window_end(cpu, tables["instants"], health)
        try:
            steps = _in_number_order(profiler_steps(cpu), health)
        except TraceFormatError as exc:
            raise TraceFormatError(path, exc.problem) from None
        if steps.empty:  # a capture has one step where nothing repeats; a Kineto trace none
            found = steps_from_ranges.steps(cpu, gpu, health, read.source_format == "nsys")
            steps = steps if found is None else found
            ranges = found is not None and found["name"].iloc[0] not in (
                contract.REPEATS,
                contract.WHOLE_CAPTURE,
            )  # a found range, not the loop's repetitions or the capture
    note(health, "profiler_step_empty", int((steps["dur"] <= 0).sum()))
    annotations = tables["gpu_annotations"]
    if not (ranges and steps_from_ranges.last_is_whole(cpu, steps)):
        cpu, gpu, annotations = _apply_step_window(
            cpu, gpu, annotations, steps, rule.include_last, health
        )
    _link(cpu, gpu, steps, health)
    cpu["forward_row"] = forward_rows(cpu, tables["flows"])
    gpu["kernel_type"] = kernel_types(gpu["name"])
    annotations["iteration"] = iteration_of(annotations["ts"].to_numpy(), steps)
    return RankTrace(
        rank=-1 if read.rank is None else read.rank,
        path=str(path),
        gpu=gpu,
        cpu=cpu,
        gpu_annotations=annotations,
        steps=steps,
        instants=tables["instants"],
        flows=tables["flows"],
        counters=tables["counters"],
        meta_events=tables["meta_events"],
        kernel_counters=tables["kernel_counters"],
        metadata=read.metadata,
        events_read=dict(read.events_read),
        health=dict(health),
        source_format=read.source_format,
    )


def _cut_steps_at_window_end(cpu: pd.DataFrame, instants: pd.DataFrame, health: Counter) -> None:
    """A ProfilerStep cannot end after the profiler's record window did (Kineto's
    ``Record Window End`` instant): one that does is cut there, and counted
    (``profiler_step_past_window``). HTA's triton sample has a 13.3 s step in a 1.8 ms window:
    every "% of the step" read it as 13.3 s."""
    if instants.empty or not len(cpu):
        return
    marks = instants["ts"].to_numpy()[np.asarray(instants["name"] == RECORD_WINDOW_END, bool)]
    if not len(marks):
        return
    limit = int(marks.max())
    names = cpu["name"].astype("category")
    is_step = np.r_[np.asarray(names.cat.categories.str.startswith(STEP_PREFIX), bool), False]
    ts, dur = cpu["ts"].to_numpy(), cpu["dur"].to_numpy()
    past = is_step[names.cat.codes.to_numpy()] & (ts <= limit) & (ts + dur > limit)
    if past.any():
        cpu.loc[past, "dur"] = limit - ts[past]
        note(health, "profiler_step_past_window", int(past.sum()))


def _in_number_order(steps: pd.DataFrame, health: Counter) -> pd.DataFrame:
    """The ProfilerSteps (by start) whose numbers rise with their starts: the most steps that
    do (a longest increasing run of numbers); a step out of that order cannot be (the profiler
    numbers its steps as they begin: a damaged ``ts``, e.g. 0, puts a step before all others)
    and is dropped, its events outside every step (``profiler_step_out_of_order``)."""
    numbers = steps["step"].tolist()
    tails, tail_at, before = [], [], [-1] * len(numbers)  # patience sorting, O(n log n)
    for i, number in enumerate(numbers):
        k = bisect.bisect_left(tails, number)
        before[i] = tail_at[k - 1] if k else -1
        tails[k:k + 1], tail_at[k:k + 1] = [number], [i]  # fmt: skip
    if len(tails) == len(numbers):
        return steps
    keep, i = [], tail_at[-1]
    while i >= 0:
        keep.append(i)
        i = before[i]
    note(health, "profiler_step_out_of_order", len(numbers) - len(keep))
    return steps.iloc[keep[::-1]].reset_index(drop=True)


def finish_snapshot(read, path: str | Path):
    """A memory snapshot's tables (``SnapshotTables`` of :mod:`.readers.snapshot`) checked
    against the contract's :data:`~hta_lite.load.contract.SNAPSHOT_TABLES`."""
    tables = {name: getattr(read, name) for name in contract.SNAPSHOT_TABLES}
    checked(tables, path, SnapshotError, "finish")
    return read


def checked(tables: dict[str, pd.DataFrame], path, error: type[TraceError], stage: str) -> None:
    """Raise ``error`` naming the file where a table breaks the contract's columns or dtypes
    (a reader's defect: the analyses would misread the table). Names and dtypes only: the
    values are checked by the tests on every reader (tests/test_contract.py)."""
    broken = [p for name, df in tables.items() for p in contract.problems(name, df, stage, False)]
    if broken:
        raise error(path, "the reader's tables break the table contract: " + "; ".join(broken))


def _named_steps(cpu: pd.DataFrame, name: str, path: str | Path) -> pd.DataFrame:
    """The steps a user named: the CPU ranges called ``name``, in time order, numbered from 0;
    none is a :class:`SelectionError` naming the file."""
    rows = cpu[np.asarray(cpu["name"] == name)].sort_values("ts", kind="stable")
    if rows.empty:
        raise SelectionError(path, f"no range named {name!r} (the step range asked for)")
    return pd.DataFrame({
        "step": np.arange(len(rows), dtype=np.int64), "ts": rows["ts"].to_numpy(),
        "dur": rows["dur"].to_numpy(), "name": pd.array([name] * len(rows), dtype="str"),
    })  # fmt: skip


def _runtime_rows(cpu: pd.DataFrame) -> np.ndarray:
    corr = cpu["correlation"].to_numpy()
    return np.flatnonzero((corr != -1) & np.asarray(cpu["cat"].isin(RUNTIME_CATEGORIES)))


def _clip_overruns(cpu: pd.DataFrame, gpu: pd.DataFrame, launch: np.ndarray, health) -> None:
    """GPU events that start before an earlier one on their stream ended: expected where the
    launch allows it (a programmatic dependent launch; a graph's parallel branches, which the
    trace puts on the stream the graph was launched on), else a trace problem. A stream runs one
    thing at a time, so there the earlier event's end is wrong (a completion timestamp written
    late: ROCm's deferred ones, clock skew between records) and is clipped to the first later
    start on its stream, as Perfetto draws it; the µs removed are in health. Events starting at
    the same time cannot be ordered: none is clipped to another."""
    on_streams = np.flatnonzero(np.asarray(gpu["cat"].isin(GPU_WORK_CATEGORIES)))
    stream = gpu["stream"].to_numpy()[on_streams]
    ts = gpu["ts"].to_numpy()[on_streams]
    end = ts + gpu["dur"].to_numpy()[on_streams]
    overlapping = np.flatnonzero(overlapping_by_group(stream, ts, end))
    rows = launch[on_streams[overlapping]]
    launched_by = np.full(len(rows), "", dtype=object)  # "": no launch in the trace
    launched_by[rows >= 0] = cpu["name"].iloc[rows[rows >= 0]].astype(str).to_numpy()
    dependent = pd.Series(launched_by).isin(DEPENDENT_LAUNCH_NAMES).to_numpy()
    in_graph = pd.Series(launched_by).isin(GRAPH_LAUNCH_NAMES).to_numpy()
    note(health, "gpu_overlap_dependent_launch", int(dependent.sum()))
    note(health, "gpu_overlap_in_graph", int(in_graph.sum()))
    problem = np.zeros(len(on_streams), bool)
    problem[overlapping[~dependent & ~in_graph]] = True
    if not problem.any():
        return
    order, first = sorted_by_group(stream, ts)
    # the first later start on each event's stream: the next run of one (stream, ts) in order
    run = first | np.r_[True, ts[order][1:] != ts[order][:-1]]
    starts = np.flatnonzero(run)
    later_run = np.cumsum(run)  # per position: the index in ``starts`` of the next run
    has_later = later_run < len(starts)
    position = np.flatnonzero(has_later)
    position = position[~first[starts[later_run[position]]]]  # the next run on the same stream
    nxt = order[starts[later_run[position]]]
    any_problem = np.maximum.reduceat(problem[order], starts)[later_run[position]]
    clip = any_problem & (end[order[position]] > ts[nxt])
    earlier, later = order[position[clip]], nxt[clip]
    removed = int((end[earlier] - ts[later]).sum())
    dur = gpu["dur"].to_numpy().copy()
    dur[on_streams[earlier]] = ts[later] - ts[earlier]
    gpu["dur"] = dur
    note(health, "gpu_overlap_on_stream", int(problem.sum()), f"{removed / 1e3:,.1f}")


def _launch_rows(cpu: pd.DataFrame, gpu: pd.DataFrame, health: Counter | None) -> np.ndarray:
    runtime = _runtime_rows(cpu)
    corr = cpu["correlation"].to_numpy()
    index, rows = first_row_by_key(corr, runtime)
    if health is not None and len(runtime) > len(rows):
        note(health, "shared_correlation", len(runtime) - len(rows))
    return lookup(index, rows, gpu["correlation"].to_numpy())


def _apply_step_window(cpu, gpu, annotations, steps, include_last, health):
    """Keep the profiled iterations, as the reference does.

    With two or more ProfilerSteps, CPU events that start at or after the last
    step's start (its end with ``include_last_profiler_step``) are dropped, and so
    are GPU events whose launching call was dropped or is absent from the trace.
    With fewer than two steps nothing is dropped, nor with steps found from the repeating GPU
    work (:mod:`.readers.kernel_steps`: their bounds are host waits, so the last is whole).
    """
    if len(steps) < 2 or (steps["name"].astype(str) == contract.REPEATS).all():
        return cpu, gpu, annotations
    last = steps.iloc[-1]
    cutoff = int(last["ts"] + last["dur"]) if include_last else int(last["ts"])
    ts = cpu["ts"].to_numpy()
    keep_cpu = ts <= cutoff if include_last else ts < cutoff
    launch = _launch_rows(cpu, gpu, None)
    keep_gpu = gather(keep_cpu, launch, False)
    keep_anno = annotations["ts"].to_numpy() < cutoff + (1 if include_last else 0)
    note(health, "gpu_outside_steps", int((launch < 0).sum()))
    where = "after" if include_last else "in"
    note(health, f"cpu_{where}_last_step", int((~keep_cpu).sum()))
    note(health, f"gpu_{where}_last_step", int(((launch >= 0) & ~keep_gpu).sum()))
    note(health, "annotations_outside_steps", int((~keep_anno).sum()))
    return (
        cpu[keep_cpu].reset_index(drop=True),
        gpu[keep_gpu].reset_index(drop=True),
        annotations[keep_anno].reset_index(drop=True),
    )


def _link(cpu: pd.DataFrame, gpu: pd.DataFrame, steps: pd.DataFrame, health: Counter) -> None:
    cpu["iteration"] = iteration_of(cpu["ts"].to_numpy(), steps)
    depth, parent = nesting(cpu)
    cpu["depth"] = depth
    cpu["parent_row"] = parent
    launch = _launch_rows(cpu, gpu, health)
    gpu["launch_row"] = launch
    gpu["iteration"] = gather(cpu["iteration"].to_numpy(), launch, -1)
    no_launch = int((launch < 0).sum())
    note(health, "gpu_without_launch", no_launch)
    launched_at = gather(cpu["ts"].to_numpy(), launch, np.iinfo(np.int64).min)
    early = int((gpu["ts"].to_numpy() < launched_at).sum())
    note(health, "gpu_before_launch", early)
    launches = np.asarray(cpu["name"].isin(LAUNCH_NAMES)) & (cpu["correlation"].to_numpy() != -1)
    orphan_launches = launches & ~np.isin(
        cpu["correlation"].to_numpy(), gpu["correlation"].to_numpy()
    )
    note(health, "launch_without_gpu", int(orphan_launches.sum()))
    _clip_overruns(cpu, gpu, launch, health)
    runtime = _runtime_rows(cpu)
    op_row = np.full(len(cpu), -1, np.int64)
    op_row[runtime] = nearest_ancestor(parent, np.asarray(cpu["cat"] == CPU_OP_CATEGORY), runtime)
    cpu["op_row"] = op_row  # a whole column: setting rows with .loc would copy the table
