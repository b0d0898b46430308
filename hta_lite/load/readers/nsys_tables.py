"""Nsight Systems export tables (SQLite) -> rows of the table contract, in Kineto's words.

Each function reads one nsys table into a dict of numpy columns (``gpu`` rows: kernels, copies,
sets, synchronizations; ``cpu`` rows: runtime / driver calls, NVTX ranges); the reader
(:mod:`.nsys`) makes DataFrames of them. Times are nsys' (ns since the session start); absent
tables or columns give no rows or the column's absent value, as nsys creates both lazily and its
schema changed between versions (``../shared/nsys/README.md`` lists what a reader must respect).
"""

from __future__ import annotations

import mmap
import os
import re
import sqlite3
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...kineto import CPU_OP_CATEGORY, SYNC_OF_CALL
from ...rows import combine_codes
from ..health_items import note
from . import nccl_groups, nvtx_payloads
from .nvtx_ops import operator_columns

try:  # the optional C reader of integer columns (setup.py); without it SQLite reads them
    from .. import _sqlite_scan
except ImportError:  # pragma: no cover - depends on the build
    _sqlite_scan = None
if os.environ.get("HTA_LITE_NO_C"):
    _sqlite_scan = None

#: CUPTI's copy kinds and memory kinds, as Kineto names copies ("Memcpy HtoD (Pinned -> Device)")
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
              8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}  # fmt: skip
MEMORY_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed",
                5: "Device Static", 6: "Managed Static"}  # fmt: skip
#: CUPTI's synchronization types, as Kineto names the GPU-side syncs: only for a record whose
#: host call is not in the export (:func:`syncs`)
SYNC_TYPES = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
#: ``CUPTI_ACTIVITY_KIND_RUNTIME.eventClass``: the calls kept (others, such as backtrace rows,
#: repeat a call's correlation id)
RUNTIME_CLASSES = {0: "cuda_runtime", 1: "cuda_driver"}
#: ``NVTX_EVENTS.eventType``: push/pop and start/end ranges; marks
NVTX_RANGES, NVTX_MARK = (59, 60), 34
#: the version suffix nsys gives runtime call names (``cudaLaunchKernel_v7000``)
_VERSION_SUFFIX = re.compile(r"_v\d+$")


