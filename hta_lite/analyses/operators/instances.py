"""One row per operator call (``cpu_op`` event) of a rank: its host and device times, shapes,
module and modelled work.

Columns:

- ``rank``, ``row`` (its row in ``trace.cpu``), ``name``, ``iteration``, ``tid``, ``ts`` (ns),
  ``op_depth`` (enclosing operators), ``parent_row`` (the enclosing operator's row, -1),
  ``graph_launch_row``: for a call a CUDA-graph replay ran (copied from its capture or eager
  run, :mod:`.graph_replays`; its ``row`` is past the trace's), the graph launch's row; -1
  for a call the host ran.
- ``host_total(us)``: its duration; ``host_self(us)``: minus that of the events directly in it
  (the operators it calls, its runtime calls such as ``cudaLaunchKernel``), as PyTorch's
  "Self CPU"; 0, not negative, where they add up to more (a call stack out of order).
- ``kernels`` / ``kernels_total``: GPU events it launched itself / it and every operator it
  calls launched. ``device_self(us)``: the union of its own GPU events' intervals;
  ``device_self_sum(us)`` their sum (larger when they overlapped on several streams);
  ``device_total(us)`` / ``device_total_sum(us)``: the same over all GPU events under it.
- ``input_dims``, ``input_types``, ``concrete_inputs`` (JSON text), ``shapes_from``
  (``"own"``, ``"forward"`` for a backward operator described by its forward operator's inputs,
  ``""`` when none were recorded), ``forward_row`` (-1), ``module`` (path, ``""`` outside every
  ``nn.Module``).
- ``flops``, ``bytes`` (NaN when not modelled), ``precision``, ``kind`` (see :mod:`.flops`;
  ``"transfer"``, not modelled, for a call under which data crosses to or from the host or
  another device);
  ``counted``: what totals add up, each computation once, at the innermost modelled call
  that does it (``aten::addmm``, not the ``aten::linear`` around it; an ``aten::matmul``'s
  copy and ``aten::bmm`` each with its own time): see ``_counted``.

:func:`instance_columns` keeps the text columns as :class:`LazyText` (codes, and how to make the
text): the summaries read codes, the roofline and MFU the text of the few rows they use, and
:func:`as_table` makes the whole table.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from ...intervals import union_length_by_group
from ...load.health_items import record
from ...load.inputs import parse
from ...load.rank_trace import RankTrace
from ...rows import combine_codes, nearest_ancestor
from ..common import text_array, text_column, text_values, us
from .attribution import Attribution
from .flops import is_modelled, model
from .shapes import module_paths
from .work import INVALID_KIND, Inputs, Work

INPUT_COLUMNS = ("input_dims", "input_types", "concrete_inputs")
SHAPES_FROM = ("forward", "own", "")  # the values of ``shapes_from``, by code


@dataclass(frozen=True)
class LazyText:
    """A text column of the instance table, made only when read: ``take(rows)`` gives it at
    those rows (all when None), as :func:`.text_array` makes a column. ``source``: a categorical
    ``trace.cpu`` column read at rows ``at``, or a few values read at codes ``at``."""

    source: pd.Series | list | tuple
    at: np.ndarray

    def take(self, rows: np.ndarray | None = None):
        at = self.at if rows is None else self.at[rows]
        if isinstance(self.source, pd.Series):
            return text_array(self.source, at)
        return text_column(self.source, at)

    @property
    def codes(self) -> np.ndarray:
        """>= 0 where a value was recorded (-1: missing)."""
        return self.source.array.codes[self.at] if isinstance(self.source, pd.Series) else self.at


def as_table(columns: dict, rows: np.ndarray | None = None) -> pd.DataFrame:
    """The instance table of :func:`instance_columns`' columns (at ``rows``: all when None), its
    text made."""
    return pd.DataFrame(
        {
            k: v.take(rows) if isinstance(v, LazyText) else v if rows is None else v[rows]
            for k, v in columns.items()
        }
    )


def instance_columns(trace: RankTrace, attr: Attribution, problems: Counter) -> dict:
    """The operator calls of one rank as columns (see the module docstring), the text ones as
    :class:`LazyText` (the summaries, roofline and MFU read their codes, or their text at a few
    rows). Calls whose shapes cannot be are counted in ``problems`` (``shape_invalid``)."""
    cpu = trace.cpu
    ops = attr.ops
    n = len(cpu)
    dur = cpu["dur"].to_numpy()
    parent = attr.parent_op[ops]
    direct = cpu["parent_row"].to_numpy()  # host self time: minus every direct child's
    child_time = np.bincount(direct[direct >= 0], weights=dur[direct >= 0], minlength=n)
    self_kernels = attr.owner >= 0
    pair_k, pair_op = attr.pairs
    kernel_dur = attr.dur
    out = {
        "rank": np.full(len(ops), trace.rank, np.int64),
        "row": ops,
        "name": LazyText(cpu["name"], ops),
        "iteration": cpu["iteration"].to_numpy()[ops],
        "tid": cpu["tid"].to_numpy()[ops],
        "ts": cpu["ts"].to_numpy()[ops],
        "op_depth": attr.op_depth[ops],
        "parent_row": parent,
        "graph_launch_row": (
            cpu["graph_launch_row"].to_numpy()[ops]
            if "graph_launch_row" in cpu
            else np.full(len(ops), -1, np.int64)
        ),
        "host_total(us)": us(dur[ops]),
        # never negative: children that outlive their parent (a call stack out of order)
        "host_self(us)": us(np.maximum(dur[ops] - child_time[ops], 0)),
        "kernels": np.bincount(attr.owner[self_kernels], minlength=n)[ops],
        "kernels_total": np.bincount(pair_op, minlength=n)[ops],
        "device_self(us)": us(_union(attr.owner[self_kernels], attr, self_kernels, n)[ops]),
        "device_self_sum(us)": us(_sum(attr.owner[self_kernels], kernel_dur[self_kernels], n)[ops]),
        "device_total(us)": us(_union(pair_op, attr, pair_k, n)[ops]),
        "device_total_sum(us)": us(_sum(pair_op, kernel_dur[pair_k], n)[ops]),
    }
    out |= _inputs(trace, attr, ops)
    out |= _work(attr, out, problems)
    return out


def _sum(group: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(group, weights=values, minlength=n).astype(np.int64)


def _union(group: np.ndarray, attr: Attribution, select: np.ndarray, n: int) -> np.ndarray:
    groups, lengths = union_length_by_group(group, attr.ts[select], attr.end[select])
    out = np.zeros(n, np.int64)
    out[groups] = lengths
    return out


def _inputs(trace: RankTrace, attr: Attribution, ops: np.ndarray) -> dict:
    """The columns of the shapes (own, or the forward operator's for a linked backward one) and
    module paths of the operators at ``cpu`` rows ``ops``."""
    cpu = trace.cpu
    forward = cpu["forward_row"].to_numpy()[ops]
    described_by = np.where(forward >= 0, forward, ops)
    out = {column: LazyText(cpu[column], described_by) for column in INPUT_COLUMNS}
    out["shapes_from"] = LazyText(SHAPES_FROM, _shapes_from(trace, ops, forward))
    out["forward_row"] = forward
    module_of, paths = module_paths(trace)
    # outside every module (a backward operator, or an operator it calls): the module of the
    # forward operator of the nearest linked backward operator around it
    forward_of = np.full(len(cpu), -1, np.int64)
    forward_of[ops] = forward
    anchor = np.where(forward >= 0, ops, nearest_ancestor(attr.parent_op, forward_of >= 0, ops))
    module_row = module_of[ops]
    inherit = (module_row < 0) & (anchor >= 0)
    module_row[inherit] = module_of[forward_of[anchor[inherit]]]
    used, module_code = np.unique(module_row, return_inverse=True)
    out["module"] = LazyText([paths[r] if r >= 0 else "" for r in used], module_code.ravel())
    return out


def _shapes_from(trace: RankTrace, rows: np.ndarray, forward: np.ndarray) -> np.ndarray:
    """Each call's code in :data:`SHAPES_FROM`, from the trace (no text read)."""
    has_own = trace.cpu["input_dims"].cat.codes.to_numpy()[rows] >= 0
    return np.where(forward >= 0, 0, np.where(has_own, 1, 2))


def instance_keys(
    trace: RankTrace, inst: dict, columns: list[str]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Each call's group among the distinct values of its text ``columns`` (numbered in order of
    first appearance; a missing value counts as ``""``) and those values per column (object
    arrays, one entry per group); ``inst``: :func:`instance_columns`' columns. Found from the
    codes of the categorical ``trace.cpu`` columns the values come from: no string is hashed or
    copied per call."""
    rows, forward = inst["row"], inst["forward_row"]
    described_by = np.where(forward >= 0, forward, rows)
    where = {column: described_by if column in INPUT_COLUMNS else rows for column in columns}
    codes = []
    for column in columns:
        if column == "shapes_from":
            codes.append(_shapes_from(trace, rows, forward))
            continue
        values = trace.cpu[column].array
        own = values.codes[where[column]]
        empty = values.categories.get_loc("") if "" in values.categories else -1
        codes.append(np.where(own >= 0, own, empty) if empty >= 0 else own)
    group, first = combine_codes(codes)
    uniques = {}
    for column, column_codes in zip(columns, codes):
        if column == "shapes_from":
            uniques[column] = np.array(SHAPES_FROM, dtype=object)[column_codes[first]]
        else:
            values = text_values(trace.cpu[column], where[column][first])
            uniques[column] = np.where(pd.isna(values), "", values)
    return group, uniques


@lru_cache(maxsize=65536)
def _work_of(name: str, dims: str, types: str, concrete: str, source: str) -> Work | None:
    """The work of one distinct call, modelled once per process (every rank of a job repeats
    the same shapes; :class:`.Work` is immutable)."""
    if not is_modelled(name):  # the inputs of the others are not read
        return None
    shapes, kinds = parse(dims or None), parse(types or None)
    if (dims and shapes is None) or (types and kinds is None):  # recorded, but no JSON list
        return INVALID
    inputs = Inputs(shapes or [], kinds or [], parse(concrete or None))
    if not inputs.valid():
        return INVALID
    work = model(name, inputs, forward_inputs=source == "forward")
    if work is None:
        return None
    flops, nbytes = float(work.flops), float(work.bytes)  # never a Python int past int64
    if not (math.isfinite(flops) and math.isfinite(nbytes)) or flops < 0 or nbytes < 0:
        return INVALID
    return Work(flops, nbytes, work.precision, work.kind)


INVALID = Work(math.nan, math.nan, "", INVALID_KIND)


def _count_invalid(problems: Counter, works: list, names, codes: np.ndarray) -> None:
    """Calls whose shapes cannot be, counted per operator name."""
    counts = np.bincount(codes, minlength=len(works) + 1)
    per_name: dict[str, int] = {}
    for i, work in enumerate(works):
        if work is INVALID:
            per_name[str(names[i])] = per_name.get(str(names[i]), 0) + int(counts[i])
    for name, count in per_name.items():
        record(problems, "shape_invalid", count, name)


def _work(attr: Attribution, inst: dict, problems: Counter) -> dict:
    """The columns of the FLOPs / bytes per call (``inst``: the columns so far), each distinct
    (name, inputs) modelled once."""
    keys = ["name", *INPUT_COLUMNS, "shapes_from"]
    codes, uniques = instance_keys(attr.trace, inst, keys)
    works = [_work_of(*key) for key in zip(*uniques.values())]
    flops = np.array([w.flops if w else np.nan for w in works] + [np.nan])
    nbytes = np.array([w.bytes if w else np.nan for w in works] + [np.nan])
    # a call that moves data between host and device (or devices) runs at the link's speed,
    # which no roof here describes: not modelled
    pair_k, pair_op = attr.pairs
    crossing = np.zeros(len(attr.parent_op), bool)
    crossing[pair_op[attr.is_transfer[pair_k]]] = True
    rows = inst["row"]
    transfer = crossing[rows]
    out = {"flops": np.where(transfer, np.nan, flops[codes])}
    out["bytes"] = np.where(transfer, np.nan, nbytes[codes])
    described = np.where(transfer, len(works), codes)  # the last value: a transfer's
    out["precision"] = LazyText([w.precision if w else "" for w in works] + [""], described)
    out["kind"] = LazyText([w.kind if w else "" for w in works] + ["transfer"], described)
    _count_invalid(problems, works, uniques["name"], codes)
    out["counted"] = _counted(attr, rows, ~np.isnan(out["flops"]), inst)
    return out


def _counted(attr: Attribution, rows: np.ndarray, modelled: np.ndarray, inst: dict) -> np.ndarray:
    """Per call: whether totals count it. Each computation is counted once, at the innermost
    modelled call that does it: a modelled call that launches no GPU event itself and has
    modelled calls with GPU work under it (``aten::linear`` over ``aten::addmm``,
    ``aten::matmul`` over a copy and ``aten::bmm``, a backward node over its ``aten::mm``) is a
    *composite* and defers to them; of the others, a call inside another counted call is in
    that call's total (the ``fill_`` inside ``aten::max``)."""
    n = len(attr.parent_op)
    is_modelled = np.zeros(n, bool)
    is_modelled[rows] = modelled
    ran = is_modelled & _at(rows, inst["kernels_total"] > 0, n)
    covers = np.zeros(n, bool)  # has a modelled call with GPU work under it
    current = attr.parent_op[np.flatnonzero(ran)]
    while len(current):
        current = current[current >= 0]
        current = current[~covers[current]]  # each ancestor chain walked once
        covers[current] = True
        current = attr.parent_op[current]
    composite = is_modelled & covers & ~_at(rows, inst["kernels"] > 0, n)
    eligible = is_modelled & ~composite
    inside = nearest_ancestor(attr.parent_op, eligible, rows) >= 0
    return eligible[rows] & ~inside


def _at(rows: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, bool)
    out[rows] = values
    return out
