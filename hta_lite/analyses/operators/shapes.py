"""Operator inputs: the forward operator of each backward one, the shapes each operator is
described by, and the ``nn.Module`` it ran in.

- A backward operator (``AddmmBackward0``, ``autograd::engine::evaluate_function: ...``) is
  linked to the forward operator autograd ran it for: by the ``fwdbwd`` flow events when the trace
  has them (their ends sit at the two operators' starts), else by the autograd sequence number
  (the forward operator with that number that started last, Kineto's own rule; only where one
  thread ran the forward operators, so the link is never a guess).
- A linked backward operator is described by its forward operator's shapes and types
  (``shapes_from == "forward"``): its own ``Input Dims`` are the gradients' (or empty in older
  traces), and the formulas of :mod:`.flops` are written for the forward shapes.
- Its module is the innermost ``python_function`` event named ``nn.Module: Name_N`` around it
  (around its forward operator, for a linked backward one), written as the path of the enclosing
  modules: ``BertModel_0.BertEncoder_0.BertLayer_3``.
"""

from __future__ import annotations

import json
from functools import lru_cache

import msgspec
import numpy as np
import pandas as pd

from ...kineto import FWDBWD_FLOW_CATEGORY, MODULE_PREFIX, PYTHON_FUNCTION_CATEGORY
from ...load.rank_trace import RankTrace
from ...rows import combine_codes, nearest_ancestor
from ..common import starts_with, text_values


