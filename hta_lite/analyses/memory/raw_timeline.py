"""The raw memory timeline that ``profile.export_memory_timeline_raw(path, device)`` writes:
a JSON list of ``[ts, action, bytes, category]`` (ts in ns, -1 for memory that existed before
profiling; ``bytes`` signed; ``category`` an index of :data:`hta_lite.kineto.MEMORY_CATEGORIES`).
HTA's ``MemoryAnalysis`` plots it by category; :func:`by_category` is that series.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import TraceParseError
from ...kineto import MEMORY_ACTIONS, MEMORY_CATEGORIES
from ...load import decode as dec

RAW_COLUMNS = ["ts", "action", "bytes", "category"]


def read(path: str | Path) -> pd.DataFrame:
    """The file (``.json`` or gzip) as ``ts`` (ns), ``action`` and ``category`` (names),
    ``bytes`` (int64); a file that is not such a list is a ``TraceParseError``."""
    import msgspec

    path = Path(path)
    try:
        rows = msgspec.json.decode(dec.read_bytes(path), type=list[tuple[int, int, int, int]])
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TraceParseError(
            path, f"not a raw memory timeline ([[ts, action, bytes, category], ...]): {exc}"
        ) from None
    data = np.array(rows, np.int64).reshape(-1, 4)
    categories = np.array(MEMORY_CATEGORIES, dtype=object)
    bad = (data[:, 3] < 0) | (data[:, 3] >= len(categories))
    if bad.any():
        raise TraceParseError(path, f"{int(bad.sum())} entries with an unknown category index")
    return pd.DataFrame(
        {
            "ts": data[:, 0],
            "action": [MEMORY_ACTIONS.get(a, f"action {a}") for a in data[:, 1].tolist()],
            "bytes": data[:, 2],
            "category": categories[data[:, 3]],
        }
    )


def by_category(raw: pd.DataFrame) -> pd.DataFrame:
    """Bytes held per category after each distinct time (rows: ``ts`` ns, memory that existed
    before profiling at the first real time; columns: the categories), as HTA's
    ``MemoryAnalysis`` computes it (entries taken in file order)."""
    if raw.empty:
        return pd.DataFrame(columns=["ts", *MEMORY_CATEGORIES])
    ts = raw["ts"].to_numpy()
    real = ts[ts >= 0]
    first = int(real.min()) if len(real) else 0
    ts = np.where(ts < 0, first, ts)
    wide = (
        pd.crosstab(
            index=np.arange(len(raw)), columns=raw["category"], values=raw["bytes"], aggfunc="sum"
        )
        .reindex(columns=list(MEMORY_CATEGORIES))
        .fillna(0)
        .astype(np.int64)
        .cumsum()
    )
    wide.insert(0, "ts", ts)
    return wide.groupby("ts", sort=False).last().reset_index()
