"""Nsight Systems export tables (SQLite) -> rows of the table contract, in Kineto's words.

Each function reads one nsys table into a dict of numpy columns (``gpu`` rows: kernels, copies,
sets, synchronizations; ``cpu`` rows: runtime / driver calls, NVTX ranges); the reader
(:mod:`.nsys`) makes DataFrames of them. Times are nsys' (ns since the session start); absent
tables or columns give no rows or the column's absent value, as nsys creates both lazily and its
schema changed between versions (``../shared/nsys/README.md`` lists what a reader must respect).
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter

import numpy as np

from ..health_items import note

#: CUPTI's copy kinds and memory kinds, as Kineto names copies ("Memcpy HtoD (Pinned -> Device)")
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
              8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}  # fmt: skip
MEMORY_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed",
                5: "Device Static", 6: "Managed Static"}  # fmt: skip
#: CUPTI's synchronization types, as Kineto names the GPU-side syncs
SYNC_TYPES = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
#: ``CUPTI_ACTIVITY_KIND_RUNTIME.eventClass``: the calls kept (others, such as backtrace rows,
#: repeat a call's correlation id)
RUNTIME_CLASSES = {0: "cuda_runtime", 1: "cuda_driver"}
#: ``NVTX_EVENTS.eventType``: push/pop and start/end ranges; marks; a domain's creation
NVTX_RANGES, NVTX_MARK, NVTX_DOMAIN = (59, 60), 34, 75
#: the version suffix nsys gives runtime call names (``cudaLaunchKernel_v7000``)
_VERSION_SUFFIX = re.compile(r"_v\d+$")


class Export:
    """An open export: which tables and columns it has, its strings."""

    def __init__(self, con: sqlite3.Connection):
        self.con = con
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        self.columns = {
            name: {r[1] for r in con.execute(f'PRAGMA table_info("{name}")')}
            for name in names
            if name.replace("_", "").isalnum()
        }
        self._strings: tuple | None = None

    def has(self, table: str) -> bool:
        return table in self.columns

    def ints(self, table: str, columns: list[str], where: str = "") -> np.ndarray:
        """int64 array (rows, columns) of ``table``; a column it lacks, or NULL, is -1."""
        if not self.has(table):
            return np.zeros((0, len(columns)), np.int64)
        present = self.columns[table]
        exprs = [f'coalesce("{c}", -1)' if c in present else "-1" for c in columns]
        sql = f'SELECT {", ".join(exprs)} FROM "{table}"' + (f" WHERE {where}" if where else "")
        rows = self.con.execute(sql).fetchall()
        return np.array(rows, np.int64).reshape(-1, len(columns))

    def texts(self, table: str, column: str, where: str = "") -> list:
        """A text column (None where NULL or absent)."""
        if column not in self.columns.get(table, set()):
            return [None] * self.count(table, where)  # no table: no rows
        sql = f'SELECT "{column}" FROM "{table}"' + (f" WHERE {where}" if where else "")
        return [r[0] if isinstance(r[0], str) else None for r in self.con.execute(sql)]

    def count(self, table: str, where: str = "") -> int:
        if not self.has(table):
            return 0
        sql = f'SELECT count(*) FROM "{table}"' + (f" WHERE {where}" if where else "")
        return int(self.con.execute(sql).fetchone()[0])

    def strings(self, ids: np.ndarray, problems: Counter) -> np.ndarray:
        """The ``StringIds`` text of each id (object array; None for an id not there, counted)."""
        if self._strings is None:
            rows = self.con.execute("SELECT id, value FROM StringIds").fetchall() if self.has(
                "StringIds") else []  # fmt: skip
            keys = np.array([r[0] for r in rows], np.int64)
            values = np.array([r[1] if isinstance(r[1], str) else None for r in rows] + [None],
                              object)  # fmt: skip
            order = np.argsort(keys, kind="stable")
            self._strings = keys[order], values[np.append(order, len(rows))]
        keys, values = self._strings
        at = np.searchsorted(keys, ids)
        found = (at < len(keys)) & (keys[np.minimum(at, len(keys) - 1)] == ids) if len(keys) else (
            np.zeros(len(ids), bool))  # fmt: skip
        missing = int((~found & (ids >= 0)).sum())
        note(problems, "nsys_string_missing", missing)
        return np.where(found, values[np.where(found, at, len(keys))], None)


def pid_of(global_id: np.ndarray) -> np.ndarray:
    """The process id in a ``globalTid`` / ``globalPid`` (bits 24-47)."""
    return (global_id >> 24) & 0xFFFFFF


def tid_of(global_tid: np.ndarray) -> np.ndarray:
    return global_tid & 0xFFFFFF


def _dims(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    return np.array([f"[{a}, {b}, {c}]" for a, b, c in zip(x.tolist(), y.tolist(), z.tolist())],
                    object)  # fmt: skip


def kernels(db: Export, problems: Counter) -> dict:
    cols = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName",
            "registersPerThread", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
            "staticSharedMemory", "dynamicSharedMemory"]  # fmt: skip
    k = db.ints("CUPTI_ACTIVITY_KIND_KERNEL", cols)
    out = _gpu_base(k[:, :6], "kernel", db.strings(k[:, 6], problems))
    shared = np.where((k[:, 14] >= 0) & (k[:, 15] >= 0), k[:, 14] + k[:, 15], -1)
    out.update(registers_per_thread=k[:, 7], shared_memory=shared,
               grid=_dims(*k[:, 8:11].T), block=_dims(*k[:, 11:14].T))  # fmt: skip
    return out


def copies(db: Export) -> dict:
    cols = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes",
            "copyKind", "srcKind", "dstKind"]  # fmt: skip
    m = db.ints("CUPTI_ACTIVITY_KIND_MEMCPY", cols)
    names = np.array([
        f"Memcpy {COPY_KINDS.get(kind, 'unknown')} ({MEMORY_KINDS.get(src, 'Unknown')} ->"
        f" {MEMORY_KINDS.get(dst, 'Unknown')})"
        for kind, src, dst in zip(m[:, 7].tolist(), m[:, 8].tolist(), m[:, 9].tolist())
    ], object)  # fmt: skip
    return _with_bytes(_gpu_base(m[:, :6], "gpu_memcpy", names), m[:, 6])


def sets(db: Export) -> dict:
    cols = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes",
            "memKind"]  # fmt: skip
    s = db.ints("CUPTI_ACTIVITY_KIND_MEMSET", cols)
    kinds = [MEMORY_KINDS.get(k, "Device") for k in s[:, 7].tolist()]
    names = np.array([f"Memset ({k})" for k in kinds], object)
    return _with_bytes(_gpu_base(s[:, :6], "gpu_memset", names), s[:, 6])


def _with_bytes(rows: dict, nbytes: np.ndarray) -> dict:
    """A copy's or set's bytes and bandwidth (GB/s: bytes per ns), as Kineto records them."""
    dur = rows["dur"]
    return {**rows, "bytes": nbytes,
            "memory_bw_gbps": np.where(dur > 0, nbytes / np.maximum(dur, 1), np.nan)}  # fmt: skip


def syncs(db: Export) -> dict:
    cols = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "syncType",
            "deprecatedSyncType"]  # fmt: skip
    s = db.ints("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", cols)
    kind = np.where(s[:, 6] > 0, s[:, 6], s[:, 7])  # syncType 0 in some 2025 exports
    names = np.array([SYNC_TYPES.get(k, "Unknown Sync") for k in kind.tolist()], object)
    return _gpu_base(s[:, :6], "cuda_sync", names)


def _gpu_base(rows: np.ndarray, cat: str, names: np.ndarray) -> dict:
    start, end = rows[:, 0], rows[:, 1]
    return {"ts": start, "dur": end - start, "name": names, "cat": cat, "pid": rows[:, 2],
            "tid": rows[:, 3], "stream": rows[:, 3], "correlation": rows[:, 4],
            "device": rows[:, 2], "global_pid": rows[:, 5]}  # fmt: skip


def runtime(db: Export, problems: Counter) -> dict:
    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    classes = ", ".join(str(c) for c in RUNTIME_CLASSES)
    other = db.count(table, f"eventClass NOT IN ({classes})") if db.has(table) else 0
    note(problems, "nsys_runtime_rows_skipped", other)
    r = db.ints(table, ["start", "end", "globalTid", "correlationId", "nameId", "eventClass"],
                f"eventClass IN ({classes})" if db.has(table) else "")  # fmt: skip
    names = [_VERSION_SUFFIX.sub("", n) if n else n for n in db.strings(r[:, 4], problems)]
    cats = np.array([RUNTIME_CLASSES[c] for c in r[:, 5].tolist()], object)
    return {"ts": r[:, 0], "dur": r[:, 1] - r[:, 0], "name": np.array(names, object),
            "cat": cats, "global_tid": r[:, 2], "correlation": r[:, 3]}  # fmt: skip


def nvtx(db: Export, problems: Counter) -> tuple[dict, dict]:
    """NVTX ranges as ``user_annotation`` rows and marks as instants; an unterminated range is
    left out and counted."""
    table = "NVTX_EVENTS"
    cols = ["start", "end", "eventType", "globalTid", "textId", "domainId"]
    n = db.ints(table, cols)
    texts = np.array(db.texts(table, "text"), object) if len(n) else np.zeros(0, object)
    named = db.strings(n[:, 4], Counter())  # textId: absent where text is given
    absent = np.array([t is None for t in texts], bool)
    text = np.where(absent, named, texts)
    kind = n[:, 2]
    ranges = np.isin(kind, NVTX_RANGES)
    open_ended = ranges & (n[:, 1] < n[:, 0])
    note(problems, "nvtx_range_without_end", int(open_ended.sum()))
    keep = ranges & ~open_ended
    note(
        problems, "nvtx_without_text", int((keep & np.array([t is None for t in text], bool)).sum())
    )
    r = n[keep]
    spans = {
        "ts": r[:, 0],
        "dur": r[:, 1] - r[:, 0],
        "name": text[keep],
        "cat": "user_annotation",
        "global_tid": r[:, 3],
        "correlation": np.full(len(r), -1),
    }
    marks = kind == NVTX_MARK
    m = n[marks]
    instants = {"ts": m[:, 0], "name": text[marks], "global_tid": m[:, 3]}
    return spans, instants  # fmt: skip
