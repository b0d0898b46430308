"""The raw memory timeline that ``profile.export_memory_timeline_raw(path, device)`` writes:
a JSON list of ``[ts, action, bytes, category]`` (ts in ns, -1 for memory that existed before
profiling; ``bytes`` signed; ``category`` an index of :data:`hta_lite.kineto.MEMORY_CATEGORIES`).
HTA's ``MemoryAnalysis`` plots it by category; :func:`by_category` is that series.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import TraceParseError
from ...kineto import MEMORY_ACTIONS, MEMORY_CATEGORIES
from .. import decode as dec
from ..gzip_text import read_bytes, text_reader


def read(path: str | Path) -> bytes:
    """The file's text (gunzipped), for :func:`parse`."""
    return read_bytes(Path(path))


def parse(text: bytes, path: str | Path) -> np.ndarray:
    """The text of ``path`` as an int64 array of rows ``ts, action, bytes, category``; a file
    that is not such a list, or names an unknown category, is a ``TraceParseError``."""
    out = dec.int_rows(text, 4)
    if out is None:  # no C decoder, or not plain integer rows: msgspec decodes or names why
        import msgspec

        try:
            decoded = msgspec.json.decode(text, type=list[tuple[int, int, int, int]])
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise TraceParseError(
                path, f"not a raw memory timeline ([[ts, action, bytes, category], ...]): {exc}"
            ) from None
        try:
            out = np.array(decoded, np.int64).reshape(-1, 4)
        except OverflowError:
            raise TraceParseError(path, "a value outside the int64 range") from None
    category = out[:, 3]
    bad = (category < 0) | (category >= len(MEMORY_CATEGORIES))
    if bad.any():
        raise TraceParseError(path, f"{int(bad.sum())} entries with an unknown category index")
    return out


def table(rows: np.ndarray) -> pd.DataFrame:
    """The rows of :func:`parse` as a table: ``ts`` (ns), ``action`` and ``category``
    (categoricals of their names), ``bytes`` (int64)."""
    actions, action_codes = np.unique(rows[:, 1], return_inverse=True)
    action_names = [MEMORY_ACTIONS.get(a, f"action {a}") for a in actions.tolist()]
    return pd.DataFrame(
        {
            "ts": rows[:, 0],
            "action": pd.Categorical.from_codes(action_codes, action_names, validate=False),
            "bytes": rows[:, 2],
            "category": pd.Categorical.from_codes(rows[:, 3], MEMORY_CATEGORIES, validate=False),
        }
    )


def file_sums(path: str | Path) -> np.ndarray:
    """Bytes held per category after each run of entries with one ``ts``, as HTA's
    ``MemoryAnalysis`` computes it from the rows of :func:`parse`: entries in file order, a new
    row whenever ``ts`` changes; the run of memory that existed before profiling (ts -1) is the
    first row, placed at the first real time. int64 (runs, 1 + categories): ``ts`` (ns), then
    the categories. The C decoder sums the file's text as it is gunzipped, a piece at a time
    (neither the whole text nor an array of the rows is ever in memory); without it, or for a
    file it declines, numpy over :func:`parse`, which also names what is wrong with the file."""
    if dec._fastjson is not None:
        with text_reader(Path(path)) as (reader, size):
            sums = dec.category_sums(reader, len(MEMORY_CATEGORIES), size)
        if sums is not None:
            return sums
    return _category_sums(parse(read(path), path)).T


def by_category(sums: np.ndarray) -> pd.DataFrame:
    """:func:`file_sums` as a table (no copy): ``ts`` and one column per category."""
    return pd.DataFrame(sums, columns=_columns(), copy=False)


@functools.cache
def _columns() -> pd.Index:
    # a numpy dtype and array: pandas takes them as they are (``dtype=object`` is looked up
    # under a warnings filter, a list converted): 110-160 us instead of 130-225 in a fresh process
    names = np.array(["ts", *MEMORY_CATEGORIES], dtype=object)
    return pd.Index(names, dtype=names.dtype, copy=False)


def _category_sums(rows: np.ndarray) -> np.ndarray:
    """:func:`by_category`'s values without the C decoder: int64 (1 + categories, runs)."""
    ts, nbytes, category = rows[:, 0], rows[:, 2], rows[:, 3]
    last_of_run = np.flatnonzero(np.append(ts[1:] != ts[:-1], True)) if len(ts) else ts
    # one row per column, one buffer for every category's running sum: in a fresh process
    # each new array costs its pages (about 3 us per 4 KB here), more than the arithmetic
    out = np.empty((1 + len(MEMORY_CATEGORIES), len(last_of_run)), np.int64)
    real = ts[ts >= 0]
    np.maximum(ts[last_of_run], real.min() if len(real) else 0, out=out[0])
    held = np.empty(len(ts), np.int64)
    for index in range(len(MEMORY_CATEGORIES)):
        np.multiply(category == index, nbytes, out=held)
        np.cumsum(held, out=held)
        np.take(held, last_of_run, out=out[1 + index])
    return out
