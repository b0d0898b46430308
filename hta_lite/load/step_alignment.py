"""Step numbers that name the same iteration on every rank, where the steps were found.

ProfilerSteps are numbered by the program (``prof.step()``): step N is one iteration on every
rank. Found steps (the ranges named by ``step_range``, a repeating range, the repeating GPU
work: :mod:`.steps_from_ranges`) are numbered from the start of each rank's capture, so a rank
whose capture holds one more iteration at its start numbers every step one higher. The
cross-rank analyses match collectives and steps by number, and would compare iteration N of one
rank with N + 1 of another: a whole step of lateness no rank had.

Where every rank's steps were found the same way, each rank's steps are renumbered after those
of the rank with the most steps (the reference): by the shift that gives each step the number of
the reference's step that starts nearest to it, within :data:`NEAR` of the reference's median
step, for at least :data:`AGREE` of the steps (``steps_renumbered:<shift>`` in health). Where no
shift fits (the ranks' steps are not the same iterations, or their clocks disagree), nothing is
renumbered and health warns (``steps_not_aligned``). Numbers stay at 0 or more: where a shift
would make one negative, every rank's steps move up alike. Clocks apart by more than three
quarters of a step cannot be told from another iteration; nor can pipeline stages, each of which
runs an iteration about a step after the stage before it (the gloo pipeline pair of
tests/data): where a rank sends or receives point to point, the steps keep the numbers of each
capture, the same iteration where every rank started its capture at the same iteration (as
Megatron-LM's ``--profile-step-start`` does), and health says so (``steps_numbered_per_capture``,
information, not a problem).

ProfilerSteps are never moved. Where a rank's ProfilerStep N starts with another step of the rank
with the most steps (its program called ``prof.step()`` once more or less, or its clock is apart
by most of a step), the health table warns (:func:`program_numbers_apart`:
``profiler_steps_apart``), pipeline stages again excepted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import pandas as pd

from ..collective_names import collective_kind
from .health_items import note
from .rank_trace import RankTrace

#: how near (a share of the reference's median step) a step must start to a reference step
NEAR = 0.25
#: the share of a rank's steps (of those in the reference's time span) that must agree
AGREE = 0.75
#: health codes of found steps (the reference's numbering is the program's otherwise)
FOUND = ("steps_named", "steps_from_range", "steps_from_kernels")
#: the tables whose ``iteration`` column is a step number
NUMBERED = ("cpu", "gpu", "gpu_annotations")


def aligned(traces: dict[int, RankTrace]) -> dict[int, RankTrace]:
    """``traces`` with the steps of each rank renumbered as the module docstring says (the
    same traces where there is nothing to align)."""
    health = {rank: trace.health for rank, trace in traces.items()}
    moves = renumbering(
        health, lambda rank: traces[rank].steps, lambda rank: point_to_point(traces[rank].cpu)
    )
    return {rank: renumbered(trace, *moves[rank]) if rank in moves else trace
            for rank, trace in traces.items()}  # fmt: skip


def renumbering(
    health: dict[int, dict[str, int]],
    steps: Callable[[int], pd.DataFrame],
    sends: Callable[[int], bool],
) -> dict[int, tuple[int, dict[str, int]]]:
    """``{rank: (what to add to its step numbers, its health counters after)}`` of the ranks
    whose numbers move or which are warned about, from each rank's ``health`` counters,
    ``steps(rank)`` (its steps table, read only where every rank's steps were found alike) and
    ``sends(rank)`` (whether it sends or receives point to point: read only where a rank's
    steps start apart from the reference's)."""
    sources = {rank: found_source(counters) for rank, counters in health.items()}
    if len(health) < 2 or None in sources.values() or len(set(sources.values())) > 1:
        return {}  # ProfilerSteps (or none): the program's numbers, never moved
    tables = {rank: steps(rank) for rank in health}
    reference = _reference(tables)
    if reference is None:
        return {}
    shifts = {rank: 0 if rank == reference else shift(tables[rank], tables[reference])
              for rank in tables}  # fmt: skip
    if any(by != 0 for by in shifts.values()) and any(sends(rank) for rank in health):
        moves = {}  # pipeline stages: a step apart in time, the same iteration (module docstring)
        for rank, counters in health.items():
            after = Counter(counters)
            note(after, "steps_numbered_per_capture", 1)
            moves[rank] = (0, dict(after))
        return moves
    lift = max(0, -min(int(tables[r]["step"].min()) + (s or 0) for r, s in shifts.items()))
    moves = {}
    for rank, by in shifts.items():
        after = Counter(health[rank])
        if by is None:
            note(after, "steps_not_aligned", 1, str(reference))
        elif by + lift:
            note(after, "steps_renumbered", 1, f"{by + lift:+d}")
        if after != Counter(health[rank]):
            moves[rank] = (0 if by is None else by + lift, dict(after))
    return moves


def program_numbers_apart(
    tables: dict[int, pd.DataFrame], sends: Callable[[int], bool]
) -> dict[int, str]:
    """``{rank: "rank R's step N+k"}`` of the ranks whose ProfilerStep N (``tables``: each
    rank's steps) starts with another step of the rank R with the most steps: their programs
    numbered their steps apart (a ``prof.step()`` more or less), or their clocks are apart by
    most of a step. None where a rank ``sends`` point to point (pipeline stages start their
    iterations a step apart). Said by the health table (``profiler_steps_apart``), never
    renumbered: the numbers are the program's."""
    tables = {rank: table for rank, table in tables.items() if len(table)}
    reference = _reference(tables) if len(tables) > 1 else None
    if reference is None:
        return {}
    shifts = {rank: shift(table, tables[reference]) for rank, table in tables.items()}
    apart = {rank: by for rank, by in shifts.items() if by}
    if not apart or any(sends(rank) for rank in tables):
        return {}
    return {rank: f"rank {reference}'s step N{by:+d}" for rank, by in apart.items()}


def _reference(tables: dict[int, pd.DataFrame]) -> int | None:
    """The rank with the most steps (the lowest of those), None where it has fewer than two."""
    reference = max(tables, key=lambda rank: (len(tables[rank]), -rank))
    return reference if len(tables[reference]) >= 2 else None


def point_to_point(cpu: pd.DataFrame) -> bool:
    """Whether the rank sends or receives point to point (``c10d::send``, ``nccl:recv``,
    ``ncclSend``, ...: a pipeline stage), from the names of its CPU rows."""
    names = cpu["name"].astype("category").cat.categories
    return any(collective_kind(str(name)) in ("send", "recv") for name in names)


def found_source(health: dict[str, int]) -> str | None:
    """How a rank's steps were found: ``steps_named:<name>``, ``steps_from_range:<name>``,
    ``steps_from_kernels`` (whichever kernel marks them); None where they are the program's
    ProfilerSteps, the whole capture, or none."""
    found = [key for key in health if key.partition(":")[0] in FOUND]
    if not found:
        return None
    return found[0] if not found[0].startswith("steps_from_kernels") else "steps_from_kernels"


def shift(mine: pd.DataFrame, reference: pd.DataFrame) -> int | None:
    """What to add to the numbers of the steps ``mine`` (``step``, ``ts``, ``dur``) so that
    each is the number of the ``reference`` step starting nearest to it; None where no shift
    fits (see the module docstring)."""
    ref_ts, ref_step = reference["ts"].to_numpy(), reference["step"].to_numpy()
    near = NEAR * float(np.median(reference["dur"].to_numpy()))
    ts, step = mine["ts"].to_numpy(), mine["step"].to_numpy()
    within = (ts >= ref_ts[0] - near) & (ts <= ref_ts[-1] + near)
    if not within.any():
        return None
    ts, step = ts[within], step[within]
    right = np.clip(np.searchsorted(ref_ts, ts), 1, len(ref_ts) - 1)
    nearest = np.where(ts - ref_ts[right - 1] <= ref_ts[right] - ts, right - 1, right)
    close = np.abs(ref_ts[nearest] - ts) <= near
    values, counts = np.unique((ref_step[nearest] - step)[close], return_counts=True)
    if not len(values) or counts.max() < AGREE * len(ts):
        return None
    return int(values[counts.argmax()])


def renumbered(trace: RankTrace, by: int, health: dict[str, int]) -> RankTrace:
    """``trace`` with its step numbers (``steps.step``, the ``iteration`` columns) moved up by
    ``by`` and ``health`` for its counters; its tables are built when first read."""

    def build(name: str) -> pd.DataFrame:
        table = getattr(trace, name)
        if name == "steps" or (name in NUMBERED and "iteration" in table.columns):
            return moved(table, "step" if name == "steps" else "iteration", by)
        return table

    return RankTrace.deferred(build, **{**trace._fields(), "health": health})


def moved(table: pd.DataFrame, column: str, by: int) -> pd.DataFrame:
    """``table`` with the step numbers of ``column`` moved up by ``by`` (-1, outside every
    step, stays); the same table where ``by`` is 0."""
    if not by or column not in table.columns:
        return table
    numbers = table[column].to_numpy()
    return table.assign(**{column: np.where(numbers >= 0, numbers + by, numbers)})
