"""The findings table: every finding's fix replayed, ranked by the step time it saves.

Columns: ``kind``, ``rank`` (Int64, <NA>: the job), ``where``, ``saving_ms_per_step`` (the
replayed fix: the job's time drop per step, ms), ``saving_pctg`` (of the mean step),
``saving_low_ms`` (a partial fix replayed), ``saving_high_ms`` (the time the fix removes
without replay, a first-order bound that ignores what becomes critical instead, overlapping
segments counted once; never above the step),
``cumulative_ms`` (this fix and every one ranked above it made together: replayed once with
the overlapping cuts discounted, :func:`.replay.combine`; never more than the step), ``evidence``,
``estimate_method``, ``advice``. Findings that save no step time (memory) come last; a finding
whose replay saves under ``MIN_PCTG`` of the step is left out (a named straggler excepted).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .context import Context
from .finding import Finding
from .replay import combine

COLUMNS = [
    "kind", "rank", "where", "saving_ms_per_step", "saving_pctg", "saving_low_ms",
    "saving_high_ms", "cumulative_ms", "evidence", "estimate_method", "advice",
]  # fmt: skip
#: % of the step under which a timed finding is not reported ...
MIN_PCTG = 0.5
#: ... but for these: a straggler the straggler report names is listed whatever its saving, so
#: that the key findings and this table never disagree about it
ALWAYS_LISTED = ("straggler",)


def rank_findings(ctx: Context, findings: list[Finding]) -> pd.DataFrame:
    """The table (module docstring) of ``findings`` over ``ctx``'s replay."""
    replay, step = ctx.replay, ctx.step_ns
    timed, rows = [], []
    for f in findings:
        if f.cut is None:
            rows.append(_row(f, 0.0, 0.0, 0.0, step))
            continue
        saving = min(replay.saving_per_step(f.cut), step)  # never above the step
        if not step > 0 or (100 * saving / step < MIN_PCTG and f.kind not in ALWAYS_LISTED):
            continue
        low = replay.saving_per_step(f.low if f.low is not None else f.cut.scaled(0.5))
        high = min(max(replay.first_order(f.cut), saving), step)  # never above the step
        timed.append((saving, f))
        rows.append(_row(f, saving, min(low, saving), high, step))
    table = pd.DataFrame(rows, columns=COLUMNS)
    if table.empty:  # typed as a table with rows is (pandas 2 makes empty columns object)
        numbers = [c for c in COLUMNS if c.startswith(("saving", "cumulative"))]
        return table.astype({"rank": "Int64", **dict.fromkeys(numbers, "float64")})
    table = table.sort_values(
        ["saving_ms_per_step", "kind"], ascending=[False, True], kind="stable", ignore_index=True
    )
    cuts = [f.cut for _, f in sorted(timed, key=lambda p: (-p[0], p[1].kind))]  # table order
    cumulative = [
        replay.saving_per_step(combine(cuts[:k], replay.spans, replay.transfers)) / 1e6
        for k in range(1, len(cuts) + 1)
    ]
    table.loc[: len(cumulative) - 1, "cumulative_ms"] = cumulative
    table["rank"] = table["rank"].astype("Int64")
    return table


def _row(f: Finding, saving: float, low: float, high: float, step: float) -> dict:
    return {
        "kind": f.kind, "rank": f.rank, "where": f.where,
        "saving_ms_per_step": saving / 1e6,
        "saving_pctg": 100 * saving / step if step > 0 else np.nan,
        "saving_low_ms": low / 1e6, "saving_high_ms": high / 1e6, "cumulative_ms": np.nan,
        "evidence": f.evidence, "estimate_method": f.method, "advice": f.advice,
    }  # fmt: skip