class Export:
    """An open export: which tables and columns it has, its strings. Bulk integer columns are
    read from the file's pages by the C reader (``_sqlite_scan``: 6x Arrow on a kernel table of
    2 M rows, measured) where it reads them, else through Arrow (``adbc_driver_sqlite``: 2.7x
    Python's ``sqlite3`` rows), else through ``sqlite3``, which casts every value to an integer
    in SQL: a text or real value a hostile file stores in an integer column reads as a number."""

    def __init__(self, con: sqlite3.Connection, path: Path | None = None):
        self.con = con
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        self.columns = {
            name: {r[1] for r in con.execute(f'PRAGMA table_info("{name}")')}
            for name in names
            if name.replace("_", "").isalnum()
        }
        self._strings: tuple | None = None
        self._arrow = _arrow_connection(path) if path is not None else None
        self._file = _mapped(path) if path is not None and _sqlite_scan is not None else None

    def close(self) -> None:
        if self._arrow is not None:
            self._arrow.close()
        if self._file is not None:
            self._file.close()
        self.con.close()

    def has(self, table: str) -> bool:
        return table in self.columns

    def ints(self, table: str, columns: list[str], where: str = "") -> np.ndarray:
        """int64 array (rows, columns) of ``table``; a column it lacks, or NULL, is -1."""
        if not self.has(table):
            return np.zeros((0, len(columns)), np.int64)
        present = self.columns[table] | {"rowid"}
        tail = f' FROM "{table}"' + (f" WHERE {where}" if where else "")
        fast = None if where else self._scanned_ints(table, columns)
        if fast is not None:
            return fast
        plain = [f'"{c}"' if c in present else "NULL" for c in columns]
        fast = self._arrow_ints(f"SELECT {', '.join(plain)}{tail}", len(columns))
        if fast is not None:
            return fast
        cast = [f'CAST(coalesce("{c}", -1) AS INTEGER)' if c in present else "-1" for c in columns]
        rows = self.con.execute(f"SELECT {', '.join(cast)}{tail}").fetchall()
        return np.array(rows, np.int64).reshape(-1, len(columns))

    def _scanned_ints(self, table: str, columns: list[str]) -> np.ndarray | None:
        """The columns read from the table's pages by the C reader (NULL: -1); None where it does
        not read them (a generated column or a default, a value of another type, a payload past
        its page: SQLite reads them then)."""
        if self._file is None:
            return None
        root = self.con.execute(
            "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        info = self.con.execute(f'PRAGMA table_xinfo("{table}")').fetchall()
        field = {r[1]: r[0] for r in info}
        keys = [r for r in info if r[5]]
        alias = keys[0][0] if len(keys) == 1 and keys[0][2].upper() == "INTEGER" else -1
        plain = all(r[6] == 0 and (r[4] is None or r[1] not in columns) for r in info)
        if not root or not isinstance(root[0], int) or not plain or len(info) > 64:
            return None
        fields = tuple(field.get(c, -2 if c == "rowid" else -1) for c in columns)
        raw = _sqlite_scan.ints(self._file, root[0], fields, alias)
        return None if raw is None else np.frombuffer(raw, np.int64).reshape(-1, len(columns))

    def _arrow_ints(self, sql: str, width: int) -> np.ndarray | None:
        """The columns through Arrow when every one reads as integers (NULL: -1); None for a
        column of another type (a hostile file's text in an integer column: sqlite3 casts)."""
        if self._arrow is None:
            return None
        try:
            with self._arrow.cursor() as cursor:
                cursor.execute(sql)
                table = cursor.fetch_arrow_table()
        except Exception:  # noqa: BLE001 - a type it could not infer: sqlite3 reads it
            return None
        out = np.empty((table.num_rows, width), np.int64)
        for i, column in enumerate(table.columns):
            if pa.types.is_null(column.type):
                out[:, i] = -1
            elif pa.types.is_integer(column.type):
                out[:, i] = pc.fill_null(column, -1).to_numpy()
            else:
                return None
        return out

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

    def strings(self, ids: np.ndarray, problems: Counter) -> pd.Categorical:
        """The ``StringIds`` text of each id (missing for an id not there, counted), each
        distinct id looked up once."""
        if self._strings is None:
            rows = self.con.execute("SELECT id, value FROM StringIds").fetchall() if self.has(
                "StringIds") else []  # fmt: skip
            keys = np.array([r[0] for r in rows], np.int64)
            values = np.array([r[1] if isinstance(r[1], str) else None for r in rows] + [None],
                              object)  # fmt: skip
            order = np.argsort(keys, kind="stable")
            self._strings = keys[order], values[np.append(order, len(rows))]
        keys, values = self._strings
        uniq, inverse = np.unique(ids, return_inverse=True)
        at = np.searchsorted(keys, uniq)
        found = (at < len(keys)) & (keys[np.minimum(at, len(keys) - 1)] == uniq) if len(keys) else (
            np.zeros(len(uniq), bool))  # fmt: skip
        counts = np.bincount(inverse.ravel(), minlength=len(uniq))
        note(problems, "nsys_string_missing", int(counts[~found & (uniq >= 0)].sum()))
        return categorical(np.where(found, values[np.where(found, at, len(keys))], None),
                           inverse.ravel())  # fmt: skip


def categorical(texts: np.ndarray, codes: np.ndarray) -> pd.Categorical:
    """``texts[codes]`` as a categorical (None: missing), from each distinct text once."""
    cat_codes, categories = pd.factorize(pd.Index(texts, dtype=object), use_na_sentinel=True)
    return pd.Categorical.from_codes(
        cat_codes[codes] if len(codes) else np.zeros(0, np.int64),
        categories=pd.Index(categories, dtype="str"),
    )


def pid_of(global_id: np.ndarray) -> np.ndarray:
    """The process id in a ``globalTid`` / ``globalPid`` (bits 24-47)."""
    return (global_id >> 24) & 0xFFFFFF


def tid_of(global_tid: np.ndarray) -> np.ndarray:
    return global_tid & 0xFFFFFF


def _dims(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> pd.Categorical:
    """``[x, y, z]`` text of each row, each distinct triple written once."""
    group, first = combine_codes([x, y, z])
    rows = zip(x[first].tolist(), y[first].tolist(), z[first].tolist())
    return categorical(np.array([f"[{a}, {b}, {c}]" for a, b, c in rows], object), group)


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
    group, first = combine_codes([m[:, 7], m[:, 8], m[:, 9]])
    names = categorical(np.array([
        f"Memcpy {COPY_KINDS.get(kind, 'unknown')} ({MEMORY_KINDS.get(src, 'Unknown')} ->"
        f" {MEMORY_KINDS.get(dst, 'Unknown')})"
        for kind, src, dst in m[first][:, 7:10].tolist()
    ], object), group)  # fmt: skip
    return _with_bytes(_gpu_base(m[:, :6], "gpu_memcpy", names), m[:, 6])


def sets(db: Export) -> dict:
    cols = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes",
            "memKind"]  # fmt: skip
    s = db.ints("CUPTI_ACTIVITY_KIND_MEMSET", cols)
    names = _by_value(s[:, 7], lambda k: f"Memset ({MEMORY_KINDS.get(k, 'Device')})")
    return _with_bytes(_gpu_base(s[:, :6], "gpu_memset", names), s[:, 6])


def _with_bytes(rows: dict, nbytes: np.ndarray) -> dict:
    """A copy's or set's bytes and bandwidth (GB/s: bytes per ns), as Kineto records them."""
    dur = rows["dur"]
    return {**rows, "bytes": nbytes,
            "memory_bw_gbps": np.where(dur > 0, nbytes / np.maximum(dur, 1), np.nan)}  # fmt: skip


def syncs(db: Export, calls: dict) -> dict:
    """The synchronization records, each named after the host call it belongs to (``calls``:
    :func:`runtime`'s rows; same process and correlation id), as Kineto names CUPTI's
    (:data:`...kineto.SYNC_OF_CALL`). The exports' type codes do not follow their own
    ``ENUM_CUPTI_SYNC_TYPE`` table (nsys 2024.6 and 2025.1 write 2, a stream's wait for an
    event there, for ``cudaStreamSynchronize``, and 0 for ``cudaDeviceSynchronize``; 2024.5
    writes 1, an event sync, for ``cudaDeviceSynchronize``): they name only a record whose call
    is not in the export."""
    cols = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "syncType",
            "deprecatedSyncType"]  # fmt: skip
    s = db.ints("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", cols)
    kind = np.where(s[:, 6] > 0, s[:, 6], s[:, 7])  # syncType 0 in some 2025 exports
    coded = np.asarray(_by_value(kind, lambda k: SYNC_TYPES.get(k, "Unknown Sync")), object)
    names = calls["name"]  # the calls that make a record (tested once per name)
    makes = np.array([SYNC_OF_CALL.get(c) for c in names.categories], object)
    known = np.isin(names.codes, np.flatnonzero(pd.notna(makes)))
    where = [pid_of(calls["global_tid"][known]), calls["correlation"][known]]
    made = pd.Series(makes[names.codes[known]], index=pd.MultiIndex.from_arrays(where))
    made = made[~made.index.duplicated()]
    by_call = made.reindex(pd.MultiIndex.from_arrays([pid_of(s[:, 5]), s[:, 4]])).to_numpy()
    named = np.where(pd.isna(by_call), coded, by_call)
    return _gpu_base(s[:, :6], "cuda_sync", categorical(named, np.arange(len(named))))


