"""The allocator's trace replayed: active and reserved bytes after each entry, the peak of each
device, and who holds the memory at it.

The trace is a ring buffer: it keeps the last entries only, so the memory live when it starts is
unknown from the entries alone. As PyTorch's own viewer does, the replay starts from the state at
the snapshot (the blocks in use, the segments) and walks back: an ``alloc`` adds its size going
forward, a ``free_completed`` takes it away (``free_requested`` changes nothing: the memory is in
use until the free completes); ``segment_alloc`` / ``segment_map`` add to the reserved bytes,
``segment_free`` / ``segment_unmap`` take away. What is left at the start of the trace predates
it (``before_trace_bytes``).

:func:`timeline` columns, per entry in order: ``device``, ``index``, ``time_us``, ``action``,
``addr``, ``size``, ``stream``, ``active_bytes`` (block sizes in use after the entry),
``reserved_bytes`` (after the entry; NaN on a device whose trace records no segment event, where
only the value at the snapshot is known).

:func:`peaks` columns, per device: ``device``, ``index`` (the entry after which the peak is
reached, the last time it is: where the walk back from the snapshot meets it first; -1: before
the first entry), ``time_us``, ``active_bytes``, ``reserved_bytes``,
``before_trace_bytes``, ``final_active_bytes``. :func:`peak_sites`: the allocations live at a
peak by site (``site``, ``bytes``, ``count``, largest first), with the memory that predates the
trace as one row ``<allocated before the trace>`` (its sites are not in the trace).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .summary import ACTIVE, AWAITING

GROWS = {"alloc": 1, "free_completed": -1}
RESERVES = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}
BEFORE_TRACE = "<allocated before the trace>"
COLUMNS = ["device", "index", "time_us", "action", "addr", "size", "stream", "active_bytes",
           "reserved_bytes"]  # fmt: skip


def final_state(segments: pd.DataFrame, blocks: pd.DataFrame, device: int) -> tuple[int, int]:
    """``(active, reserved)`` bytes of a device at the snapshot (exact)."""
    mine = blocks[blocks["device"].to_numpy() == device]
    live = np.isin(mine["state"].to_numpy(), [ACTIVE, AWAITING])
    active = sum(mine["size"].to_numpy()[live].tolist())
    reserved = sum(
        segments["total_size"].to_numpy()[segments["device"].to_numpy() == device].tolist()
    )
    return int(active), int(reserved)


def timeline(entries: pd.DataFrame, segments: pd.DataFrame, blocks: pd.DataFrame) -> pd.DataFrame:
    parts = []
    for device, rows in entries.groupby("device", sort=True):
        active, reserved = final_state(segments, blocks, int(device))
        action = rows["action"].astype(str).to_numpy()
        size = rows["size"].to_numpy()
        out = rows[["device", "index", "time_us", "action", "addr", "size", "stream"]].copy()
        out["active_bytes"] = _walk_back(size, _signs(action, GROWS), active)
        signs = _signs(action, RESERVES)
        traced = signs.any()
        out["reserved_bytes"] = (
            _walk_back(size, signs, reserved) if traced else np.full(len(rows), np.nan)
        )
        parts.append(out)
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    return pd.concat(parts, ignore_index=True)[COLUMNS]


def _signs(action: np.ndarray, table: dict) -> np.ndarray:
    out = np.zeros(len(action), np.int64)
    for name, sign in table.items():
        out[action == name] = sign
    return out


def _walk_back(size: np.ndarray, sign: np.ndarray, final: int) -> np.ndarray:
    """The value after each entry, given the value after the last one."""
    after = np.cumsum(size * sign)
    return final - (after[-1] if len(after) else 0) + after


def peaks(line: pd.DataFrame, segments: pd.DataFrame, blocks: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for device, part in line.groupby("device", sort=True):
        active = part["active_bytes"].to_numpy()
        final, _ = final_state(segments, blocks, int(device))
        start = int(final - (active[-1] - active[0]) - _delta(part.iloc[0])) if len(part) else final
        k = len(active) - 1 - int(np.argmax(active[::-1]))  # the last time it is reached
        at_start = start > active[k]
        rows.append(
            {
                "device": int(device),
                "index": -1 if at_start else int(part["index"].iat[k]),
                "time_us": int(part["time_us"].iat[0 if at_start else k]),
                "active_bytes": int(start if at_start else active[k]),
                "reserved_bytes": part["reserved_bytes"].iat[k],
                "before_trace_bytes": start,
                "final_active_bytes": final,
            }
        )
    return pd.DataFrame(rows)


def _delta(entry: pd.Series) -> int:
    return int(entry["size"]) * GROWS.get(str(entry["action"]), 0)


def peak_sites(entries: pd.DataFrame, site_of, device: int, index: int, active_bytes: int):
    """The allocations of the trace live after entry ``index`` of ``device``, by site
    (``site_of(row)``: the site of an entry row), and what predates the trace."""
    mine = entries[entries["device"].to_numpy() == device]
    action = mine["action"].astype(str).to_numpy()
    keep = (action == "alloc") | (action == "free_completed")
    part = mine[keep]
    frame = pd.DataFrame(
        {
            "row": part.index.to_numpy(),
            "addr": part["addr"].to_numpy(),
            "index": part["index"].to_numpy(),
            "alloc": action[keep] == "alloc",
            "size": part["size"].to_numpy(),
        }
    ).sort_values(["addr", "index"], kind="stable")
    frees = frame["index"].where(~frame["alloc"])
    # the first free of the same address after each entry
    next_free = frees.groupby(frame["addr"]).shift(-1).groupby(frame["addr"]).bfill()
    live = frame["alloc"] & (frame["index"] <= index) & ~(next_free <= index)
    held = frame[live.to_numpy()]
    sites = pd.Series([site_of(r) for r in held["row"]], dtype=object)
    table = (
        pd.DataFrame({"site": sites.to_numpy(), "bytes": held["size"].to_numpy().astype(object)})
        .groupby("site")
        .agg(bytes=("bytes", "sum"), count=("bytes", "size"))
        .reset_index()
    )
    before = active_bytes - int(sum(held["size"].tolist()))
    if before > 0:
        table.loc[len(table)] = [BEFORE_TRACE, before, 0]
    table["bytes"] = table["bytes"].astype(object).map(int)
    order = np.argsort([-b for b in table["bytes"]], kind="stable")
    return table.iloc[order].reset_index(drop=True)
