"""Memory: the allocator's timeline, peaks, lifetimes, leaks, memory per operator and per step
(the TensorBoard plugin's memory view), and HTA's raw memory timeline
(docs/analyses/memory.md)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ..analyses.common import select
from ..analyses.memory import lifetimes as life
from ..analyses.memory import operators, timeline
from ..analyses.memory.events import MEMORY_COLUMNS, memory_events
from ..analyses.memory.per_rank import why_none
from ..errors import MissingDataError, SelectionError
from ..load.readers import memory_timeline as raw_timeline
from ..safe_output import write_atomically
from .base import plots
from .missing import need, table_view

NO_RAW_ENTRIES = (
    "the raw memory timeline has no entries: export it from a profile recorded with"
    " torch.profiler.profile(profile_memory=True, record_shapes=True, with_stack=True)"
)


class Memory:
    """Memory methods of :class:`hta_lite.TraceAnalysis`."""

    def _memory_of(self, rank: int) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The rank's memory events and timeline, built once (bad totals: :meth:`health`)."""
        cache = self.memo.memory
        if rank not in cache:
            trace = self.trace(rank)
            events = memory_events(trace)
            line = timeline.timeline(events, rank)
            self._found(rank).update(timeline.found(events, line))
            cache[rank] = events, line
        return cache[rank]

    def _memory(self, rank: int) -> pd.DataFrame:
        return self._memory_of(rank)[0]

    def _memory_ranks(self, ranks) -> list[int]:
        chosen = [t.rank for t in select(self.traces, ranks)]
        with_events = [r for r in chosen if len(self._memory(r))]
        if not with_events:
            raise MissingDataError(None, why_none([self.traces[r] for r in chosen]))
        return with_events

    @table_view([*MEMORY_COLUMNS, "rank"])
    def get_memory_events(self, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """The ``[memory]`` events, typed, with the operator, annotation and module active when
        each happened.

        Args:
            ranks: default all; ranks without memory events are left out (none at all: no
                rows, ``attrs["why"]`` says what to record).

        Returns:
            ``rank`` plus :data:`hta_lite.analyses.memory.events.MEMORY_COLUMNS` (ns, bytes).
        """
        parts = [self._memory(r).assign(rank=r) for r in self._memory_ranks(ranks)]
        return pd.concat(parts, ignore_index=True)

    @table_view(timeline.TIMELINE_COLUMNS)
    def get_memory_timeline(
        self, ranks: Iterable[int] | None = None, *, visualize: bool = False
    ) -> pd.DataFrame:
        """Allocated, reserved and cached (reserved - allocated) memory after each event,
        per (rank, device), with the total recomputed from the byte deltas.

        Args:
            ranks: as in :meth:`get_memory_events`.
            visualize: a line chart per device with the ProfilerSteps shaded.

        Returns:
            :data:`hta_lite.analyses.memory.timeline.TIMELINE_COLUMNS` (bytes, ts ns).
        """
        line = pd.concat(
            [self._memory_of(r)[1] for r in self._memory_ranks(ranks)], ignore_index=True
        )
        if visualize:
            steps = {r: self.trace(r).steps for r in line["rank"].unique()}
            plots.show(plots.plot_memory_timeline(line, steps))
        return line

    @table_view(timeline.PEAK_COLUMNS)
    def get_memory_peaks(self, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """Per (rank, device): peak allocated memory, when, and the operator / annotation /
        module / step that reached it; peak reserved memory and peak cached memory (reserved
        less allocated: held by the allocator, not in use).

        Returns:
            :data:`hta_lite.analyses.memory.timeline.PEAK_COLUMNS` (bytes, ts ns).
        """
        return timeline.peaks(need(self.get_memory_timeline(ranks)))

    @table_view(["operator", "annotation", "module", "count", "bytes"])
    def get_memory_at_peak(self, rank: int, device: str | None = None) -> pd.DataFrame:
        """What was allocated when a device's allocated memory peaked, by allocating operator /
        annotation / module.

        Args:
            rank: the rank.
            device: ``cuda:0``, ``cpu``, ...; default the device with the largest peak.

        Returns:
            ``operator, annotation, module, count, bytes``, most bytes first; memory allocated
            before the trace began is one row, ``[allocated before the trace]`` (count -1), so
            the bytes add up to the peak.
        """
        peaks = need(self.get_memory_peaks([rank]))
        if device is not None and device not in set(peaks["device"]):
            raise SelectionError(None, f"rank {rank} has no memory events on {device!r}; it"
                                 f" has {sorted(peaks['device'])}")  # fmt: skip
        row = peaks.sort_values("peak_allocated").iloc[-1] if device is None else (
            peaks.set_index("device").loc[device].rename(device)
        )  # fmt: skip
        device = device or row["device"]
        table = life.lifetimes(self._memory(rank), rank)
        live = life.live_at(table, device, int(row["peak_allocated_ts"]))
        before = int(row["peak_allocated"]) - int(live["bytes"].sum())
        if before > 0:  # allocated before the trace began (the allocator's total says how much)
            extra = {"operator": "[allocated before the trace]", "annotation": "", "module": "",
                     "count": -1, "bytes": before}  # fmt: skip
            live = pd.concat([live, pd.DataFrame([extra])], ignore_index=True)
        return live.sort_values("bytes", ascending=False, ignore_index=True)

    def _steady_leaks(self) -> pd.DataFrame:
        """The sites that leak in every step, on every rank with memory events
        (:func:`~hta_lite.analyses.memory.lifetimes.steady_leaks`: the findings and the key
        findings)."""
        if self.memo.leaks is None:
            self.memo.leaks = life.steady_leaks(need(self.get_memory_lifetimes()))
        return self.memo.leaks

    @table_view(life.LIFETIME_COLUMNS)
    def get_memory_lifetimes(self, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """Every allocation paired with its free (same device and address).

        Returns:
            :data:`hta_lite.analyses.memory.lifetimes.LIFETIME_COLUMNS`: ``status`` ``freed``,
            ``live at end`` (never freed in the trace) or ``allocated before the trace`` (a
            free without its allocation); times ns, ``lifetime_us``.
        """
        parts = [life.lifetimes(self._memory(r), r) for r in self._memory_ranks(ranks)]
        return pd.concat(parts, ignore_index=True)

    @table_view(life.LEAK_COLUMNS)
    def get_memory_leaks(self, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """Allocations made in a profiled ProfilerStep and never freed in the trace, per (rank,
        device, step, operator, annotation, module): the same bytes in every step is a leak.

        Returns:
            ``rank, device, step, operator, annotation, module, count, bytes``.
        """
        return life.leaks(need(self.get_memory_lifetimes(ranks)))

    @table_view(operators.MEMORY_OPERATOR_COLUMNS)
    def get_memory_by_operator(self, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """Memory per operator (the TensorBoard plugin's table), summed over ranks, plus what
        of the operator's own allocations the trace never frees.

        ``alloc_bytes`` adds up every allocation an operator made over the trace, and frees
        count where they happen (often in another operator), so an operator can show far more
        allocated than the peak with no free of its own; ``self_unfreed_bytes`` says how much
        of what it allocated itself is still allocated at the end of the trace.

        Returns:
            :data:`hta_lite.analyses.memory.operators.OPERATOR_COLUMNS`: calls, allocations and
            frees (count, bytes) and the net increase, with and without (``self_``) the
            operators each calls, then ``self_unfreed_bytes``; most net bytes first.
        """
        return operators.across_ranks([
            operators.rank_table(self.trace(r), self._memory(r), life.lifetimes(self._memory(r), r))
            for r in self._memory_ranks(ranks)
        ])  # fmt: skip

    @table_view(timeline.STEP_COLUMNS)
    def get_memory_by_step(self, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """Per (rank, device, ProfilerStep): allocated at its start and end, its peak, the
        growth (steady growth: a leak), and the peak over the median rank's (imbalance).

        Returns:
            :data:`hta_lite.analyses.memory.timeline.STEP_COLUMNS` (bytes).
        """
        return timeline.by_step(need(self.get_memory_timeline(ranks)))


class MemoryAnalysis:
    """HTA's ``MemoryAnalysis`` over the raw memory timeline ``profile.export_memory_timeline_raw``
    writes (``[[ts, action, bytes, category], ...]``, JSON or gzip).

    Args:
        path: the file.
    """

    def __init__(self, path: str | Path):
        self.path = path
        # summed now, so that a file that is not a raw timeline, or has no entries, is an error
        self._sums = raw_timeline.file_sums(path)
        if not len(self._sums):
            raise MissingDataError(path, NO_RAW_ENTRIES)

    @property
    def raw(self) -> pd.DataFrame:
        """The entries, in file order: ``ts`` (ns), ``action``, ``bytes``, ``category``."""
        return raw_timeline.table(raw_timeline.parse(raw_timeline.read(self.path), self.path))

    def memory_by_category(self) -> pd.DataFrame:
        """Bytes held per category after each time (``ts`` ns, one column per category).

        Returns:
            ``ts`` and one column per :data:`hta_lite.kineto.MEMORY_CATEGORIES`.
        """
        sums, self._sums = self._sums, None  # the first table takes the sums made at the start
        if sums is None:
            sums = raw_timeline.file_sums(self.path)
        return raw_timeline.by_category(sums)

    def plot_memory_timeline(self, save_graph: bool = False):
        """Memory by category over time, stacked (HTA's chart).

        Args:
            save_graph: write ``images/memory_plot.html`` instead of showing the chart.

        Returns:
            The plotly figure.
        """
        fig = plots.plot_memory_by_category(self.memory_by_category())
        if save_graph:
            write_atomically("images/memory_plot.html", fig.to_html(include_plotlyjs=True))
        else:
            plots.show(fig)
        return fig
