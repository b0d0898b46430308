"""The findings of a folder summarized by :func:`.batch.summarize_folder`, with bounded memory.

The replays rest on tables the batch already has in the driver (each rank's job-path segments,
the matched collectives, the job critical path, the scored steps, the stragglers' causes). What
a kind reads of a rank's own trace (its data-loading ranges, launch calls, syncs, copies, step
graphs) comes from :class:`Reopened`: the rank reopened from the cache where it is read and let
go, and the step graphs are built one rank at a time. With the cache off the findings are not
computed (each rank would be parsed again in the driver). The memory kinds read the memory
tables each worker made of its rank (:mod:`hta_lite.analyses.memory.per_rank`), ``below_roof``
the operator roofline of all ranks (:mod:`.batch_operators`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pandas as pd

from ..analyses import findings as ranked
from ..analyses.collectives.matching import Matching
from ..analyses.job_path import JobCriticalPath
from ..analyses.memory.per_rank import device_memory
from ..errors import MissingDataError, TraceError
from ..kineto import DATA_LOADING_PATTERN
from ..load import step_alignment
from ..load.loader import LoadOptions, load_part
from ..load.rank_trace import RankTrace
from ..load.series import join_windows


class Reopened(Mapping):
    """``{rank: RankTrace}`` over the ranks' files, each reopened from the cache where it is
    read (its tables read as they are used). The ranks first read are kept for the next kinds
    while their tables fit in :attr:`KEEP_BYTES` (the kinds read the ranks in turn, so a rank
    kept is read again; one let go would be reopened anyway): memory stays bounded however many
    ranks, and a folder that fits reads each table once, not once per kind."""

    #: the kept ranks' tables, in bytes of their columns: 256 MiB (a process holds about 2.4
    #: times that: diff_control's ranks, 11.4 MB of columns, add 27 MB each)
    KEEP_BYTES = 256 << 20

    def __init__(self, files: dict[int, list[tuple[str, int]]], options: LoadOptions,
                 moves: dict[int, tuple[int, dict[str, int]]] | None = None):  # fmt: skip
        self.files, self.options = files, options  # {rank: [(path, part), ...]}
        self.moves = moves or {}  # {rank: (step numbers moved by, health)}: step_alignment
        self._kept: dict[int, RankTrace] = {}  # in the order they were kept
        self._sizes: dict[int, dict[str, int]] = {}  # {rank: {table: bytes}} of built tables

    def __getitem__(self, rank: int) -> RankTrace:
        trace = self._kept.get(rank)
        if trace is None:
            trace = self._kept[rank] = self._reopen(rank)
        for kept, held in self._kept.items():  # each table measured once, when first seen
            sizes = self._sizes.setdefault(kept, {})
            for name in held.__dict__.keys() & set(RankTrace.TABLES) - sizes.keys():
                sizes[name] = int(held.__dict__[name].memory_usage(deep=False).sum())
        while self._kept and sum(sum(s.values()) for s in self._sizes.values()) > self.KEEP_BYTES:
            self._sizes.pop(self._kept.popitem()[0])  # the rank kept last
        return trace

    def _reopen(self, rank: int) -> RankTrace:
        parts = []
        for path, part in self.files[rank]:
            trace = load_part(
                path, part, rank, self.options.steps, self.options.cache_root, by_address=True
            )
            if isinstance(trace, TraceError):
                raise trace
            parts.append(trace)
        trace = parts[0] if len(parts) == 1 else join_windows(parts)
        return step_alignment.renumbered(trace, *self.moves[rank]) if rank in self.moves else trace

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self.files))

    def __len__(self) -> int:
        return len(self.files)


def folder_findings(
    partials: dict[str, pd.DataFrame],
    matching: Matching,
    path: JobCriticalPath,
    scored: pd.DataFrame,
    report,
    traces: Reopened,
    stubs: Mapping[int, RankTrace],
    snapshot=None,
) -> pd.DataFrame:
    """``get_findings()``'s table (:mod:`hta_lite.analyses.findings.ranking`) of the batch.
    ``stubs``: ``{rank: the rank's trace without its tables}`` (the devices' memory);
    ``snapshot``: a ``MemorySnapshot`` of the run, whose findings join the memory findings.

    Raises:
        MissingDataError: no step on any rank's path (``partials``' ``job_path_segments``: a
            folder without ProfilerSteps gives its ranks' whole traces, each one step), or a
            rank recorded with the CUPTI range profiler (as ``TraceAnalysis.get_findings``)."""
    if traces.options.cache_root is None:
        raise MissingDataError(
            None,
            "not computed with the cache off: the batch's findings reopen each rank from the"
            " cache where a finding reads it (TraceAnalysis.get_findings() gives them)",
        )
    segments = partials["job_path_segments"]
    if segments.empty:
        raise MissingDataError(None, "no step on any rank's critical path to replay")
    ranked.refuse_range_profiled(traces)
    ctx = ranked.Context.of(
        segments, partials["job_path_events"], path, matching.calls, matching.instances, traces,
        patterns=[DATA_LOADING_PATTERN], stragglers=report,
        anomalies=scored if len(scored) else None,
        gaps=partials["job_path_gaps"], memory_peaks=_or_none(partials["memory_peaks"]),
        memory_leaks=_or_none(partials["memory_leak_sites"]),
        roofline=_or_none(partials["operator_roofline"]),
        capacity=lambda rank, device: device_memory(stubs[rank], device),
    )  # fmt: skip
    if snapshot is not None:
        ctx.add_snapshot(snapshot)
    return ranked.findings(ctx)


def _or_none(table: pd.DataFrame) -> pd.DataFrame | None:
    """The batch's table, None where it has no rows for a reason (no rank has memory events, no
    modelled operator: as ``get_findings``)."""
    return None if "why" in table.attrs else table
