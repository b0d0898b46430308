"""``health()``: what loading found in each rank's file, and what the checks ``health()`` runs
itself found in its data. It is the same whatever ran before: the checks are run here (each
computed once and shared with its views). Problems of views that need a choice (a device, a
step) come with their result instead: roofline / MFU rows flagged ``above_roof`` /
``above_peak`` (and their ``attrs["problems"]``), the critical path's ``health``.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from ..analyses import health
from ..errors import MissingDataError


class Health:
    """Health methods of :class:`hta_lite.TraceAnalysis`."""

    def _found(self, rank: int) -> Counter:
        """What the checks found in a rank's data (health codes -> counts; ``memo.problems``),
        written by the views that run the checks."""
        return self.memo.problems.setdefault(rank, Counter())

    def _run_checks(self) -> dict[int, Counter]:
        """Run the checks (collectives matched across ranks, operators' shapes and graph
        replays, memory totals); ``{rank: problems}``."""
        self.get_collectives()
        for rank in self.ranks:
            try:
                self._operators([rank])
            except MissingDataError:
                pass
            self._memory_of(rank)
        return {r: c for r, c in self.memo.problems.items() if c}

    def health(self) -> pd.DataFrame:
        """What the loader read, skipped, clamped or excluded, and what the checks of the
        traces' data found (docs/health.md).

        Returns:
            DataFrame ``rank, file, code, severity, item, count``: events read per phase and
            category, then every counted item; files not loaded (``on_error="skip"``) with rank
            -1. The same whatever views ran before.
        """
        return health.health_table(self.traces, self.skipped_files, self._run_checks())

    def health_summary(self) -> pd.DataFrame:
        """One row per rank: ``rank, file, device_type, gpu_name, schema_version,
        display_time_unit, has_distributed_info, profiler_steps, gpu_events, cpu_events,
        clock_offset_us`` (µs after the earliest rank's first event), ``excluded_outside_steps``,
        ``problems`` (events skipped, clamped or not linked, and data problems the checks of
        :meth:`health` found)."""
        return health.health_summary(self.traces, self._run_checks())
