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
    """Bytes held per category after each run of entries with one ``ts`` (rows: ``ts`` ns;
    columns: the categories), as HTA's ``MemoryAnalysis`` computes it: entries in file order, a
    new row whenever ``ts`` changes; the run of memory that existed before profiling (ts -1)
    is the first row, placed at the first real time."""
    if raw.empty:
        return pd.DataFrame(columns=["ts", *MEMORY_CATEGORIES])
    ts = raw["ts"].to_numpy()
    index = pd.Index(MEMORY_CATEGORIES).get_indexer(raw["category"])
    held = np.zeros((len(raw), len(MEMORY_CATEGORIES)), np.int64)
    held[np.arange(len(raw)), index] = raw["bytes"].to_numpy()
    held = np.cumsum(held, axis=0)
    last_of_run = np.append(ts[1:] != ts[:-1], True)
    real = ts[ts >= 0]
    first = int(real.min()) if len(real) else 0
    out = pd.DataFrame(held[last_of_run], columns=list(MEMORY_CATEGORIES))
    out.insert(0, "ts", np.where(ts[last_of_run] < 0, first, ts[last_of_run]))
    return out
