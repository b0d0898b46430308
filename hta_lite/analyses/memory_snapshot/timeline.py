"""The allocator's trace replayed: active and reserved bytes after each entry, the peak of each
device, and who holds the memory at it.

The trace is a ring buffer: it keeps the last entries only, so the memory live when it starts is
unknown from the entries alone. As PyTorch's own viewer does, the replay starts from the state at
the snapshot (the blocks in use, the segments) and walks back: an ``alloc`` adds its size going
forward, a ``free_completed`` takes it away (``free_requested`` changes nothing: the memory is in
use until the free completes); ``segment_alloc`` / ``segment_map`` add to the reserved bytes,
``segment_free`` / ``segment_unmap`` take away. What is left at the start of the trace predates
it (``before_trace_bytes``).

:func:`replay` walks once and keeps two arrays per entry; :func:`timeline` makes the table of
them, columns, per entry in order: ``device``, ``index``, ``time_us``, ``action``,
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

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...kineto import SNAPSHOT_ACTIVE as ACTIVE
from ...kineto import SNAPSHOT_PENDING as PENDING

GROWS = {"alloc": 1, "free_completed": -1}
RESERVES = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}
BEFORE_TRACE = "<allocated before the trace>"
COLUMNS = ["device", "index", "time_us", "action", "addr", "size", "stream", "active_bytes",
           "reserved_bytes"]  # fmt: skip


@dataclass(frozen=True, eq=False)
class Replay:
    active: np.ndarray  # per entry, block sizes in use after it
    reserved: np.ndarray  # per entry, reserved bytes after it (NaN: no segment event traced)


def final_state(segments: pd.DataFrame, blocks: pd.DataFrame, device: int) -> tuple[int, int]:
    """``(active, reserved)`` bytes of a device at the snapshot (exact)."""
    mine = blocks[blocks["device"].to_numpy() == device]
    live = np.isin(mine["state"].to_numpy(), [ACTIVE, *PENDING])
    active = sum(mine["size"].to_numpy()[live].tolist())
    reserved = sum(
        segments["total_size"].to_numpy()[segments["device"].to_numpy() == device].tolist()
    )
    return int(active), int(reserved)


def replay(entries: pd.DataFrame, segments: pd.DataFrame, blocks: pd.DataFrame) -> Replay:
    """Per entry (each device's rows together, in order, as
    :mod:`hta_lite.load.readers.snapshot_tables` gives them): the active and reserved bytes
    after it."""
    device = entries["device"].to_numpy()
    size = entries["size"].to_numpy()
    grows, reserves = _signs(entries["action"], GROWS), _signs(entries["action"], RESERVES)
    kind = np.result_type(size.dtype, np.int64)  # Python integers stay Python integers
    active, reserved = np.empty(len(size), kind), np.empty(len(size), kind)
    untraced = []
    for d, part in device_runs(device):
        final_active, final_reserved = final_state(segments, blocks, d)
        active[part] = _walk_back(size[part], grows[part], final_active)
        reserved[part] = _walk_back(size[part], reserves[part], final_reserved)
        if not reserves[part].any():
            untraced.append(part)
    if untraced:
        reserved = reserved.astype(np.float64)
        for part in untraced:
            reserved[part] = np.nan
    return Replay(active, reserved)


def device_runs(device: np.ndarray) -> list[tuple[int, slice]]:
    """``(device, rows)`` of each device's run of rows."""
    cuts = [0, *(np.flatnonzero(device[1:] != device[:-1]) + 1).tolist(), len(device)]
    return [(int(device[a]), slice(a, b)) for a, b in zip(cuts, cuts[1:]) if b > a]


def timeline(entries: pd.DataFrame, replayed: Replay, rows=slice(None)) -> pd.DataFrame:
    """The :data:`COLUMNS` table of ``rows`` of the entries (a new table each call)."""
    out = {c: entries[c].to_numpy()[rows] for c in COLUMNS[:7]}
    out["action"] = entries["action"].array[rows]
    out["active_bytes"], out["reserved_bytes"] = replayed.active[rows], replayed.reserved[rows]
    return pd.DataFrame(out)


def _signs(action: pd.Series, table: dict) -> np.ndarray:
    """Per entry, the sign ``table`` gives its action (0 for the others), through the codes."""
    of_code = np.array([table.get(c, 0) for c in action.cat.categories] + [0], np.int8)
    return of_code[action.cat.codes.to_numpy()]


def _walk_back(size: np.ndarray, sign: np.ndarray, final: int) -> np.ndarray:
    """The value after each entry, given the value after the last one."""
    after = np.cumsum(size * sign)
    after += final - (after[-1] if len(after) else 0)
    return after


def peaks(
    entries: pd.DataFrame, replayed: Replay, segments: pd.DataFrame, blocks: pd.DataFrame
) -> pd.DataFrame:
    rows = []
    index, time_us = entries["index"].to_numpy(), entries["time_us"].to_numpy()
    for device, part in device_runs(entries["device"].to_numpy()):
        active = replayed.active[part]
        final, _ = final_state(segments, blocks, device)
        start = int(active[0]) - _delta(entries.iloc[part.start])  # before the first entry
        k = len(active) - 1 - int(np.argmax(active[::-1]))  # the last time it is reached
        at_start = start > active[k]
        rows.append(
            {
                "device": device,
                "index": -1 if at_start else int(index[part][k]),
                "time_us": int(time_us[part][0 if at_start else k]),
                "active_bytes": int(start if at_start else active[k]),
                "reserved_bytes": replayed.reserved[part][k],
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
    mine = dict(device_runs(entries["device"].to_numpy()))[device]
    sign = _signs(entries["action"], GROWS)
    rows = mine.start + np.flatnonzero(sign[mine])
    alloc = sign[rows] > 0
    addr, at = entries["addr"].to_numpy()[rows], entries["index"].to_numpy()[rows]
    order = np.argsort(addr, kind="stable")  # by address, then in order (``index`` grows)
    rows, alloc = rows[order], alloc[order]
    addr = addr[order]  # one at a time: a million-entry buffer's copies are not all alive at once
    at = at[order]
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


def dump_peaks(segments: pd.DataFrame, blocks: pd.DataFrame) -> pd.DataFrame:
    """:func:`peaks` without a trace: per device the state at the dump (``index`` and
    ``time_us`` -1, nothing before it known)."""
    rows = []
    for device in sorted(set(segments["device"].tolist())):
        active, reserved = final_state(segments, blocks, device)
        rows.append({"device": device, "index": -1, "time_us": -1, "active_bytes": active,
                     "reserved_bytes": float(reserved), "before_trace_bytes": active,
                     "final_active_bytes": active})  # fmt: skip
    return pd.DataFrame(rows)


def block_sites(blocks: pd.DataFrame, device: int) -> pd.DataFrame:
    """The blocks in use on ``device`` at the dump by site (``site``, ``bytes``, ``count``)."""
    mine = blocks[
        (blocks["device"].to_numpy() == device)
        & np.isin(blocks["state"].to_numpy(), [ACTIVE, *PENDING])
    ]
    grouped = mine.groupby("site", sort=False)["size"].agg(["sum", "count"]).reset_index()
    grouped.columns = ["site", "bytes", "count"]
    return grouped.sort_values("bytes", ascending=False, kind="stable", ignore_index=True)
