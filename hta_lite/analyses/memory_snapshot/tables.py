"""A memory snapshot's dict as tables: segments, blocks and the allocator's trace.

- ``segments``: ``device``, ``address``, ``total_size``, ``allocated_size``, ``active_size``,
  ``requested_size`` (bytes), ``stream``, ``segment_type`` (``large`` / ``small``), ``pool``
  (``segment_pool_id`` as text: ``"(0, 0)"`` is the default pool, others are CUDA graphs'
  private pools), ``is_expandable``, ``blocks``, ``site`` (where the segment was allocated).
- ``blocks``: ``device``, ``segment`` (row of ``segments``), ``address``, ``size``,
  ``requested_size`` (bytes; the older format's ``history[0].real_size``), ``state``
  (``active_allocated``, ``active_awaiting_free``, ``inactive``), ``stream``, ``pool``, ``site``
  (:mod:`.sites`).
- ``entries``: the ring buffer of each device in order: ``device``, ``index``, ``action``,
  ``addr``, ``size`` (bytes), ``stream``, ``time_us``, ``device_free`` (bytes CUDA had free, on
  ``oom`` entries; -1 elsewhere).

Integers are int64 (the reader refuses others). A record that is not a dict, or a size that is
not an integer, is left out and counted in ``problems`` (``{what: count}``); a text field that
is not text (a segment type, a pool id) is read as absent and counted. A size past
:data:`SIZE_LIMIT`, or sizes whose total passes int64, are a :class:`SnapshotError` (no device
has that memory; sums of them would wrap).
"""

from __future__ import annotations

import gc
from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np
import pandas as pd

from ...errors import SnapshotError
from .sites import Sites

SEGMENT_INTS = ("address", "total_size", "allocated_size", "active_size", "requested_size")
INT64 = (-(2**63), 2**63 - 1)
#: the largest size of a block, segment or allocation read (16 TiB: 50x the largest GPU's memory)
SIZE_LIMIT = 2**44
#: trace entries' times are µs since the epoch, below 2**53 (285 years): differences never wrap
TIME_LIMIT_US = 2**53


@dataclass
class SnapshotTables:
    segments: pd.DataFrame
    blocks: pd.DataFrame
    entries: pd.DataFrame
    block_frames: list  # per block row, its frames (the full stack on request)
    entry_frames: list  # per entry row
    sites: Sites
    problems: Counter = field(default_factory=Counter)


def tables(snapshot: dict, columns: dict | None = None) -> SnapshotTables:
    """The tables of a snapshot dict; ``columns``: its trace as the C reader wrote it
    (:func:`hta_lite.load.snapshot.read_snapshot_columns`)."""
    problems: Counter = Counter()
    sites = Sites()
    collecting = gc.isenabled()
    gc.disable()  # a million short-lived tuples, no cycles: the collector's passes cost half
    try:
        segments, blocks, block_frames = _segments(snapshot.get("segments") or [], sites, problems)
        if columns is None:
            entries, entry_frames = _entries(snapshot.get("device_traces") or [], problems)
        else:
            entries, entry_frames = _entries_of_columns(snapshot.get("device_traces"), columns)
    finally:
        if collecting:
            gc.enable()
    _check_sizes(segments, ["total_size", "allocated_size", "active_size", "requested_size"])
    _check_sizes(blocks, ["size", "requested_size"])
    _check_sizes(entries, ["size"])
    times = entries["time_us"].to_numpy()
    if len(times) and (times.min() < 0 or times.max() >= TIME_LIMIT_US):
        bad = int(times.min()) if times.min() < 0 else int(times.max())
        raise SnapshotError(None, f"a trace entry at time_us {bad:,}: not a time a clock gives")
    return SnapshotTables(segments, blocks, entries, block_frames, entry_frames, sites, problems)


def _check_sizes(table: pd.DataFrame, columns: list[str]) -> None:
    """A :class:`SnapshotError` (without a path: the caller names the file) for a size past
    :data:`SIZE_LIMIT` or sizes adding up past int64."""
    for name in columns:
        values = table[name].to_numpy()
        if not len(values):
            continue
        largest = int(np.abs(values).max()) if values.dtype != object else max(map(abs, values))
        if largest > SIZE_LIMIT:
            raise SnapshotError(
                None, f"a {name} of {largest:,} bytes, past 16 TiB: not a snapshot of a device"
            )
        if float(np.abs(values.astype(np.float64)).sum()) >= 2**62:
            raise SnapshotError(None, f"{name}s that add up past int64: not a snapshot")