def forward_op(trace: RankTrace, is_op: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Per ``cpu`` row: the row of its forward operator, -1 when it is not a linked backward
    operator."""
    flows = trace.flows
    linked = np.flatnonzero(np.asarray(flows["cat"] == FWDBWD_FLOW_CATEGORY)) if len(flows) else []
    if len(linked):
        return _by_flows(trace.cpu, flows, linked, is_op, depth)
    return _by_sequence_number(trace.cpu, is_op)


def _by_flows(cpu: pd.DataFrame, flows: pd.DataFrame, linked, is_op, depth) -> np.ndarray:
    """Through the ``fwdbwd`` flows (rows ``linked`` of ``flows``): each end joined to the
    operators that start where it sits (process, thread, time)."""
    rows = np.flatnonzero(is_op)
    phase = np.asarray(flows["ph"], dtype=object)
    ends = linked[(phase[linked] == "s") | (phase[linked] == "f")]
    is_start = phase[ends] == "s"
    at = [np.concatenate([flows[c].to_numpy()[ends], cpu[c].to_numpy()[rows]]) for c in PLACE]
    place = combine_codes([pd.factorize(values)[0] for values in at])[0]
    place_end, place_op = place[: len(ends)], place[len(ends) :]
    # every (end, operator) pair at one place: ends in order, then operators in row order
    by_place = np.argsort(place_op, kind="stable")
    low = np.searchsorted(place_op[by_place], place_end, "left")
    count = np.searchsorted(place_op[by_place], place_end, "right") - low
    end = np.repeat(np.arange(len(ends)), count)
    op = by_place[np.repeat(low - np.cumsum(count) + count, count) + np.arange(count.sum())]
    out = np.full(len(cpu), -1, np.int64)
    if not len(end):
        return out
    # several operators start at the flow's time (nested ones): the one autograd recorded the
    # link on carries a sequence number; else the outermost; else the first
    seq = cpu["sequence_number"].to_numpy()[rows[op]]
    fwd_tid = cpu["fwd_thread_id"].to_numpy()[rows[op]]
    preferred = (seq >= 0) & np.where(is_start[end], fwd_tid == 0, fwd_tid > 0)
    ids, id_of_end = np.unique(flows["id"].to_numpy()[ends], return_inverse=True)
    link_end = id_of_end.ravel()[end] * 2 + is_start[end]  # (id, start or finish)
    order = np.lexsort((np.arange(len(end)), depth[rows[op]], ~preferred, link_end))
    chosen = order[np.append(True, link_end[order][1:] != link_end[order][:-1])]
    flow_id, row, starts = link_end[chosen] // 2, rows[op[chosen]], is_start[end[chosen]]
    start_of, finish_of = np.full(len(ids), -1, np.int64), np.full(len(ids), -1, np.int64)
    start_of[flow_id[starts]] = row[starts]
    finish_of[flow_id[~starts]] = row[~starts]
    both = np.flatnonzero((start_of >= 0) & (finish_of >= 0))
    # a finish reached from two flows: the later id's start, as before
    last = len(both) - 1 - np.unique(finish_of[both][::-1], return_index=True)[1]
    out[finish_of[both][last]] = start_of[both][last]
    return out


PLACE = ("pid", "tid", "ts")


def _by_sequence_number(cpu: pd.DataFrame, is_op: np.ndarray) -> np.ndarray:
    """A backward operator's forward one: the last (by start, then row) forward operator of its
    process with its sequence number, where only one thread ran forward operators with it."""
    seq = cpu["sequence_number"].to_numpy()
    fwd_tid = cpu["fwd_thread_id"].to_numpy()
    out = np.full(len(cpu), -1, np.int64)
    forward = np.flatnonzero(is_op & (seq >= 0) & (fwd_tid == 0))
    backward = np.flatnonzero(is_op & (seq >= 0) & (fwd_tid > 0))
    if not len(forward) or not len(backward):
        return out
    both = np.concatenate([forward, backward])
    pid, tid = cpu["pid"].to_numpy(), cpu["tid"].to_numpy()
    key, _ = combine_codes([pd.factorize(pid[both])[0], pd.factorize(seq[both])[0]])
    key_f, key_b = key[: len(forward)], key[len(forward) :]
    # (pid, seq) keys whose forward operators ran on one thread
    _, first = combine_codes([key_f, pd.factorize(tid[forward])[0]])  # each (key, thread)
    one_thread = np.bincount(key_f[first], minlength=int(key.max()) + 1) == 1
    # per key the last forward operator by (start, row): the end of its run in that order
    order = np.lexsort((forward, cpu["ts"].to_numpy()[forward], key_f))
    last = np.flatnonzero(np.append(key_f[order][1:] != key_f[order][:-1], True))
    chosen = np.full(len(one_thread), -1, np.int64)
    chosen[key_f[order][last]] = forward[order][last]
    chosen[~one_thread] = -1
    out[backward] = chosen[key_b]
    return out


def module_paths(trace: RankTrace) -> tuple[np.ndarray, np.ndarray]:
    """``(module_row, paths)``: per ``cpu`` row the row of its innermost ``nn.Module`` event (-1:
    none), and per ``cpu`` row of a module event its path (object array, None elsewhere)."""
    cpu = trace.cpu
    names = cpu["name"]
    is_module = np.asarray(
        (cpu["cat"] == PYTHON_FUNCTION_CATEGORY) & starts_with(names, MODULE_PREFIX)
    )
    parent = cpu["parent_row"].to_numpy()
    module_of = np.full(len(cpu), -1, np.int64)
    paths = np.full(len(cpu), None, dtype=object)
    if not is_module.any():
        return module_of, paths
    all_rows = np.arange(len(cpu))
    module_of[:] = nearest_ancestor(parent, is_module, all_rows)
    modules = np.flatnonzero(is_module)
    own = text_values(names, modules)
    paths[modules] = [n[len(MODULE_PREFIX) :] for n in own]
    # parents before children: extend each path by its enclosing module's, level by level
    outer = module_of[modules]
    level = np.zeros(len(modules), np.int64)
    current = outer.copy()
    while (current >= 0).any():
        level += current >= 0
        current = np.where(current >= 0, module_of[np.maximum(current, 0)], -1)
    for depth in range(1, int(level.max()) + 1):
        at = level == depth
        paths[modules[at]] = [f"{p}.{c}" for p, c in zip(paths[outer[at]], paths[modules[at]])]
    return module_of, paths


@lru_cache(maxsize=65536)
def parse(text: str | None) -> list | None:
    """A JSON text of the operator inputs (``input_dims`` ...) as a list, None when absent or
    not a JSON list."""
    if text is None or text != text:  # missing (NaN in object arrays)
        return None
    try:
        value = msgspec.json.decode(text)  # 3-5x faster than json.loads
    except msgspec.DecodeError:  # NaN, integers past 64 bits: the standard library's reading
        try:
            value = json.loads(text)
        except ValueError:  # not JSON at all (a text cut short): as if not recorded
            return None
    return value if isinstance(value, list) else None
