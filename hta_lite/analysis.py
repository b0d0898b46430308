"""``TraceAnalysis``: the facade users open in a notebook. It holds no algorithm:
each method selects ranks, calls one function of :mod:`hta_lite.analyses` and,
when asked, shows the matching figure of :mod:`hta_lite.plots`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from . import augment, health
from .analyses import (
    annotations,
    counters,
    idle,
    kernels,
    launches,
    overlap,
    sequences,
    stragglers,
    temporal,
    timers,
)
from .analyses.common import select
from .classify import short_name
from .errors import RankNotFoundError
from .loader import LoadOptions, OnError, load
from .rank_trace import RankTrace


class _LazyPlots:
    """:mod:`hta_lite.plots`, imported at the first figure: plotly adds 0.2 s to every start
    (a batch script or a worker process that never plots does not pay it)."""

    def __getattr__(self, name: str):
        from . import plots as module

        return getattr(module, name)


plots = _LazyPlots()


class TraceAnalysis:
    """Load a folder of per-rank Kineto traces and analyze where the GPU time went.

    Args:
        trace_files: ``{rank: path}`` of single files (the reference's first argument); a folder
            given here is taken as ``trace_dir``.
        trace_dir: folder with one ``*.json`` / ``*.json.gz`` file per rank.
        include_last_profiler_step: keep the last ProfilerStep (dropped by default, as in the
            reference, because it is usually cut short by the profiler).
        parallel, max_workers, on_error, progress, cache: keyword-only loader options, see
            :class:`hta_lite.loader.LoadOptions` (or pass ``options=LoadOptions(...)``).
            With ``on_error="skip"`` the files not loaded are in ``skipped_files``
            (``{path: problem}``) and in :meth:`health`.

    Raises:
        TraceError: a file cannot be loaded (``on_error="raise"``), or no file can.
    """

    def __init__(
        self,
        trace_files: Mapping[int, str | Path] | str | Path | None = None,
        trace_dir: str | Path | None = None,
        include_last_profiler_step: bool = False,
        *,
        parallel: bool = True,
        max_workers: int | None = None,
        on_error: OnError = "raise",
        progress: bool | None = None,
        cache: bool | str | Path | None = None,
        options: LoadOptions | None = None,
    ):
        if isinstance(trace_files, (str, Path)):  # TraceAnalysis("traces/")
            trace_files, trace_dir = None, trace_files
        self.trace_dir = None if trace_dir is None else str(trace_dir)
        self.options = options or LoadOptions(
            include_last_profiler_step, parallel, max_workers, on_error, progress, cache
        )
        self.traces, self.skipped_files = load(trace_dir, trace_files, self.options)

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

    def get_step_breakdown(
        self,
        ranks: Iterable[int] | None = None,
        steps: Iterable[int] | None = None,
        visualize: bool = False,
    ) -> pd.DataFrame:
        """Per rank and ProfilerStep: step time and the GPU time of the work it launched (µs)."""
        from .analyses import steps as step_analysis

        df = step_analysis.step_breakdown(self.traces, ranks, steps)
        if visualize:
            plots.show(plots.plot_step_breakdown(df))
        return df

    def get_temporal_breakdown(
        self, visualize: bool = True, ranks: Iterable[int] | None = None
    ) -> pd.DataFrame:
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
        df, stats = idle.idle_time_breakdown(
            self.traces, ranks, streams, consecutive_kernel_delay, show_idle_interval_stats
        )
        if visualize:
            plots.show(plots.plot_idle_time_breakdown(df, visualize_pctg))
        return df, stats

    def get_comm_comp_overlap(
        self, visualize: bool = True, ranks: Iterable[int] | None = None
    ) -> pd.DataFrame:
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
        type_df, kernel_df = kernels.gpu_kernel_breakdown(
            self.traces, ranks, duration_ratio, num_kernels, include_memory_kernels
        )
        if visualize:
            plots.show(plots.plot_kernel_type_pie(type_df))
            for fig in plots.plot_kernel_distribution(kernel_df):
                plots.show(fig)
        return type_df, kernel_df

    def get_gpu_kernels_with_user_annotations(
        self, rank: int | None = None, shortern_names: bool = False
    ) -> pd.DataFrame:
        """GPU events of a rank with the innermost ``gpu_user_annotation`` that covers each;
        ``shortern_names`` (the reference's spelling) drops template and function arguments."""
        trace = self.trace(self.ranks[0] if rank is None else rank)
        df = annotations.kernels_with_user_annotations(trace)
        if shortern_names:
            df["name"] = df["name"].astype(str).map(short_name).astype("category")
        return df

    def get_gpu_user_annotation_breakdown(
        self,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 1000,
        ranks: Iterable[int] | None = None,
    ) -> pd.DataFrame:
        """Time per ``gpu_user_annotation`` name per rank (µs), top names as in the kernel breakdown."""
        df = annotations.user_annotation_breakdown(
            select(self.traces, ranks), duration_ratio, num_kernels
        )
        if visualize:
            plots.show(plots.plot_user_annotation_breakdown(df))
        return df

    # ---- counters and launches -------------------------------------------
    def get_queue_length_time_series(
        self, ranks: Iterable[int] | None = None
    ) -> dict[int, pd.DataFrame]:
        """``{rank: DataFrame[ts (ns), pid, tid, stream, queue_length]}``, one row per change."""
        return counters.queue_length_time_series(self.traces, ranks)

    def get_queue_length_summary(self, ranks: Iterable[int] | None = None) -> pd.DataFrame | None:
        """``describe()`` of the queue length, indexed by (rank, stream)."""
        return counters.queue_length_summary(self.get_queue_length_time_series(ranks))

    def get_time_spent_blocked_on_full_queue(
        self, queue_length_dict: dict[int, pd.DataFrame] | None = None, max_queue_length: int = 1024
    ) -> pd.DataFrame:
        """One row per (rank, stream) that reached ``max_queue_length``; durations in µs."""
        series = (
            queue_length_dict
            if queue_length_dict is not None
            else self.get_queue_length_time_series()
        )
        return counters.time_blocked_on_full_queue(self.traces, series, max_queue_length)

    def get_memory_bw_time_series(
        self, ranks: Iterable[int] | None = None
    ) -> dict[int, pd.DataFrame]:
        """``{rank: DataFrame[ts (ns), pid, name, memory_bw_gbps]}``, running bandwidth per memcpy kind."""
        return counters.memory_bw_time_series(self.traces, ranks)

    def get_memory_bw_summary(self, ranks: Iterable[int] | None = None) -> pd.DataFrame | None:
        """``describe()`` of the bandwidth while copies run, indexed by (rank, name)."""
        return counters.memory_bw_summary(self.get_memory_bw_time_series(ranks))

    def generate_trace_with_counters(
        self,
        time_series: dict | None = None,
        ranks: Iterable[int] | None = None,
        output_suffix: str = "_with_counters",
        output_dir: str | Path | None = None,
    ) -> dict[int, Path]:
        """Write each rank's trace plus queue-length and bandwidth counters; returns the paths."""
        return augment.generate_trace_with_counters(
            self.traces, time_series, ranks, output_suffix, output_dir
        )

    def get_cuda_kernel_launch_stats(
        self,
        ranks: Iterable[int] | None = None,
        runtime_cutoff: float = 50,
        launch_delay_cutoff: float = 100,
        include_memory_events: bool = True,
        visualize: bool = True,
    ) -> dict[int, pd.DataFrame]:
        """``{rank: DataFrame[correlation, cpu_duration, gpu_duration, launch_delay, ...]}`` (µs)."""
        stats = launches.cuda_kernel_launch_stats(self.traces, ranks, include_memory_events)
        if visualize:
            for rank, df in stats.items():
                for fig in plots.plot_launch_stats(df, rank, runtime_cutoff, launch_delay_cutoff):
                    plots.show(fig)
        return stats

    def get_aten_op_kernels_and_delay(
        self, ranks: Iterable[int] | None = None, sort_by: list[str] | None = None
    ) -> dict[int, pd.DataFrame]:
        """Per ATen operator and kernel sequence: occurrences and mean launch delays (µs)."""
        return launches.aten_op_kernels_and_delay(self.traces, ranks, sort_by)

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
        """Kernel patterns launched under ``operator_name``, with counts and GPU/CPU time (µs);
        also writes ``output_dir/overlaid_<trace file>`` with the top patterns marked."""
        trace = self.trace(rank)
        patterns = sequences.frequent_sequences(trace, operator_name, min_pattern_len)
        if not patterns.empty:
            augment.overlay_patterns(trace, patterns, top_k, output_dir, compress_other_kernels)
            if visualize:
                plots.show(plots.plot_frequent_sequences(patterns.head(top_k)))
        return patterns

    # ---- cross-rank ---------------------------------------------------------
    def get_annotation_timers(
        self,
        names: Iterable[str] | None = None,
        source: str = "cpu",
        ranks: Iterable[int] | None = None,
        steps: Iterable[int] | None = None,
    ) -> pd.DataFrame:
        """Tidy ``rank, step, name, elapsed_ms`` for user annotations and ProfilerStep (``source``
        ``"cpu"`` or ``"gpu"``); nested repeats of a name are counted once."""
        return timers.annotation_timers(self.traces, names, source, ranks, steps)

    def get_timers_across_ranks(
        self,
        names: Iterable[str] | None = None,
        source: str = "cpu",
        log_option: str = "minmax",
        normalizer: float = 1.0,
        ranks: Iterable[int] | None = None,
        steps: Iterable[int] | None = None,
        visualize: bool = False,
    ) -> pd.DataFrame:
        """Megatron's cross-rank view of the timers: ``"max"``, ``"minmax"`` or ``"all"`` (ms,
        sum over steps / ``normalizer``; ranks without a timer are left out)."""
        tidy = self.get_annotation_timers(names, source, ranks, steps)
        table = timers.timers_across_ranks(tidy, log_option, normalizer)
        if visualize:
            plots.show(
                plots.plot_timers_minmax(timers.timers_across_ranks(tidy, "minmax", normalizer))
            )
            plots.show(plots.plot_timer_heatmap(tidy))
        return table

    def timers_text(
        self,
        names: Iterable[str] | None = None,
        source: str = "cpu",
        log_option: str = "minmax",
        normalizer: float = 1.0,
        ranks: Iterable[int] | None = None,
        steps: Iterable[int] | None = None,
    ) -> str:
        """The timers in Megatron-LM's log format (``(min, max) time across ranks (ms):`` ...)."""
        table = self.get_timers_across_ranks(names, source, log_option, normalizer, ranks, steps)
        return timers.megatron_text(table, log_option)

    def get_potential_stragglers(
        self,
        profiler_steps: Iterable[int] | None = None,
        num_candidates: int = 2,
        visualize: bool = False,
    ) -> list[int]:
        """Reference method: ranks whose long communication kernels start latest, most frequent first."""
        found = stragglers.potential_stragglers(self.traces, profiler_steps, num_candidates)
        if visualize:
            plots.show(
                plots.plot_rank_lateness(
                    stragglers.rank_skew(
                        stragglers.collective_skew(self.traces, steps=profiler_steps)
                    )
                )
            )
        return found

    def get_straggler_report(
        self, steps: Iterable[int] | None = None, factor: float = 3.0
    ) -> stragglers.StragglerReport:
        """Collectives matched across ranks, per-rank lateness, the stragglers and why (tables and text)."""
        skew = stragglers.collective_skew(self.traces, steps=steps)
        lateness = stragglers.rank_skew(skew)
        found = stragglers.find_stragglers(lateness, factor)
        causes, texts = stragglers.explain(self.traces, lateness, found, steps)
        return stragglers.StragglerReport(skew, lateness, found, causes, texts)
