"""Where a GPU collective call's collective, sizes, dtype and group size come from.

Kineto writes a collective's metadata in several places, more of them in newer PyTorch. Each
field is taken from the first place that has it, and the place is kept (``*_source``):

- **collective**: ``Collective name`` of the kernel's args or of the ``record_param_comms`` op
  around its launch; else the enclosing ``nccl:*`` range; else the kernel name; for a
  collective kernel that is not NCCL's (symmetric memory, custom all-reduce:
  :data:`~hta_lite.kineto.OTHER_COLLECTIVE_KERNELS`), the launching op's name, else the kernel's.
- **elements in / out** (``size_source``): ``In / Out msg nelems`` of the kernel (``kernel``) or
  of ``record_param_comms``; else the first input of the enclosing ``nccl:*`` range, which is
  the collective's input (``nccl range``); else the input and output arguments of the
  ``c10d::*`` op (``c10d op``: :data:`~hta_lite.kineto.C10D_TENSOR_ARGS`, since
  ``_allgather_base_``'s first argument is its output); else the first tensor of the op that
  launched the kernel (``launching op``). A missing output is derived from the input and the
  group size (x n for all_gather, / n for reduce_scatter).
- **dtype** (``dtype_source``): the same places, then the kernel name's type suffix (``kernel
  name``), for reducing kernels only: an all_gather, broadcast or send/recv kernel moves bytes
  and is named ``..._int8_t`` whatever it moves.
- **group size** (``group_size_source``): ``Group size`` (``kernel`` / ``record_param_comms``);
  else the recorded ``Process Group Ranks`` (``group ranks``); else the group's ``pg_size`` in
  ``distributedInfo.pg_config`` (``pg_config``); else the communicator's size in NCCL's NVTX
  payload (``nccl payload``, Nsight Systems exports); else the rank count a collective kernel
  that is not NCCL's was compiled for (``kernel name``:
  :func:`~hta_lite.collective_names.kernel_group_size`); else the ratio of an all_gather's
  output to its input, or a reduce_scatter's input to its output, when both are known
  (``sizes``); else unknown (-1: bus bandwidth unknown, never computed for a guessed size).

On an Nsight Systems export, NCCL's NVTX range around the launch gives the message size in bytes
(``payload_bytes``: :mod:`hta_lite.load.readers.nvtx_payloads`) and the communicator, the process
group's name where no other place names one.

``""`` is the source of a field no place holds.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from ...collective_names import (
    collective_kind,
    kernel_dtype,
    kernel_group_size,
    other_collective_kind,
)
from ...kineto import (
    C10D_PEER_ARG,
    C10D_PREFIX,
    C10D_TENSOR_ARGS,
    COLLECTIVE_DTYPE_BYTES,
    CPU_COLLECTIVE,
    DTYPE_BYTES,
    PARAM_COMMS_NAME,
    REDUCING_COLLECTIVES,
    torch_dtype,
)
from ...load.health_items import record
from ...load.inputs import arg_tensors, parse
from ...load.rank_trace import RankTrace
from ...rows import gather, nearest_ancestor

#: bytes per element by torch's dtype name
BYTES_PER_ELEMENT = {
    torch_dtype(name): size for name, size in {**COLLECTIVE_DTYPE_BYTES, **DTYPE_BYTES}.items()
}


def text(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    """Object array of a categorical's values at ``rows`` (``""`` where missing or row -1)."""
    column = column.astype("category")
    values = np.array([str(c) for c in column.cat.categories] + [""], dtype=object)
    return values[gather(column.cat.codes.to_numpy().astype(np.int64), rows, -1)]


def names_where(names: pd.Series, predicate) -> np.ndarray:
    """Boolean per row of a categorical name column: ``predicate`` of its name (evaluated once
    per distinct name)."""
    names = names.astype("category")
    hit = np.array([bool(predicate(str(c))) for c in names.cat.categories] + [False])
    return hit[names.cat.codes.to_numpy()]  # code -1 (missing) picks the trailing False


