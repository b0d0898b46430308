"""The collective calls of one rank, with their process group and message sizes.

GPU ranks: every communication kernel (``ncclKernel_*``, ``ncclDevKernel_*``, RCCL). Its
metadata comes from the kernel's own args (c10d writes them there since PyTorch 2.3), else from
the ``record_param_comms`` op enclosing its launch (sizes, when neither has them, from the first
tensor of that op's, or the launching op's, ``Input Dims`` / ``Input type``); the collective
from that metadata, else from the enclosing ``nccl:*`` range, else from the kernel name; the
dtype else from the kernel name, always spelled as torch does (``int8``, ``bfloat16``:
``kineto.torch_dtype``).
Without a process group name the kernel's stream stands for it (NCCL runs each communicator on
its own stream).

CPU ranks (gloo): the ``gloo:*`` ranges its worker threads record around each collective, with
their sizes from ``Input Dims`` / ``Input type`` (recorded with ``record_shapes=True``). gloo
writes no process group; each group has its own worker threads, created with the group, so the
worker threads in creation (thread id) order, split evenly over the rank's gloo groups of
``distributedInfo.pg_config`` in their order, give each call its group. When they do not split
evenly the group is ``?`` and said so in ``pg_source``.

This is a per-rank partial: it needs nothing from other ranks (computed where the rank loaded).
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from ...classify import COMMUNICATION
from ...kineto import (
    COLLECTIVE_DTYPE_BYTES,
    CPU_COLLECTIVE,
    DTYPE_BYTES,
    PARAM_COMMS_NAME,
    collective_kind,
    kernel_dtype,
    torch_dtype,
)
from ...load.health_items import record
from ...load.links import gather, nearest_ancestor
from ...load.rank_trace import RankTrace
from ..operators.shapes import parse as parse_json

#: columns of :func:`collective_calls` (ts / end / dur int64 ns; bytes -1 when unknown)
CALL_COLUMNS = [
    "rank", "step", "pg", "pg_desc", "members", "group_size", "collective", "name", "dtype",
    "in_bytes", "out_bytes", "ts", "end", "dur", "stream", "tid", "source", "pg_source",
]  # fmt: skip
UNKNOWN_GROUP = "?"


def _parse(text: str) -> list | None:
    return parse_json(text) if text else None


def collective_calls(trace: RankTrace) -> pd.DataFrame:
    """One row per collective call of the rank (columns :data:`CALL_COLUMNS`): ``pg`` (process
    group name, ``stream N`` or ``?`` — see ``pg_source``), ``members`` (global ranks of the
    group, ``"0,1,2,3"``; empty when not recorded), ``group_size`` (-1 unknown), ``collective``
    (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``, ``broadcast``,
    ``reduce``, ``send``, ``recv``, ``send_recv``, ``barrier``, ``gather``, ``scatter``),
    ``name`` (the event), ``dtype``, ``in_bytes`` / ``out_bytes`` (per rank, -1 unknown),
    ``ts`` / ``end`` / ``dur`` (ns), ``stream`` (-1 for CPU calls), ``tid``, ``source``
    (``gpu`` / ``cpu``), ``step`` (ProfilerStep, -1 outside)."""
    gpu = trace.gpu
    comm = np.flatnonzero(np.asarray(gpu["kernel_type"] == COMMUNICATION)) if len(gpu) else []
    table = _gpu_calls(trace, np.asarray(comm, np.int64)) if len(comm) else _cpu_calls(trace)
    return table.sort_values(["ts", "stream", "tid"], kind="stable", ignore_index=True)


def _text(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    """Object array of a categorical's values at ``rows`` (``""`` where missing or row -1)."""
    column = column.astype("category")
    values = np.array([str(c) for c in column.cat.categories] + [""], dtype=object)
    return values[gather(column.cat.codes.to_numpy().astype(np.int64), rows, -1)]


def _names_where(names: pd.Series, predicate) -> np.ndarray:
    """Boolean per row of a categorical name column: ``predicate`` of its name (evaluated once
    per distinct name)."""
    names = names.astype("category")
    hit = np.array([bool(predicate(str(c))) for c in names.cat.categories] + [False])
    return hit[names.cat.codes.to_numpy()]  # code -1 (missing) picks the trailing False


