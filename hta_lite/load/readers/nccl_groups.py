"""NCCL's grouped calls in an Nsight Systems export: the payload of the kernel a group launches.

Between ``ncclGroupStart`` and ``ncclGroupEnd`` NCCL only queues its calls; their kernel is
launched in the outermost ``ncclGroupEnd`` (groups nest), outside every call's NVTX range. That
is how PyTorch issues coalesced collectives, ``batch_isend_irecv`` and ``all_to_all`` (sends
and receives to every peer), and Megatron-LM its pipeline exchanges and the distributed
optimizer's bucketed reduce-scatters. The outermost ``ncclGroupEnd`` range gets what its calls
say (:func:`carry`), so the kernel's launch finds a payload around it as an ungrouped call's
does: their communicator and their bytes, summed (sends and receives: the larger of the two
sums, NCCL-tests' size of a send/recv). A group whose calls use several communicators or
operations launches one kernel per communicator or operation, which its ranges cannot tell
apart: its sizes stay unknown (health: ``nccl_group_mixed``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from ..health_items import note

GROUP_START, GROUP_END = "ncclGroupStart", "ncclGroupEnd"
POINT_TO_POINT = ("ncclSend", "ncclRecv")


def carry(names: np.ndarray, start: np.ndarray, tid: np.ndarray, payloads: dict,
          problems: Counter) -> None:  # fmt: skip
    """Give each outermost ``ncclGroupEnd`` range (of ``names``, starting at ``start`` ns on
    thread ``tid``) its calls' ``msg_bytes``, ``comm`` and ``nranks`` in ``payloads`` (the
    columns :func:`.nvtx_payloads.read` returns, changed in place)."""
    is_start, is_end = names == GROUP_START, names == GROUP_END
    if not is_end.any():
        return
    named = pd.Categorical(names)  # each distinct name tested once
    call = np.array([n.startswith("nccl") and not n.startswith("ncclComm") for n in
                     named.categories.astype(str)] + [False], bool)  # fmt: skip
    is_call = call[named.codes] & ~(is_start | is_end)
    rows = np.flatnonzero(is_start | is_end | is_call)
    rows = rows[np.lexsort((start[rows], tid[rows]))]  # by thread, then time
    thread = tid[rows]
    first = np.r_[True, thread[1:] != thread[:-1]]
    depth_before, depth = _depths(np.where(is_start[rows], 1, np.where(is_end[rows], -1, 0)), first)
    outer_start = is_start[rows] & (depth_before == 0)
    group = np.cumsum(outer_start)
    in_group = is_call[rows] & (depth > 0)
    outer_end = is_end[rows] & (depth_before == 1)
    calls = pd.DataFrame({
        "group": group[in_group],
        "bytes": payloads["msg_bytes"][rows[in_group]],
        "comm": payloads["comm"][rows[in_group]],
        "nranks": payloads["nranks"][rows[in_group]],
        "op": names[rows[in_group]],
    })  # fmt: skip
    if calls.empty:
        return
    send = calls["op"] == POINT_TO_POINT[0]
    calls["sent"] = calls["bytes"].where(send, 0)
    calls["received"] = calls["bytes"].where(~send, 0)
    calls["op"] = calls["op"].where(~calls["op"].isin(POINT_TO_POINT), "p2p")
    by = calls.groupby("group", sort=False)
    summary = by.agg(
        known=("bytes", lambda b: bool((b >= 0).all())), comms=("comm", "nunique"),
        unnamed=("comm", lambda c: bool(c.isna().any())), ops=("op", "nunique"),
        total=("bytes", "sum"), sent=("sent", "sum"), received=("received", "sum"),
        comm=("comm", "first"), nranks=("nranks", "max"), op=("op", "first"),
    )  # fmt: skip
    one = (summary["comms"] == 1) & ~summary["unnamed"] & (summary["ops"] == 1)
    note(problems, "nccl_group_mixed", int((summary["known"] & ~one).sum()))
    summary = summary[summary["known"] & one]
    size = np.where(
        summary["op"] == "p2p", np.maximum(summary["sent"], summary["received"]), summary["total"]
    )
    sized = dict(zip(summary.index, zip(size.tolist(), summary["comm"], summary["nranks"])))
    for at, g in zip(rows[outer_end].tolist(), group[outer_end].tolist()):
        if g in sized and payloads["msg_bytes"][at] < 0:
            payloads["msg_bytes"][at], payloads["comm"][at], payloads["nranks"][at] = sized[g]


def _depths(delta: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group depth before and after each row of a walk of +1 / -1 / 0 steps restarted at each
    ``first`` row, an end without its start leaving the depth at 0 (a capture that began
    inside a group): the walk minus its running minimum below zero, per thread."""
    segment = np.cumsum(first) - 1
    raw = np.cumsum(delta)
    base = np.r_[0, raw][np.flatnonzero(first)]  # the walk's value before each thread
    raw = raw - base[segment]
    low = pd.Series(np.minimum(raw, 0)).groupby(segment).cummin().to_numpy()
    depth = raw - low
    before = np.r_[0, depth[:-1]]
    before[first] = 0
    return before, depth
