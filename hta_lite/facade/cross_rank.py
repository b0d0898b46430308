"""Across ranks: Megatron-style timers and stragglers."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from ..analyses import stragglers, timers
from ..analyses.pipeline_stages import stage_work, stages_view
from ..analyses.steps import step_breakdown
from ..analyses.straggler_causes import host_wait_by_step
from ..analyses.timers import LogOption
from ..errors import SelectionError
from .base import plots
from .missing import empty_says, no_steps


class CrossRank:
    """Cross-rank methods of :class:`hta_lite.TraceAnalysis`."""

    def get_annotation_timers(
        self,
        names: Iterable[str] | None = None,
        *,
        source: str = "cpu",
        ranks: Iterable[int] | None = None,
        steps: Iterable[int] | None = None,
    ) -> pd.DataFrame:
        """Elapsed time of named regions (user annotations, and ``ProfilerStep``) per rank and
        step, as Megatron's timers measure them (repeated or nested ranges of one name counted
        once).

        Args:
            names: annotation names (default: all); ``ProfilerStep`` for the steps.
            source: ``"cpu"`` (``user_annotation``) or ``"gpu"`` (``gpu_user_annotation``).
            ranks, steps: restrict (default: all). A name or step no selected rank has is a
                ``SelectionError``.

        Returns:
            Tidy ``rank, step, name, elapsed_ms`` (step -1 outside every ProfilerStep).
        """
        return timers.annotation_timers(self.traces, names, source, ranks, steps)

    @empty_says(no_steps)
    def get_timers_across_ranks(
        self,
        names: Iterable[str] | None = None,
        *,
        source: str = "cpu",
        log_option: LogOption = "minmax",
        normalizer: float = 1.0,
        ranks: Iterable[int] | None = None,
        steps: Iterable[int] | None = None,
        visualize: bool = False,
    ) -> pd.DataFrame:
        """Megatron's cross-rank view of :meth:`get_annotation_timers`.

        Args:
            names, source, ranks, steps: which timers, as in :meth:`get_annotation_timers`.
            log_option: ``"max"`` (the slowest rank), ``"minmax"`` (fastest and slowest) or
                ``"all"`` (every rank); ranks without the timer are left out.
            normalizer: divides the sum over steps (the number of steps gives per-step times).
            visualize: show the min/max bars and a rank x step heatmap.

        Returns:
            Indexed by timer name: ``max_ms, slowest_rank`` (``"max"``), ``min_ms, max_ms,
            fastest_rank, slowest_rank`` (``"minmax"``), or one column per rank (``"all"``, NaN
            where a rank did not record the timer).
        """
        tidy = self.get_annotation_timers(names, source=source, ranks=ranks, steps=steps)
        table = timers.timers_across_ranks(tidy, log_option, normalizer)
        if visualize:
            minmax = timers.timers_across_ranks(tidy, "minmax", normalizer)
            plots.show(plots.plot_timers_minmax(minmax))
            plots.show(plots.plot_timer_heatmap(tidy))
        return table

    def timers_text(
        self,
        names: Iterable[str] | None = None,
        *,
        source: str = "cpu",
        log_option: LogOption = "minmax",
        normalizer: float = 1.0,
        ranks: Iterable[int] | None = None,
        steps: Iterable[int] | None = None,
    ) -> str:
        """:meth:`get_timers_across_ranks` in Megatron-LM's log format.

        Args:
            names, source, log_option, normalizer, ranks, steps: as in
                :meth:`get_timers_across_ranks`.

        Returns:
            Text: ``(min, max) time across ranks (ms):`` then one line per timer.
        """
        table = self.get_timers_across_ranks(
            names,
            source=source,
            log_option=log_option,
            normalizer=normalizer,
            ranks=ranks,
            steps=steps,
        )
        return timers.megatron_text(table, log_option)

    def get_potential_stragglers(
        self,
        profiler_steps: Iterable[int] | None = None,
        num_candidates: int = 2,
        visualize: bool = False,
        straggler_identification_impl=None,
    ) -> list[int]:
        """The reference's straggler finder: the ranks whose long communication kernels start
        latest, most often first (``num_candidates`` per step).

        Args:
            profiler_steps: steps to use (default: all profiled; absent: ``SelectionError``).
            straggler_identification_impl: the reference's hook takes its internal frame and
                symbol table, which hta_lite does not have: anything but None is a
                ``SelectionError`` pointing to :meth:`get_straggler_report`.

        Returns:
            Ranks, most frequent candidate first; empty with fewer than two ranks with
            collectives.
        """
        if straggler_identification_impl is not None:
            raise SelectionError(
                None,
                "straggler_identification_impl takes HTA's internal frame and symbol table,"
                " which hta_lite does not build: use get_straggler_report() (lateness per rank at"
                " matched collectives, the stragglers and their causes) or the tables of"
                " get_collectives()",
            )
        matching = self.get_collectives()
        found = stragglers.potential_stragglers(
            self.traces, profiler_steps, num_candidates, matching
        )
        if visualize:
            skew = stragglers.collective_skew(self.traces, steps=profiler_steps, matching=matching)
            plots.show(plots.plot_rank_lateness(stragglers.rank_skew(skew)))
        return found

    def get_pipeline_stages(
        self, *, steps: Iterable[int] | None = None, visualize: bool = False
    ) -> pd.DataFrame:
        """The stages of a pipeline (ranks that send and receive point to point) and the work
        of each per step outside communication (its GPU's, or a CPU-only rank's time outside
        its calls): a pipeline runs at the pace of its slowest stage (docs/cross-rank.md).

        Args:
            steps: ProfilerSteps to use (default: all profiled).
            visualize: show each stage's work per step against the median stage's.

        Returns:
            ``get_straggler_report(steps=steps).stages``: ``rank``, ``work_us`` (its median
            step's), ``typical_us`` (the median of the other stages'), ``excess_us``,
            ``steps``, the largest excess first; ``attrs["slow_stage"]``: the slowest stage's rank
            when it works 10 % more than that median (else None). Empty where no rank sends or
            receives point to point.
        """
        report = self.get_straggler_report(steps=steps)
        table = stages_view(report.stages, report.slow_stage)
        if visualize and len(table):
            plots.show(plots.plot_pipeline_stages(table))
        return table

    def get_straggler_report(
        self,
        *,
        steps: Iterable[int] | None = None,
        factor: float = 3.0,
        min_step_pctg: float = 0.5,
    ) -> stragglers.StragglerReport:
        """Collectives matched across ranks, how late each rank arrives, the stragglers and why
        (compute, host or waiting).

        Args:
            steps: ProfilerSteps to use (default: all profiled).
            factor: a straggler is more than ``factor`` x as late as the median of the other
                ranks (per step, summed over its collectives) ...
            min_step_pctg: ... and later than that median by at least this share of the mean
                step time (%), so that clock jitter is never a straggler.

        Returns:
            :class:`~hta_lite.analyses.stragglers.StragglerReport` with ``collectives``,
            ``ranks``, ``stragglers``, ``causes`` (tables), ``texts`` and ``rule`` (what was
            tested: send / recv pairs are not compared), ``stages`` and ``slow_stage`` (a
            pipeline's: :meth:`get_pipeline_stages`); ``str()`` is the text.
        """
        matching = self.get_collectives()
        skew = stragglers.collective_skew(self.traces, steps=steps, matching=matching)
        per_step = step_breakdown(self.traces, steps=steps)
        work = pd.concat([stage_work(t, matching.calls) for t in self.traces.values()])
        if steps is not None:
            work = work[work["step"].isin(list(steps))]
        return stragglers.report(
            skew,
            per_step,
            pd.concat([host_wait_by_step(t) for t in self.traces.values()]),
            lambda: timers.annotation_timers(self.traces, steps=steps),
            work,
            factor,
            min_step_pctg,
        )
