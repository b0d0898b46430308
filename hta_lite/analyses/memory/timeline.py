"""Allocated and reserved memory over time, their peaks, and memory per step.

Per (rank, device) the allocator's running totals as written (``Total Allocated`` / ``Total
Reserved``) and the same total recomputed from the signed byte deltas (the first event's total
minus its own bytes is what was allocated before the trace). :func:`total_mismatches` counts
events where the two disagree. Cached is reserved - allocated: memory the caching allocator
holds but has not allocated (NaN where the allocator reports no reserved memory: the CPU
allocator writes 0). Whether it is fragmented (free, but in blocks too small for a request) only
a memory snapshot's blocks say (:mod:`hta_lite.analyses.memory_snapshot`). Bytes are int64.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from ...load.health_items import record
from ...units import fmt_bytes

TIMELINE_COLUMNS = [
    "rank", "device", "ts", "bytes", "allocated", "reserved", "cached", "recomputed",
    "operator", "annotation", "module", "step",
]  # fmt: skip
PEAK_COLUMNS = [
    "rank", "device", "peak_allocated", "peak_allocated_ts", "operator", "annotation", "module",
    "step", "peak_reserved", "peak_reserved_ts", "peak_cached", "peak_cached_ts",
]  # fmt: skip
STEP_COLUMNS = [
    "rank", "device", "step", "start_allocated", "end_allocated", "peak_allocated", "growth",
    "peak_growth", "peak_vs_median_rank",
]  # fmt: skip


def timeline(events: pd.DataFrame, rank: int) -> pd.DataFrame:
    """One row per ``[memory]`` event (:data:`TIMELINE_COLUMNS`): ``allocated`` / ``reserved``
    as written (recomputed where not written), ``cached``, ``recomputed`` (before-trace
    total + cumulative bytes)."""
    parts = []
    for device, rows in events.groupby("device", sort=True):
        written = rows["total_allocated"].to_numpy(dtype=np.float64, na_value=np.nan)
        written[written < 0] = np.nan  # cannot be (negative_totals counts them): recomputed
        deltas = rows["bytes"].to_numpy()
        known = np.flatnonzero(~np.isnan(written))
        before = int(written[known[0]]) - int(deltas[: known[0] + 1].sum()) if len(known) else 0
        recomputed = before + np.cumsum(deltas)
        allocated = np.where(np.isnan(written), recomputed, written).astype(np.int64)
        reserved = rows["total_reserved"].to_numpy(dtype=np.float64, na_value=np.nan)
        reserved[reserved < 0] = np.nan
        if np.nan_to_num(reserved).max(initial=0) == 0:
            reserved[:] = np.nan  # the CPU allocator writes 0: it reserves nothing
        parts.append(
            pd.DataFrame(
                {
                    "rank": rank,
                    "device": device,
                    "ts": rows["ts"].to_numpy(),
                    "bytes": deltas,
                    "allocated": allocated,
                    "reserved": reserved,
                    "cached": reserved - allocated,
                    "recomputed": recomputed,
                    "operator": rows["operator"].to_numpy(),
                    "annotation": rows["annotation"].to_numpy(),
                    "module": rows["module"].to_numpy(),
                    "step": rows["step"].to_numpy(),
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=TIMELINE_COLUMNS)
    return pd.concat(parts, ignore_index=True)[TIMELINE_COLUMNS]


def found(events: pd.DataFrame, line: pd.DataFrame) -> Counter:
    """What a rank's memory events say of its data, as health counters: totals that disagree
    with the deltas (``memory_total_mismatch``) and negative totals (``memory_total_negative``)."""
    counters: Counter = Counter()
    record(counters, "memory_total_mismatch", total_mismatches(line))
    record(counters, "memory_total_negative", negative_totals(events))
    return counters


def negative_totals(events: pd.DataFrame) -> int:
    """Events whose written ``Total Allocated`` or ``Total Reserved`` is negative, which cannot
    be: the timeline takes the recomputed total there (allocated) or none (reserved)."""
    allocated = events["total_allocated"].to_numpy(dtype=np.float64, na_value=np.nan)
    reserved = events["total_reserved"].to_numpy(dtype=np.float64, na_value=np.nan)
    return int(((allocated < 0) | (reserved < 0)).sum())


def total_mismatches(line: pd.DataFrame) -> int:
    """Events whose written ``Total Allocated`` is not the recomputed running total."""
    return int((line["allocated"] != line["recomputed"]).sum())


def peaks(line: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, device): the peak of allocated memory, when, and the operator / annotation /
    module / step of the event that reached it; the peaks of reserved memory and of
    cached memory, and when (:data:`PEAK_COLUMNS`; the first time a peak is reached)."""
    rows = []
    for (rank, device), part in line.groupby(["rank", "device"], sort=True):
        top = part.loc[part["allocated"].idxmax()]
        reserved = part["reserved"]
        cached = part["cached"]
        r = part.loc[reserved.idxmax()] if reserved.notna().any() else None
        f = part.loc[cached.idxmax()] if cached.notna().any() else None
        rows.append(
            {
                "rank": rank, "device": device, "peak_allocated": int(top["allocated"]),
                "peak_allocated_ts": int(top["ts"]), "operator": top["operator"],
                "annotation": top["annotation"], "module": top["module"], "step": top["step"],
                "peak_reserved": float(r["reserved"]) if r is not None else np.nan,
                "peak_reserved_ts": int(r["ts"]) if r is not None else -1,
                "peak_cached": float(f["cached"]) if f is not None else np.nan,
                "peak_cached_ts": int(f["ts"]) if f is not None else -1,
            }
        )  # fmt: skip
    return pd.DataFrame(rows, columns=PEAK_COLUMNS)


