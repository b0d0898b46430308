"""Collectives across ranks: calls, matching, bus bandwidth, skew and waits
(docs/analyses/collectives.md)."""

from __future__ import annotations

from typing import Literal

import pandas as pd

from ..analyses.collectives import checks, summaries
from ..analyses.collectives.matching import Matching, match_traces
from ..errors import SelectionError
from .base import plots


class Collectives:
    """Collective methods of :class:`hta_lite.TraceAnalysis` (beyond the reference: what
    TraceLens' NCCL analyser reports, robust to ranks and metadata that disagree)."""

    def get_collectives(self) -> Matching:
        """Every collective call of the loaded ranks matched across ranks (computed once).

        Returns:
            :class:`~hta_lite.analyses.collectives.matching.Matching`: ``calls`` (one row per
            call and rank: group, collective, dtype, in/out bytes, ``ts`` / ``dur`` ns, step,
            ``instance`` (-1 unmatched), ``wait`` ns, ``arrived_last``), ``instances`` (one row
            per matched collective: arrival / end skew and transfer time µs, last rank, algbw /
            busbw GB/s) and ``problems`` (unmatched, partial or disagreeing calls, with the
            reason). Nothing unmatched is dropped or raised: it is in ``problems``.
        """
        if self.memo.collectives is None:
            self.memo.collectives = match_traces(self.traces)
            for rank, found in checks.found(self.memo.collectives.problems).items():
                self._found(rank).update(found)
            for rank, found in self.memo.collectives.rank_problems.items():
                self._found(rank).update(found)
        return self.memo.collectives

    def get_collective_summary(
        self, by: Literal["collective", "rank"] = "collective", *, visualize: bool = False
    ) -> pd.DataFrame:
        """Collectives summarized.

        Args:
            by: ``"collective"`` or ``"rank"`` (see Returns).
            visualize: show bus bandwidth vs message size, the rank x collective wait heatmap
                and the arrival skew over time.

        Returns:
            ``by="collective"``: per (collective, dtype, power-of-two message size, group):
            ``count``, ``total_us``, median / p90 transfer time (µs) and bus bandwidth (GB/s),
            ``wait_us``; most time first. ``by="rank"``: per rank, ``calls``, ``unmatched``,
            ``time_us`` in collectives, ``arrived_last``, ``wait_caused_us`` (the others' waits
            where it arrived last) and ``wait_suffered_us``; most wait caused first. No
            collective in the traces: no rows, ``attrs["why"]`` says so.
        """
        if by not in ("collective", "rank"):
            raise SelectionError(None, f"by must be 'collective' or 'rank', not {by!r}")
        matching = self.get_collectives()
        table = (
            summaries.by_collective(matching) if by == "collective" else summaries.by_rank(matching)
        )
        if matching.calls.empty:
            table.attrs["why"] = "no collective in the traces (no NCCL / Gloo / RCCL call)"
        if visualize:
            plots.show(plots.plot_bus_bandwidth(matching.instances))
            plots.show(plots.plot_wait_heatmap(matching.calls))
            plots.show(plots.plot_arrival_skew(matching.instances))
        return table
