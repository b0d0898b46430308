"""The Nsight Systems reader: an ``nsys export --type sqlite`` file -> one
:class:`~hta_lite.load.finish.ReadRank` per process that ran GPU work.

Kernels, copies (named as Kineto does, with pageable / pinned / device from ``srcKind`` /
``dstKind``), sets and GPU-side synchronizations go to ``gpu``; CUDA runtime and driver calls
(their ``_v7000`` suffixes cut) and NVTX ranges (``user_annotation``) to ``cpu``, NVTX marks to
``instants``, process names to ``meta_events`` (:mod:`.nsys_tables`). Kernels link to their
launching call by (process, correlation id) in the finishing step, as Kineto's do. Times are
placed in wall-clock time (``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` + nsys' ns), so the
reports of one job line up. Steps are found by the finishing step, as for every format
(``ProfilerStep#N`` NVTX ranges, else :mod:`..steps_from_ranges`: a repeating range, the
repeating GPU work, else the capture as one step).

A file of one process with GPU work is one rank (its rank from the file name, as for Kineto
files); several are one rank each: the rank NCCL's payload gives each at its largest
communicator's creation where every one has a distinct one, else in process id order (said in
health). The file is opened read-only and immutable; a file that is not an SQLite database, or an
export without CUDA kernels, is a :class:`~hta_lite.errors.TraceFormatError` naming it.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from ...classify import COMMUNICATION, kernel_type
from ...errors import TraceFormatError
from .. import gzip_text
from ..contract import frame
from ..finish import ReadRank
from ..health_items import note
from ..tables import TIME_LIMIT_NS
from . import nsys_tables as nt

SUFFIXES = (".sqlite", ".sqlite.gz")
#: a report as ``nsys profile`` writes it: read after ``nsys export --type sqlite``
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
MAGIC = b"SQLite format 3\x00"
RECORD_HINT = (
    "record with `nsys profile -t cuda,nvtx --cuda-graph-trace=node ...` and export with"
    " `nsys export --type sqlite --include-blobs=true` (docs/nsight-systems.md)"
)


def looks_like(head: bytes) -> bool:
    return head.startswith(MAGIC)


def read(path: Path) -> list[ReadRank]:
    """The ranks of an export, ``path`` (gzipped: gunzipped into a temporary folder made for it
    and removed once read, ``nsys_export_gunzipped`` in health)."""
    with gzip_text.open_regular(path) as file:
        gzipped = file.read(2) == gzip_text.GZIP_MAGIC
    if not gzipped:
        return _read_file(path, path)
    folder = Path(tempfile.mkdtemp(prefix="hta_lite_nsys_"))
    try:
        target = folder / "export.sqlite"
        gzip_text.copy_text(path, target)
        parts = _read_file(target, path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # the folder made above, nothing else
    for part in parts:
        note(part.problems, "nsys_export_gunzipped", 1)
    return parts


def _read_file(file: Path, path: Path) -> list[ReadRank]:
    """The ranks of the export ``file`` (``path``: the trace it is, named in errors)."""
    try:
        con = sqlite3.connect(f"file:{quote(str(file))}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as exc:
        raise TraceFormatError(path, f"cannot open as an SQLite database ({exc})") from None
    try:
        db = nt.Export(con, file)
    except sqlite3.Error as exc:
        con.close()
        raise TraceFormatError(path, f"not a readable Nsight Systems export ({exc})") from None
    try:
        return _read(db, path)
    except sqlite3.Error as exc:
        raise TraceFormatError(path, f"not a readable Nsight Systems export ({exc})") from None
    finally:
        db.close()


def _read(db: nt.Export, path: Path) -> list[ReadRank]:
    if not db.count("CUPTI_ACTIVITY_KIND_KERNEL"):
        raise TraceFormatError(
            path, f"an Nsight Systems export without CUDA kernels: {RECORD_HINT}"
        )
    problems: Counter = Counter()
    calls = nt.runtime(db, problems)
    gpu = _concat([nt.kernels(db, problems), nt.copies(db), nt.sets(db), nt.syncs(db, calls)])
    spans, marks = nt.nvtx(db, problems)
    cpu = _concat([calls, spans])
    kinds = {kernel_type(str(n)) for n in gpu["name"].categories}
    if COMMUNICATION in kinds and not (cpu["msg_bytes"] >= 0).any():  # said once: sizes unknown
        note(problems, "nccl_payloads_absent", 1)
    start = _session_start(db, problems)
    for table in (gpu, cpu, marks):
        table["ts"] = table["ts"] + start
    gpu, cpu, marks = (_in_range(t, problems) for t in (gpu, cpu, marks))
    gpu_pid = nt.pid_of(gpu.pop("global_pid"))
    cpu_tid = cpu.pop("global_tid")
    cpu_pid = nt.pid_of(cpu_tid)
    cpu["pid"], cpu["tid"] = cpu_pid, nt.tid_of(cpu_tid)
    mark_tid = marks.pop("global_tid")
    marks["pid"], marks["tid"] = nt.pid_of(mark_tid), nt.tid_of(mark_tid)
    header = _header(db, start)
    processes = sorted(set(gpu_pid.tolist()))
    ranks = _nccl_ranks(cpu.pop("nccl_rank"), cpu["group_size"], cpu_pid, processes)
    parts = []
    for i, pid in enumerate(processes):
        mine = Counter(problems) if i == 0 else Counter()
        if len(processes) > 1:
            note(mine, "rank_from_nccl" if ranks else "rank_by_process_order", 1)
        if len(processes) == 1:
            note(mine, "nsys_other_process_rows", int((cpu_pid != pid).sum()))
        tables = _tables(_rows(gpu, gpu_pid == pid), _rows(cpu, cpu_pid == pid),
                         _rows(marks, marks["pid"] == pid), _meta_events(db, pid))  # fmt: skip
        rank = (ranks[i] if ranks else i) if len(processes) > 1 else None
        parts.append(ReadRank(tables, header, _events_read(tables), mine, rank, "nsys"))
    return parts


def _nccl_ranks(rank: np.ndarray, size: np.ndarray, cpu_pid: np.ndarray,
                processes: list[int]) -> list[int] | None:  # fmt: skip
    """Each process's rank in its largest NCCL communicator, as its creation's payload
    (``ncclCommInitRank``) records it (``rank``, ``size``: per cpu row, -1 unknown): the global
    rank of a job whose world is one communicator. None unless every process has one and no two
    share it."""
    ranks = []
    for pid in processes:
        at = np.flatnonzero((cpu_pid == pid) & (rank >= 0))
        if not len(at):
            return None
        ranks.append(int(rank[at[np.argmax(size[at])]]))
    return ranks if len(set(ranks)) == len(ranks) else None


def _concat(parts: list[dict]) -> dict:
    """Row dicts of one table joined; a column a part lacks gets its absent value, a scalar
    (a part's category) is broadcast to the part's rows; text stays categorical."""
    out = {}
    for key in sorted({k for p in parts for k in p}):
        pieces = []
        for part in parts:
            n, value = len(part["ts"]), part.get(key, _absent(key))
            if value is None or isinstance(value, str):
                value = nt.categorical(np.array([value], object), np.zeros(n, np.int64))
            elif np.ndim(value) == 0:
                value = np.full(n, value)
            pieces.append(value)
        text = any(isinstance(p, pd.Categorical) for p in pieces)
        out[key] = union_categoricals(pieces) if text else np.concatenate(pieces)
    return out


def _absent(key: str):
    if key == "memory_bw_gbps":
        return np.nan
    return None if key in ("name", "cat", "grid", "block", "input_dims", "pg_name") else -1


def _in_range(table: dict, problems: Counter) -> dict:
    """Rows whose time and duration are usable (0 <= ts, 0 <= dur, below 2**62 ns); the rest
    dropped and counted."""
    ts = table["ts"]
    dur = table.get("dur", np.zeros(len(ts), np.int64))
    ok = (ts >= 0) & (dur >= 0) & (ts < TIME_LIMIT_NS) & (dur < TIME_LIMIT_NS)
    note(problems, "nsys_time_out_of_range", int((~ok).sum()))
    return _rows(table, ok)


def _rows(table: dict, keep: np.ndarray) -> dict:
    """The rows ``keep`` of a table; the table itself (no copy) when that is every row."""
    if keep.all():
        return table
    return {k: (v[keep] if np.ndim(v) else v) for k, v in table.items()}


def _tables(gpu: dict, cpu: dict, marks: dict, meta: pd.DataFrame) -> dict[str, pd.DataFrame]:
    for table, order in ((gpu, np.lexsort((gpu["stream"], gpu["ts"]))),
                         (cpu, np.argsort(cpu["ts"], kind="stable"))):  # fmt: skip
        for key, value in table.items():  # in place: each column's unsorted copy freed as it goes
            table[key] = value[order]
    n_marks = len(marks["ts"])
    return {
        "gpu": frame("gpu", gpu, len(gpu["ts"])),
        "cpu": frame("cpu", cpu, len(cpu["ts"])),
        "gpu_annotations": frame("gpu_annotations", {"ts": [], "dur": []}, 0),
        "instants": frame("instants", {**marks, "cat": "nvtx_mark", "scope": "t"}, n_marks),
        "flows": frame("flows", {}, 0),
        "counters": frame("counters", {}, 0),
        "meta_events": meta,
        "kernel_counters": frame("kernel_counters", {}, 0),
    }


def _meta_events(db: nt.Export, pid: int) -> pd.DataFrame:
    """``process_name`` of the process (``PROCESSES``), as Kineto's metadata events."""
    rows = db.ints("PROCESSES", ["pid"]) if db.has("PROCESSES") else np.zeros((0, 1), np.int64)
    names = db.texts("PROCESSES", "name")
    values = [n for p, n in zip(rows[:, 0].tolist(), names) if p == pid and n]
    return frame("meta_events", {"name": "process_name", "pid": pid, "tid": 0,
                                 "value": values}, len(values))  # fmt: skip


def _session_start(db: nt.Export, problems: Counter) -> int:
    """``utcEpochNs`` of the capture's start (0 and counted when the export lacks it)."""
    rows = db.ints("TARGET_INFO_SESSION_START_TIME", ["utcEpochNs"])
    start = int(rows[0, 0]) if len(rows) else -1
    if not 0 <= start < TIME_LIMIT_NS // 2:
        note(problems, "nsys_no_session_start", 1)
        return 0
    return start


def _header(db: nt.Export, start: int) -> dict:
    """What the export says of the run, in the keys :class:`~hta_lite.load.metadata.
    TraceMetadata` reads: ``deviceProperties`` from ``TARGET_INFO_GPU`` (keyed by CUDA device id)
    and the export's own facts under ``nsys``."""
    cols = ["cuDevice", "id", "totalMemory", "smCount", "computeMajor", "computeMinor"]
    gpus = db.ints("TARGET_INFO_GPU", cols)
    names = db.texts("TARGET_INFO_GPU", "name")
    devices = [
        {"id": int(cuda if cuda >= 0 else gpu_id), "name": name or "", "totalGlobalMem": int(mem),
         "numSms": int(sms), "computeMajor": int(major), "computeMinor": int(minor)}
        for (cuda, gpu_id, mem, sms, major, minor), name in zip(gpus.tolist(), names)
    ]  # fmt: skip
    facts = {}
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if db.has(table):
            keys, values = db.texts(table, "name"), db.texts(table, "value")
            facts.update({k: v for k, v in zip(keys, values) if k and k.startswith("EXPORT_")})
    return {"deviceProperties": devices, "nsys": {"session_start_ns": start, **facts}}


def _events_read(tables: dict[str, pd.DataFrame]) -> dict[str, int]:
    out: Counter = Counter()
    for name in ("gpu", "cpu"):
        for cat, n in tables[name]["cat"].value_counts().items():
            out["X"] += int(n)
            out[f"X/{cat}"] += int(n)
    out["i"] = len(tables["instants"])
    return {k: v for k, v in out.items() if v}
