"""The loaded trace set: loading, data access, health, and the notebook ``repr``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ..analyses import health
from ..errors import RankNotFoundError
from ..load.loader import LoadOptions, OnError, load, load_graph_sources
from ..load.rank_trace import RankTrace
from .memo import Memo


class _LazyPlots:
    """:mod:`hta_lite.plots`, imported at the first figure: plotly adds 0.2 s to every start
    (a batch script or a worker process that never plots does not pay it)."""

    def __getattr__(self, name: str):
        from .. import plots as module

        return getattr(module, name)


plots = _LazyPlots()


class TraceSet:
    """Per-rank tables of a folder of traces (the base of :class:`TraceAnalysis`)."""

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
        graph_capture: str | Path | None = None,
        start_method: str | None = None,
        max_inflate_ratio: float | None = None,
        max_text_gb: float | None = None,
        step_range: str | None = None,
    ):
        if isinstance(trace_files, (str, Path)):  # TraceAnalysis("traces/")
            trace_files, trace_dir = None, trace_files
        self.trace_dir = None if trace_dir is None else str(trace_dir)
        self.options = options or LoadOptions(
            include_last_profiler_step, parallel, max_workers, on_error, progress, cache,
            start_method, max_inflate_ratio, max_text_gb, step_range,
        )  # fmt: skip
        self.traces, self.skipped_files = load(trace_dir, trace_files, self.options)
        self.graph_sources = (
            [] if graph_capture is None else load_graph_sources(graph_capture, self.options)
        )
        self.memo = Memo()  # results shared between views (facade/memo.py)

    @property
    def ranks(self) -> list[int]:
        """The loaded ranks, sorted (files not loaded with ``on_error="skip"`` are in
        ``skipped_files``)."""
        return sorted(self.traces)

    def trace(self, rank: int) -> RankTrace:
        """All tables of one rank (:class:`hta_lite.load.rank_trace.RankTrace`).

        Raises:
            RankNotFoundError: the rank is not loaded (the message lists the loaded ones).
        """
        if rank not in self.traces:
            raise RankNotFoundError(None, f"rank {rank} not loaded; loaded ranks: {self.ranks}")
        return self.traces[rank]

    def gpu_events(self, rank: int) -> pd.DataFrame:
        """The ``gpu`` table of a rank: kernels, copies, sets and GPU-side syncs, one row each.

        Returns:
            DataFrame with ``ts``, ``dur`` (int64 ns), ``name``, ``cat`` (categorical),
            ``pid``, ``tid``, ``stream``, ``device``, ``correlation``, ``external_id``,
            ``bytes``, ``memory_bw_gbps``, ``grid``, ``block``, the collective args,
            ``launch_row`` (row of the launching call in :meth:`cpu_events`, -1 if none),
            ``iteration`` (ProfilerStep of the launch, -1 if none), ``kernel_type``.
        """
        return self.trace(rank).gpu

    def cpu_events(self, rank: int) -> pd.DataFrame:
        """The ``cpu`` table of a rank: operators, annotations, Python functions, runtime calls.

        Returns:
            DataFrame with ``ts``, ``dur`` (int64 ns), ``name``, ``cat``, ``pid``, ``tid``,
            ``stream``, ``correlation``, ``external_id``, ``iteration``, ``depth``,
            ``parent_row`` (enclosing event on the thread, -1 if none), ``op_row`` (for runtime
            calls, the innermost enclosing ``cpu_op``, -1 otherwise).
        """
        return self.trace(rank).cpu

    def metadata(self, rank: int) -> dict:
        """Top-level keys of the rank's trace file other than ``traceEvents``
        (``deviceProperties``, ``distributedInfo``, ``displayTimeUnit``, ...)."""
        return self.trace(rank).metadata

    def __repr__(self) -> str:
        summary = health.health_summary(self.traces)
        devices = ", ".join(sorted(set(summary["device_type"])))
        steps = sorted({int(s) for t in self.traces.values() for s in t.steps["step"]})
        step_text = f"steps {steps[0]}..{steps[-1]}" if steps else "no ProfilerStep"
        ranks = self.ranks
        rank_text = f"{ranks}" if len(ranks) <= 8 else f"[{ranks[0]} .. {ranks[-1]}]"
        lines = [
            f"{type(self).__name__}({self.trace_dir or 'trace_files'}): "
            f"{len(ranks)} rank(s) {rank_text}, {devices}, {step_text}"
        ]
        problems = int(summary["problems"].sum())
        if problems or self.skipped_files:
            lines.append(
                f"  health: {problems} problem(s) (events skipped, clamped or not linked, steps"
                " unknown or unlike)"
                f"; {len(self.skipped_files)} file(s) not loaded: see .health()"
            )
        return "\n".join(lines)
