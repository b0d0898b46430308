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
import pickle
from pathlib import Path

from ..errors import SnapshotError, TraceReadError
from . import gzip_text


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
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("segments"), list):
        raise SnapshotError(
            path, "a pickle, but not a memory snapshot (no 'segments' list in a dict)"
        )
    return snapshot
