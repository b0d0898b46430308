"""Operator ranges in NVTX: what ``torch.autograd.profiler.emit_nvtx()`` records, one range per
operator named ``name[, seq = N][, op_id = M][, sizes = [[...], ...]][, input_op_ids = [...]]``
(PyTorch's ``getNvtxStr``; ``sizes`` with ``emit_nvtx(record_shapes=True)``).

A range is an operator when its text carries a sequence number, an op id or sizes, or its name
is an ATen operator's (``aten::empty``, written bare by older PyTorch without a sequence number;
other ``A::b`` names are C++ scopes, e.g. nvFuser's); it becomes a ``cpu_op`` row with its
``sequence_number`` and ``input_dims`` (the sizes, JSON text as Kineto writes ``Input Dims``).
Input types are not recorded: views that need the precision say so. Every other range stays a
``user_annotation``.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...kineto import ATEN_PREFIX, CPU_ANNOTATION_CATEGORY, CPU_OP_CATEGORY

_TEXT = re.compile(
    r"^(?P<name>.+?)(?:, seq = (?P<seq>-?\d{1,18}))?(?:, op_id = (?P<op_id>\d{1,18}))?"
    r"(?:, sizes = (?P<sizes>\[.*?\]))?(?:, input_op_ids = .*)?$",
    re.DOTALL,
)


def operator_columns(names: pd.Categorical) -> dict:
    """For NVTX range texts (categorical): ``name`` (the operator's, or the text), ``cat``
    (``cpu_op`` / ``user_annotation``), ``input_dims`` (None without sizes), as object arrays,
    and ``sequence_number`` (-1), each worked out once per distinct text."""
    texts = [str(t) for t in names.categories]
    parsed = [_parse(t) for t in texts]
    codes = np.asarray(names.codes)
    at = np.where(codes < 0, len(texts), codes)  # a range without text: an annotation

    def column(values: list, absent, dtype=object) -> np.ndarray:
        return np.array([*values, absent], dtype=dtype)[at]

    return {
        "name": column([p[0] for p in parsed], None),
        "cat": column([p[1] for p in parsed], CPU_ANNOTATION_CATEGORY),
        "sequence_number": column([p[2] for p in parsed], -1, np.int64),
        "input_dims": column([p[3] for p in parsed], None),
    }


def _parse(text: str) -> tuple[str, str, int, str | None]:
    """(name, category, sequence number, sizes text) of one range text."""
    match = _TEXT.match(text)
    if match is None:
        return text, CPU_ANNOTATION_CATEGORY, -1, None
    name, seq, op_id, sizes = match.group("name", "seq", "op_id", "sizes")
    is_op = (
        seq is not None or op_id is not None or sizes is not None or name.startswith(ATEN_PREFIX)
    )
    if not is_op:
        return text, CPU_ANNOTATION_CATEGORY, -1, None
    return name, CPU_OP_CATEGORY, int(seq) if seq is not None else -1, sizes
