"""A memory snapshot's dict as tables: segments, blocks and the allocator's trace.

- ``segments``: ``device``, ``address``, ``total_size``, ``allocated_size``, ``active_size``,
  ``requested_size`` (bytes), ``stream``, ``segment_type`` (``large`` / ``small``), ``pool``
  (``segment_pool_id`` as text: ``"(0, 0)"`` is the default pool, others are CUDA graphs'
  private pools), ``is_expandable``, ``blocks``, ``site`` (where the segment was allocated).
- ``blocks``: ``device``, ``segment`` (row of ``segments``), ``address``, ``size``,
  ``requested_size`` (bytes), ``state`` (``active_allocated``, ``active_pending_free``,
  ``inactive``), ``stream``, ``pool``, ``site`` (:mod:`.snapshot_sites`). Older layouts (addresses
  implied by order, requested bytes from the history): :mod:`.snapshot_segments`.
- ``entries``: the ring buffer of each device in order: ``device``, ``index``, ``action``,
  ``addr``, ``size`` (bytes), ``stream``, ``time_us`` (-1 where the entry has none: PyTorch 2.0),
  ``device_free`` (bytes CUDA had free, on ``oom`` entries; -1 elsewhere).
- ``layout``: which PyTorch wrote the segments (:mod:`.snapshot_segments`); ``traced``: whether the
  entries record the allocator's actions (a dump without ``_record_memory_history``, or holding
  only its own ``snapshot`` entry, has none: the state at the dump is all there is).

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
from ...kineto import SNAPSHOT_TRACED_ACTIONS as TRACED_ACTIONS
from .snapshot_segments import frame as _frame
from .snapshot_segments import segment_tables
from .snapshot_sites import Sites

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
    layout: str = ""
    allocator_settings: dict = field(default_factory=dict)  # the allocator's, as recorded

    @property
    def traced(self) -> bool:
        return bool(self.entries["action"].isin(TRACED_ACTIONS).any())


def tables(snapshot: dict, columns: dict | None = None) -> SnapshotTables:
    """The tables of a snapshot dict; ``columns``: its trace as the C reader wrote it
    (:func:`hta_lite.load.readers.snapshot.read_snapshot_columns`)."""
    problems: Counter = Counter()
    traces = snapshot.get("device_traces")
    if traces is not None and not isinstance(traces, list):
        problems["device_traces that is not a list (left out)"] += 1
        traces = []
    odd = sum(not isinstance(t, list) for t in traces or [])
    if odd:
        problems["device trace that is not a list (left out)"] += odd
    sites = Sites()
    collecting = gc.isenabled()
    gc.disable()  # a million short-lived tuples, no cycles: the collector's passes cost half
    try:
        segments, blocks, block_frames, layout = segment_tables(
            snapshot.get("segments") or [], sites, problems
        )
        if columns is None:
            entries, entry_frames = _entries(traces or [], problems)
        else:
            entries, entry_frames = _entries_of_columns(traces or [], columns)
    finally:
        if collecting:
            gc.enable()
    _check_sizes(segments, ["total_size", "allocated_size", "active_size", "requested_size"])
    _check_sizes(blocks, ["size", "requested_size"])
    _check_sizes(entries, ["size"])
    times = entries["time_us"].to_numpy()
    if len(times) and (times.min() < -1 or times.max() >= TIME_LIMIT_US):
        bad = int(times.min()) if times.min() < -1 else int(times.max())
        raise SnapshotError(None, f"a trace entry at time_us {bad:,}: not a time a clock gives")
    return SnapshotTables(
        segments, blocks, entries, block_frames, entry_frames, sites, problems, layout
    )


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
    if len(parts) == 1 and isinstance(parts[0]["action"].dtype, pd.CategoricalDtype):
        return parts[0][names], frames
    # devices of other actions, or of none: the categories in order of first use, as the C
    # reader's columns give them
    out = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)
    codes, used = pd.factorize(out["action"].astype(object).to_numpy())
    out["action"] = pd.Categorical.from_codes(codes, categories=list(used))
    return out[names], frames


_INT_FIELDS = ("addr", "size", "stream", "time_us")


def _entries_of_columns(traces: list, columns: dict) -> tuple[pd.DataFrame, np.ndarray]:
    """The entries from the C reader's columns: each device's rows in their place in its list.
    The frames per row are the shared stack lists (an object array)."""
    owner = np.frombuffer(columns["owner"], np.int64)
    position = np.frombuffer(columns["position"], np.int64)
    device_of = {id(trace): d for d, trace in enumerate(traces)}
    device_of_owner = np.array([device_of.get(id(o), 0) for o in columns["owners"]], np.int64)
    device = device_of_owner[owner] if len(owner) else np.zeros(0, np.int64)
    order = np.lexsort((position, device))
    if (np.diff(order) == 1).all():
        order = slice(None)  # already in place: no copies
    # the categories in order of first use, as the unpickler's path gives them (the C reader
    # interns the actions of lists that are not a device's trace too)
    codes, used = pd.factorize(np.frombuffer(columns["action"], np.int32)[order])
    actions = [columns["actions"][k] for k in used.tolist()]
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
             _int(entry.get("stream")) or 0, _time(entry.get("time_us")),
             _int(entry.get("device_free")) if "device_free" in entry else -1)
        )  # fmt: skip
        frames.append(entry.get("frames") or [])
    names = ["device", "index", "action", "addr", "size", "stream", "time_us", "device_free"]
    return _frame(rows, names, ints=[n for n in names if n != "action"]), frames


def _time(value) -> int:
    """An entry's ``time_us``; -1 when it has none (PyTorch 2.0 recorded no times)."""
    return value if type(value) is int else -1