def by_step(line: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, device, ProfilerStep): allocated at the step's first and last event, its peak,
    ``growth`` (end - start: a leak shows as steady growth), ``peak_growth`` (from the previous
    step's peak), and ``peak_vs_median_rank`` (the step's peak over the median rank's for that
    kind of device and step: the imbalance across ranks, each on its own GPU)
    (:data:`STEP_COLUMNS`)."""
    inside = line[line["step"] >= 0]
    if inside.empty:
        return pd.DataFrame(columns=STEP_COLUMNS)
    first = inside.groupby(["rank", "device", "step"]).first()
    table = inside.groupby(["rank", "device", "step"]).agg(
        end_allocated=("allocated", "last"), peak_allocated=("allocated", "max")
    )
    table.insert(0, "start_allocated", first["allocated"] - first["bytes"])
    table["growth"] = table["end_allocated"] - table["start_allocated"]
    table["peak_growth"] = table.groupby(level=["rank", "device"])["peak_allocated"].diff()
    return with_median_rank(table.reset_index())


def with_median_rank(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`by_step`'s rows (of one rank or many) with ``peak_vs_median_rank`` set across the
    ranks they hold (the batch joins each rank's rows, then sets it)."""
    if table.empty:
        return pd.DataFrame(columns=STEP_COLUMNS)
    table = table.copy()
    kind = device_kind(table["device"])
    median = table.groupby([kind, table["step"]])["peak_allocated"].transform("median")
    table["peak_vs_median_rank"] = table["peak_allocated"] / median.where(median > 0)
    return table[STEP_COLUMNS]


def device_kind(device: pd.Series) -> pd.Series:
    """``cuda:3`` -> ``cuda``: ranks on one node each use their own GPU (``cuda:<local rank>``),
    so ranks are compared by the kind of device, not its index."""
    return device.astype(str).str.partition(":")[0]


def imbalance_clause(peaks: pd.DataFrame, rank: int, device: str) -> str:
    """``" (2.5x the median rank's 1.0 GiB)"``: ``rank``'s allocated peak (``peaks``:
    :func:`peaks`) against the median rank's on the same kind of device; "" with one rank, or
    within a tenth of it."""
    mine = peaks[device_kind(peaks["device"]) == device.partition(":")[0]]
    per_rank = mine.groupby("rank")["peak_allocated"].max()
    median = float(per_rank.median()) if len(per_rank) > 1 else np.nan
    if not median > 0 or per_rank.get(rank, 0) < 1.1 * median:
        return ""
    return f" ({per_rank[rank] / median:.1f}x the median rank's {fmt_bytes(median)})"
