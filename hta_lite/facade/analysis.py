"""``TraceAnalysis``: the facade users open in a notebook, with the reference's method names and
columns. It holds no algorithm: each method checks its arguments, calls one function of
:mod:`hta_lite.analyses` and, when asked, shows the matching figure of :mod:`hta_lite.plots`.
The methods live in one mixin per family (breakdowns, counters, launches, operators,
graphs, collectives, critical path, job critical path, memory, cross-rank, long runs, key
findings); a new analysis adds its method to the family it belongs to, or a new mixin here.
"""

from __future__ import annotations

from ..tools.augment import TimeSeriesTypes
from .base import TraceSet
from .breakdowns import Breakdowns
from .collectives import Collectives
from .counters import Counters
from .critical_path import CriticalPaths
from .cross_rank import CrossRank
from .findings import Findings
from .graphs import Graphs
from .health import Health
from .hta_compat import HtaTrace
from .job_path import JobPaths
from .launches import Launches
from .long_runs import LongRuns
from .memory import Memory
from .operators import Operators

__all__ = ["TraceAnalysis", "TimeSeriesTypes"]


class TraceAnalysis(
    Breakdowns,
    Counters,
    Launches,
    Operators,
    Graphs,
    Collectives,
    CriticalPaths,
    JobPaths,
    Memory,
    CrossRank,
    LongRuns,
    Findings,
    Health,
    TraceSet,
):
    """Load a folder of per-rank Kineto traces and analyze where the GPU time went.

    Args:
        trace_files: ``{rank: path}`` of single files (the reference's first argument); a
            folder given here is taken as ``trace_dir``.
        trace_dir: folder with one ``*.json`` / ``*.json.gz`` (Kineto) or ``*.sqlite`` (Nsight
            Systems export) file per rank (a file may hold several: docs/loading.md).
        include_last_profiler_step: keep the last ProfilerStep (dropped by default, as in the
            reference, because the profiler usually cuts it short).
        parallel, max_workers, on_error, progress, cache, start_method, max_inflate_ratio,
            max_text_gb, step_range: keyword-only loader options
            (:class:`hta_lite.LoadOptions`), or ``options=LoadOptions(...)``. With
            ``on_error="skip"`` the files not loaded are in ``skipped_files`` (``{path:
            problem}``) and in :meth:`health`.
        graph_capture: keyword-only; a trace file or folder of traces of the same run that
            hold the kernel sequences its CUDA / HIP graphs replay (the profiled capture, or an
            eager run): each replayed kernel is then mapped to the operator that issued it
            there (:meth:`get_graph_launches`; a capture in the traces themselves is used
            without it).

    Raises:
        TraceError: a file cannot be loaded (``on_error="raise"``), or no file can; the message
            names the file and the problem.
        SettingError: a limit (argument or ``HTA_LITE_*`` variable) that is not a positive
            number or ``inf``.

    Example:
        >>> analysis = TraceAnalysis(trace_dir="sample_traces/two_ranks")
        >>> analysis.get_temporal_breakdown(visualize=False)
    """

    @property
    def t(self) -> HtaTrace:
        """The reference's ``Trace`` object as far as notebooks use it: ``t.get_trace(rank)``
        (all events of a rank in one frame, names decoded), ``t.get_all_traces()``,
        ``t.get_ranks()``, ``t.get_iterations()``, ``t.decode_symbol_ids()``."""
        if self.memo.hta_trace is None:
            self.memo.hta_trace = HtaTrace(self)
        return self.memo.hta_trace