def _first_tensor(dims_text: str, types_text: str) -> tuple[int, str]:
    return next(((n, d) for n, d in arg_tensors(dims_text, types_text) if d and n >= 0), (-1, ""))


def _c10d_args(name: str, dims_text: str, types_text: str) -> tuple[int, int, str]:
    """(input elements, output elements, dtype) of a ``c10d::*`` op's tensor arguments."""
    args = arg_tensors(dims_text, types_text)
    where = C10D_TENSOR_ARGS.get(name)
    if where is None:
        n, dtype = _first_tensor(dims_text, types_text)
        return n, -1, dtype
    picked = [args[i] if i is not None and i < len(args) else (-1, "") for i in where]
    dtype = picked[0][1] or picked[1][1]
    return picked[0][0], picked[1][0], dtype


def _pick(candidates: list[tuple[np.ndarray, np.ndarray, str]], fill) -> tuple[np.ndarray, ...]:
    """The first candidate value whose mask is set, per row, and the candidate's label."""
    n = len(candidates[0][0])
    value = np.full(n, fill, dtype=candidates[0][0].dtype)
    source = np.full(n, "", dtype=object)
    open_ = np.ones(n, bool)
    for values, known, label in candidates:
        take = open_ & known
        value[take] = values[take]
        source[take] = label
        open_ &= ~take
    return value, source


