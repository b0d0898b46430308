"""A digest of every table of a loaded rank, and of every table of the operator view: columns,
dtypes, categories and values. Equal digests mean identical tables (``tests/test_table_digests.py``
holds a change to them)."""

from __future__ import annotations

import hashlib

import pandas as pd

from hta_lite.facade.missing import why
from hta_lite.load.rank_trace import RankTrace


def table_digest(df: pd.DataFrame) -> str:
    """The same on pandas 2 and 3: a text column is ``str`` on pandas 3 and ``object`` on
    pandas 2, digested there as pandas 3's ``str`` (on pandas 3, ``object`` stays itself)."""
    columns = [(name, _as_str(df.iloc[:, i])) for i, name in enumerate(df.columns)]
    h = hashlib.blake2b(digest_size=12)
    h.update(repr([(name, str(col.dtype)) for name, col in columns]).encode())
    for _, col in columns:
        if isinstance(col.dtype, pd.CategoricalDtype):
            h.update(repr(col.cat.categories.tolist()).encode())
            h.update(col.cat.codes.to_numpy().astype("int64").tobytes())
        else:
            h.update(pd.util.hash_pandas_object(col, index=False).to_numpy().tobytes())
    return h.hexdigest()


PANDAS_2 = int(pd.__version__.split(".")[0]) < 3


def _as_str(col: pd.Series) -> pd.Series:
    text = col.dtype == object and pd.api.types.infer_dtype(col, skipna=True) in ("string", "empty")
    if PANDAS_2 and text:
        return col.astype(pd.StringDtype(na_value=float("nan")))
    return col


def trace_digests(trace: RankTrace) -> dict[str, str]:
    return {name: table_digest(getattr(trace, name)) for name in RankTrace.TABLES}


OPERATOR_CALLS = {
    "instances": lambda a: a.get_operator_instances(),
    **{f"summary_{by}": (lambda a, by=by: a.get_operator_summary(by=by))
       for by in ("name", "shape", "stack", "module")},
    "summary_stack_5": lambda a: a.get_operator_summary(by="stack", stack_depth=5),
    "roofline": lambda a: a.get_operator_roofline(),
    "targets": lambda a: a.get_optimization_targets(),
    "mfu": lambda a: a.get_mfu(),
    "kernel_efficiency": lambda a: a.get_kernel_efficiency(),
}  # fmt: skip


def operator_digests(analysis) -> dict[str, str]:
    """The digest of each operator-view table of ``analysis`` (the error's name where a call
    refuses the trace; ``missing`` where it has no rows for want of data, e.g. no
    ``nn.Module`` events: docs/missing-data.md)."""
    out = {}
    for name, call in OPERATOR_CALLS.items():
        try:
            table = call(analysis)
            out[name] = "missing" if why(table) else table_digest(table)
        except Exception as exc:  # noqa: BLE001 -- which error is part of the answer
            out[name] = f"error: {type(exc).__name__}"
    return out
