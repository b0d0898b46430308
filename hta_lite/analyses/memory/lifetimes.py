"""Allocation lifetimes: each allocation paired with the free of the same address, and what
was still live at a moment (the peak) or at the end (leaks).

An allocation (bytes > 0) is paired with the next event at the same (device, address) when that
is a free (bytes < 0). Allocations never freed in the trace are ``live at end``; frees whose
allocation came before the trace are ``allocated before the trace``: reported as such, not
errors. Times are ns, sizes bytes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...kineto import STEP_PREFIX
from ...units import fmt_bytes

LIFETIME_COLUMNS = [
    "rank", "device", "addr", "bytes", "allocated_ts", "freed_ts", "lifetime_us", "operator",
    "annotation", "module", "step", "status",
]  # fmt: skip
LIVE, FREED, BEFORE = "live at end", "freed", "allocated before the trace"


def lifetimes(events: pd.DataFrame, rank: int) -> pd.DataFrame:
    """One row per allocation, and per free without one (:data:`LIFETIME_COLUMNS`): the
    allocating event's operator / annotation / module / step; ``status`` ``freed``, ``live at
    end`` or ``allocated before the trace`` (then the free's own context and time)."""
    if events.empty:
        return pd.DataFrame(columns=LIFETIME_COLUMNS)
    addr = events["addr"].to_numpy(dtype=np.float64, na_value=np.nan)
    order = np.lexsort((np.arange(len(events)), events["ts"].to_numpy(), addr,
                        events["device"].to_numpy()))  # fmt: skip
    e = events.iloc[order].reset_index(drop=True)
    size = e["bytes"].to_numpy()
    same_next = np.zeros(len(e), bool)
    same_next[:-1] = (e["device"].to_numpy()[1:] == e["device"].to_numpy()[:-1]) & (
        addr[order][1:] == addr[order][:-1]
    )
    alloc = size > 0
    freed_next = same_next & np.append(size[1:] < 0, False)
    paired_free = np.append(False, (alloc[:-1] & freed_next[:-1]))
    orphan_free = (size < 0) & ~paired_free
    rows = np.flatnonzero(alloc | orphan_free)
    ts = e["ts"].to_numpy()
    freed_ts = np.where(alloc & freed_next, np.append(ts[1:], -1), -1)
    status = np.where(orphan_free, BEFORE, np.where(freed_ts >= 0, FREED, LIVE))
    out = pd.DataFrame(
        {
            "rank": rank,
            "device": e["device"].to_numpy()[rows],
            "addr": e["addr"].array[rows],
            "bytes": np.abs(size[rows]),
            "allocated_ts": np.where(orphan_free[rows], -1, ts[rows]),
            "freed_ts": np.where(orphan_free[rows], ts[rows], freed_ts[rows]),
            "lifetime_us": np.where(
                status[rows] == FREED, (freed_ts[rows] - ts[rows]) / 1000.0, np.nan
            ),
            "operator": e["operator"].to_numpy()[rows],
            "annotation": e["annotation"].to_numpy()[rows],
            "module": e["module"].to_numpy()[rows],
            "step": e["step"].to_numpy()[rows],
            "status": status[rows],
        }
    )
    return out.sort_values(["device", "allocated_ts", "freed_ts"], kind="stable", ignore_index=True)


def live_at(table: pd.DataFrame, device: str, ts: int) -> pd.DataFrame:
    """Allocations live on ``device`` at ``ts`` (made at or before it, freed after it or never),
    grouped by allocating operator / annotation / module: ``count``, ``bytes``; most first."""
    live = table[
        (table["device"] == device)
        & (table["status"] != BEFORE)
        & (table["allocated_ts"] <= ts)
        & ((table["freed_ts"] > ts) | (table["freed_ts"] < 0))
    ]
    grouped = live.groupby(["operator", "annotation", "module"], sort=False).agg(
        count=("bytes", "size"), bytes=("bytes", "sum")
    )
    return grouped.sort_values("bytes", ascending=False).reset_index()


LEAK_COLUMNS = ["rank", "device", "step", "operator", "annotation", "module", "count", "bytes"]


def leaks(table: pd.DataFrame, steps: list[int] | None = None) -> pd.DataFrame:
    """Allocations made inside a ProfilerStep and never freed in the trace, per (rank, device,
    step, allocating operator / annotation / module): ``count``, ``bytes``. The same row in
    every step is a leak of that many bytes per step."""
    live = table[(table["status"] == LIVE) & (table["step"] >= 0)]
    if steps is not None:
        live = live[live["step"].isin(steps)]
    keys = LEAK_COLUMNS[:-2]
    out = live.groupby(keys, sort=True).agg(count=("bytes", "size"), bytes=("bytes", "sum"))
    return out.reset_index()


#: the fewest steps that must each leave the same site's allocations unfreed to call it a leak
MIN_LEAK_STEPS = 3
STEADY_COLUMNS = [
    "rank", "device", "operator", "annotation", "module", "steps", "bytes_per_step",
]  # fmt: skip


def steady_leaks(table: pd.DataFrame) -> pd.DataFrame:
    """The sites that leak in every step (:data:`STEADY_COLUMNS`): per (rank, device, operator,
    annotation, module) of ``table`` (lifetimes), allocations never freed in the trace made in
    each of the rank's steps that allocate on the device, at least :data:`MIN_LEAK_STEPS` of
    them; ``steps`` (how many), ``bytes_per_step`` (the median over them); most bytes first.
    Fewer steps cannot tell a leak from what the step after the last would free. An allocation
    whose innermost annotation is its step (``ProfilerStep#N``) has none: the step's number
    does not make another site."""
    made = table[(table["status"] != BEFORE) & (table["step"] >= 0)]
    per_device = made.groupby(["rank", "device"], sort=False, observed=True)["step"].nunique()
    site = ["rank", "device", "operator", "annotation", "module"]
    found = leaks(table)
    annotation = found["annotation"].astype(str)
    found["annotation"] = annotation.mask(annotation.str.startswith(STEP_PREFIX), "")
    found = found.groupby(site, sort=False, observed=True).agg(
        steps=("step", "nunique"), bytes_per_step=("bytes", "median")
    )
    needed = per_device.reindex(found.index.droplevel(site[2:])).to_numpy()
    out = found[(found["steps"].to_numpy() == needed) & (needed >= MIN_LEAK_STEPS)].reset_index()
    out["bytes_per_step"] = out["bytes_per_step"].round().astype(np.int64)
    return out.sort_values("bytes_per_step", ascending=False, kind="stable", ignore_index=True)[
        STEADY_COLUMNS
    ]


def leak_growth(steady: pd.DataFrame) -> pd.Series:
    """Bytes per step that each (device, rank) of ``steady`` (:func:`steady_leaks`) leaves
    unfreed, most first."""
    grows = steady.groupby(["device", "rank"], sort=True, observed=True)["bytes_per_step"].sum()
    return grows.sort_values(ascending=False, kind="stable")


def leak_clause(steady: pd.DataFrame) -> str:
    """``"; rank R DEVICE leaks N per step (...)"``: the largest leak of ``steady``
    (:func:`steady_leaks`), for the key findings' memory line ("" where none)."""
    if steady.empty:
        return ""
    grows = leak_growth(steady)
    (device, rank), size = grows.index[0], grows.iloc[0]
    return (
        f"; rank {rank} {device} leaks {fmt_bytes(size)} per step (allocated in every step,"
        " never freed: the finding memory_leak)"
    )