def gpu_metadata(
    trace: RankTrace, rows: np.ndarray, pg_sizes: dict[str, int], problems: Counter
) -> dict:
    """For the communication kernels ``rows`` of ``trace.gpu``: ``collective``, ``dtype``
    (torch's name), ``in_nelems`` / ``out_nelems`` (-1 unknown), ``group_size`` (-1 unknown),
    ``pg_name``, ``pg_desc``, ``members`` (``"0,1"``, ``""`` not recorded), and
    ``size_source``, ``dtype_source``, ``group_size_source``. ``pg_sizes``: ``pg_size`` by
    group name from ``pg_config``."""
    gpu, cpu = trace.gpu, trace.cpu
    launch = gpu["launch_row"].to_numpy()[rows]
    parent = cpu["parent_row"].to_numpy()
    is_param = names_where(cpu["name"], lambda n: n == PARAM_COMMS_NAME)
    param = np.where(
        gather(is_param, launch, False), launch, nearest_ancestor(parent, is_param, launch)
    )
    rng = nearest_ancestor(parent, names_where(cpu["name"], CPU_COLLECTIVE.match), launch)
    is_c10d = names_where(cpu["name"], lambda n: n.startswith(C10D_PREFIX))
    c10d = nearest_ancestor(parent, is_c10d, launch)
    launcher = np.where(param >= 0, param, gather(cpu["op_row"].to_numpy(), launch, -1))
    own = gpu["collective_name"].notna().to_numpy()[rows]
    has_param = param >= 0
    # NCCL's own NVTX range around the launch with its payload (Nsight Systems exports)
    msg_bytes = cpu["msg_bytes"].to_numpy() if "msg_bytes" in cpu else np.full(len(cpu), -1)
    payload = nearest_ancestor(parent, msg_bytes >= 0, launch)

    def recorded(column: str) -> tuple[np.ndarray, np.ndarray]:  # kernel's args, its op's
        return text(gpu[column], rows), text(cpu[column], param)

    def recorded_int(column: str) -> tuple[np.ndarray, np.ndarray]:
        return gpu[column].to_numpy()[rows], gather(cpu[column].to_numpy(), param, -1)

    kernel_names = text(gpu["name"], rows)
    name_k, name_p = recorded("collective_name")
    spelled = np.where(own, name_k, np.where(name_p != "", name_p, text(cpu["name"], rng)))
    collective = np.array(
        [
            collective_kind(s) or collective_kind(k) or other_collective_kind(k, op)
            for s, k, op in zip(spelled, kernel_names, text(cpu["name"], launcher))
        ],
        object,
    )

    def args_of(at: np.ndarray, reader) -> list:
        dims, types = text(cpu["input_dims"], at), text(cpu["input_types"], at)
        return [reader(d, t) if r >= 0 else (-1, "") for r, d, t in zip(at, dims, types)]

    ranged = args_of(rng, _first_tensor)
    c10d_names = text(cpu["name"], c10d)
    op = [
        _c10d_args(name, d, t) if r >= 0 else (-1, -1, "")
        for r, name, d, t in zip(
            c10d, c10d_names, text(cpu["input_dims"], c10d), text(cpu["input_types"], c10d)
        )
    ]
    launched = args_of(launcher, _first_tensor)
    range_n = np.array([n for n, _ in ranged], np.int64)
    op_in = np.array([i for i, _, _ in op], np.int64)
    op_out = np.array([o for _, o, _ in op], np.int64)
    launch_n = np.array([n for n, _ in launched], np.int64)

    in_k, in_p = recorded_int("in_msg_nelems")
    out_k, out_p = recorded_int("out_msg_nelems")
    for field, values in (("In msg nelems", (in_k, in_p)), ("Out msg nelems", (out_k, out_p))):
        negative = int(sum((v < -1).sum() for v in values))  # -1: not recorded
        if negative:
            record(problems, "collective_metadata_invalid", negative, field)
    in_nelems, size_source = _pick(
        [
            (in_k, own & (in_k >= 0), "kernel"),
            (in_p, has_param & (in_p >= 0), PARAM_COMMS_NAME),
            (range_n, range_n >= 0, "nccl range"),
            (op_in, op_in >= 0, "c10d op"),
            (launch_n, launch_n >= 0, "launching op"),
        ],
        -1,
    )
    out_nelems, _ = _pick(
        [
            (out_k, own & (out_k >= 0), "kernel"),
            (out_p, has_param & (out_p >= 0), PARAM_COMMS_NAME),
            (op_out, op_out >= 0, "c10d op"),
        ],
        -1,
    )
    dtype_k, dtype_p = recorded("dtype")
    by_name = np.array(
        [
            kernel_dtype(k) if collective_kind(k) in REDUCING_COLLECTIVES else ""
            for k in kernel_names
        ],
        object,
    )
    candidates = [
        (dtype_k, own, "kernel"),
        (dtype_p, has_param, PARAM_COMMS_NAME),
        (np.array([d for _, d in ranged], object), None, "nccl range"),
        (np.array([d for _, _, d in op], object), None, "c10d op"),
        (np.array([d for _, d in launched], object), None, "launching op"),
        (by_name, None, "kernel name"),
    ]
    dtype, dtype_source = _pick(
        [(v, (v != "") & (True if m is None else m), label) for v, m, label in candidates], ""
    )
    dtype = np.array([torch_dtype(d) for d in dtype], object)
    dtype_source = np.where(dtype != "", dtype_source, "")
    size_k, size_p = recorded_int("group_size")
    ranks_k, ranks_p = recorded("pg_ranks")
    names_k, names_p = recorded("pg_name")
    pg_name = np.where(own, names_k, names_p)
    pg_name = np.where(pg_name != "", pg_name, text(cpu["pg_name"], payload))  # communicator
    member_text = members(np.where(own, ranks_k, ranks_p), problems)
    counted = np.array([m.count(",") + 1 if m else -1 for m in member_text], np.int64)
    configured = np.array([pg_sizes.get(p, -1) if p else -1 for p in pg_name], np.int64)
    ratio = _size_ratio(collective, in_nelems, out_nelems)
    communicator = gather(cpu["group_size"].to_numpy(), payload, -1)  # its size, NCCL's payload
    compiled = np.array([kernel_group_size(k) for k in kernel_names], np.int64)
    group_size, group_size_source = _pick(
        [
            (size_k, own & (size_k > 0), "kernel"),
            (size_p, has_param & (size_p > 0), PARAM_COMMS_NAME),
            (counted, counted > 0, "group ranks"),
            (configured, configured > 0, "pg_config"),
            (communicator, communicator > 0, "nccl payload"),
            (compiled, compiled > 0, "kernel name"),
            (ratio, ratio > 0, "sizes"),
        ],
        -1,
    )
    return {
        "collective": collective,
        "dtype": dtype,
        "in_nelems": in_nelems,
        "out_nelems": out_nelems,
        "group_size": group_size,
        "pg_name": pg_name,
        "pg_desc": np.where(own, *recorded("pg_desc")),
        "members": member_text,
        "size_source": size_source,
        "dtype_source": dtype_source,
        "group_size_source": group_size_source,
        "c10d_row": c10d,
        "payload_bytes": gather(msg_bytes, payload, -1),
    }


