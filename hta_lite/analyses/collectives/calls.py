"""The collective calls of one rank, with their process group and message sizes.

GPU ranks: every communication kernel (``ncclKernel_*``, ``ncclDevKernel_*``, RCCL), its
collective, sizes, dtype and group size read from every place Kineto writes them (kernel args,
``record_param_comms``, the ``nccl:*`` range, the ``c10d::*`` op, ``distributedInfo``), each with
the place it came from: :mod:`.metadata`. dtypes are spelled as torch does (``int8``,
``bfloat16``: ``kineto.torch_dtype``). Without a process group name the kernel's stream stands
for it (NCCL runs each communicator on its own stream).

CPU ranks (gloo): the ``gloo:*`` ranges its worker threads record around each collective, with
their sizes from ``Input Dims`` / ``Input type`` (recorded with ``record_shapes=True``). gloo
writes no process group; each group has its own worker threads, created with the group, so the
worker threads in creation (thread id) order, split evenly over the rank's gloo groups of
``distributedInfo.pg_config`` in their order, give each call its group. When they do not split
evenly the group is ``?`` and said so in ``pg_source``.

This is a per-rank partial: it needs nothing from other ranks (computed where the rank loaded).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from ...classify import COMMUNICATION
from ...collective_names import collective_kind, kernel_algorithm
from ...kineto import CPU_COLLECTIVE, GLOO_BACKEND
from ...load.health_items import record
from ...load.inputs import arg_tensors
from ...load.metadata import ProcessGroup
from ...load.rank_trace import RankTrace
from ...rows import gather
from .issue_order import issue_times
from .metadata import (
    BYTES_PER_ELEMENT,
    gpu_metadata,
    names_where,
    nbytes,
    peers,
    text,
)

#: columns of :func:`collective_calls` (ts / end / dur / issued int64 ns; bytes -1 when unknown)
CALL_COLUMNS = [
    "rank", "step", "pg", "pg_desc", "members", "group_size", "world_size", "collective", "peer",
    "name",
    "dtype", "in_bytes", "out_bytes", "ts", "end", "dur", "issued", "stream", "tid", "source",
    "pg_source", "size_source", "dtype_source", "group_size_source", "algorithm", "protocol",
]  # fmt: skip
UNKNOWN_GROUP = "?"
POINT_TO_POINT = ("send", "recv")


def collective_calls(trace: RankTrace) -> pd.DataFrame:
    """One row per collective call of the rank (columns :data:`CALL_COLUMNS`): ``pg`` (process
    group name, ``stream N`` or ``?`` — see ``pg_source``), ``members`` (global ranks of the
    group, ``"0,1,2,3"``; empty when not recorded), ``group_size`` (-1 unknown),
    ``world_size`` (``distributedInfo``'s, -1 unknown), ``collective``
    (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``, ``broadcast``,
    ``reduce``, ``send``, ``recv``, ``send_recv``, ``barrier``, ``gather``, ``scatter``),
    ``peer`` (a send's or recv's other side, global rank, from its ``c10d::send`` /
    ``c10d::recv_`` op: :func:`.metadata.peers`; -1 unknown or not point-to-point),
    ``name`` (the event), ``dtype``, ``in_bytes`` / ``out_bytes`` (per rank, -1 unknown),
    ``ts`` / ``end`` / ``dur`` (ns: ``ts`` is when the call arrived, the kernel's or the gloo
    worker range's start; a gloo send / recv, run on the calling thread, from its ``c10d::``
    op's start to the later of the op's and the range's end), ``issued`` (ns: when it was
    issued, the order the matching pairs calls in: a kernel's start, for gloo the ``c10d::*``
    op that enqueued the range, :mod:`.issue_order`), ``stream`` (-1 for CPU calls), ``tid``,
    ``source`` (``gpu`` / ``cpu``), ``step`` (ProfilerStep, -1 outside), ``size_source`` /
    ``dtype_source`` / ``group_size_source`` (where each came from, :mod:`.metadata`; ``""``
    not recorded), ``algorithm`` / ``protocol`` (``RING`` / ``LL``: what the NCCL kernel is
    named after, :func:`~hta_lite.collective_names.kernel_algorithm`; ``""`` when it says none,
    and on CPU ranks). ``attrs["problems"]``: the recorded values that could not be used
    (health codes, :mod:`hta_lite.load.health_items`: ``collective_metadata_invalid``)."""
    gpu = trace.gpu
    problems: Counter = Counter()
    comm = np.flatnonzero(np.asarray(gpu["kernel_type"] == COMMUNICATION)) if len(gpu) else []
    table = (
        _gpu_calls(trace, np.asarray(comm, np.int64), problems) if len(comm)
        else _cpu_calls(trace)
    )  # fmt: skip
    table = table.sort_values(["ts", "stream", "tid"], kind="stable", ignore_index=True)
    table.attrs["problems"] = problems
    return table


def _gpu_calls(trace: RankTrace, rows: np.ndarray, problems: Counter) -> pd.DataFrame:
    gpu = trace.gpu
    pg_sizes = {str(g.name): g.size or -1 for g in _groups(trace)}
    meta = gpu_metadata(trace, rows, pg_sizes, problems)
    collective, group_size = meta["collective"], meta["group_size"]
    in_bytes = nbytes(meta["in_nelems"], meta["dtype"])
    out_bytes = nbytes(meta["out_nelems"], meta["dtype"])
    typed = np.array([d in BYTES_PER_ELEMENT for d in meta["dtype"]], bool)
    for field, n, b in (
        ("In", meta["in_nelems"], in_bytes),
        ("Out", meta["out_nelems"], out_bytes),
    ):
        too_large = int((typed & (n >= 0) & (b < 0)).sum())  # bytes past int64: unknown
        if too_large:
            record(problems, "collective_metadata_invalid", too_large, f"{field} msg nelems")
    in_bytes, out_bytes, size_source = _payload_sizes(meta, in_bytes, out_bytes)
    derived = out_bytes_from_input(collective, in_bytes, group_size)
    out_bytes = np.where(out_bytes >= 0, out_bytes, derived)
    pg = meta["pg_name"]
    stream = gpu["stream"].to_numpy()[rows]
    named = pg != ""
    p2p = np.isin(collective, POINT_TO_POINT)
    peer = np.full(len(rows), -1, np.int64)
    peer[p2p] = peers(trace.cpu, meta["c10d_row"][p2p], meta["members"][p2p])
    names = text(gpu["name"], rows)
    named_after = {n: kernel_algorithm(n) for n in set(names)}  # once per name
    ts = gpu["ts"].to_numpy()[rows]
    dur = gpu["dur"].to_numpy()[rows]
    return pd.DataFrame(
        {
            "rank": trace.rank,
            "step": gpu["iteration"].to_numpy()[rows],
            "pg": np.where(named, pg, [f"stream {s}" for s in stream]),
            "pg_desc": meta["pg_desc"],
            "members": meta["members"],
            "group_size": group_size.astype(np.int64),
            "world_size": _world_size(trace),
            "collective": collective,
            "peer": peer,
            "name": names,
            "dtype": meta["dtype"],
            "in_bytes": in_bytes,
            "out_bytes": out_bytes,
            "ts": ts,
            "end": ts + dur,
            "dur": dur,
            "issued": ts,
            "stream": stream,
            "tid": gpu["tid"].to_numpy()[rows],
            "source": "gpu",
            "pg_source": np.where(named, "metadata", "stream"),
            "size_source": size_source,
            "dtype_source": meta["dtype_source"],
            "group_size_source": meta["group_size_source"],
            "algorithm": [named_after[n][0] for n in names],
            "protocol": [named_after[n][1] for n in names],
        },
        columns=CALL_COLUMNS,
    )


#: the collectives whose NCCL payload size is known to be the input (reduce_scatter: the output)
SIZED_BY_PAYLOAD = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "send",
                    "recv", "send_recv")  # fmt: skip


def _payload_sizes(meta: dict, in_bytes: np.ndarray, out_bytes: np.ndarray) -> tuple:
    """Sizes from NCCL's NVTX payload (bytes, no dtype) where nothing else gave one: a
    reduce_scatter's output (its input: the output x the group size, when known), every other
    collective's input; ``size_source`` ``nccl payload`` there."""
    collective, payload = meta["collective"], meta["payload_bytes"]
    sized = (in_bytes < 0) & (out_bytes < 0) & (payload >= 0)
    sized &= np.isin(collective, SIZED_BY_PAYLOAD)
    scattered = collective == "reduce_scatter"
    group = meta["group_size"]
    fits = (group > 0) & (payload <= (2**62) // np.maximum(group, 1))  # no int64 wrap
    whole = np.where(fits, payload * np.where(fits, group, 1), -1)
    in_bytes = np.where(sized, np.where(scattered, whole, payload), in_bytes)
    out_bytes = np.where(sized & scattered, payload, out_bytes)
    return in_bytes, out_bytes, np.where(sized, "nccl payload", meta["size_source"])


def out_bytes_from_input(
    collective: np.ndarray, in_bytes: np.ndarray, group_size: np.ndarray
) -> np.ndarray:
    """Output size from the input: x group size for all_gather, / for reduce_scatter (-1 for
    those two while the group size is unknown), the same for the others."""
    known = (group_size > 0) & (in_bytes >= 0)
    gathered = collective == "all_gather"
    scattered = collective == "reduce_scatter"
    return np.where(
        (gathered | scattered) & ~known,
        -1,
        np.where(
            gathered,
            in_bytes * group_size,
            np.where(scattered, in_bytes // np.maximum(group_size, 1), in_bytes),
        ),
    )


def _groups(trace: RankTrace) -> list[ProcessGroup]:
    """The process groups (creation order) this rank is a member of."""
    meta = trace.meta
    return meta.groups_of(meta.rank if meta.rank is not None else trace.rank)


def _world_size(trace: RankTrace) -> int:
    """The recorded world size (-1 when not recorded)."""
    return trace.meta.world_size or -1


def _cpu_calls(trace: RankTrace) -> pd.DataFrame:
    cpu = trace.cpu
    rows = np.flatnonzero(names_where(cpu["name"], CPU_COLLECTIVE.match))
    names = text(cpu["name"], rows)
    dims, types = text(cpu["input_dims"], rows), text(cpu["input_types"], rows)
    first = [
        next(((n, d) for n, d in arg_tensors(a, b) if d and n >= 0), (-1, ""))
        for a, b in zip(dims, types)
    ]
    dtype = np.array([d for _, d in first], object)
    in_bytes = nbytes(np.array([n for n, _ in first], np.int64), dtype)
    collective = np.array([collective_kind(n) for n in names], object)
    tid = cpu["tid"].to_numpy()[rows]
    groups = [g for g in _groups(trace) if GLOO_BACKEND in g.backend]
    workers = np.unique(tid)
    if groups and len(workers) % len(groups) == 0:
        block = np.searchsorted(workers, tid) // (len(workers) // len(groups))
        pg = np.array([str(b) if groups[b].name is None else groups[b].name for b in block], object)
        desc = np.array([groups[b].description for b in block], object)
        member_lists = [list(groups[b].ranks) for b in block]
        source = "thread order"
    else:
        pg = np.full(len(rows), UNKNOWN_GROUP, object)
        desc = np.full(len(rows), "", object)
        member_lists = [[] for _ in rows]
        source = "unknown"
    group_size = np.array([len(m) or -1 for m in member_lists], np.int64)
    out_bytes = out_bytes_from_input(collective, in_bytes, group_size)
    ts = cpu["ts"].to_numpy()[rows]
    end = ts + cpu["dur"].to_numpy()[rows]
    issued, issuer = issue_times(trace, rows, collective)
    p2p = np.isin(collective, POINT_TO_POINT)
    peer = np.full(len(rows), -1, np.int64)
    member_text = np.array([",".join(map(str, m)) for m in member_lists], object)
    peer[p2p] = peers(cpu, issuer[p2p], member_text[p2p])
    # gloo runs a send / recv on the calling thread, no worker: it arrives when its op starts
    # (the gloo range is only a part of the op's wait) and ends when both have ended
    inline = p2p & (issuer >= 0)
    op_end = gather(cpu["ts"].to_numpy() + cpu["dur"].to_numpy(), issuer, 0)
    ts = np.where(inline, issued, ts)
    end = np.where(inline, np.maximum(end, op_end), end)
    dur = end - ts
    return pd.DataFrame(
        {
            "rank": trace.rank,
            "step": cpu["iteration"].to_numpy()[rows],
            "pg": pg,
            "pg_desc": desc,
            "members": member_text,
            "group_size": group_size,
            "world_size": _world_size(trace),
            "collective": collective,
            "peer": peer,
            "name": names,
            "dtype": dtype,
            "in_bytes": in_bytes,
            "out_bytes": out_bytes,
            "ts": ts,
            "end": end,
            "issued": issued,
            "dur": dur,
            "stream": -1,
            "tid": tid,
            "source": "cpu",
            "pg_source": source,
            "size_source": np.where(in_bytes >= 0, "gloo range", ""),
            "dtype_source": np.where(dtype != "", "gloo range", ""),
            "group_size_source": np.where(group_size > 0, "pg_config", ""),
            "algorithm": "",
            "protocol": "",
        },
        columns=CALL_COLUMNS,
    )
