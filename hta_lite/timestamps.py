"""Exact conversion of JSON number text (microseconds) to int64 nanoseconds.

Kineto writes ``ts`` in microseconds with up to three decimals, often as
absolute epoch values such as ``1712195495519689.047``.  A float64 holds that
only to ~0.25 us, so the number text is parsed as a decimal by Arrow's CSV
reader (vectorized C++), and the scaled 128-bit decimal is read as int64.
"""
from __future__ import annotations

from operator import attrgetter
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

_NUMBER = r"^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$"
_EXACT = pa.decimal128(38, 3)  # 3 decimals of a microsecond = whole nanoseconds
_FINE = pa.decimal128(38, 12)
_READ = pcsv.ReadOptions(column_names=["v"], autogenerate_column_names=False)
_PARSE = pcsv.ParseOptions(quote_char=False, escape_char=False, delimiter="\x01", ignore_empty_lines=False)
_CONVERT = pcsv.ConvertOptions(column_types={"v": pa.string()}, strings_can_be_null=True, null_values=[""])


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
    text = b"\n".join(map(attrgetter(field), raws))
    table = pcsv.read_csv(pa.py_buffer(text + b"\n"), _READ, _PARSE, _CONVERT)
    col = table.column(0).combine_chunks()
    if len(col) != n:  # an event whose raw text held a newline: cannot happen for JSON numbers
        raise ValueError("internal error: timestamp column length mismatch")
    if b'"' in text:
        col = pc.replace_substring(col, '"', "")
    n_subns = 0
    try:
        dec = col.cast(_EXACT)  # fast path: plain numbers with at most 3 decimals (nulls stay null)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        ok = pc.match_substring_regex(col, _NUMBER)
        col = pc.if_else(ok, col, pa.scalar(None, pa.string()))
        try:
            dec = col.cast(_EXACT)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            dec, n_subns = _cast_fine(col)
    valid = dec.is_valid().to_numpy(zero_copy_only=False)
    words = np.frombuffer(dec.buffers()[1], dtype=np.int64)[2 * dec.offset :: 2][:n]
    high = np.frombuffer(dec.buffers()[1], dtype=np.int64)[2 * dec.offset + 1 :: 2][:n]
    in_range = (high == 0) & (words >= 0) | (high == -1) & (words < 0)
    valid &= in_range
    return np.where(valid, words, 0), valid, n_subns


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
