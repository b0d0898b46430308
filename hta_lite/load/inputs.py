"""Operator inputs as a trace's tables hold them, decoded: the JSON texts of ``cpu.input_dims``,
``input_types``, ``concrete_inputs`` and ``pg_ranks`` (Kineto's ``Input Dims``, ``Input type``,
``Concrete Inputs``, ``Process Group Ranks``; other readers write the same texts).

The one place these texts are decoded; analyses ask here. Each function is memoised by text, so
a distinct text is decoded once a process, however many calls and ranks repeat it. Not decoded
at load: most views never read the inputs, and a reopen from the cache takes about as long as
decoding them (a trace of 1,357 distinct texts: 2.7 ms to decode them, 5.2 ms to reopen).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache

import msgspec

from ..kineto import DTYPE_BYTES, torch_dtype


@lru_cache(maxsize=65536)
def parse(text: str | None) -> list | None:
    """A JSON text of operator inputs as a list; None when absent, and when the text is no JSON
    list (cut short, nested past the interpreter's recursion limit, a string): a caller tells
    the two apart by the text."""
    if text is None or text != text:  # missing (NaN in object arrays)
        return None
    try:
        value = msgspec.json.decode(text)  # 3-5x faster than json.loads
    except RecursionError:
        return None
    except msgspec.DecodeError:  # NaN, integers past 64 bits: the standard library's reading
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):  # not JSON at all
            return None
    return value if isinstance(value, list) else None


@lru_cache(maxsize=4096)
def arg_tensors(dims_text: str, types_text: str) -> tuple[tuple[int, str], ...]:
    """Per argument of an op's recorded inputs: (elements, torch dtype). A tensor list's
    elements are summed over its tensors (its dtype is not recorded: ``""``); -1 elements for
    an argument that is not a tensor or whose shapes were not recorded (older PyTorch writes a
    ``TensorList`` as ``[]``)."""
    dims, types = parse(dims_text or None) or [], parse(types_text or None) or []
    out = []
    for shape, kind in zip(dims, types):
        if kind in DTYPE_BYTES and _is_shape(shape):
            out.append((math.prod(shape), torch_dtype(kind)))
        elif isinstance(shape, list) and shape and not _is_shape(shape):
            try:
                out.append((_total(shape), ""))
            except RecursionError:  # nested past the recursion limit: not a list of shapes
                out.append((-1, ""))
        else:
            out.append((-1, ""))
    return tuple(out)


def concrete_value(text, default=None):
    """One entry of ``Concrete Inputs`` (a Python literal written as text) as a value:
    ``"[1, 1]"`` -> [1, 1], ``"True"`` -> True; the text itself when it is not such a literal
    (or is nested past the recursion limit), ``default`` when absent or empty."""
    if not isinstance(text, str) or text == "":
        return default
    try:
        return json.loads(text.replace("True", "true").replace("False", "false"))
    except (ValueError, RecursionError):
        return text


def _is_shape(value) -> bool:
    return isinstance(value, list) and all(type(d) is int for d in value)


def _total(value) -> int:
    """Elements of a nested list of shapes (-1 when anything in it is not a shape)."""
    if _is_shape(value):
        return math.prod(value)
    if not isinstance(value, list):
        return -1
    parts = [_total(v) for v in value]
    return -1 if any(p < 0 for p in parts) else sum(parts)
