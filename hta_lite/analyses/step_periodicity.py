"""Recurring anomalies: steps that slow down every N steps (a data-loader refill, a checkpoint,
garbage collection, logging).

For each rank, every period P from 2 to the run's length / ``min_occurrences`` and every phase F
(0 <= F < P) is tried on the anomalous steps of :mod:`.step_anomalies`: the pattern
*step % P == F* holds when at least ``min_occurrences`` anomalous steps fall on it and they fill
at least ``min_share`` of its slots (the run's steps with that phase). Of the patterns that hold,
a period that is a multiple of a smaller one found for the same steps is left out, so every 10
steps is not also reported as every 20. Nothing is reported when no period holds.

Columns: ``rank``, ``period``, ``phase``, ``occurrences`` (anomalous steps on the pattern),
``slots`` (the run's steps on it), ``steps`` (the anomalous ones, as text), ``cause`` (their most
common cause), ``mean_excess(us)`` (their mean excess over the typical step).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

COLUMNS = ["rank", "period", "phase", "occurrences", "slots", "steps", "cause", "mean_excess(us)"]


def periodicity(
    scored: pd.DataFrame, min_occurrences: int = 3, min_share: float = 0.75
) -> pd.DataFrame:
    rows = []
    for rank, part in scored.groupby("rank", sort=True):
        steps = part["step"].to_numpy()
        hits = np.sort(part.loc[part["anomalous"].to_numpy(), "step"].to_numpy())
        if len(hits) < min_occurrences:
            continue
        found: list[tuple[int, set]] = []
        # a period needs min_occurrences slots in the run: P <= len(steps) / min_occurrences
        for period in range(2, max(len(steps) // min_occurrences, 2) + 1):
            slots = np.bincount(steps % period, minlength=period)
            on = np.bincount(hits % period, minlength=period)
            for phase in np.flatnonzero((on >= min_occurrences) & (on >= min_share * slots)):
                members = set(hits[hits % period == phase].tolist())
                if any(period % p == 0 and members <= seen for p, seen in found):
                    continue  # a multiple of a pattern already found
                found.append((period, members))
                excess = part.set_index("step").loc[sorted(members)]
                rows.append(
                    [
                        int(rank), period, int(phase), len(members), int(slots[phase]),
                        ", ".join(str(s) for s in sorted(members)),
                        str(excess["cause"].mode().iloc[0]),
                        round(float((excess["step_time"] - excess["typical"]).mean()), 3),
                    ]
                )  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)
