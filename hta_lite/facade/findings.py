"""Findings ranked by the step time a fix would save (:mod:`hta_lite.analyses.findings`), and
the key facts of each view (:mod:`hta_lite.analyses.key_findings`)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pandas as pd

from ..analyses import findings as ranked
from ..analyses import key_findings as kf
from ..analyses.job_path import job_critical_path
from ..analyses.lateness import rank_skew
from ..analyses.memory.per_rank import device_memory
from ..analyses.one_time import idle_while_one_time
from ..analyses.operators import DEVICES, architecture_hint
from ..analyses.stragglers import skew_table
from ..errors import MissingDataError
from ..kineto import DATA_LOADING_PATTERN
from .base import plots
from .missing import need, table_view
from .snapshot import MemorySnapshot


class Findings:
    """Findings methods of :class:`hta_lite.TraceAnalysis`."""

    @table_view(ranked.COLUMNS)
    def get_findings(
        self,
        *,
        data_load_events: list[str] | None = None,
        device: str | None = None,
        snapshot=None,
        visualize: bool = False,
    ) -> pd.DataFrame:
        """What to fix first: one row per finding, ranked by the step time its fix would save,
        estimated by replaying the job's critical path with the fix made (docs/analyses/
        findings.md: each kind's model and blind spots).

        Args:
            data_load_events: regexes of event names that are data loading (default: names
                with ``data load`` / ``DataLoader`` in them).
            device: the GPU for the roofline of GEMMs and convolutions when the trace does not
                name it (as :meth:`get_operator_roofline`'s).
            snapshot: a CUDA memory snapshot of the run (a :class:`hta_lite.MemorySnapshot`
                or the path of its pickle): its fragmentation and every out-of-memory it
                records, with the verdict, join the memory findings.
            visualize: show the findings' savings, with their ranges and the cumulative saving.

        Returns:
            DataFrame with the columns of :mod:`hta_lite.analyses.findings.ranking`: ``kind``,
            ``rank``, ``where``, ``saving_ms_per_step``, ``saving_pctg``, ``saving_low_ms``,
            ``saving_high_ms``, ``cumulative_ms`` (this fix and all above it made together),
            ``evidence``, ``estimate_method``, ``advice``; largest saving first, then the
            findings that save no step time (memory). Empty when no fix would save at least
            0.5 % of the step.

            Traces without ProfilerSteps are one step each, from the first event to the last
            (the savings are then per trace). A rank recorded with the CUPTI range profiler
            (its times are the profiler's replays, not the run's): no rows, and
            ``attrs["why"]`` says so.
        """
        if snapshot is not None and not isinstance(snapshot, MemorySnapshot):
            snapshot = MemorySnapshot(snapshot)
        key = (
            tuple(data_load_events) if data_load_events is not None else None,
            device,
            _file_key(snapshot.path) if snapshot is not None else None,
        )
        cache = self.memo.findings  # the summary and report both ask
        if key not in cache:
            ctx = self._findings_context(data_load_events, device)
            if snapshot is not None:
                ctx.add_snapshot(snapshot)
            cache[key] = ranked.findings(ctx)
        table = cache[key].copy()
        if visualize:
            plots.show(plots.plot_findings(table))
        return table

    def _findings_context(self, data_load_events, device=None) -> ranked.Context:
        ranked.refuse_range_profiled(self.traces)
        whole = not self.get_profiler_steps()  # then each trace is one step
        parts = self._job_path_partials(data_load_events, None, whole)
        matching = self.get_collectives()
        path = job_critical_path(
            parts["segments"], parts["events"], matching.calls, matching.instances,
            sorted(self.traces), gaps=parts["gaps"],
        )  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = self.get_straggler_report() if len(self.ranks) > 1 else None
            anomalies = _or_none(self.get_step_anomalies)
            peaks = _or_none(self.get_memory_peaks)
            leaks = _or_none(self._steady_leaks)
            roofline = _or_none(lambda: self.get_operator_roofline(device=device))
        return ranked.Context.of(
            parts["segments"], parts["events"], path, matching.calls, matching.instances,
            self.traces,
            patterns=(
                list(data_load_events) if data_load_events is not None else [DATA_LOADING_PATTERN]
            ),
            stragglers=report, anomalies=anomalies, memory_peaks=peaks, memory_leaks=leaks,
            roofline=roofline,
            capacity=self._device_memory, gaps=parts["gaps"],
        )  # fmt: skip

    def get_key_findings(self, *, visualize: bool = False) -> pd.DataFrame:
        """The few facts to read first, one line each with its number: idle GPU time and its
        main cause, the rank the others wait for, communication not hidden by compute, the top
        operator, MFU, the memory peak against the device's memory, a job not every rank of
        which is loaded, trace health.

        Args:
            visualize: show a chart of the findings that are a share of the step.

        Returns:
            DataFrame with the columns of :mod:`hta_lite.analyses.key_findings` (``kind``,
            ``rank``, ``finding``, ``value``, ``unit``, ``step_pctg``, ``section``), the
            wall-clock findings first by their share of the step. A view the traces lack gives
            no row, or a row that says what to record (memory, MFU).
        """
        temporal = self.get_temporal_breakdown(visualize=False)
        idle = self.get_gpu_idle_by_cause()
        steps = self.get_step_breakdown(visualize=False)
        step_us = float(steps["step_time"].mean()) if len(steps) else math.nan
        report = self.get_straggler_report() if len(self.ranks) > 1 else None
        straggler = kf.straggler(report, step_us) if report is not None else None
        stage = kf.pipeline_stage(report, step_us) if report is not None else None
        waits = self._waits_suffered() if report is not None else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an unknown device: the MFU row says what to pass
            operators = self.get_operator_summary(visualize=False)
            mfu = _or_none(self.get_mfu)
        top = kf.top_operator(operators)
        rows = [
            kf.gpu_idle(temporal, idle, self._idle_while_one_time(), steps),
            straggler,
            stage,
            kf.exposed_communication(steps, waits),
            self._step_anomaly_finding(),
            top,
            kf.mfu(mfu, list(DEVICES), self._architecture()) if top else None,
            kf.memory_peak(
                self.get_memory_peaks(), self._device_memory, _or_none(self._steady_leaks)
            ),
            kf.partial_job(self.ranks, self._world_size()),
            kf.health(self.health()),
        ]
        table = kf.key_findings(rows)
        if visualize:
            plots.show(plots.plot_key_findings(table))
        return table

    def _waits_suffered(self) -> pd.Series:
        """Per rank, µs per step it sat in a collective or a send / recv waiting for its last
        member, as measured (every matched call of a profiled step: a pipeline's receives
        included, which the straggler report does not compare)."""
        calls = self.get_collectives().measured()
        return rank_skew(skew_table(calls[calls["step"] >= 0]))["wait_suffered_us"]

    def _idle_while_one_time(self) -> tuple[float, str]:
        """(µs the ranks' GPUs idle while their hosts compile or capture a graph, summed; what
        the rank with the most of it does)."""
        per_rank = [idle_while_one_time(self.trace(r)) for r in sorted(self.traces)]
        doing = [d for ns, d in sorted(per_rank, reverse=True) if ns > 0]
        return sum(ns for ns, _ in per_rank) / 1e3, doing[0] if doing else ""

    def _step_anomaly_finding(self) -> dict | None:
        try:
            return kf.step_anomalies(need(self.get_step_anomalies()), self.get_step_periodicity())
        except MissingDataError:  # no ProfilerStep
            return None

    def _world_size(self) -> int:
        """The job's rank count as the traces record it (``distributedInfo.world_size``, the
        largest recorded), -1 when none does."""
        sizes = [self.traces[r].meta.world_size for r in self.ranks]
        return max([s for s in sizes if s is not None] or [-1])

    def _architecture(self) -> str:
        """What the first GPU rank's kernel names say of its device (``"sm80 or newer"``)."""
        gpu = next((t.gpu for t in self.traces.values() if len(t.gpu)), None)
        return architecture_hint(pd.unique(gpu["name"])) if gpu is not None else ""

    def _device_memory(self, rank: int, device: str) -> float:
        """Bytes of memory of a rank's device (``cuda:N``), NaN when its trace does not say."""
        return device_memory(self.traces[rank], device)


def _file_key(path: str) -> tuple:
    """A file as the findings' cache knows it: its path, size and modification time."""
    stat = Path(path).stat()
    return str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns


def _or_none(method):
    """What ``method`` answers, None where its data is missing (docs/missing-data.md)."""
    try:
        return need(method())
    except MissingDataError:
        return None
