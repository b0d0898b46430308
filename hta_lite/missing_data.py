"""A table with no rows that says why (the policy: docs/missing-data.md): :func:`missing` makes
one, :func:`why` reads it, :func:`need` turns it back into the ``MissingDataError`` it stands
for. The facade's decorators that apply the policy: :mod:`hta_lite.facade.missing`."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from .errors import MissingDataError

#: why a per-step view is empty where no rank has a ProfilerStep
NO_STEPS = "no ProfilerStep in the traces: steps need torch.profiler's schedule and prof.step()"

#: yes/no columns: typed bool even with no rows, so that ``table[table["anomalous"]]`` selects
#: rows (an empty object column would select columns)
FLAGS = frozenset({"anomalous", "above_peak", "above_roof", "tf32_inferred", "partial",
                   "consistent", "mapped", "equally_good"})  # fmt: skip


def missing(columns: Sequence[str], reason: str, index: Sequence[str] = ()) -> pd.DataFrame:
    """A table of ``columns`` (and ``index`` levels) with no rows, carrying ``reason``."""
    names = [*index, *columns]
    table = pd.DataFrame({c: pd.Series(dtype=bool if c in FLAGS else object) for c in names})
    if index:
        table = table.set_index(list(index))
    table.attrs["why"] = reason
    return table


def no_gpu_work_in(ranks) -> str:
    """Why a GPU view has no rows of ``ranks``: they ran no GPU work."""
    return f"no GPU work in rank(s) {sorted(ranks)} (CPU-only traces)"


def why(table) -> str | None:
    """Why a table view has no rows (``None`` when it has rows, or none were missing)."""
    if isinstance(table, pd.DataFrame) and table.empty:
        return table.attrs.get("why")
    return None


def need(table: pd.DataFrame) -> pd.DataFrame:
    """``table``, or the :class:`MissingDataError` it stands for when it is a missing one: for
    code that goes on with the rows."""
    reason = why(table)
    if reason:
        raise MissingDataError(None, reason)
    return table