def peers(cpu, op_rows: np.ndarray, member_text: np.ndarray) -> np.ndarray:
    """The other side's global rank of each point-to-point call whose ``c10d::send`` /
    ``c10d::recv_`` op is ``op_rows`` (-1: no such op, or its peer not recorded): the op's
    ``Concrete Inputs`` entry :data:`~hta_lite.kineto.C10D_PEER_ARG` (the rank in the process
    group), mapped to the global rank through the group's members (``"0,1,2"``) when recorded."""
    names = text(cpu["name"], op_rows)
    inputs = text(cpu["concrete_inputs"], op_rows)
    out = np.full(len(op_rows), -1, np.int64)
    for i, (row, name, values, group) in enumerate(zip(op_rows, names, inputs, member_text)):
        at = C10D_PEER_ARG.get(name)
        if row < 0 or at is None or not values:
            continue
        parsed = parse(values)
        entry = parsed[at] if isinstance(parsed, list) and len(parsed) > at else ""
        if not (isinstance(entry, str) and entry.isdigit()):
            continue
        peer, ranks = int(entry), group.split(",") if group else []
        out[i] = int(ranks[peer]) if ranks and peer < len(ranks) else (-1 if ranks else peer)
    return out


def _size_ratio(collective: np.ndarray, in_n: np.ndarray, out_n: np.ndarray) -> np.ndarray:
    """Group size from sizes: an all_gather's output / input, a reduce_scatter's input / output
    (-1 unless both are known and divide evenly)."""
    gathered, scattered = collective == "all_gather", collective == "reduce_scatter"
    big = np.where(gathered, out_n, np.where(scattered, in_n, -1))
    small = np.where(gathered, in_n, np.where(scattered, out_n, -1))
    ok = (big > 0) & (small > 0) & (big % np.maximum(small, 1) == 0)
    return np.where(ok, big // np.maximum(small, 1), -1)


def members(texts: np.ndarray, health=None) -> np.ndarray:
    """``"[0, 1]"`` (c10d's ``Process Group Ranks``) -> ``"0,1"``; a text that is not a list of
    non-negative integers (cut short, ``[-1]``) is unknown (``""``), counted in ``health``."""
    out, bad = {}, 0
    for value in set(texts):
        ranks = parse(value) if value else []
        valid = isinstance(ranks, list) and all(type(r) is int and r >= 0 for r in ranks)
        out[value] = ",".join(map(str, ranks)) if valid else ""
        bad += 0 if valid else int((texts == value).sum())
    if bad and health is not None:
        record(health, "collective_metadata_invalid", bad, "Process Group Ranks")
    return np.array([out[t] for t in texts], dtype=object)


def nbytes(nelems: np.ndarray, dtypes: np.ndarray) -> np.ndarray:
    """Bytes of ``nelems`` elements of each (torch) dtype; -1 (unknown) for a negative count,
    an unknown dtype, or a count whose bytes would not fit in int64 (never a wrapped product)."""
    size = np.array([BYTES_PER_ELEMENT.get(d, -1) for d in dtypes], np.int64)
    limit = np.iinfo(np.int64).max // np.maximum(size, 1)
    valid = (nelems >= 0) & (size > 0) & (nelems <= limit)
    return np.where(valid, nelems * np.where(valid, size, 0), -1)
