"""Helpers that turn lists of decoded values into typed numpy / pandas columns.

Each helper takes the fast path (one C-level conversion of the whole list) and
falls back to per-value coercion only when the list holds unexpected types; the
number of values it could not use is returned so the caller can report it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

MISSING_INT = -1  # reference convention for absent stream / correlation / ids


def take(values: Sequence, index: np.ndarray) -> list:
    """``[values[i] for i in index]`` without an interpreted loop."""
    return list(map(values.__getitem__, index.tolist()))


def _objects(values: Sequence) -> np.ndarray:
    return np.fromiter(values, dtype=object, count=len(values))


def to_float(values: Sequence) -> tuple[np.ndarray, int]:
    """Numbers or numeric / hex strings -> float64; else NaN.

    Returns ``(array, n_bad)``: ``n_bad`` counts values present but not numeric.
    """
    objs = _objects(values)
    arr = pd.to_numeric(objs, errors="coerce").astype(np.float64, copy=False)
    unparsed = np.isnan(arr) & ~np.equal(objs, None)
    if not unparsed.any():
        return arr, 0
    idx = np.flatnonzero(unparsed)
    arr[idx] = [_one_number(v) for v in objs[idx]]
    return arr, int(np.isnan(arr[idx]).sum())


def to_int(values: Sequence) -> tuple[np.ndarray, int]:
    """Like :func:`to_float`, as int64 with -1 for missing or unusable values."""
    arr, bad = to_float(values)
    usable = np.isfinite(arr) & (np.abs(arr) < 2.0**62)
    return np.where(usable, arr, MISSING_INT).astype(np.int64), bad


def to_category(values: Sequence) -> pd.Categorical:
    """Strings (or lists, joined with ',') -> dictionary-encoded pandas categorical."""
    try:
        arr = pa.array(values, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        arr = _lists_as_text(values)
    return arr.dictionary_encode().to_pandas().array


def _lists_as_text(values: Sequence) -> pa.Array:
    try:
        lists = pa.array(values)
        if pa.types.is_list(lists.type):
            return pc.binary_join(lists.cast(pa.list_(pa.string())), ",")
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        pass
    return pa.array([None if v is None else _text(v) for v in values], type=pa.string())


def _text(v) -> str:
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v))
    return str(v)


def _one_number(v) -> float:
    if v is None or isinstance(v, bool):
        return np.nan
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(int(v, 0)) if v.strip().lower().startswith(("0x", "-0x")) else float(v)
        except ValueError:
            return np.nan
    return np.nan