def _int(value) -> int | None:
    return value if type(value) is int else None


def int_column(values: list) -> np.ndarray:
    """int64 when every value fits, else the Python integers (object)."""
    if all(INT64[0] <= v <= INT64[1] for v in values):
        return np.array(values, dtype=np.int64)
    return np.array(values, dtype=object)


def _segments(raw: list, sites: Sites, problems: Counter):
    seg_rows, block_rows, block_frames = [], [], []
    for seg in raw:
        ints = [_int(seg.get(k)) if isinstance(seg, dict) else None for k in SEGMENT_INTS[:2]]
        if not isinstance(seg, dict) or None in ints or not isinstance(seg.get("blocks"), list):
            problems["segment without address, total_size or blocks (left out)"] += 1
            continue
        row = len(seg_rows)
        pool = _pool(seg.get("segment_pool_id"), problems)
        stream = _int(seg.get("stream")) or 0
        device = _int(seg.get("device")) or 0
        kept = 0
        for block in seg["blocks"]:
            parsed = _block(block)
            if parsed is None:
                problems["block without address, size or state (left out)"] += 1
                continue
            address, size, requested, state, frames = parsed
            block_rows.append((device, row, address, size, requested, state, stream, pool))
            block_frames.append(frames)
            kept += 1
        seg_rows.append(
            (device, *ints, *(_int(seg.get(k)) or 0 for k in SEGMENT_INTS[2:]), stream,
             _text(seg.get("segment_type"), "segment_type", problems), pool,
             seg.get("is_expandable") is True, kept, sites.site(seg.get("frames") or []))
        )  # fmt: skip
    names = ["device", *SEGMENT_INTS, "stream", "segment_type", "pool", "is_expandable", "blocks",
             "site"]  # fmt: skip
    segments = _frame(seg_rows, names, ints=[*SEGMENT_INTS])
    blocks = _frame(
        block_rows,
        ["device", "segment", "address", "size", "requested_size", "state", "stream", "pool"],
        ints=["address", "size", "requested_size"],
    )
    blocks["site"] = [sites.site(f) for f in block_frames]
    return segments, blocks, block_frames


def _text(value, name: str, problems: Counter) -> str:
    """``value`` when it is text; else "" (a list nested 100,000 deep is never turned into
    text), counted unless absent."""
    if isinstance(value, str):
        return value
    if value is not None:
        problems[f"{name} that is not text (read as absent)"] += 1
    return ""


def _pool(pool_id, problems: Counter) -> str:
    """``segment_pool_id`` as text, ``"(0, 0)"`` (the default pool) when absent; a pool id that
    is not a few integers is the default pool, counted."""
    if pool_id is None or pool_id == 0:
        return "(0, 0)"
    if (
        isinstance(pool_id, (list, tuple))
        and len(pool_id) <= 4
        and all(type(v) is int for v in pool_id)
    ):
        return str(tuple(pool_id))
    if type(pool_id) is int:
        return str(pool_id)
    problems["segment_pool_id that is not integers (default pool assumed)"] += 1
    return "(0, 0)"


def _block(block) -> tuple | None:
    """``(address, size, requested_size, state, frames)``; the older format (``history``) too."""
    if not isinstance(block, dict):
        return None
    address, size, state = _int(block.get("address")), _int(block.get("size")), block.get("state")
    if address is None or size is None or not isinstance(state, str):
        return None
    if "frames" in block or "history" not in block:
        requested = _int(block.get("requested_size"))
        frames = block.get("frames") or []
    else:  # before PyTorch 2.1: the allocation's history
        history = block.get("history")
        first = history[0] if isinstance(history, list) and history else {}
        first = first if isinstance(first, dict) else {}
        requested, frames = _int(first.get("real_size")), first.get("frames") or []
    return address, size, size if requested is None else requested, state, frames


def _entries(traces: list, problems: Counter):
    parts, frames = [], []
    for device, trace in enumerate(traces):
        if not isinstance(trace, list):
            continue
        fast = _entries_fast(device, trace)
        part, part_frames = fast if fast is not None else _entries_checked(device, trace, problems)
        parts.append(part)
        frames += part_frames
    names = ["device", "index", "action", "addr", "size", "stream", "time_us", "device_free"]
    if not parts:
        ints = [n for n in names if n != "action"]
        return _frame([], names, ints=ints).assign(action=pd.Categorical([])), frames
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    if not isinstance(out["action"].dtype, pd.CategoricalDtype):  # devices of other actions
        out["action"] = pd.Categorical(out["action"].astype(object))
    return out[names], frames