def _by_value(values: np.ndarray, name_of) -> pd.Categorical:
    """``name_of(value)`` of each row as a categorical, each distinct value named once."""
    uniq, inverse = np.unique(values, return_inverse=True)
    return categorical(np.array([name_of(v) for v in uniq.tolist()], object), inverse.ravel())


def _gpu_base(rows: np.ndarray, cat: str, names: np.ndarray) -> dict:
    start, end = rows[:, 0], rows[:, 1]
    return {"ts": start, "dur": end - start, "name": names, "cat": cat, "pid": rows[:, 2],
            "tid": rows[:, 3], "stream": rows[:, 3], "correlation": rows[:, 4],
            "device": rows[:, 2], "global_pid": rows[:, 5]}  # fmt: skip


def runtime(db: Export, problems: Counter) -> dict:
    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    r = db.ints(table, ["start", "end", "globalTid", "correlationId", "nameId", "eventClass"])
    kept = np.isin(r[:, 5], list(RUNTIME_CLASSES))
    note(problems, "nsys_runtime_rows_skipped", int((~kept).sum()))
    r = r[kept] if not kept.all() else r
    names = _renamed(db.strings(r[:, 4], problems))
    classes = np.array(list(RUNTIME_CLASSES.values()), object)
    cats = categorical(classes, np.searchsorted(list(RUNTIME_CLASSES), r[:, 5]))
    return {"ts": r[:, 0], "dur": r[:, 1] - r[:, 0], "name": names,
            "cat": cats, "global_tid": r[:, 2], "correlation": r[:, 3]}  # fmt: skip


