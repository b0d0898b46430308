"""Which findings appeared, grew, shrank or disappeared between two runs (the trace diff's).

Findings are matched by ``kind`` and ``where`` (a kind of one finding per job, whose ``where``
names only its largest site, by ``kind`` alone: :data:`ONE_PER_JOB`). Columns: ``kind``,
``where``, ``control_ms``, ``test_ms`` (``saving_ms_per_step`` of each run; NaN where the run
lacks it), ``change_ms`` (test - control) and ``status``: ``appeared`` / ``disappeared`` (only
in one run), ``grew`` / ``shrank`` (by more than ``tolerance`` of the larger), else ``same``;
largest change first.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

COLUMNS = ["kind", "where", "control_ms", "test_ms", "change_ms", "status"]
#: kinds with one finding per job whose ``where`` is the largest of its sites
ONE_PER_JOB = ("host_bound",)


def findings_changes(
    control: pd.DataFrame, test: pd.DataFrame, tolerance: float = 0.1
) -> pd.DataFrame:
    """The table (module docstring) from two ``get_findings`` tables."""
    key = ["kind", "match"]

    def keyed(table, column):
        match = table["where"].where(~table["kind"].isin(ONE_PER_JOB), "")
        return table.assign(match=match)[[*key, "where", "saving_ms_per_step"]].rename(
            columns={"saving_ms_per_step": column}
        )

    both = pd.merge(keyed(control, "control_ms"), keyed(test, "test_ms"), on=key, how="outer",
                    suffixes=("_control", ""))  # fmt: skip
    both["where"] = both["where"].fillna(both["where_control"])
    c, t = both["control_ms"], both["test_ms"]
    both["change_ms"] = t.fillna(0) - c.fillna(0)
    larger = np.maximum(c.fillna(0), t.fillna(0))
    moved = both["change_ms"].abs() > tolerance * larger
    both["status"] = np.select(
        [c.isna(), t.isna(), moved & (both["change_ms"] > 0), moved],
        ["appeared", "disappeared", "grew", "shrank"],
        "same",
    )
    order = both["change_ms"].abs().sort_values(ascending=False, kind="stable").index
    return both.loc[order, COLUMNS].reset_index(drop=True)