_INT_FIELDS = ("addr", "size", "stream", "time_us")


def _entries_of_columns(traces, columns: dict) -> tuple[pd.DataFrame, np.ndarray]:
    """The entries from the C reader's columns: each device's rows in their place in its list.
    The frames per row are the shared stack lists (an object array)."""
    owner = np.frombuffer(columns["owner"], np.int64)
    position = np.frombuffer(columns["position"], np.int64)
    device_of = {id(trace): d for d, trace in enumerate(traces if isinstance(traces, list) else [])}
    device_of_owner = np.array([device_of.get(id(o), 0) for o in columns["owners"]], np.int64)
    device = device_of_owner[owner] if len(owner) else np.zeros(0, np.int64)
    order = np.lexsort((position, device))
    if (np.diff(order) == 1).all():
        order = slice(None)  # already in place: no copies
    codes = np.frombuffer(columns["action"], np.int32)[order]
    actions = columns["actions"]
    ints = {k: np.frombuffer(columns[k], np.int64)[order] for k in (*_INT_FIELDS, "device_free")}
    oom = actions.index("oom") if "oom" in actions else -1
    device_free = np.where(codes == oom, ints["device_free"], -1)
    stacks = np.empty(len(columns["stacks"]) + 1, dtype=object)
    for k, stack in enumerate(columns["stacks"]):
        stacks[k] = stack
    stacks[-1] = []
    frame = pd.DataFrame(
        {"device": device[order], "index": position[order],
         "action": pd.Categorical.from_codes(codes, categories=list(actions)),
         "addr": ints["addr"], "size": ints["size"], "stream": ints["stream"],
         "time_us": ints["time_us"], "device_free": device_free},
        copy=False,
    )  # fmt: skip
    return frame, stacks[np.frombuffer(columns["stack"], np.int32)[order]]


def _entries_fast(device: int, trace: list) -> tuple[pd.DataFrame, list] | None:
    """Every entry a dict with the usual keys and int64 values (a real buffer): read column by
    column; None sends the trace to the checked reading."""
    n = len(trace)
    try:
        columns = [np.fromiter(map(itemgetter(k), trace), np.int64, n) for k in _INT_FIELDS]
        actions = np.fromiter(map(itemgetter("action"), trace), object, n)
        frames = [e.get("frames") or [] for e in trace]
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError):
        return None  # a missing key, a value that is not an int64 integer
    if not n or set(map(type, actions)) != {str}:
        return None
    codes, names = pd.factorize(actions)
    device_free = np.full(n, -1, np.int64)
    for i in np.flatnonzero(actions == "oom").tolist():
        value = _int(trace[i].get("device_free"))
        device_free[i] = -1 if value is None or not INT64[0] <= value <= INT64[1] else value
    frame = pd.DataFrame(
        {"device": device, "index": np.arange(n),
         "action": pd.Categorical.from_codes(codes, categories=list(names)),
         "addr": columns[0], "size": columns[1], "stream": columns[2], "time_us": columns[3],
         "device_free": device_free}
    )  # fmt: skip
    return frame, frames


def _entries_checked(device: int, trace: list, problems: Counter):
    rows, frames = [], []
    for index, entry in enumerate(trace):
        if not isinstance(entry, dict) or not isinstance(entry.get("action"), str):
            problems["trace entry without an action (left out)"] += 1
            continue
        size = _int(entry.get("size"))
        if size is None and entry["action"] != "snapshot":
            problems[f"{entry['action']} entry without an integer size (left out)"] += 1
            continue
        rows.append(
            (device, index, entry["action"], _int(entry.get("addr")) or 0, size or 0,
             _int(entry.get("stream")) or 0, _int(entry.get("time_us")) or 0,
             _int(entry.get("device_free")) if "device_free" in entry else -1)
        )  # fmt: skip
        frames.append(entry.get("frames") or [])
    names = ["device", "index", "action", "addr", "size", "stream", "time_us", "device_free"]
    return _frame(rows, names, ints=[n for n in names if n != "action"]), frames


def _frame(rows: list, names: list[str], ints: list[str]) -> pd.DataFrame:
    columns = list(zip(*rows)) if rows else [()] * len(names)
    out = {}
    for name, values in zip(names, columns):
        values = list(values)
        if name in ints or (values and type(values[0]) is int):
            out[name] = int_column(values)
        else:
            out[name] = np.array(values, dtype=object)
    return pd.DataFrame(out, columns=names)
