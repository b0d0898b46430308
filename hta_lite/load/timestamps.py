"""Exact conversion of JSON number text (microseconds) to int64 nanoseconds.

Kineto writes ``ts`` in microseconds with up to three decimals, often as
absolute epoch values such as ``1712195495519689.047``.  A float64 holds that
only to ~0.25 us, so the number text is parsed as a decimal by Arrow's CSV
reader (vectorized C++), and the scaled 128-bit decimal is read as int64.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

_NUMBER = r"^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$"
_EXACT = pa.decimal128(38, 3)  # 3 decimals of a microsecond = whole nanoseconds
_FINE = pa.decimal128(38, 12)
_READ = pcsv.ReadOptions(column_names=["v"], autogenerate_column_names=False)
_PARSE = pcsv.ParseOptions(
    quote_char=False, escape_char=False, delimiter="\x01", ignore_empty_lines=False
)
_NULLS = {"strings_can_be_null": True, "null_values": [""]}
_MAX_US = (2**63 - 1) // 1000  # larger microsecond values do not fit int64 nanoseconds


def raw_us_to_ns(raws: Sequence, field: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Convert ``getattr(event, field)`` raw JSON texts to int64 ns.

    Returns ``(ns, valid, n_subns)``: ``ns`` is 0 where ``valid`` is False
    (missing, null, non-numeric or out of range); ``n_subns`` counts values that
    had digits below a nanosecond (rounded toward zero).
    Quoted numbers (``"12.5"``) are accepted.
    """
    n = len(raws)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, bool), 0
    text = b"\n".join(list(map(attrgetter(field), raws))) + b"\n"
    if b'"' not in text and b"e" not in text and b"E" not in text:
        exact = _read_column(
            text, pa.int64() if b"." not in text else _EXACT
        )  # one C++ pass, no strings
        if exact is not None:
            return (*_to_ns(exact, n), 0)
    col = _read_column(text, pa.string())
    if b'"' in text:
        col = pc.replace_substring(col, '"', "")
    n_subns = 0
    try:
        dec = col.cast(_EXACT)  # plain numbers with at most 3 decimals (nulls stay null)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        ok = pc.match_substring_regex(col, _NUMBER)
        col = pc.if_else(ok, col, pa.scalar(None, pa.string()))
        try:
            dec = col.cast(_EXACT)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            dec, n_subns = _cast_fine(col)
    return (*_to_ns(dec, n), n_subns)


def _read_column(text: bytes, kind: pa.DataType) -> pa.Array | None:
    """One value per line, as ``kind`` (empty lines are null); None when a value does not fit."""
    try:
        table = pcsv.read_csv(
            pa.py_buffer(text),
            _READ,
            _PARSE,
            pcsv.ConvertOptions(column_types={"v": kind}, **_NULLS),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if kind == pa.string():
            raise
        return None
    return table.column(0).combine_chunks()


def _to_ns(col: pa.Array, n: int) -> tuple[np.ndarray, np.ndarray]:
    """int64 or decimal128(38, 3) microseconds -> (int64 ns, valid)."""
    if len(col) != n:  # an event whose raw text held a newline: cannot happen for JSON numbers
        raise ValueError("internal error: timestamp column length mismatch")
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    if pa.types.is_integer(col.type):
        us = col.fill_null(0).to_numpy()
        valid &= (us >= -_MAX_US) & (us <= _MAX_US)
        return np.where(valid, us * 1000, 0), valid
    words = np.frombuffer(col.buffers()[1], dtype=np.int64)[2 * col.offset :: 2][:n]
    high = np.frombuffer(col.buffers()[1], dtype=np.int64)[2 * col.offset + 1 :: 2][:n]
    valid &= (high == 0) & (words >= 0) | (high == -1) & (words < 0)
    return np.where(valid, words, 0), valid


def _cast_fine(col: pa.Array) -> tuple[pa.Array, int]:
    """Slow path for values with more than 3 decimals or exponents.

    Values beyond int64 nanoseconds (|v| > 9e15 us) become null; digits below
    a picosecond are truncated; the result is truncated to whole nanoseconds.
    """
    magnitude = pc.abs(pc.cast(col, pa.float64()))
    col = pc.if_else(pc.less_equal(magnitude, 9e15), col, pa.scalar(None, pa.string()))
    fine = pc.cast(col, _FINE, safe=False)
    coarse = pc.cast(fine, _EXACT, safe=False)
    n_subns = int(pc.sum(pc.not_equal(pc.cast(coarse, _FINE), fine)).as_py() or 0)
    return coarse, n_subns
