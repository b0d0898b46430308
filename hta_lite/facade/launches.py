"""Kernel launches: launch statistics, the kernels of each ATen operator, frequent sequences."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ..analyses import launches, sequences
from ..tools import augment
from .base import plots
from .missing import empty_says, no_gpu_work


class Launches:
    """Launch methods of :class:`hta_lite.TraceAnalysis` (the reference's names and columns)."""

    @empty_says(no_gpu_work)
    def get_cuda_kernel_launch_stats(
        self,
        ranks: Iterable[int] | None = None,
        runtime_cutoff: float = 50,
        launch_delay_cutoff: float = 100,
        include_memory_events: bool = True,
        visualize: bool = True,
    ) -> dict[int, pd.DataFrame]:
        """CPU duration of each launch call and how late the GPU started its work.

        Args:
            ranks: ranks to include (default: all; the reference: rank 0).
            runtime_cutoff, launch_delay_cutoff: thresholds (µs) of the outliers the charts mark.
            include_memory_events: include copy and set calls (``kineto.COPY_LAUNCH_NAMES``).
            visualize: show the charts per rank.

        Returns:
            ``{rank: DataFrame}``, one row per launched GPU event: ``correlation``,
            ``cpu_duration``, ``gpu_duration``, ``launch_delay`` (GPU start minus call end,
            clipped at 0; all µs), ``launch_name``, ``kernel_name``.
        """
        stats = launches.cuda_kernel_launch_stats(self.traces, ranks, include_memory_events)
        if visualize:
            for rank, df in stats.items():
                for fig in plots.plot_launch_stats(df, rank, runtime_cutoff, launch_delay_cutoff):
                    plots.show(fig)
        return stats

    @empty_says(no_gpu_work)
    def get_aten_op_kernels_and_delay(
        self, ranks: Iterable[int] | None = None, sort_by: list[str] | None = None
    ) -> dict[int, pd.DataFrame]:
        """The GPU work of each ATen operator: its kernel sequence and its launch delays.

        Args:
            ranks: ranks to include (default: all; the reference: rank 0).
            sort_by: columns to sort by, descending (default ``["occurrence_count"]``).

        Returns:
            ``{rank: DataFrame}``: ``aten_op_name, kernel_sequence`` (names joined by `` -> ``),
            ``occurrence_count``, ``avg_aten_op_launch_delay`` (operator start to its first
            launch call), ``avg_runtime_delay`` (that call to the GPU start), in µs.
        """
        return launches.aten_op_kernels_and_delay(self.traces, ranks, sort_by)

    @empty_says(no_gpu_work)
    def get_frequent_cuda_kernel_sequences(
        self,
        operator_name: str,
        output_dir: str | Path,
        min_pattern_len: int = 3,
        rank: int = 0,
        top_k: int = 5,
        visualize: bool = False,
        compress_other_kernels: bool = True,
    ) -> pd.DataFrame:
        """Kernel sequences launched under the CPU operators whose name contains
        ``operator_name``, by frequency; also writes ``output_dir/overlaid_<trace file>`` with
        the ``top_k`` patterns marked as GPU annotations.

        Args:
            operator_name: text in the operator's name (no operator with it: ``SelectionError``).
            output_dir: folder of the overlaid trace.
            min_pattern_len: ignore operators that launched fewer GPU events.
            rank: the rank (default 0, as the reference).
            top_k: patterns to mark (and to chart with ``visualize``).
            compress_other_kernels: in the overlaid trace, shorten the other kernels' names.

        Returns:
            ``pattern`` (operator and kernel names joined by ``|``), ``count``,
            ``GPU kernel duration (us)``, ``CPU op duration (us)``, ``pattern_indices`` (rows of
            the GPU table); no rows when no operator launched ``min_pattern_len`` events.
        """
        trace = self.trace(rank)
        patterns = sequences.frequent_sequences(trace, operator_name, min_pattern_len)
        if not patterns.empty:
            augment.overlay_patterns(trace, patterns, top_k, output_dir, compress_other_kernels)
            if visualize:
                plots.show(plots.plot_frequent_sequences(patterns.head(top_k)))
        return patterns
