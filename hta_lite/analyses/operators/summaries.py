"""Operator time summed by name, by (name, shapes), by call stack, and by ``nn.Module``.

Each summary is built per rank (:func:`rank_summary`, small: one row per group) and the ranks'
rows are then added (:func:`combine`), so it runs where each rank was loaded (batch, Dask).

Columns of the operator summaries (groups sorted by ``device_self_sum(us)``):
``calls``; ``host_self(us)`` / ``host_total(us)`` (sums over the calls); ``kernels``;
``device_self_sum(us)`` (the GPU events the group's calls launched themselves, each counted once)
and ``device_self(us)`` (their union per rank, added over ranks); ``device_total_sum(us)`` /
``device_total(us)`` (the GPU events under the group's calls, each counted once per group);
``device_self_pctg`` (of all GPU work of the ranks) and ``cumulative_pctg``. Two rows end the
table so that ``device_self_sum(us)`` adds up to all GPU work: ``[graph replay]`` (events of
``cudaGraphLaunch`` / ``hipGraphLaunch``) and ``[no operator]``.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...errors import SelectionError
from ...intervals import union_length_by_group
from ...kineto import STEP_PREFIX
from ...rows import combine_codes
from ..common import sorted_unique, starts_with, us
from .attribution import UNOWNED_LABELS, Attribution
from .instances import instance_keys

GROUPINGS = {"name": ["name"], "shape": ["name", "input_dims", "input_types"]}
SUMMED = ("calls", "host_self(us)", "host_total(us)", "kernels", "device_self_sum(us)",
          "device_self(us)", "device_total_sum(us)", "device_total(us)")  # fmt: skip


def group_of(attr: Attribution, inst: dict, by: str, stack_depth: int):
    """Each instance's group (numbered in order of first appearance) and the key columns of
    each group (``{name: object array}``, one value per group)."""
    if by in GROUPINGS:
        return instance_keys(attr.trace, inst, GROUPINGS[by])
    if by == "stack":
        return _stacks(attr, inst["row"], stack_depth)
    raise SelectionError(None, f"by must be one of {[*GROUPINGS, 'stack', 'module']}, not {by!r}")


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # "<built-in method argmax of ... at 0x7f1a...>"


def _stacks(attr: Attribution, rows: np.ndarray, depth: int) -> tuple[np.ndarray, dict]:
    """``outer > ... > op``: the operator and the names of up to ``depth - 1`` CPU events around
    it (operators, Python frames, annotations; not ``ProfilerStep#N``). The groups are found
    from the name codes of each level; the text is made once per group."""
    cpu = attr.trace.cpu
    categories = cpu["name"].cat.categories
    text, same = pd.factorize(
        pd.Index([_ADDRESS.sub("", str(c)) for c in categories], dtype=object)
    )  # names equal once their addresses are gone: one code
    names = np.append(np.asarray(same, dtype=object), "")
    code_of_row = np.append(text, len(same))[cpu["name"].cat.codes.to_numpy()]
    parent = cpu["parent_row"].to_numpy()
    is_step = starts_with(cpu["name"], STEP_PREFIX)
    levels = [code_of_row[rows]]
    current = rows
    for _ in range(max(depth, 1) - 1):
        current = np.where(current >= 0, parent[np.maximum(current, 0)], -1)
        current = np.where((current >= 0) & is_step[np.maximum(current, 0)], -1, current)
        levels.append(np.where(current >= 0, code_of_row[np.maximum(current, 0)], -1))
    codes, first = combine_codes(levels)
    stack = names[levels[0][first]]
    for level in levels[1:]:
        outer = level[first]
        has = outer >= 0
        stack[has] = names[outer[has]] + " > " + stack[has]
    merged, texts = pd.factorize(stack)  # names holding " > " can give two groups one text
    return merged[codes], {"stack": np.asarray(texts, dtype=object)}


def rank_summary(attr: Attribution, inst: dict, by: str = "name", stack_depth: int = 3):
    """One rank's groups with the summed columns (no percentages), plus the unowned rows
    (``inst``: the rank's instance columns, :func:`.instances.instance_columns`)."""
    codes, keys = group_of(attr, inst, by, stack_depth)
    key_names = list(keys)
    n_groups = len(keys[key_names[0]])
    ops_group = np.full(len(attr.parent_op), -1, np.int64)
    ops_group[inst["row"]] = codes
    owned = attr.owner >= 0
    self_group = ops_group[attr.owner[owned]]
    pair_k, pair_op = attr.pairs
    pair_group = ops_group[pair_op]
    # a kernel under two calls of one group (nested: aten::to in aten::to) counts once
    key = sorted_unique(pair_k.astype(np.int64) * (n_groups + 1) + pair_group)
    uk, ug = key // (n_groups + 1), key % (n_groups + 1)
    dur = attr.dur
    sums = {
        "calls": np.bincount(codes, minlength=n_groups),
        **{
            column: np.bincount(codes, weights=inst[column], minlength=n_groups)
            for column in ("host_self(us)", "host_total(us)")
        },
        "kernels": np.bincount(self_group, minlength=n_groups),
        "device_self_sum(us)": us(np.bincount(self_group, dur[owned], minlength=n_groups)),
        "device_self(us)": us(_union(self_group, attr.ts[owned], attr.end[owned], n_groups)),
        "device_total_sum(us)": us(np.bincount(ug, dur[uk], minlength=n_groups)),
        "device_total(us)": us(_union(ug, attr.ts[uk], attr.end[uk], n_groups)),
    }
    for label, times in _unowned(attr):  # appended as rows of their own
        keys = {k: np.append(v, label if k == key_names[0] else "") for k, v in keys.items()}
        sums = {k: np.append(v, times[k]) for k, v in sums.items()}
    return pd.DataFrame(keys | sums)


def _union(group, ts, end, n) -> np.ndarray:
    groups, lengths = union_length_by_group(group, ts, end)
    out = np.zeros(n, np.int64)
    out[groups] = lengths
    return out


def _unowned(attr: Attribution) -> list[tuple[str, dict]]:
    """The ``[graph replay]`` / ``[no operator]`` rows: label and summed columns (their GPU
    events, no host time)."""
    rows = []
    for kind, label in UNOWNED_LABELS.items():
        mask = attr.owner_kind == kind
        if mask.any():
            span = us(
                _union(np.zeros(int(mask.sum()), np.int64), attr.ts[mask], attr.end[mask], 1)[0]
            )
            total = us(int(attr.dur[mask].sum()))
            times = dict(zip(SUMMED, (0, 0.0, 0.0, int(mask.sum()), total, span, total, span)))
            rows.append((label, times))
    return rows


def combine(parts: list[pd.DataFrame], total_gpu_us: float) -> pd.DataFrame:
    """The ranks' rows added per group, with percentages of ``total_gpu_us`` (all GPU work)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(
            columns=[*GROUPINGS["name"], *SUMMED, "device_self_pctg", "cumulative_pctg"]
        )
    keys = [c for c in parts[0].columns if c not in SUMMED]
    if len(parts) == 1:  # one rank's groups are distinct already
        out = parts[0]
    else:
        frame = pd.concat(parts, ignore_index=True)
        out = frame.groupby(keys, sort=False, dropna=False)[list(SUMMED)].sum().reset_index()
    # by device_self_sum(us), largest first (ties in order), then the unowned rows
    unowned = np.asarray(out[keys[0]].array.isin(list(UNOWNED_LABELS.values())), bool)
    owned = np.flatnonzero(~unowned)
    self_sum = out["device_self_sum(us)"].to_numpy()
    largest_first = np.argsort(-self_sum[owned], kind="stable")
    order = np.concatenate([owned[largest_first], np.flatnonzero(unowned)])
    pct = 100.0 * self_sum[order] / (total_gpu_us or np.nan)  # no GPU work: NaN
    return (
        out.take(order)
        .reset_index(drop=True)
        .assign(
            calls=lambda t: t["calls"].astype(np.int64),
            kernels=lambda t: t["kernels"].astype(np.int64),
            device_self_pctg=pct.round(2),
            cumulative_pctg=pct.cumsum().round(2),
        )
    )


def across_ranks(per_rank: pd.DataFrame) -> pd.DataFrame:
    """The summary by name of all ranks from each rank's own (``per_rank``: their rows, with a
    ``rank`` column, as the batch keeps them): :func:`combine` of them, as of the ranks' parts."""
    own = [c for c in per_rank.columns if c not in ("rank", "device_self_pctg", "cumulative_pctg")]
    parts = [rows[own].reset_index(drop=True) for _, rows in per_rank.groupby("rank", sort=True)]
    return combine(parts, float(per_rank["device_self_sum(us)"].sum()))