def _members(texts: np.ndarray, health=None) -> np.ndarray:
    """``"[0, 1]"`` (c10d's ``Process Group Ranks``) -> ``"0,1"``; a text that is not a list of
    non-negative integers (cut short, ``[-1]``) is unknown (``""``), counted in ``health``."""
    out, bad = {}, 0
    for text in set(texts):
        ranks = _parse(text) if text else []
        valid = isinstance(ranks, list) and all(type(r) is int and r >= 0 for r in ranks)
        out[text] = ",".join(map(str, ranks)) if valid else ""
        bad += 0 if valid else int((texts == text).sum())
    if bad and health is not None:
        record(health, "collective_metadata_invalid", bad, "Process Group Ranks")
    return np.array([out[t] for t in texts], dtype=object)


def _bytes(nelems: np.ndarray, dtypes: np.ndarray) -> np.ndarray:
    """Bytes of ``nelems`` elements of each dtype; -1 (unknown) for a negative count, an unknown
    dtype, or a count whose bytes would not fit in int64 (never a wrapped product)."""
    size = np.array([COLLECTIVE_DTYPE_BYTES.get(d, -1) for d in dtypes], np.int64)
    limit = np.iinfo(np.int64).max // np.maximum(size, 1)
    valid = (nelems >= 0) & (size > 0) & (nelems <= limit)
    return np.where(valid, nelems * np.where(valid, size, 0), -1)


def _gpu_calls(trace: RankTrace, rows: np.ndarray) -> pd.DataFrame:
    gpu, cpu = trace.gpu, trace.cpu
    launch = gpu["launch_row"].to_numpy()[rows]
    parent = cpu["parent_row"].to_numpy()
    is_param = _names_where(cpu["name"], lambda n: n == PARAM_COMMS_NAME)
    param = np.where(
        gather(is_param, launch, False), launch, nearest_ancestor(parent, is_param, launch)
    )
    rng = nearest_ancestor(parent, _names_where(cpu["name"], CPU_COLLECTIVE.match), launch)
    own = gpu["collective_name"].notna().to_numpy()[rows]

    def meta(column: str) -> np.ndarray:  # the kernel's own args, else its record_param_comms
        return np.where(own, _text(gpu[column], rows), _text(cpu[column], param))

    def meta_int(column: str) -> np.ndarray:
        return np.where(
            own, gpu[column].to_numpy()[rows], gather(cpu[column].to_numpy(), param, -1)
        )

    kernel_names = _text(gpu["name"], rows)
    spelled = np.where(
        meta("collective_name") != "", meta("collective_name"), _text(cpu["name"], rng)
    )
    collective = np.array(
        [collective_kind(s) or collective_kind(k) for s, k in zip(spelled, kernel_names)], object
    )
    dtype = meta("dtype")
    dtype = np.where(dtype != "", dtype, [kernel_dtype(k) for k in kernel_names]).astype(object)
    members = _members(meta("pg_ranks"), trace.health)
    group_size = meta_int("group_size")
    group_size = np.where(
        group_size > 0, group_size, [m.count(",") + 1 if m else -1 for m in members]
    )
    pg = meta("pg_name")
    stream = gpu["stream"].to_numpy()[rows]
    named = pg != ""
    ts = gpu["ts"].to_numpy()[rows]
    dur = gpu["dur"].to_numpy()[rows]
    in_bytes = _bytes(meta_int("in_msg_nelems"), dtype)
    out_bytes = _bytes(meta_int("out_msg_nelems"), dtype)
    # no size in the metadata: the first tensor of the launching op's recorded inputs
    op = np.where(param >= 0, param, gather(cpu["op_row"].to_numpy(), launch, -1))
    unknown = np.flatnonzero((in_bytes < 0) & (op >= 0))
    if len(unknown):
        inputs = zip(_text(cpu["input_dims"], op[unknown]), _text(cpu["input_types"], op[unknown]))
        sized = [_first_tensor_bytes(d, t) for d, t in inputs]
        in_bytes[unknown] = [b for b, _ in sized]
        out_bytes[unknown] = out_bytes_from_input(
            collective[unknown], in_bytes[unknown], group_size[unknown]
        )
        dtype[unknown] = [t or d for (_, t), d in zip(sized, dtype[unknown])]
    return pd.DataFrame(
        {
            "rank": trace.rank,
            "step": gpu["iteration"].to_numpy()[rows],
            "pg": np.where(named, pg, [f"stream {s}" for s in stream]),
            "pg_desc": meta("pg_desc"),
            "members": members,
            "group_size": group_size.astype(np.int64),
            "collective": collective,
            "name": kernel_names,
            "dtype": np.array([torch_dtype(d) for d in dtype], object),
            "in_bytes": in_bytes,
            "out_bytes": out_bytes,
            "ts": ts,
            "end": ts + dur,
            "dur": dur,
            "stream": stream,
            "tid": gpu["tid"].to_numpy()[rows],
            "source": "gpu",
            "pg_source": np.where(named, "metadata", "stream"),
        },
        columns=CALL_COLUMNS,
    )


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


