"""Long runs: anomalous and periodic steps (:mod:`hta_lite.analyses.step_anomalies`,
:mod:`hta_lite.analyses.step_periodicity`), and two steps side by side."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from ..analyses import diff
from ..analyses import step_anomalies as sa
from ..analyses.common import select, wanted
from ..analyses.step_periodicity import COLUMNS as PERIOD_COLUMNS
from ..analyses.step_periodicity import periodicity
from ..analyses.steps import profiled_steps
from ..errors import MissingDataError, SelectionError
from ..missing_data import NO_STEPS
from ..settings import positive_limit
from .base import plots
from .missing import table_view

#: the columns every step-anomaly table has (one ``annotation:NAME`` column per annotation)
ANOMALY_COLUMNS = ["rank", "step", "window", "step_time", "typical", "score", "anomalous",
                   "cause", "cause_excess(us)", "grew_most", "origin_rank", "baseline"]  # fmt: skip
JOB_COLUMNS = ["step", "step_time", "slowest_rank", "typical", "score", "anomalous",
               "origin_rank", "cause"]  # fmt: skip


class LongRuns:
    """Step-anomaly methods of :class:`hta_lite.TraceAnalysis`."""

    @table_view(ANOMALY_COLUMNS)
    def get_step_anomalies(
        self,
        metric: str = "step_time",
        threshold: float = 3.5,
        *,
        baseline: str = "median",
        window: int = 11,
        ranks: Iterable[int] | None = None,
        visualize: bool = False,
    ) -> pd.DataFrame:
        """One row per rank and step: the step's components, a robust score of ``metric``
        against the rank's typical step, ``anomalous``, and for each anomalous step its
        ``cause`` (the component that grew most), ``grew_most`` (the operators, annotations and
        kernels that grew most against the most typical step) and ``origin_rank`` (the rank the
        step waited for at its collectives).

        Args:
            metric: the column scored (``step_time``, a GPU component, or
                ``annotation:NAME``).
            threshold: the score above which a step is anomalous (3.5: the usual cut of a
                median/MAD score).
            baseline: ``"median"`` (the whole run) or ``"rolling"`` (a centred window of
                ``window`` steps, for a drifting run).
            ranks: ranks to include (default: all).
            visualize: show step time per step with the anomalies marked and the period shaded.

        Returns:
            DataFrame, columns in :mod:`hta_lite.analyses.step_anomalies` (times in µs).

            No ProfilerStep in the traces: no rows, ``attrs["why"]`` says so.
        """
        scored = self._scored(metric, threshold, baseline, window, ranks)
        if visualize:
            plots.show(plots.plot_step_anomalies(scored, periodicity(scored)))
        return scored

    @table_view(PERIOD_COLUMNS)
    def get_step_periodicity(
        self,
        threshold: float = 3.5,
        *,
        min_occurrences: int = 3,
        ranks: Iterable[int] | None = None,
    ) -> pd.DataFrame:
        """Anomalies that come back every N steps.

        Args:
            threshold: as in :meth:`get_step_anomalies`.
            min_occurrences: anomalous steps a pattern needs.
            ranks: ranks to include (default: all).

        Returns:
            DataFrame: per rank and pattern its ``period``, ``phase`` (step % period),
            ``occurrences`` and what they have in common (``cause``); no rows when no period
            holds (columns in :mod:`hta_lite.analyses.step_periodicity`).
        """
        scored = self._scored("step_time", threshold, "median", 11, ranks)
        return periodicity(scored, min_occurrences)

    @table_view(JOB_COLUMNS)
    def get_job_step_anomalies(self, threshold: float = 3.5) -> pd.DataFrame:
        """The job's steps (a step ends when its slowest rank does): ``step``, ``step_time``,
        ``slowest_rank``, ``typical``, ``score``, ``anomalous``, and the ``origin_rank`` and
        ``cause`` of each anomalous one."""
        return sa.job_steps(self._scored("step_time", threshold, "median", 11, None), threshold)

    def compare_steps(self, a: int, b: int, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """Two steps side by side, as the trace diff compares two traces.

        Args:
            a, b: the two ProfilerStep numbers.
            ranks: ranks to include (default: all).

        Returns:
            DataFrame indexed by event name (CPU operators, annotations, kernels):
            ``step_A_counts``, ``step_A_total_duration`` (µs) and the same for B,
            ``diff_counts``, ``diff_duration``, ``counts_change_categories``; largest change
            first.

        Raises:
            SelectionError: a step none of the ranks profiled, or ``a == b``.
        """
        if a == b:
            raise SelectionError(None, f"compare two different steps, not step {a} with itself")
        traces = select(self.traces, ranks)
        present = sorted({int(s) for t in traces for s in profiled_steps(t)["step"]})
        wanted([a, b], present, "ProfilerStep(s)", "the profiled steps")
        rank_ids = [t.rank for t in traces]
        sides = [
            diff.ops_summary(self.traces, rank_ids, [s], diff.DeviceType.ALL, False) for s in (a, b)
        ]
        out = diff.compare_ops(*sides, f"step_{a}", f"step_{b}", "name")
        return out.reindex(out["diff_duration"].abs().sort_values(ascending=False).index)

    def _scored(self, metric, threshold, baseline, window, ranks) -> pd.DataFrame:
        """The scored steps, computed once per set of arguments (the traces do not change)."""
        threshold = positive_limit(threshold, "threshold")
        key = (metric, threshold, baseline, window, None if ranks is None else tuple(ranks))
        cache = self.memo.scored_steps
        if key not in cache:
            cache[key] = self._score_steps(*key)
        return cache[key].copy()

    def _score_steps(self, metric, threshold, baseline, window, ranks) -> pd.DataFrame:
        components = sa.step_components(self.traces, ranks)
        if components.empty:
            raise MissingDataError(None, NO_STEPS)
        instances = self.get_collectives().instances if len(self.ranks) > 1 else None
        return sa.anomalies(components, instances, self.traces, metric, threshold, baseline,
                            window)  # fmt: skip
