"""Recurring anomalies: steps that slow down every N steps (a data-loader refill, a checkpoint,
garbage collection, logging).

For each rank, every period P from 2 to half the run and phase F (0 <= F < P) is tried on the
anomalous steps of :mod:`.step_anomalies`: the pattern *step % P == F* holds when at least
``min_occurrences`` anomalous steps fall on it and they fill at least ``min_share`` of its slots
(the run's steps with that phase). Of the patterns that hold, a period that is a multiple of a
smaller one found for the same steps is left out, so every 10 steps is not also reported as every
20. Nothing is reported when no period holds.

Columns: ``rank``, ``period``, ``phase``, ``occurrences`` (anomalous steps on the pattern),
``slots`` (the run's steps on it), ``steps`` (the anomalous ones, as text), ``cause`` (their most
common cause), ``mean_excess(us)`` (their mean excess over the typical step).
"""

from __future__ import annotations

import pandas as pd

COLUMNS = ["rank", "period", "phase", "occurrences", "slots", "steps", "cause", "mean_excess(us)"]


def periodicity(
    scored: pd.DataFrame, min_occurrences: int = 3, min_share: float = 0.75
) -> pd.DataFrame:
    rows = []
    for rank, part in scored.groupby("rank", sort=True):
        steps = part["step"].to_numpy()
        flagged = part[part["anomalous"]]
        hits = set(flagged["step"].tolist())
        if len(hits) < min_occurrences:
            continue
        found: list[tuple[int, int, set]] = []
        for period in range(2, max(len(steps) // 2, 2) + 1):
            for phase in range(period):
                slots = [s for s in steps.tolist() if s % period == phase]
                on = hits.intersection(slots)
                if len(on) < min_occurrences or len(on) < min_share * len(slots):
                    continue
                if any(period % p == 0 and on <= seen for p, _, seen in found):
                    continue  # a multiple of a pattern already found
                found.append((period, phase, on))
                excess = part.set_index("step").loc[sorted(on)]
                rows.append(
                    [
                        int(rank), period, phase, len(on), len(slots),
                        ", ".join(str(s) for s in sorted(on)),
                        str(excess["cause"].mode().iloc[0]),
                        round(float((excess["step_time"] - excess["typical"]).mean()), 3),
                    ]
                )  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)
