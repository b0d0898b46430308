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
        action = rows["action"]
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


def _signs(action: pd.Series, table: dict) -> np.ndarray:
    """Per entry, the sign ``table`` gives its action (0 for the others), through the codes."""
    of_code = np.array([table.get(c, 0) for c in action.cat.categories] + [0], np.int64)
    return of_code[action.cat.codes.to_numpy()]


def _walk_back(size: np.ndarray, sign: np.ndarray, final: int) -> np.ndarray:
    """The value after each entry, given the value after the last one."""
    after = np.cumsum(size * sign)
    return final - (after[-1] if len(after) else 0) + after


def peaks(line: pd.DataFrame, segments: pd.DataFrame, blocks: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for device, part in line.groupby("device", sort=True):
        active = part["active_bytes"].to_numpy()
        final, _ = final_state(segments, blocks, int(device))
        start = int(active[0]) - _delta(part.iloc[0])  # before the first entry
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
    mine = np.flatnonzero(entries["device"].to_numpy() == device)
    sign = _signs(entries["action"], GROWS)[mine]
    rows = mine[sign != 0]
    alloc = sign[sign != 0] > 0
    addr, at = entries["addr"].to_numpy()[rows], entries["index"].to_numpy()[rows]
    order = np.lexsort((at, addr))
    rows, alloc, addr, at = rows[order], alloc[order], addr[order], at[order]
    # an allocation ends at the next entry of its address, when that is a free
    freed_next = np.append((addr[1:] == addr[:-1]) & ~alloc[1:], False)
    freed_by = freed_next & (np.append(at[1:], index + 1) <= index)
    live = alloc & (at <= index) & ~freed_by
    held, sizes = rows[live].tolist(), entries["size"].to_numpy()[rows[live]].tolist()
    by_site: dict[str, list[int]] = {}
    for row, size in zip(held, sizes):
        total = by_site.setdefault(site_of(row), [0, 0])
        total[0] += size
        total[1] += 1
    before = active_bytes - sum(sizes)
    if before > 0:
        by_site[BEFORE_TRACE] = [before, 0]
    ranked = sorted(by_site.items(), key=lambda item: -item[1][0])
    return pd.DataFrame(
        [(site, int(b), int(n)) for site, (b, n) in ranked], columns=["site", "bytes", "count"]
    )
