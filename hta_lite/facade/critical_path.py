"""Critical path: what bounds an iteration (HTA 0.6.1's analysis;
docs/analyses/critical-path.md)."""

from __future__ import annotations

from ..analyses.critical_path import CriticalPath, critical_path
from ..errors import SelectionError
from ..kineto import STEP_ANNOTATION
from ..tools.critical_path_overlay import overlay
from .base import plots
from .missing import table_view


class CriticalPaths:
    """Critical path methods of :class:`hta_lite.TraceAnalysis` (the reference's)."""

    def critical_path_analysis(
        self,
        rank: int,
        annotation: str | None = None,
        instance_id: int | tuple[int, int] | None = 0,
        data_load_events: list[str] | None = None,
    ) -> tuple[CriticalPath, bool]:
        """The longest chain of dependencies through one region of a rank, and what bounds it.

        Args:
            rank: the rank.
            annotation: the region is the events during the ``instance_id``-th event whose
                name contains this text (``"ProfilerStep"``: a step); ``""``: the whole trace;
                None (the default): ``"ProfilerStep"`` where the rank has steps, else ``""``.
            instance_id: which instance (default the first), or ``(first, last)`` for a span.
            data_load_events: regexes of event names whose time counts as ``data_loading``.

        Returns:
            ``(critical_path, success)``:
            :class:`~hta_lite.analyses.critical_path.CriticalPath` with
            ``get_critical_path_breakdown()`` (the reference's columns, µs), ``summary()``
            (percent by ``bound_by``), ``bound_by_us()``, the path's nodes, events and edges.
            An annotation or instance that is not there is a ``SelectionError``. Edges the trace
            made inconsistent are repaired or cut and counted in its ``health``.
        """
        trace = self.trace(rank)
        if annotation is None:
            annotation = STEP_ANNOTATION if len(trace.steps) else ""
        cp = critical_path(trace, annotation, instance_id, data_load_events)
        return cp, cp.success

    def overlay_critical_path_analysis(
        self,
        rank: int,
        critical_path_graph: CriticalPath,
        output_dir: str,
        only_show_critical_events: bool = True,
        show_all_edges: bool = False,
    ) -> str:
        """Write the rank's trace with its critical path marked (for Perfetto).

        Args:
            rank: the rank of ``critical_path_graph``.
            critical_path_graph: from :meth:`critical_path_analysis`.
            output_dir: folder of the new file (``overlaid_critical_path_<name>``).
            only_show_critical_events: keep only the events on the path (and the user
                annotations and Python functions).
            show_all_edges: draw every edge of the graph, not only the path's dependency,
                launch and sync edges.

        Returns:
            The path of the written trace (written atomically; the input is never touched).
        """
        if critical_path_graph.rank != rank:
            raise SelectionError(
                None, f"the critical path is of rank {critical_path_graph.rank}, not {rank}"
            )
        return str(
            overlay(critical_path_graph, output_dir, only_show_critical_events, show_all_edges)
        )

    @table_view(["duration_us", "pctg"], index=["bound_by"])
    def get_critical_path_summary(
        self, rank: int, annotation: str | None = None, instance_id=0, *, visualize: bool = False
    ):
        """µs and percent of the critical path per ``bound_by`` (a shortcut of
        :meth:`critical_path_analysis`).

        Args:
            rank, annotation, instance_id: the region, as in :meth:`critical_path_analysis`
                (default: the first ProfilerStep, or the whole trace where there is none).
            visualize: show the path on a timeline, coloured by what bounds it.

        Returns:
            Indexed by ``bound_by``: ``duration_us``, ``pctg``; no rows where the rank has no
            host events to build a path from (``attrs["why"]``).
        """
        cp, _ = self.critical_path_analysis(rank, annotation, instance_id)
        if visualize:
            plots.show(plots.plot_critical_path(cp))
        return cp.bound_by_table()
