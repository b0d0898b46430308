"""The job's critical path across ranks (docs/analyses/job-critical-path.md)."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ..analyses.job_path import JobCriticalPath, job_critical_path, segments
from ..errors import SelectionError, TraceError
from ..load import cache as trace_cache
from ..load.workers import map_in_processes
from ..tools.job_path_overlay import overlay_job_path
from .base import plots


class JobPaths:
    """Job critical path methods of :class:`hta_lite.TraceAnalysis`."""

    def get_job_critical_path(
        self,
        step: int | Iterable[int] | None = None,
        *,
        data_load_events: list[str] | None = None,
        visualize: bool = False,
    ) -> JobCriticalPath:
        """The chain of work across ranks that sets each step's time: every rank's local
        critical path (HTA's graph) between its collectives, joined at the matched collectives
        (a collective ends when its last rank has arrived, plus the transfer), walked back from
        the rank whose step ends last.

        Args:
            step: a ProfilerStep number, several, or None (every step). A step no rank has is
                a ``SelectionError``. Traces without ProfilerSteps are one step each (step
                -1), from their first event to their last, as in :meth:`get_findings`.
            data_load_events: regexes of event names whose time is ``data_loading`` (default:
                names with ``data load`` / ``DataLoader`` in them).
            visualize: show the path over time, one lane per rank, hops drawn.

        Returns:
            :class:`~hta_lite.analyses.job_path.JobCriticalPath`: ``path()`` (``step, rank,
            name, category, bound_by, start_us, duration_us, tid, stream``, in time order,
            without gaps), ``summary()`` (``rank, bound_by, duration_us, share_pctg`` of the
            steps), ``by_rank()``, ``hops()`` (each move between ranks, the collective crossed,
            the wait it caused), ``steps()`` (per step: span, the rank it ends and starts on)
            and ``problems`` (ranks without the step, unmatched or partial collectives).
        """
        present = self.get_profiler_steps()
        whole = not present  # then each rank's trace is one step, -1 (as the findings do)
        steps = None if step is None else ([step] if isinstance(step, int) else list(step))
        absent = [s for s in steps or [] if s not in present]
        if absent:
            where = f"there are {present}" if present else "the traces have no ProfilerStep"
            raise SelectionError(None, f"step(s) {absent} not profiled; {where}")
        parts = self._job_path_partials(data_load_events, steps, whole)
        matching = self.get_collectives()
        path = job_critical_path(
            parts["segments"], parts["events"], matching.calls, matching.instances,
            sorted(self.traces), steps, gaps=parts["gaps"],
        )  # fmt: skip
        if visualize:
            plots.show(plots.plot_job_critical_path(path))
        return path

    def overlay_job_critical_path(self, path: JobCriticalPath, output_dir: str) -> str:
        """Write the job path as one trace for Perfetto: a process per rank on the path, its
        path events in order, and a flow arrow at every hop between ranks.

        Args:
            path: from :meth:`get_job_critical_path`.
            output_dir: folder of the new file (``job_critical_path.json``).

        Returns:
            The path of the written file.
        """
        return str(overlay_job_path(path, Path(output_dir)))

    def _job_path_partials(
        self, data_load_events, steps, whole: bool = False
    ) -> dict[str, pd.DataFrame]:
        """The ranks' segments (``whole``: a rank without ProfilerSteps is one step, -1)."""
        key = (
            tuple(data_load_events) if data_load_events is not None else None,
            tuple(steps) if steps is not None else None,
            whole,
        )
        cache = self.memo.job_path_parts
        if key not in cache:
            parts = self._segments_per_rank(data_load_events, steps, whole)
            cache[key] = {
                name: pd.concat([p[name] for p in parts], ignore_index=True)
                for name in ("segments", "events", "gaps")
            }
        return cache[key]

    def _segments_per_rank(self, data_load_events, steps, whole) -> list[dict]:
        """Each rank's segments, in the loader's worker processes when the ranks were reopened
        from the cache (each worker reads its rank's tables from the cache's files: nothing
        large travels) and several workers are allowed; else here, one rank after another."""
        work = functools.partial(
            _segments_job, data_load_events=data_load_events, steps=steps, whole=whole
        )
        ranks = sorted(self.traces)
        shipped = [trace_cache.by_address(self.trace(r)) for r in ranks]
        workers = min(len(ranks), self.options.max_workers or os.cpu_count() or 1)
        if self.options.parallel and workers > 1 and all(t is not None for t in shipped):
            results = list(map_in_processes(work, shipped, workers, self.options.start_method))
        else:
            results = [work(self.trace(r)) for r in ranks]
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return results


def _segments_job(trace, data_load_events, steps, whole):
    """:func:`~..analyses.job_path.segments` of one rank in a worker: an error is returned
    (the pool re-runs a job whose process died, and would hide a raised one)."""
    try:
        return segments(trace, data_load_events, steps, whole)
    except TraceError as exc:
        return exc
