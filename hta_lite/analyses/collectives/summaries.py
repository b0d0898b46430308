"""Summaries of matched collectives: by (collective, dtype, message size, group) and by rank.

Message sizes are bucketed by powers of two (``size_bucket``: the bucket's lower bound in bytes,
``<NA>`` when the size is unknown; ``size_range``: ``"64 KiB-128 KiB"`` or ``"unknown"``). Times
are µs, bandwidths decimal GB/s.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..common import us
from .matching import Matching, wait_caused

#: columns of :func:`by_collective`
COLLECTIVE_COLUMNS = [
    "collective", "dtype", "size_range", "pg", "count", "total_us", "transfer_median_us",
    "transfer_p90_us", "busbw_median_gbps", "busbw_p90_gbps", "wait_us", "partial", "size_bucket",
]  # fmt: skip
#: columns of :func:`by_rank`
RANK_COLUMNS = [
    "rank", "calls", "unmatched", "time_us", "arrived_last", "wait_caused_us", "wait_suffered_us",
]  # fmt: skip


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} TiB"


def size_bucket(nbytes: np.ndarray) -> np.ndarray:
    """The power of two at or below each size (-1 for unknown sizes)."""
    nbytes = np.asarray(nbytes, np.float64)
    safe = np.where(nbytes > 0, nbytes, 1.0)
    return np.where(nbytes > 0, 2 ** np.floor(np.log2(safe)), -1).astype(np.int64)


def by_collective(matching: Matching) -> pd.DataFrame:
    """Per (collective, dtype, size bucket, group), over consistent instances: ``count``
    (collectives), ``total_us`` (time all ranks spent in them), median / p90 ``transfer`` time and
    bus bandwidth, ``wait_us`` (time ranks waited in them for the last one), ``partial`` (members
    of the group not loaded, or not known to be: the transfer times then include waiting for
    the absent ranks, so they are upper bounds and the bandwidths lower bounds); most time
    first."""
    table = matching.instances[matching.instances["consistent"]].copy()
    if table.empty:
        return pd.DataFrame(columns=COLLECTIVE_COLUMNS)
    table["size_bucket"] = size_bucket(table["bytes"])
    total = matching.calls[matching.calls["instance"] >= 0].groupby("instance")["dur"].sum()
    table["total_us"] = us(total.reindex(table["instance"]).to_numpy())
    keys = ["collective", "dtype", "size_bucket", "pg"]
    grouped = table.groupby(keys, sort=False)
    out = grouped.agg(
        count=("instance", "size"),
        total_us=("total_us", "sum"),
        transfer_median_us=("transfer_us", "median"),
        transfer_p90_us=("transfer_us", lambda v: v.quantile(0.9)),
        busbw_median_gbps=("busbw_gbps", "median"),
        busbw_p90_gbps=("busbw_gbps", lambda v: v.quantile(0.9)),
        wait_us=("wait_us", "sum"),
        partial=("complete", lambda v: not v.all()),
    ).reset_index()
    out["size_range"] = [
        f"{_human(b)}-{_human(2 * b)}" if b > 0 else "unknown" for b in out["size_bucket"]
    ]
    out["size_bucket"] = out["size_bucket"].astype("Int64").mask(out["size_bucket"] < 0)
    return out.sort_values("total_us", ascending=False, ignore_index=True)[COLLECTIVE_COLUMNS]


def by_rank(matching: Matching) -> pd.DataFrame:
    """Per rank: ``calls``, ``unmatched`` calls, ``time_us`` in collectives, ``arrived_last``
    (consistent collectives it reached last), ``wait_caused_us`` (the others' waits there),
    ``wait_suffered_us`` (its own waits); most wait caused first. Over all ranks, the waits
    caused sum to the waits suffered."""
    calls = matching.calls
    if calls.empty:
        return pd.DataFrame(columns=RANK_COLUMNS)
    measured = matching.measured()
    table = calls.groupby("rank").agg(
        calls=("instance", "size"),
        unmatched=("instance", lambda v: int((v < 0).sum())),
        time_us=("dur", "sum"),
    )
    table["time_us"] = us(table["time_us"].to_numpy())
    last = measured[measured["arrived_last"]]
    table["arrived_last"] = last.groupby("rank").size().reindex(table.index, fill_value=0)
    table["wait_caused_us"] = us(wait_caused(measured).reindex(table.index, fill_value=0))
    table["wait_suffered_us"] = us(
        measured.groupby("rank")["wait"].sum().reindex(table.index, fill_value=0)
    )
    return table.reset_index().sort_values("wait_caused_us", ascending=False, ignore_index=True)[
        RANK_COLUMNS
    ]
