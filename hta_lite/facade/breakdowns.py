"""Where the GPU time went: temporal, idle, overlap, kernel, annotation and per-step breakdowns."""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import pandas as pd

from ..analyses import annotations, idle, kernels, overlap, temporal
from ..analyses import steps as step_analysis
from ..analyses.common import select
from ..missing_data import no_gpu_work_in
from .base import plots
from .missing import empty_says, no_gpu_work, no_steps


class Breakdowns:
    """Breakdown methods of :class:`hta_lite.TraceAnalysis` (the reference's names and columns)."""

    def get_profiler_steps(self, *, rank: int | None = None) -> list[int]:
        """The ProfilerStep numbers the analyses see (the last step is left out unless loaded
        with ``include_last_profiler_step=True``), over all ranks or of ``rank``.

        Returns:
            Sorted list of step numbers (``N`` of ``ProfilerStep#N``); empty without steps.
        """
        traces = self.traces.values() if rank is None else [self.trace(rank)]
        found = {int(s) for t in traces for s in step_analysis.profiled_steps(t)["step"]}
        return sorted(found)

    def _gpu_ranks_only(self, df: pd.DataFrame, ranks: list[int] | None = None) -> pd.DataFrame:
        """``df`` without the rows of ranks that ran no GPU work, whose numbers would be NaN or
        0; ``attrs["why"]`` names them (``ranks``: those asked, default ``df``'s)."""
        asked = sorted(set(df["rank"].tolist()) if ranks is None else ranks)
        cpu_only = [r for r in asked if self.traces[r].gpu.empty]
        if not cpu_only:
            return df
        out = df[~df["rank"].isin(cpu_only)].reset_index(drop=True)
        out.attrs["why"] = no_gpu_work_in(cpu_only)
        return out

    def get_temporal_breakdown(
        self, visualize: bool = True, *, ranks: Iterable[int] | None = None
    ) -> pd.DataFrame:
        """Idle, compute and non-compute share of each rank's GPU time.

        Over the rank's GPU work (kernels, copies, sets; GPU-side syncs are waiting, not work),
        every stream merged: ``kernel_time`` is the span from the first start to the last end,
        ``idle`` the part of it with no work, ``compute`` the union of computation kernels,
        ``non_compute`` the rest (communication and copies not hidden under computation).

        Args:
            visualize: show a stacked bar chart (in a notebook).
            ranks: ranks to include (default: all).

        Returns:
            One row per rank: ``rank, idle_time(us), compute_time(us), non_compute_time(us),
            kernel_time(us), idle_time_pctg, compute_time_pctg, non_compute_time_pctg``
            (percentages of ``kernel_time``, 2 decimals). A rank without GPU work has no row
            (``attrs["why"]`` names it; docs/missing-data.md).
        """
        df = self._gpu_ranks_only(temporal.temporal_breakdown(self.traces, ranks))
        if visualize:
            plots.show(plots.plot_temporal_breakdown(df))
        return df

    @empty_says(no_gpu_work)
    def get_idle_time_breakdown(
        self,
        ranks: Iterable[int] | int | None = None,
        streams: Iterable[int] | None = None,
        visualize: bool = True,
        visualize_pctg: bool = True,
        show_idle_interval_stats: bool = False,
        consecutive_kernel_delay: float = 30,
    ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """Why each stream was idle: each gap before a GPU event is ``host_wait`` (its launch
        call came after the stream went idle), ``kernel_wait`` (shorter than
        ``consecutive_kernel_delay``) or ``other`` (e.g. waiting on another stream).

        Args:
            ranks: ranks to include (default: all; the reference: rank 0).
            streams: streams to include (default: all); a stream no selected rank has is a
                :class:`~hta_lite.errors.SelectionError`.
            visualize: show a bar chart per stream; ``visualize_pctg``: as shares.
            show_idle_interval_stats: also return statistics of the gaps.
            consecutive_kernel_delay: gap threshold of ``kernel_wait``, in **µs**.

        Returns:
            ``(breakdown, stats)``: breakdown has one row per (rank, stream, idle_category):
            ``rank, stream, idle_category, idle_time`` (µs), ``idle_time_ratio`` (share of the
            stream's idle time); stats (None unless asked): ``rank, stream, idle_category,
            count, mean, std, min, 25%, 50%, 75%, max`` of the gaps (µs).
        """
        df, stats = idle.idle_time_breakdown(
            self.traces, ranks, streams, consecutive_kernel_delay, show_idle_interval_stats
        )
        if visualize:
            plots.show(plots.plot_idle_time_breakdown(df, visualize_pctg))
        return df, stats

    def get_gpu_idle_by_cause(
        self,
        ranks: Iterable[int] | None = None,
        consecutive_kernel_delay: float = 30,
        *,
        visualize: bool = False,
    ) -> pd.DataFrame:
        """Why the whole GPU was idle (no work on any stream: the idle time of
        :meth:`get_temporal_breakdown`), by the rule of :meth:`get_idle_time_breakdown` applied
        to the event that ends each gap. Unlike the per-stream breakdown, a stream with
        little work does not weigh like the busy one.

        Args:
            ranks: ranks to include (default: all).
            consecutive_kernel_delay: gap threshold of ``kernel_wait``, in µs.
            visualize: show idle time by cause per rank.

        Returns:
            One row per (rank, idle_category): ``rank, idle_category, idle_time`` (µs),
            ``idle_time_pctg`` (share of the rank's GPU idle time); no row for a rank without
            GPU work (``attrs["why"]`` names it).
        """
        selected = {t.rank: t for t in select(self.traces, ranks)}
        df = idle.gpu_idle_by_cause(selected, consecutive_kernel_delay)
        df = self._gpu_ranks_only(df, list(selected))
        if visualize:
            plots.show(plots.plot_gpu_idle_by_cause(df))
        return df

    def get_comm_comp_overlap(
        self, visualize: bool = True, *, ranks: Iterable[int] | None = None
    ) -> pd.DataFrame:
        """Share of each rank's communication time hidden under computation.

        Returns:
            One row per rank: ``rank, comp_comm_overlap_pctg`` (100 x time where communication
            and computation kernels overlap / communication time; NaN without communication).
            A rank without GPU work has no row (``attrs["why"]`` names it).
        """
        df = self._gpu_ranks_only(overlap.comm_comp_overlap(self.traces, ranks))
        if visualize:
            plots.show(plots.plot_comm_comp_overlap(df))
        return df

    @empty_says(no_gpu_work)
    def get_gpu_kernel_breakdown(
        self,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 10,
        include_memory_kernels: bool = True,
        image_renderer: str = "",
        *,
        ranks: Iterable[int] | None = None,
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """GPU time by kernel type and by kernel.

        Args:
            visualize: show a pie of the types and the top kernels per rank;
                ``image_renderer``: a plotly renderer to show them with (any environment).
            duration_ratio, num_kernels: per rank and type, kernels past the top
                ``num_kernels`` or past the ``duration_ratio`` share of the time are pooled
                as ``others``.
            include_memory_kernels: include copies and sets (MEMORY).
            ranks: ranks to include (default: all).

        Returns:
            ``(kernel_type_df, kernel_df)``: ``kernel_type, sum`` (µs of wall time during which
            exactly that combination of types ran, e.g. ``COMPUTATION overlapping
            COMMUNICATION``), ``percentage``; and per rank, type and kernel name ``name,
            sum (us), max (us), min (us), stddev, mean (us), kernel_type, rank`` (statistics
            of the individual kernels, µs).
        """
        type_df, kernel_df = kernels.gpu_kernel_breakdown(
            self.traces, ranks, duration_ratio, num_kernels, include_memory_kernels
        )
        if visualize:
            plots.show(plots.plot_kernel_type_pie(type_df), image_renderer)
            for fig in plots.plot_kernel_distribution(kernel_df):
                plots.show(fig, image_renderer)
        return type_df, kernel_df

    @empty_says(no_gpu_work)
    def get_gpu_kernels_with_user_annotations(
        self,
        rank: int | None = None,
        expand_names: bool = True,
        shorten_names: bool = True,
        *,
        shortern_names: bool | None = None,
    ) -> pd.DataFrame:
        """The GPU events of a rank with the innermost GPU user annotation (``record_function``
        range as the GPU ran it, same device and stream) holding each one's start.

        Args:
            rank: the rank (default: the first).
            expand_names: add ``s_name`` and ``s_user_annotation`` (the reference's columns).
            shorten_names: in those, cut templates and arguments (``void f<T>(int)`` -> ``f``).
            shortern_names: deprecated spelling of ``shorten_names`` (HTA before 0.6).

        Returns:
            The ``gpu`` table (see :meth:`gpu_events`) plus ``user_annotation`` (missing when
            no annotation holds the event) and, with ``expand_names``, ``s_name`` and
            ``s_user_annotation``.
        """
        if shortern_names is not None:
            warnings.warn(
                "shortern_names is deprecated: use shorten_names", DeprecationWarning, stacklevel=2
            )
            shorten_names = shortern_names
        trace = self.trace(self.ranks[0] if rank is None else rank)
        return annotations.kernels_with_user_annotations(trace, expand_names, shorten_names)

    @empty_says(no_gpu_work)
    def get_gpu_user_annotation_breakdown(
        self,
        use_gpu_annotation: bool = True,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 1000,
        allowlist_patterns: list[str] | None = None,
        image_renderer: str | None = None,
        *,
        ranks: Iterable[int] | None = None,
    ) -> pd.DataFrame:
        """Time per user annotation (``record_function`` / NVTX range) name and rank.

        Args:
            use_gpu_annotation: the ranges as the GPU ran them (``gpu_user_annotation``);
                False: as the CPU ran them (``user_annotation``, ProfilerStep included).
            visualize: show a pie per rank; ``image_renderer``: plotly renderer to use.
            duration_ratio, num_kernels: names beyond the top ``num_kernels`` or the
                ``duration_ratio`` share are pooled as ``others`` ...
            allowlist_patterns: ... except names matching one of these (text or regular
                expression); a pattern that matches no name is a ``SelectionError``.
            ranks: ranks to include (default: all).

        Returns:
            ``name, sum (us), max (us), min (us), stddev, mean (us), rank`` (statistics of the
            ranges' durations, µs); no rows when the ranks have no such ranges.
        """
        df = annotations.user_annotation_breakdown(
            select(self.traces, ranks),
            use_gpu_annotation,
            duration_ratio,
            num_kernels,
            allowlist_patterns,
        )
        if visualize:
            plots.show(plots.plot_user_annotation_breakdown(df), image_renderer)
        return df

    @empty_says(no_steps)
    def get_step_breakdown(
        self,
        *,
        ranks: Iterable[int] | None = None,
        steps: Iterable[int] | None = None,
        visualize: bool = True,
    ) -> pd.DataFrame:
        """Per rank and ProfilerStep, where the step's time went (GPU events belong to the step
        of their launch call).

        Args:
            ranks: ranks to include (default: all).
            steps: steps to include (default: all profiled); a step no selected rank profiled
                is a ``SelectionError``.
            visualize: show a bar chart.

        Returns:
            ``rank, step, step_time`` (the step's length: from its ProfilerStep's start to the
            end of its CPU and GPU work, counted from the end of the steps before it where the
            GPU runs behind the CPU and steps overlap), ``cpu_time`` (the ProfilerStep's),
            ``gpu_span``, ``gpu_busy``,
            ``gpu_idle``, ``compute``, ``communication``, ``memory``, ``comm_overlapped`` (all
            µs), ``comp_comm_overlap_pctg``; no rows for ranks without ProfilerStep.
        """
        df = step_analysis.step_breakdown(self.traces, ranks, steps)
        if visualize:
            plots.show(plots.plot_step_breakdown(df))
        return df
