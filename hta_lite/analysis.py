"""``TraceAnalysis``: the facade users open in a notebook. It holds no algorithm:
each method selects ranks, calls one function of :mod:`hta_lite.analyses` and,
when asked, shows the matching figure of :mod:`hta_lite.plots`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

from . import health, plots
from .analyses import annotations, idle, kernels, overlap, temporal
from .analyses.common import select
from .errors import RankNotFoundError
from .loader import OnError, load
from .rank_trace import RankTrace


class TraceAnalysis:
    """Load a folder of per-rank Kineto traces and analyze where the GPU time went.

    Args:
        trace_dir: folder with one ``*.json`` / ``*.json.gz`` file per rank.
        trace_files: ``{rank: path}`` instead of a folder.
        include_last_profiler_step: keep the last ProfilerStep (dropped by default,
            as in the reference, because it is usually cut short by the profiler).
        parallel: parse ranks in worker processes (default when there are several files).
        max_workers: cap on worker processes (default: CPU count).
        on_error: ``"raise"`` (default), ``"skip"`` or ``"warn"`` for unreadable files;
            skipped files are listed in ``skipped_files``.
        progress: show a progress bar (default: when there is more than one file).
    """

    def __init__(
        self,
        trace_dir: str | Path | None = None,
        trace_files: Mapping[int, str | Path] | None = None,
        include_last_profiler_step: bool = False,
        parallel: bool = True,
        max_workers: int | None = None,
        on_error: OnError = "raise",
        progress: bool | None = None,
    ):
        self.trace_dir = None if trace_dir is None else str(trace_dir)
        self.traces, self.skipped_files = load(
            trace_dir, trace_files, include_last_profiler_step, parallel, max_workers, on_error, progress
        )

    # ---- data access -------------------------------------------------------
    @property
    def ranks(self) -> list[int]:
        """Loaded ranks, sorted."""
        return sorted(self.traces)

    def trace(self, rank: int) -> RankTrace:
        """All tables of one rank (see :class:`hta_lite.rank_trace.RankTrace`)."""
        if rank not in self.traces:
            raise RankNotFoundError(None, f"rank {rank} not loaded; loaded ranks: {self.ranks}")
        return self.traces[rank]

    def gpu_events(self, rank: int) -> pd.DataFrame:
        """GPU table of a rank: kernels, memcpy, memset, syncs (ts/dur in ns)."""
        return self.trace(rank).gpu

    def cpu_events(self, rank: int) -> pd.DataFrame:
        """CPU table of a rank: operators, annotations, python functions, runtime calls (ns)."""
        return self.trace(rank).cpu

    def metadata(self, rank: int) -> dict:
        """Top-level keys of the trace file other than ``traceEvents``."""
        return self.trace(rank).metadata

    def health(self) -> pd.DataFrame:
        """Long table ``rank, file, item, count``: events read, and every event skipped,
        clamped or excluded with its reason (docs/health.md)."""
        return health.health_table(self.traces, self.skipped_files)

    def health_summary(self) -> pd.DataFrame:
        """One row per rank: device, schema, time unit, steps, clock offset, problem count."""
        return health.health_summary(self.traces)

    # ---- reference analyses -----------------------------------------------
    def get_profiler_steps(self, rank: int | None = None) -> list[int]:
        """ProfilerStep numbers present in the (first, or given) rank."""
        trace = self.trace(self.ranks[0] if rank is None else rank)
        return trace.steps["step"].tolist()

    def get_temporal_breakdown(self, visualize: bool = True, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        df = temporal.temporal_breakdown(self.traces, ranks)
        if visualize:
            plots.show(plots.plot_temporal_breakdown(df))
        return df

    def get_idle_time_breakdown(
        self,
        ranks: Iterable[int] | int | None = None,
        streams: Iterable[int] | None = None,
        visualize: bool = True,
        visualize_pctg: bool = True,
        show_idle_interval_stats: bool = False,
        consecutive_kernel_delay: float = 30,
    ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """Idle time per (rank, stream) by cause; ``consecutive_kernel_delay`` is in µs."""
        df, stats = idle.idle_time_breakdown(self.traces, ranks, streams, consecutive_kernel_delay, show_idle_interval_stats)
        if visualize:
            plots.show(plots.plot_idle_time_breakdown(df, visualize_pctg))
        return df, stats

    def get_comm_comp_overlap(self, visualize: bool = True, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        df = overlap.comm_comp_overlap(self.traces, ranks)
        if visualize:
            plots.show(plots.plot_comm_comp_overlap(df))
        return df

    def get_gpu_kernel_breakdown(
        self,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 10,
        include_memory_kernels: bool = True,
        ranks: Iterable[int] | None = None,
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        type_df, kernel_df = kernels.gpu_kernel_breakdown(self.traces, ranks, duration_ratio, num_kernels, include_memory_kernels)
        if visualize:
            plots.show(plots.plot_kernel_type_pie(type_df))
            for fig in plots.plot_kernel_distribution(kernel_df):
                plots.show(fig)
        return type_df, kernel_df

    def get_gpu_kernels_with_user_annotations(
        self, rank: int | None = None, expand_names: bool = True, shortern_names: bool = False
    ) -> pd.DataFrame:
        """GPU events of a rank with the innermost ``gpu_user_annotation`` that covers each."""
        trace = self.trace(self.ranks[0] if rank is None else rank)
        return annotations.kernels_with_user_annotations(trace)

    def get_gpu_user_annotation_breakdown(
        self, visualize: bool = True, duration_ratio: float = 0.8, num_kernels: int = 1000, ranks: Iterable[int] | None = None
    ) -> pd.DataFrame:
        """Time per ``gpu_user_annotation`` name per rank (µs), top names as in the kernel breakdown."""
        df = annotations.user_annotation_breakdown(select(self.traces, ranks), duration_ratio, num_kernels)
        if visualize:
            plots.show(plots.plot_user_annotation_breakdown(df))
        return df
