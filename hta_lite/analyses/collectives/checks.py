"""What matching the collectives across ranks says of each rank's data, as health counters
(docs/health.md): ``collective_metadata_disagrees`` where a rank's collective, dtype or size is
the odd one out at a matched collective, ``clock_offset`` where its clock is apart from the
others'. ``TraceAnalysis.health()`` and the batch's health summary count them alike."""

from __future__ import annotations

from collections import Counter, defaultdict

import pandas as pd

from ...load.health_items import record


def found(problems: pd.DataFrame) -> dict[int, Counter]:
    """``{rank: Counter(health key -> count)}`` from a :class:`~.matching.Matching`'s
    ``problems`` table."""
    out: dict[int, Counter] = defaultdict(Counter)
    for row in problems[problems["reason"] == "metadata disagree"].itertuples():
        for rank in (int(r) for r in row.ranks.split(",") if r):
            record(out[rank], "collective_metadata_disagrees",
                   row.calls, f"{row.pg}, step {row.step}")  # fmt: skip
    for row in problems[problems["reason"] == "clock offset"].itertuples():
        offset = row.detail.split("about ", 1)[1].split(" the others", 1)[0]
        record(out[int(row.ranks)], "clock_offset", row.calls, offset)
    return dict(out)
