"""Reading a collective from the names traces give it: the collective a call, range or kernel
name says (c10d's ``Collective name``, ``gloo:`` / ``nccl:`` ranges, ``c10d::`` ops, NCCL / RCCL
kernels, the collective kernels that are not NCCL's), and what a collective kernel's name says
of its element type, algorithm and group size. The names themselves are Kineto vocabulary
(:mod:`hta_lite.kineto`)."""

from __future__ import annotations

import re
from functools import lru_cache

from .kineto import (
    COLLECTIVE_DTYPE_BYTES,
    COLLECTIVE_SPELLINGS,
    NCCL_SHORT_DTYPES,
    OTHER_COLLECTIVE_KERNELS,
)

_COLLECTIVE_PREFIX = re.compile(
    r"^(?:(?:gloo|nccl|ucc|mpi|xccl):|c10d::|(?:nccl|rccl)(?:Dev)?Kernel_|(?:nccl|rccl))_*",
    re.IGNORECASE,
)


@lru_cache(maxsize=4096)  # called per collective row: the names repeat
def collective_kind(name: str) -> str:
    """``all_reduce``, ``all_gather``, ... from how a trace names a collective (c10d's
    ``Collective name``, a kernel, a ``gloo:`` range, a ``c10d::`` op); ``""`` when none."""
    key = _COLLECTIVE_PREFIX.sub("", name).replace("_", "").lower()
    return next((kind for prefix, kind in COLLECTIVE_SPELLINGS if key.startswith(prefix)), "")


_OTHER_COLLECTIVES = [(re.compile(p), kind) for p, kind in OTHER_COLLECTIVE_KERNELS]


@lru_cache(maxsize=4096)
def other_collective_kind(kernel: str, launching_op: str) -> str:
    """The collective a kernel of :data:`OTHER_COLLECTIVE_KERNELS` runs: the one its launching
    op's name holds (``symm_mem::reduce_scatter_out``, ``vllm::all_reduce``), else the one the
    kernel is named after; ``""`` for any other kernel."""
    named = next((kind for p, kind in _OTHER_COLLECTIVES if p.search(kernel)), "")
    if not named:
        return ""
    op = launching_op.rsplit("::", 1)[-1].replace("_", "").lower()
    return next((kind for spelled, kind in COLLECTIVE_SPELLINGS if spelled in op), named)


#: collective kernels compiled for a number of ranks, and the template argument that holds it
#: (vLLM's ``cross_device_reduce_1stage<T, ngpus>``, symmetric memory's
#: ``one_shot_all_reduce_kernel<T, alignment, k_world_size>``, userbuffers' ``<RANKS>``)
RANKS_TEMPLATE_ARG = (
    (re.compile(r"\bcross_device_reduce_[12]stage<"), 1),
    (re.compile(r"\b(?:one|two)_shot_all_reduce_kernel(?:_inplace)?<"), 2),
    (re.compile(r"\buserbuffers_fp16_sum_inplace_gpu\w*<"), 0),
)


@lru_cache(maxsize=4096)
def kernel_group_size(name: str) -> int:
    """The number of ranks a kernel of :data:`RANKS_TEMPLATE_ARG` was compiled for (Kineto
    writes ``<__nv_bfloat16, 8>``, Nsight Systems ``<__nv_bfloat16, (int)8>``); -1 for any other
    kernel, and where the argument is not a number from 2 to 1,000,000 (``-1``: chosen at run
    time)."""
    for pattern, at in RANKS_TEMPLATE_ARG:
        match = pattern.search(name)
        if match:
            args = _template_args(name, match.end())
            value = args[at].rsplit(")", 1)[-1].strip() if at < len(args) else ""
            ok = value.isdigit() and len(value) <= 7 and 1 < int(value) <= 1_000_000
            return int(value) if ok else -1
    return -1


def _template_args(name: str, start: int) -> list[str]:
    """The top-level arguments of the template list that opens just before ``start``."""
    depth, args, current = 1, [], []
    for ch in name[start:]:
        depth += (ch == "<") - (ch == ">")
        if depth == 0 or (ch == "," and depth == 1):
            args.append("".join(current))
            if depth == 0:
                return args
            current = []
        else:
            current.append(ch)
    return []  # never closed


def kernel_dtype(name: str) -> str:
    """The element type an NCCL / RCCL kernel name ends with (``ncclKernel_AllReduce_RING_LL_Sum_
    float(...)`` -> ``float``), or names before its algorithm and protocol (NCCL 2.19+:
    ``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` -> ``f32``); ``""`` when it names none
    (``ncclDevKernel_AllGather_RING_LL``)."""
    base = _ALGORITHM_PROTOCOL_END.sub("", name.split("(", 1)[0])
    types = (*COLLECTIVE_DTYPE_BYTES, *NCCL_SHORT_DTYPES)
    return next((t for t in types if base.endswith("_" + t)), "")


#: NCCL's algorithms and protocols as its kernel names spell them (``ncclKernel_AllReduce_RING_LL_
#: Sum_float``, ``ncclDevKernel_AllReduce_Sum_f32_TREE_LL128``); longest first, so that
#: ``NVLS_TREE`` is not read as ``NVLS``
NCCL_ALGORITHMS = ("COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS_TREE", "NVLS", "RING", "TREE", "PAT")
NCCL_PROTOCOLS = ("LL128", "LL", "SIMPLE")
_ALGORITHM_PROTOCOL = re.compile(
    rf"_({'|'.join(NCCL_ALGORITHMS)})_({'|'.join(NCCL_PROTOCOLS)})(?:_|$)"
)
_ALGORITHM_PROTOCOL_END = re.compile(
    rf"_({'|'.join(NCCL_ALGORITHMS)})_({'|'.join(NCCL_PROTOCOLS)})$"
)


def kernel_algorithm(name: str) -> tuple[str, str]:
    """``(algorithm, protocol)`` an NCCL kernel is named after (``("RING", "LL")``); ``("", "")``
    when its name says none (``ncclDevKernel_Generic``, ``ncclDevKernel_SendRecv``, RCCL's, a
    kernel that is not NCCL's). The protocol is the one compiled into the kernel: NCCL may run
    another through it (the tuned one is not in the trace)."""
    match = _ALGORITHM_PROTOCOL.search(name.split("(", 1)[0])
    return (match.group(1), match.group(2)) if match else ("", "")
