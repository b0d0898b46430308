"""Fuse per-rank Kineto traces into one file the way AMD's trace fusion does: every rank's
process ids, correlation ids and flow ids moved to a range of their own, each process named
``RANK n - GPU`` / ``RANK n - CPU``, events without a numeric process (Kineto's ``Spans`` /
``Traces`` rows) left out, no header (no ``distributedInfo``, no ``deviceProperties``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

#: Kineto writes device indices as the pids of GPU processes
GPU_PIDS = range(64)
OFFSET = 10**9  # pid, correlation and flow id ranges of one rank


def fuse(files: dict[int, Path], out: Path) -> Path:
    events = []
    for rank, path in sorted(files.items()):
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt") as f:
            trace = json.load(f)
        named = set()
        for event in trace["traceEvents"]:
            pid = event.get("pid")
            if not isinstance(pid, int) or isinstance(pid, bool):
                continue
            event = dict(event, pid=rank * OFFSET + pid)
            args = dict(event.get("args") or {})
            for key in ("correlation", "External id"):
                if isinstance(args.get(key), int):
                    args[key] += rank * OFFSET
            if event.get("ph") in ("s", "f", "t") and isinstance(event.get("id"), int):
                event["id"] += rank * OFFSET
            if event.get("ph") == "M" and event.get("name") == "process_name":
                args["name"] = _process_name(rank, pid)
                named.add(pid)
            event["args"] = args
            events.append(event)
        for pid in sorted({e["pid"] - rank * OFFSET for e in events if e["pid"] // OFFSET == rank}
                          - named):  # fmt: skip
            events.append({"ph": "M", "name": "process_name", "pid": rank * OFFSET + pid,
                           "tid": 0, "args": {"name": _process_name(rank, pid)}})  # fmt: skip
    with gzip.open(out, "wt") as f:
        json.dump({"traceEvents": events}, f)
    return out


def _process_name(rank: int, pid: int) -> str:
    return f"RANK {rank} - GPU {pid}" if pid in GPU_PIDS else f"RANK {rank} - CPU"
