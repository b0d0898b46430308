"""Several ranks fused into one Kineto file (AMD TraceLens' and similar merge tools): split
back into one rank each.

Such a file names each process after its rank in a ``process_name`` metadata event
(``RANK 2 - GPU``, ``RANK 2 - CPU``, ``rank 2 ...``) and has no header of its own (no
``distributedInfo``); pids, correlation and flow ids are made distinct per rank by the merge.
Every row goes to the rank of its process; metadata rows without a process (pid -1) go to
every rank. Rows of a process no ``RANK n`` name claims are dropped and counted. What was
counted while reading the file is counted on its first rank.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import TraceFormatError
from ..finish import ReadRank
from ..health_items import note
from ..ranks import RANK_LIMIT, checked_rank

#: a process named after its rank: "RANK 3 - GPU", "rank3 CPU", "Rank 3"
RANK_PROCESS = re.compile(r"^\s*rank[\s_-]*(\d{1,10})\b", re.IGNORECASE)
#: the header fields of one rank, which a fused file's header cannot give for each
PER_RANK_FIELDS = ("distributedInfo",)


def split(
    tables: dict[str, pd.DataFrame], metadata: dict, health: Counter, path: Path
) -> list[ReadRank] | None:
    """One :class:`ReadRank` per rank of a fused file, in rank order; None for a file that
    names no process after a rank (one rank's trace)."""
    owners = _rank_of_pid(tables["meta_events"], path)
    if not owners:
        return None
    ranks = sorted(set(owners.values()))
    header = {k: v for k, v in metadata.items() if k not in PER_RANK_FIELDS}
    pid_to_rank = pd.Series(owners, dtype=np.int64)
    by_table = {name: _rank_column(df, pid_to_rank) for name, df in tables.items()}
    unclaimed = sum(int((rank_col == -1).sum()) for name, rank_col in by_table.items()
                    if name != "meta_events")  # fmt: skip
    parts = []
    for i, rank in enumerate(ranks):
        part_tables = {}
        for name, df in tables.items():
            keep = by_table[name] == rank
            if name == "meta_events":
                keep |= df["pid"].to_numpy() == -1
            part_tables[name] = df[keep].reset_index(drop=True)
        problems = Counter(health) if i == 0 else Counter()
        note(problems, "fused_file", len(ranks))
        note(problems, "rank_from_process_name", 1)
        if i == 0:
            note(problems, "fused_row_without_rank", unclaimed)
        parts.append(ReadRank(
            part_tables, header, _events_read(part_tables), problems, rank, "kineto (fused)"
        ))  # fmt: skip
    return parts


def _rank_of_pid(meta: pd.DataFrame, path: Path) -> dict[int, int]:
    """``{pid: rank}`` of the processes named after a rank; a pid named for two ranks is a
    :class:`TraceFormatError`."""
    names = meta[np.asarray(meta["name"] == "process_name")]
    owners: dict[int, int] = {}
    for pid, value in zip(names["pid"].tolist(), names["value"].astype(object).tolist()):
        match = RANK_PROCESS.match(str(value)) if value is not None else None
        if match is None:
            continue
        rank = checked_rank(int(match.group(1)), path, f"the rank in process name {value!r}")
        if owners.setdefault(pid, rank) != rank:
            raise TraceFormatError(
                path,
                f"fused trace: process {pid} is named for ranks {owners[pid]} and {rank};"
                " its rows cannot be split into ranks",
            )
    assert all(0 <= r < RANK_LIMIT for r in owners.values())
    return owners


def _rank_column(df: pd.DataFrame, pid_to_rank: pd.Series) -> np.ndarray:
    """The rank of each row (by its pid; -1: no process of a rank)."""
    if "pid" not in df.columns or df.empty:
        return np.full(len(df), -1, np.int64)
    index = pid_to_rank.index.get_indexer(df["pid"].to_numpy())
    return np.where(index >= 0, pid_to_rank.to_numpy()[index], -1)


def _events_read(tables: dict[str, pd.DataFrame]) -> dict[str, int]:
    """Events of one rank by phase (complete events also by category), from its tables."""
    out: Counter = Counter()
    for name in ("cpu", "gpu", "gpu_annotations"):
        for cat, n in tables[name]["cat"].value_counts().items():
            out["X"] += int(n)
            out[f"X/{cat}"] += int(n)
    out["i"] = len(tables["instants"])
    for ph, n in tables["flows"]["ph"].value_counts().items():
        out[str(ph)] += int(n)
    out["M"] = len(tables["meta_events"])
    return {k: v for k, v in out.items() if v}
