"""A digest of every table of a loaded rank: columns, dtypes, categories and values. Equal
digests mean identical tables (``tests/test_table_digests.py`` holds a loader change to them)."""

from __future__ import annotations

import hashlib

import pandas as pd

from hta_lite.load.rank_trace import RankTrace


def table_digest(df: pd.DataFrame) -> str:
    h = hashlib.blake2b(digest_size=12)
    h.update(repr([(name, str(dtype)) for name, dtype in df.dtypes.items()]).encode())
    for name in df.columns:
        col = df[name]
        if isinstance(col.dtype, pd.CategoricalDtype):
            h.update(repr(col.cat.categories.tolist()).encode())
            h.update(col.cat.codes.to_numpy().astype("int64").tobytes())
        else:
            h.update(pd.util.hash_pandas_object(col, index=False).to_numpy().tobytes())
    return h.hexdigest()


def trace_digests(trace: RankTrace) -> dict[str, str]:
    return {name: table_digest(getattr(trace, name)) for name in RankTrace.TABLES}
