"""CUDA / HIP graph launches (:mod:`hta_lite.analyses.operators.graph_launches`)."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from ..analyses.operators import graph_launches as gl
from ..errors import MissingDataError
from .base import plots
from .missing import table_view


class Graphs:
    """Graph-launch methods of :class:`hta_lite.TraceAnalysis` (needs :class:`.Operators`)."""

    @table_view(gl.LAUNCH_COLUMNS)
    def get_graph_launches(
        self, ranks: Iterable[int] | None = None, visualize: bool = False
    ) -> pd.DataFrame:
        """One row per CUDA / HIP graph launch: where it was launched, how many GPU events it
        replayed, their GPU time and span, and how many were mapped to the operators that issued
        the same kernels in a capture or an eager run (the traces' own, or those passed as
        ``TraceAnalysis(..., graph_capture=...)``). Mapped events count for their operators in
        every operator view (summary, modules, roofline, MFU); the others stay ``[graph
        replay]``.

        Args:
            ranks: ranks to include (default: all).
            visualize: show each launch's GPU time by kernel type, mapped or not.

        Returns:
            DataFrame, columns in :mod:`hta_lite.analyses.operators.graph_launches`.

            No rows where no graph launch replayed GPU events in the ranks
            (``attrs["why"]``).
        """
        rank_ops = self._operators(ranks)
        table = gl.launch_table(rank_ops)
        if table.empty:
            raise MissingDataError(None, gl.NO_GRAPH_LAUNCH)
        if visualize:
            plots.show(plots.plot_graph_launches(table, gl.graph_kernel_table(rank_ops)))
        return table

    @table_view(gl.KERNEL_COLUMNS)
    def get_graph_kernels(self, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """The GPU events each graph launch replayed, by kernel name: type, the operator each is
        mapped to (``[graph replay]`` when none), count and GPU time.

        Args:
            ranks: ranks to include (default: all).

        Returns:
            DataFrame, columns in :mod:`hta_lite.analyses.operators.graph_launches`.

            No rows, with ``attrs["why"]``, as :meth:`get_graph_launches`.
        """
        table = gl.graph_kernel_table(self._operators(ranks))
        if table.empty:
            raise MissingDataError(None, gl.NO_GRAPH_LAUNCH)
        return table
