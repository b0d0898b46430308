"""Counters: launch-queue length, copy bandwidth, traces with counters, CUPTI kernel counters."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from ..analyses import counters, cupti
from ..analyses.common import select
from ..tools import augment
from ..tools.augment import TimeSeriesTypes
from .base import plots
from .missing import empty_says, missing, no_gpu_work


class Counters:
    """Counter methods of :class:`hta_lite.TraceAnalysis` (the reference's names and columns)."""

    def get_queue_length_time_series(
        self, ranks: Iterable[int] | None = None
    ) -> dict[int, pd.DataFrame]:
        """Operations queued on each stream and not yet started, over time: +1 when a runtime
        call enqueues a GPU event (``kineto.LAUNCH_NAMES``; a graph launch adds one per event it
        releases), -1 when the event starts.

        Args:
            ranks: ranks to include (default: all; the reference: rank 0).

        Returns:
            ``{rank: DataFrame}`` for the ranks that launch GPU work, one row per change:
            ``ts`` (ns), ``pid``, ``tid`` (of the GPU event), ``stream``, ``queue_length``.
        """
        return counters.queue_length_time_series(self.traces, ranks)

    @empty_says(no_gpu_work)
    def get_queue_length_summary(self, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """Statistics of the queue length per (rank, stream).

        Returns:
            Index ``(rank, stream)``, columns ``("queue_length", stat)`` for ``count, mean, std,
            min, 25%, 50%, 75%, max`` (over the changes); no rows when nothing is launched.
        """
        return counters.queue_length_summary(self.get_queue_length_time_series(ranks))

    @empty_says(no_gpu_work)
    def get_queue_length_summary_from_time_series(
        self, queue_length_dict: Mapping[int, pd.DataFrame]
    ) -> pd.DataFrame:
        """:meth:`get_queue_length_summary` of series already computed with
        :meth:`get_queue_length_time_series` (same columns)."""
        return counters.queue_length_summary(queue_length_dict)

    @empty_says(no_gpu_work)
    def get_time_spent_blocked_on_full_queue(
        self,
        queue_length_dict: Mapping[int, pd.DataFrame] | None = None,
        max_queue_length: int = 1024,
    ) -> pd.DataFrame:
        """How long each stream's queue was full: CUDA blocks the launching thread when
        ``max_queue_length`` operations are queued on a stream.

        Args:
            queue_length_dict: series from :meth:`get_queue_length_time_series` (default: all
                ranks).
            max_queue_length: the limit (1024 in CUDA).

        Returns:
            One row per (rank, stream) that reached the limit: ``rank, stream,
            duration_at_max_queue_length`` (µs), ``relative_duration_at_max_queue_length``
            (share of the rank's trace span); no rows when none did.
        """
        series = (
            queue_length_dict
            if queue_length_dict is not None
            else self.get_queue_length_time_series()
        )
        if len(series):
            select(self.traces, list(series))  # the series' ranks must be loaded
        return counters.time_blocked_on_full_queue(self.traces, series, max_queue_length)

    def get_memory_bw_time_series(
        self, ranks: Iterable[int] | None = None
    ) -> dict[int, pd.DataFrame]:
        """Bandwidth of the running copies and sets, per kind, over time: each adds its
        bandwidth (Kineto's ``memory bandwidth (GB/s)``, else bytes / duration) while it runs.

        Returns:
            ``{rank: DataFrame}`` for ranks with copies: ``ts`` (ns), ``pid``, ``name``
            (``Memcpy HtoD``, ``Memcpy DtoH``, ``Memcpy DtoD``, ``Memcpy PtoP``, ``Memset``,
            ``Memcpy Unknown``), ``memory_bw_gbps`` (running sum, GB/s).
        """
        return counters.memory_bw_time_series(self.traces, ranks)

    @empty_says(no_gpu_work)
    def get_memory_bw_summary(self, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """Statistics of the copy bandwidth while copies of a kind run.

        Returns:
            Index ``(rank, name)``, columns ``("memory_bw_gbps", stat)`` for ``count, mean,
            std, min, 25%, 50%, 75%, max`` (GB/s); no rows without copies.
        """
        return counters.memory_bw_summary(self.get_memory_bw_time_series(ranks))

    def generate_trace_with_counters(
        self,
        time_series: TimeSeriesTypes | None = None,
        ranks: Iterable[int] | None = None,
        output_suffix: str = "_with_counters",
        *,
        output_dir: str | Path | None = None,
    ) -> dict[int, Path | list[Path]]:
        """Write each rank's trace plus counter events, to open in Perfetto or chrome://tracing.

        Args:
            time_series: ``TimeSeriesTypes.QUEUE_LENGTH``, ``TimeSeriesTypes.MEMCPY_BANDWIDTH``
                or both (``|``, the default).
            ranks: ranks to write (default: all; the reference: rank 0).
            output_suffix: added to each file name (before ``.json``).
            output_dir: folder for the files (default: ``<trace folder><output_suffix>``).

        Returns:
            ``{rank: path written}`` (the original events unchanged, the counters appended); for
            a rank profiled in several windows (files), the list of the paths, one per window.
        """
        return augment.generate_trace_with_counters(
            self.traces, time_series, ranks, output_suffix, output_dir
        )

    def get_cupti_counter_data_with_operators(
        self, ranks: Iterable[int] | None = None, *, visualize: bool = False
    ) -> list[pd.DataFrame]:
        """CUPTI range-profiler counters per kernel, with the operators that launched it
        (traces recorded with the profiler's CUPTI range-profiler mode: ``cuda_profiler_range``
        events; :mod:`hta_lite.analyses.cupti` explains the pairing).

        Args:
            ranks: ranks to include (default: all; the reference: rank 0).
            visualize: show the FLOPs (or, without SASS counters, the first counter) per operator.

        Returns:
            One DataFrame per rank with profiler ranges: ``rank, name, ts, dur`` (ns, the
            profiler's replay), ``correlation``, ``launch_row``, ``op_stack`` (list of operator
            names, outermost first), ``top_level_op``, ``bottom_level_op``, ``flops`` (from the
            SASS instruction counters, NaN without them), then one column per counter. No
            selected rank with ``cuda_profiler_range`` events: one table with no rows, whose
            ``attrs["why"]`` says so.

        Raises:
            TraceError: a rank's ranges and kernel launches differ in number.
        """
        selected = select(self.traces, ranks)
        with_ranges = [t for t in selected if len(t.kernel_counters)]
        if not with_ranges:
            reason = (
                f"no cuda_profiler_range events in rank(s) {[t.rank for t in selected]}: record"
                " with the CUPTI range profiler (docs/collecting-traces.md)"
            )
            return [missing(cupti.FIXED_COLUMNS, reason)]
        frames = [cupti.counter_data_with_operators(t) for t in with_ranges]
        if visualize:
            for df in frames:
                plots.show(plots.plot_cupti_counters(df, cupti.main_counter(df)))
        return frames
