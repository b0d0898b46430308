"""Each backward operator's forward operator, linked once at load (``cpu.forward_row``).

A backward operator (``AddmmBackward0``, ``autograd::engine::evaluate_function: ...``) is linked
to the forward operator autograd ran it for: by the ``fwdbwd`` flow events when the trace has
them (their ends sit at the two operators' starts), else by the autograd sequence number (the
forward operator with that number that started last, Kineto's own rule; only where one thread
ran the forward operators, so the link is never a guess).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..kineto import CPU_OP_CATEGORY, FWDBWD_FLOW_CATEGORY
from ..rows import ancestors_where, combine_codes, nearest_ancestor


def forward_rows(cpu: pd.DataFrame, flows: pd.DataFrame) -> np.ndarray:
    """Per ``cpu`` row (linked: ``parent_row`` set): the row of its forward operator, -1 when it
    is not a linked backward operator."""
    is_op = np.asarray(cpu["cat"] == CPU_OP_CATEGORY)
    linked = np.flatnonzero(np.asarray(flows["cat"] == FWDBWD_FLOW_CATEGORY)) if len(flows) else []
    if len(linked):
        rows = np.flatnonzero(is_op)
        parent_op = np.full(len(cpu), -1, np.int64)
        parent_op[rows] = nearest_ancestor(cpu["parent_row"].to_numpy(), is_op, rows)
        return _by_flows(cpu, flows, linked, is_op, ancestors_where(parent_op, is_op))
    return _by_sequence_number(cpu, is_op)


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
