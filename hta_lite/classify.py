"""Kernel type of GPU events, from the event name (rules in docs/metrics.md).

COMMUNICATION  NCCL / RCCL / HCCL kernels: ``^nccl``, ``^rccl``, ``^hccl``, or
               ``ncclKernel`` / ``ncclDevKernel`` anywhere in the name; collective kernels
               that are not NCCL's (symmetric memory, custom all-reduce:
               ``kineto.OTHER_COLLECTIVE_KERNELS``).
MEMORY         ``^(hip)?Memcpy``, ``^(hip)?Memset``, ``^dma``.
OTHER          names the reference treats as neither: GPU-side syncs (``Sync``
               anywhere), ``Stream Wait Event``, launch/runtime names, MTIA
               runtime names.
COMPUTATION    everything else.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .kineto import COMMUNICATION_KERNEL, MEMORY_KERNEL, NOT_COMPUTE_KERNEL

COMMUNICATION = "COMMUNICATION"
MEMORY = "MEMORY"
COMPUTATION = "COMPUTATION"
OTHER = "OTHER"
KERNEL_TYPES = (COMPUTATION, COMMUNICATION, MEMORY, OTHER)


# the rules in order: the first that matches a name gives its type (none: COMPUTATION)
_RULES = (
    (COMMUNICATION_KERNEL, COMMUNICATION),
    (MEMORY_KERNEL, MEMORY),
    (NOT_COMPUTE_KERNEL, OTHER),
)
#: the rules' fingerprint: part of each cache entry's key, so that tables cached under other
#: rules are never read back with stale kernel types
RULES_KEY = hashlib.blake2b(
    "\n".join(f"{rule.pattern}={kind}" for rule, kind in _RULES).encode(), digest_size=8
).hexdigest()


def kernel_type(name: str) -> str:
    return next((kind for rule, kind in _RULES if rule.search(name)), COMPUTATION)


def kernel_types(names: pd.Series) -> pd.Categorical:
    """Vectorized over a categorical name column: the distinct names are classified together by
    Arrow's regex engine (RE2, one pass per rule; Python's ``re`` retries the unanchored
    alternatives at every position of names hundreds of characters long: 5-10x slower)."""
    names = names.astype("category")
    distinct = pa.array([str(n) for n in names.cat.categories], type=pa.string())
    per_name = np.full(len(distinct), KERNEL_TYPES.index(COMPUTATION), np.int8)
    for rule, kind in reversed(_RULES):  # the first rule wins: applied last
        hit = pc.match_substring_regex(distinct, rule.pattern).to_numpy(zero_copy_only=False)
        per_name[hit] = KERNEL_TYPES.index(kind)
    codes = names.cat.codes.to_numpy()
    type_codes = np.where(
        codes >= 0,
        per_name[np.maximum(codes, 0)] if len(per_name) else 0,
        KERNEL_TYPES.index(OTHER),
    )
    return pd.Categorical.from_codes(type_codes, categories=list(KERNEL_TYPES))


def short_name(name: str) -> str:
    """Drop template and function arguments and return types: ``void f<T>(int)`` -> ``f``."""
    if name.startswith(("Memcpy", "Memset")) or ("<" not in name and "(" not in name):
        return name
    s = name.replace("->", "")
    depth, out = 0, []
    for ch in s:  # cut everything inside <...> and (...)
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    words = "".join(out).split()
    return words[-1] if words else name
