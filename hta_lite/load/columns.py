"""Helpers that turn lists of decoded values into typed numpy / pandas columns.

Each helper takes the fast path (one C-level conversion of the whole list) and
falls back to per-value coercion only when the list holds unexpected types; the
number of values it could not use is returned so the caller can report it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from itertools import count

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..rows import combine_codes  # noqa: F401 - readers build columns with it

MISSING_INT = -1  # reference convention for absent stream / correlation / ids
_INT_LIMIT = 2**62  # larger ids are unusable (stored as -1)


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
    """Like :func:`to_float`, as int64 with -1 for missing or unusable values; a number past
    int64 is unusable and counted with the values that are not numbers."""
    arr, bad = to_float(values)
    usable = np.isfinite(arr) & (np.abs(arr) < _INT_LIMIT)
    too_large = int((np.isfinite(arr) & ~usable).sum())
    return np.where(usable, arr, MISSING_INT).astype(np.int64), bad + too_large


def int_column(values: Sequence) -> tuple[np.ndarray, int]:
    """Values as int64 (-1 when missing or unusable).

    One C-level pass when the decoder typed every value as int. Returns ``(array, n_bad)``
    with ``n_bad`` the values present but not numeric.
    """
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values)), 0
    except (TypeError, ValueError, OverflowError):
        return to_int(values)


def factorize(values: Sequence) -> tuple[np.ndarray, list]:
    """Dense codes and distinct values in first-seen order (values must be hashable)."""
    first_seen: dict = {}
    # each distinct value keeps the position where it first appeared: one dict lookup per value
    first = np.fromiter(
        map(first_seen.setdefault, values, count()), dtype=np.int64, count=len(values)
    )
    is_first = first == np.arange(len(values))
    code_at = (
        np.cumsum(is_first) - 1
    )  # at a first occurrence: the number of distinct values before it
    return code_at[first], [values[i] for i in np.flatnonzero(is_first).tolist()]


def float_column(values: Sequence) -> np.ndarray:
    try:
        return np.fromiter(values, dtype=np.float64, count=len(values))
    except (TypeError, ValueError):
        return to_float(values)[0]


TEXT = "str"  # category dtype of every text column (pandas' string dtype)


_NO_TEXT = pd.CategoricalDtype(pd.Index([], dtype=TEXT))  # made once: 0.3 ms each time


def empty_category(n: int) -> pd.Categorical:
    """``n`` missing values of a text categorical (keeps its type through the cache)."""
    return pd.Categorical.from_codes(np.full(n, -1, np.int8), dtype=_NO_TEXT)


def to_category(values: Sequence) -> pd.Categorical:
    """Strings (lists joined with ',', other values as text) -> pandas categorical (None:
    missing)."""
    try:
        codes, categories = factorize(values)
    except TypeError:  # unhashable values (lists)
        return _lists_as_text(values).dictionary_encode().to_pandas().array
    return category_from_codes(codes, categories)


def category_from_codes(codes: np.ndarray, categories: list) -> pd.Categorical:
    """As :func:`to_category`, from factorized values (``categories``: distinct, first seen
    first)."""
    if None in categories:
        none_code = categories.index(None)
        codes = np.where(codes == none_code, -1, codes - (codes > none_code))
        del categories[none_code]
    if not all(
        isinstance(c, str) for c in categories
    ):  # e.g. grid / block tuples: text once per distinct value
        merged, categories = factorize([_text(c) for c in categories])
        codes = np.where(codes >= 0, merged[codes], -1)
    dtype = pd.CategoricalDtype(pd.Index(categories, dtype=TEXT)) if categories else _NO_TEXT
    return pd.Categorical.from_codes(codes.astype(np.int32), dtype=dtype)


def json_text_category(codes: np.ndarray, texts: list) -> pd.Categorical:
    """Factorized JSON texts (see :func:`factorize`) -> categorical of their canonical text
    (``json.dumps`` of the value: ``[[2, 3], [3]]`` whatever the trace's spacing; JSON null and
    absent: missing). Each distinct text is parsed once."""
    return category_from_codes(codes, _canonical_texts(texts))


def _canonical_texts(texts: list) -> list:
    """:func:`_canonical_json` of each text (None kept). Integer lists, the usual (shapes and
    strides), are respaced in one pass over all of them joined."""
    present = [t for t in texts if t is not None]
    joined = "\0".join(present)
    if all(present) and _INT_LISTS_OR_NUL.fullmatch(joined) and "-0" not in joined:
        canonical = iter(", ".join(joined.translate(_NO_SPACE).split(",")).split("\0"))
        return [None if t is None else next(canonical) for t in texts]
    return [None if t is None else _canonical_json(t) for t in texts]


def _canonical_json(text: str) -> str | None:
    # shapes and strides: only the spacing can differ (10x faster than a JSON round trip)
    if _INT_LISTS.fullmatch(text) and "-0" not in text:
        return ", ".join(text.translate(_NO_SPACE).split(","))
    parsed = json.loads(text)
    return None if parsed is None else json.dumps(parsed)


_INT_LISTS = re.compile(r"[\[\]0-9, \n\r\t-]+")
_INT_LISTS_OR_NUL = re.compile(r"[\[\]0-9, \n\r\t\0-]*")
_NO_SPACE = str.maketrans("", "", " \n\r\t")


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