@functools.lru_cache(maxsize=4096)
def _first_tensor_bytes(dims_text: str, types_text: str) -> tuple[int, str]:
    """Bytes and type of the first tensor of an op's recorded inputs (-1, "" when none)."""
    dims, types = _parse(dims_text) or [], _parse(types_text) or []
    for shape, kind in zip(dims, types):
        if kind in DTYPE_BYTES and isinstance(shape, list):
            return int(np.prod(shape, dtype=np.int64)) * DTYPE_BYTES[kind], kind
    return -1, ""


def _gloo_groups(trace: RankTrace) -> list[dict]:
    """The rank's gloo process groups from ``distributedInfo.pg_config``, in creation order."""
    info = trace.metadata.get("distributedInfo") or {}
    groups = [g for g in info.get("pg_config") or [] if "gloo" in str(g.get("backend_config", ""))]
    rank = info.get("rank", trace.rank)
    return [g for g in groups if rank in (g.get("ranks") or [rank])]


def _cpu_calls(trace: RankTrace) -> pd.DataFrame:
    cpu = trace.cpu
    rows = np.flatnonzero(_names_where(cpu["name"], CPU_COLLECTIVE.match))
    names = _text(cpu["name"], rows)
    dims, types = _text(cpu["input_dims"], rows), _text(cpu["input_types"], rows)
    sized = [_first_tensor_bytes(d, t) for d, t in zip(dims, types)]
    in_bytes = np.array([b for b, _ in sized], np.int64)
    collective = np.array([collective_kind(n) for n in names], object)
    tid = cpu["tid"].to_numpy()[rows]
    groups = _gloo_groups(trace)
    workers = np.unique(tid)
    if groups and len(workers) % len(groups) == 0:
        block = np.searchsorted(workers, tid) // (len(workers) // len(groups))
        pg = np.array([str(groups[b].get("pg_name", b)) for b in block], object)
        desc = np.array([str(groups[b].get("pg_desc", "")) for b in block], object)
        member_lists = [groups[b].get("ranks") or [] for b in block]
        source = "thread order"
    else:
        pg = np.full(len(rows), UNKNOWN_GROUP, object)
        desc = np.full(len(rows), "", object)
        member_lists = [[] for _ in rows]
        source = "unknown"
    group_size = np.array([len(m) or -1 for m in member_lists], np.int64)
    out_bytes = out_bytes_from_input(collective, in_bytes, group_size)
    ts = cpu["ts"].to_numpy()[rows]
    dur = cpu["dur"].to_numpy()[rows]
    return pd.DataFrame(
        {
            "rank": trace.rank,
            "step": cpu["iteration"].to_numpy()[rows],
            "pg": pg,
            "pg_desc": desc,
            "members": np.array([",".join(map(str, m)) for m in member_lists], object),
            "group_size": group_size,
            "collective": collective,
            "name": names,
            "dtype": np.array([torch_dtype(t) for _, t in sized], object),
            "in_bytes": in_bytes,
            "out_bytes": out_bytes,
            "ts": ts,
            "end": ts + dur,
            "dur": dur,
            "stream": -1,
            "tid": tid,
            "source": "cpu",
            "pg_source": source,
        },
        columns=CALL_COLUMNS,
    )
