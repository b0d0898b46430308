"""Memory per operator (the TensorBoard plugin's memory table): what each operator allocated
and freed, itself and with the operators it called.

``self``: the ``[memory]`` events whose innermost enclosing ``cpu_op`` is a call of the
operator; the totals add the events of every operator it encloses. Operators are nested among
``cpu_op`` events only (Python-function events often overlap without nesting).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...kineto import CPU_OP_CATEGORY
from ...load.links import nesting
from ...load.rank_trace import RankTrace
from ...rows import gather, nearest_ancestor
from .lifetimes import LIVE

OPERATOR_COLUMNS = [
    "name", "calls", "alloc_count", "alloc_bytes", "free_count", "free_bytes", "net_bytes",
    "self_alloc_count", "self_alloc_bytes", "self_free_count", "self_free_bytes", "self_net_bytes",
]  # fmt: skip
#: ``get_memory_by_operator()``'s columns (:func:`rank_table`, :func:`across_ranks`)
MEMORY_OPERATOR_COLUMNS = [*OPERATOR_COLUMNS, "self_unfreed_bytes"]


def _op_parents(trace: RankTrace) -> tuple[np.ndarray, np.ndarray]:
    """``(ops, parent)``: the ``cpu`` rows of the operators, and per ``cpu`` row the row of the
    operator enclosing it among operators only (-1 none)."""
    cpu = trace.cpu
    ops = np.flatnonzero(np.asarray(cpu["cat"] == CPU_OP_CATEGORY))
    _, parent = nesting(cpu.iloc[ops][["ts", "dur", "pid", "tid"]].reset_index(drop=True))
    out = np.full(len(cpu), -1, np.int64)
    out[ops] = gather(
        ops, nearest_ancestor(parent, np.ones(len(ops), bool), np.arange(len(ops))), -1
    )
    return ops, out


def by_operator(trace: RankTrace, events: pd.DataFrame) -> pd.DataFrame:
    """Per operator name (:data:`OPERATOR_COLUMNS`): ``calls``, allocations (count, bytes),
    frees (count, bytes), ``net_bytes`` (allocated - freed), with and without (``self_``) the
    operators it called; most net bytes first."""
    ops, parent = _op_parents(trace)
    names = trace.cpu["name"].astype(str).to_numpy()
    owned = events[events["op_row"] >= 0]
    size = owned["bytes"].to_numpy()
    op = owned["op_row"].to_numpy()
    levels = []
    current, first = op, True
    while len(current) and (current >= 0).any():
        keep = current >= 0
        levels.append((current[keep], size[keep], first))
        current, first = gather(parent, current, -1), False
    rows = []
    for row, b, is_self in levels:
        rows.append(pd.DataFrame({"name": names[row], "bytes": b, "self": is_self}))
    frame = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        {"name": pd.Series(dtype=object), "bytes": pd.Series(dtype=np.int64), "self": False}
    )  # fmt: skip

    def sums(part: pd.DataFrame, prefix: str) -> pd.DataFrame:
        alloc, free = part["bytes"] > 0, part["bytes"] < 0
        g = part.assign(a=alloc, f=free, ab=part["bytes"].where(alloc, 0),
                        fb=-part["bytes"].where(free, 0)).groupby("name")  # fmt: skip
        return pd.DataFrame({
            f"{prefix}alloc_count": g["a"].sum(), f"{prefix}alloc_bytes": g["ab"].sum(),
            f"{prefix}free_count": g["f"].sum(), f"{prefix}free_bytes": g["fb"].sum(),
        })  # fmt: skip

    table = sums(frame, "").join(sums(frame[frame["self"]], "self_"), how="left").fillna(0)
    table["net_bytes"] = table["alloc_bytes"] - table["free_bytes"]
    table["self_net_bytes"] = table["self_alloc_bytes"] - table["self_free_bytes"]
    calls = pd.Series(names[ops]).value_counts()
    table.insert(0, "calls", calls.reindex(table.index, fill_value=0))
    table = table.astype({c: np.int64 for c in OPERATOR_COLUMNS if c != "name"})
    table = table.reset_index().rename(columns={"index": "name"})
    return table.sort_values("net_bytes", ascending=False, ignore_index=True)[OPERATOR_COLUMNS]


def unfreed_by_operator(lifetimes: pd.DataFrame) -> pd.Series:
    """Bytes each operator allocated (innermost operator at the allocation, as ``self_``) and
    the trace never frees, from :func:`~.lifetimes.lifetimes`; int64, by operator name."""
    live = lifetimes[(lifetimes["status"] == LIVE) & (lifetimes["operator"] != "")]
    return live.groupby("operator")["bytes"].sum().astype(np.int64)


def rank_table(trace: RankTrace, events: pd.DataFrame, lifetimes: pd.DataFrame) -> pd.DataFrame:
    """One rank's :func:`by_operator` with ``self_unfreed_bytes`` (:func:`unfreed_by_operator`
    of its ``lifetimes``; an operator that leaves bytes unfreed allocated them, so it has a row)
    (:data:`MEMORY_OPERATOR_COLUMNS`)."""
    table = by_operator(trace, events)
    unfreed = unfreed_by_operator(lifetimes)
    table["self_unfreed_bytes"] = unfreed.reindex(table["name"], fill_value=0).to_numpy()
    return table


def across_ranks(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """:func:`rank_table` of several ranks (in rank order) summed by operator name, most net
    bytes first (``get_memory_by_operator()``; the batch's ``memory_by_operator``)."""
    table = pd.concat(parts, ignore_index=True).groupby("name", sort=False).sum()
    return table.sort_values("net_bytes", ascending=False).reset_index()
