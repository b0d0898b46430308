"""Reading a CUDA memory snapshot (``torch.cuda.memory._dump_snapshot``): a pickled dict, or the
bare list of segments ``torch.cuda.memory_snapshot()`` returns (read as a dict without trace).

Untrusted input, so the file is read by an unpickler of plain data (:mod:`.plain_pickle`): a
snapshot holds only dicts, lists, tuples, strings, int64 integers, floats and booleans, and a
pickle needs a global for anything that could run (a class to build, a function to call). Such a
file, or one that asks for more than plain data or more memory than its size, is a
:class:`~hta_lite.errors.SnapshotError` naming the file (and the global), raised before anything
is looked up: nothing from the file executes. Gzip-compressed pickles are read
too (the gzip bomb limits of trace files apply). A ``torch.save`` zip, JSON, a truncated or
corrupt file, or a pickle that is not a snapshot dict is a clear error naming the file.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np

from ...errors import SnapshotError, TraceReadError
from .. import gzip_text
from ..plain_pickle import PlainData
from .snapshot_tables import SnapshotTables, tables

try:  # the optional C reader (setup.py); without it the restricted unpickler reads every file
    from .. import _snapshot_pickle
except ImportError:  # pragma: no cover - depends on the build
    _snapshot_pickle = None
if os.environ.get("HTA_LITE_NO_C"):  # as for the trace decoder: rule the C readers out
    _snapshot_pickle = None


def read(path: str | Path) -> SnapshotTables:
    """The tables of the snapshot at ``path`` (:mod:`.snapshot_tables`), before the finishing
    step (:func:`hta_lite.load.finish.finish_snapshot`)."""
    data, columns = read_snapshot_columns(path)
    try:
        out = tables(data, columns)
    except SnapshotError as exc:
        raise SnapshotError(path, exc.problem) from None
    settings = data.get("allocator_settings")
    out.allocator_settings = settings if isinstance(settings, dict) else {}
    return out


def read_snapshot(path: str | Path) -> dict:
    """The snapshot dict of ``path`` (``segments``, ``device_traces``, ...)."""
    return read_snapshot_columns(path, columns=False)[0]


def read_snapshot_columns(path: str | Path, columns: bool = True) -> tuple[dict, dict | None]:
    """The snapshot dict of ``path`` and, where the C reader read it, its trace as columns
    (``_snapshot_pickle.c``: then each ``device_traces`` list holds None per entry, and the
    columns' ``owner`` / ``position`` say which list and place each row is); else None and
    the whole trace in the dict."""
    path = Path(path)
    try:
        data = gzip_text.read_bytes(path)
    except TraceReadError as exc:
        raise SnapshotError(path, exc.problem) from None
    if data[:4] == b"PK\x03\x04":
        raise SnapshotError(
            path,
            "a zip archive (torch.save writes these), not a memory snapshot: write one with"
            " torch.cuda.memory._dump_snapshot(path)",
        )
    if data[:1] != b"\x80" and data.lstrip()[:1] in (b"{", b"["):
        raise SnapshotError(path, "JSON text, not a pickled memory snapshot")
    if columns and _snapshot_pickle is not None:
        fast = _snapshot_pickle.read(data)
        if fast is not None and _is_snapshot(fast[0]) and _rows_in_traces(*fast):
            return fast
    collecting = gc.isenabled()
    gc.disable()  # millions of dicts and no cycles: the collector's passes would double the time
    try:
        snapshot = PlainData(data, path).load()
    finally:
        if collecting:
            gc.enable()
    if _is_segment_list(snapshot):  # torch.cuda.memory_snapshot(), pickled as it comes
        snapshot = {"segments": snapshot, "device_traces": []}
    if not _is_snapshot(snapshot):
        raise SnapshotError(
            path,
            "a pickle, but not a memory snapshot (neither a dict with a 'segments' list nor a"
            " list of segments)",
        )
    return snapshot, None


def _is_segment_list(data) -> bool:
    """A list of segment dicts (``torch.cuda.memory_snapshot()``: each with ``blocks``)."""
    return isinstance(data, list) and all(
        isinstance(s, dict) and "blocks" in s and "total_size" in s for s in data
    )


def _is_snapshot(snapshot) -> bool:
    return isinstance(snapshot, dict) and isinstance(snapshot.get("segments"), list)


def _rows_in_traces(snapshot: dict, columns: dict) -> bool:
    """Every row of the C reader is an entry of a device's trace, and those hold nothing else."""
    traces = snapshot.get("device_traces")
    if not isinstance(traces, list):
        return columns["rows"] == 0
    lists = [t for t in traces if isinstance(t, list)]
    ids = {id(t) for t in lists}  # the lists and the reader's owners are alive: ids are theirs
    held = sum(len(t) for t in lists)
    if held != columns["rows"] or len(ids) != len(lists):
        return False
    used = np.unique(np.frombuffer(columns["owner"], np.int64)).tolist()
    owners = columns["owners"]
    return all(id(owners[k]) in ids for k in used) and all(t.count(None) == len(t) for t in lists)
