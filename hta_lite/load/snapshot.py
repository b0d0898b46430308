"""Reading a CUDA memory snapshot (``torch.cuda.memory._dump_snapshot``): a pickled dict.

Untrusted input, so the file is read by an unpickler that refuses every global: a snapshot holds
only dicts, lists, tuples, strings, numbers (integers of any size) and booleans, and a pickle
needs a global for anything that could run (a class to build, a function to call). Such a file
is a :class:`~hta_lite.errors.SnapshotError` naming the global, raised when the unpickler meets
it, before it is looked up: nothing from the file executes. Gzip-compressed pickles are read
too (the gzip bomb limits of trace files apply). A ``torch.save`` zip, JSON, a truncated or
corrupt file, or a pickle that is not a snapshot dict is a clear error naming the file.
"""

from __future__ import annotations

import gc
import io
import os
import pickle
from pathlib import Path

import numpy as np

from ..errors import SnapshotError, TraceReadError
from . import gzip_text

try:  # the optional C reader (setup.py); without it the restricted unpickler reads every file
    from . import _snapshot_pickle
except ImportError:  # pragma: no cover - depends on the build
    _snapshot_pickle = None
if os.environ.get("HTA_LITE_NO_C"):  # as for the trace decoder: rule the C readers out
    _snapshot_pickle = None


class _PlainData(pickle.Unpickler):
    """An unpickler for plain data: every global and persistent id is refused."""

    def __init__(self, file, path: Path):
        super().__init__(file)
        self.path = path

    def find_class(self, module: str, name: str):
        raise SnapshotError(
            self.path,
            f"the pickle names the Python global {module}.{name}, which a memory snapshot never"
            " does: refused, and nothing from the file was run",
        )

    def persistent_load(self, pid):
        raise SnapshotError(self.path, "the pickle refers to persistent objects: not a snapshot")


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
        snapshot = _PlainData(io.BytesIO(data), path).load()
    except SnapshotError:
        raise
    except (EOFError, pickle.UnpicklingError, ValueError, IndexError, TypeError) as exc:
        raise SnapshotError(path, f"not a readable pickle, or cut short ({exc})") from None
    except RecursionError:
        raise SnapshotError(path, "a pickle nested too deeply to be a snapshot") from None
    finally:
        if collecting:
            gc.enable()
    if not _is_snapshot(snapshot):
        raise SnapshotError(
            path, "a pickle, but not a memory snapshot (no 'segments' list in a dict)"
        )
    return snapshot, None


def _is_snapshot(snapshot) -> bool:
    return isinstance(snapshot, dict) and isinstance(snapshot.get("segments"), list)


def _rows_in_traces(snapshot: dict, columns: dict) -> bool:
    """Every row of the C reader is an entry of a device's trace, and those hold nothing else."""
    traces = snapshot.get("device_traces")
    if not isinstance(traces, list):
        return columns["rows"] == 0
    lists = [t for t in traces if isinstance(t, list)]
    owners = {id(t) for t in lists}
    held = sum(len(t) for t in lists)
    if held != columns["rows"] or len(owners) != len(lists):
        return False
    owner = np.unique(np.frombuffer(columns["owner"], np.int64)).tolist()
    return set(owner) <= owners and all(t.count(None) == len(t) for t in lists)