def _texts(values: np.ndarray) -> pd.Categorical:
    codes, uniques = pd.factorize(pd.Index(values, dtype=object), use_na_sentinel=True)
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniques, dtype="str"))


def _renamed(names: pd.Categorical) -> pd.Categorical:
    """Runtime call names without nsys' version suffix (two versions of a call become one)."""
    stripped = np.array([_VERSION_SUFFIX.sub("", n) for n in names.categories], object)
    return categorical(np.append(stripped, None), np.where(names.codes < 0, len(stripped),
                                                           names.codes))  # fmt: skip


def nvtx(db: Export, problems: Counter) -> tuple[dict, dict]:
    """NVTX ranges as ``user_annotation`` rows (``cpu_op`` rows with their shapes where
    ``emit_nvtx`` wrote them: :mod:`.nvtx_ops`) and marks as instants; an unterminated range is
    left out and counted."""
    table = "NVTX_EVENTS"
    cols = ["start", "end", "eventType", "globalTid", "textId", "domainId", "rowid"]
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
    ops = operator_columns(_texts(text[keep]))  # emit_nvtx's operators, else annotations
    note(problems, "nvtx_operator_ranges", int((ops["cat"] == CPU_OP_CATEGORY).sum()))
    spans = {
        "ts": r[:, 0],
        "dur": r[:, 1] - r[:, 0],
        "name": _texts(ops["name"]),
        "cat": _texts(ops["cat"]),
        "sequence_number": ops["sequence_number"],
        "input_dims": _texts(ops["input_dims"]),
        "global_tid": r[:, 3],
        "correlation": np.full(len(r), -1),
    }
    names = np.asarray(ops["name"], object)
    payloads = nvtx_payloads.read(db, r[:, 6], r[:, 5], names, problems)  # NCCL: sizes, comms
    nccl_groups.carry(names, r[:, 0], r[:, 3], payloads, problems)
    spans["msg_bytes"], spans["group_size"] = payloads["msg_bytes"], payloads["nranks"]
    spans["nccl_rank"] = payloads["rank"]  # not a contract column: the reader's rank source
    spans["pg_name"] = _texts(payloads["comm"])
    marks = kind == NVTX_MARK
    m = n[marks]
    instants = {"ts": m[:, 0], "name": _texts(text[marks]), "global_tid": m[:, 3]}
    return spans, instants  # fmt: skip


def _mapped(path: Path) -> mmap.mmap | None:
    """The export file mapped read-only, None where it cannot be (empty, not a plain file)."""
    try:
        with open(path, "rb") as f:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None


def _arrow_connection(path: Path):
    """An ADBC connection to the export (read-only, immutable), None where the driver is not
    installed or cannot open it."""
    try:
        import adbc_driver_sqlite.dbapi as dbapi
    except ImportError:
        return None
    try:
        return dbapi.connect(f"file:{quote(str(path))}?mode=ro&immutable=1")
    except Exception:  # noqa: BLE001 - sqlite3 reads it then
        return None
