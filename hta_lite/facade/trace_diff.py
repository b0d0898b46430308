"""``TraceDiff``: what changed between a control run and a test run.

``compare_traces`` / ``ops_diff`` / ``visualize_*`` keep the reference's API and columns (folders
are read with every ProfilerStep, the last one included, as the reference's diff reads them);
``compare`` adds the diffs of the temporal breakdown, kernel time by type, top kernels, per-step
time, the regression gate used by ``hta-lite diff`` and a text summary
(:mod:`hta_lite.analyses.diff`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from ..analyses import diff
from ..analyses.diff import Comparison, DeviceType
from ..analyses.findings.changes import findings_changes
from ..errors import MissingDataError, RankNotFoundError
from ..safe_output import write_atomically
from .analysis import TraceAnalysis
from .base import plots
from .missing import need

__all__ = ["TraceDiff", "DeviceType", "Comparison"]


def as_analysis(trace, every_step: bool = False) -> TraceAnalysis:
    """A folder path or an already loaded ``TraceAnalysis``; a folder is loaded with every
    ProfilerStep when ``every_step`` (the last one included, as the reference's diff does)."""
    if isinstance(trace, TraceAnalysis):
        return trace
    return TraceAnalysis(trace_dir=trace, include_last_profiler_step=every_step, progress=False)


def _ranks(analysis: TraceAnalysis, rank, label: str) -> list[int]:
    if rank is None:
        return analysis.ranks[:1]
    ranks = [rank] if isinstance(rank, (int, np.integer)) else list(rank)
    missing = [r for r in ranks if r not in analysis.traces]
    if missing:
        raise RankNotFoundError(
            analysis.trace_dir,
            f"{label}: rank(s) {missing} not loaded; loaded ranks: {analysis.ranks}",
        )
    return ranks


class TraceDiff:
    """Compare a control trace (folder or loaded ``TraceAnalysis``) with a test one."""

    @classmethod
    def compare_traces(
        cls,
        control,
        test,
        control_rank: int | list[int] | None = None,
        test_rank: int | list[int] | None = None,
        control_iteration: int | list[int] | None = None,
        test_iteration: int | list[int] | None = None,
        device_type: DeviceType = DeviceType.ALL,
        use_short_name: bool = False,
        *,
        control_label: str = "Control",
        test_label: str = "Test",
    ) -> pd.DataFrame:
        """Counts and total duration of every operator and kernel name, control vs test.

        Args:
            control, test: trace folders (read with every ProfilerStep) or ``TraceAnalysis``.
            control_rank, test_rank: rank(s) of each (default: the first).
            control_iteration, test_iteration: ProfilerStep(s) of each (default: the first
                profiled step; the whole trace without steps). An iteration a trace does not
                have is a ``SelectionError`` (a ``ValueError``) naming the trace and its steps.
            device_type: ``DeviceType.CPU``, ``GPU`` or ``ALL`` events.
            use_short_name: group by shortened names (templates and arguments cut).
            control_label, test_label: column prefixes.

        Returns:
            Indexed by ``name`` (``short_name``): ``Control_counts``, ``Control_total_duration``
            (µs), ``Test_counts``, ``Test_total_duration``, ``diff_counts``, ``diff_duration``
            (test minus control), ``counts_change_categories`` ('+', '-', '=').
        """
        sides = []
        for trace, rank, iteration, label in (
            (control, control_rank, control_iteration, control_label),
            (test, test_rank, test_iteration, test_label),
        ):
            analysis = as_analysis(trace, every_step=True)
            ranks = _ranks(analysis, rank, label)
            steps = diff.selected_iterations(
                analysis.traces, ranks, iteration, label, analysis.trace_dir
            )
            sides.append(
                diff.ops_summary(analysis.traces, ranks, steps, device_type, use_short_name)
            )
        index_name = "short_name" if use_short_name else "name"
        return diff.compare_ops(*sides, control_label, test_label, index_name)

    @classmethod
    def ops_diff(
        cls,
        control,
        test,
        control_rank: int | list[int] | None = None,
        test_rank: int | list[int] | None = None,
        control_iteration: int | list[int] | None = None,
        test_iteration: int | list[int] | None = None,
        device_type: DeviceType = DeviceType.ALL,
    ) -> dict[str, list[str]]:
        """Operator and kernel names by change in count.

        Args:
            control, test, control_rank, test_rank, control_iteration, test_iteration,
            device_type: as in :meth:`compare_traces`.

        Returns:
            ``{"added", "deleted", "increased", "decreased", "unchanged"}`` -> list of names.
        """
        comp = cls.compare_traces(
            control, test, control_rank, test_rank, control_iteration, test_iteration, device_type
        )
        return diff.ops_changes(comp, "Control", "Test")

    @classmethod
    def visualize_counts_diff(
        cls, df: pd.DataFrame, show_image: bool = True, export_image_path: str | None = None,
        *, top: int = 30,
    ):  # fmt: skip
        """Bar chart of the ``top`` largest count changes.

        Args:
            df: the table of :meth:`compare_traces`.
            show_image: show it (in a notebook).
            export_image_path: write it there (.html, or an image format with kaleido).
            top: how many names.

        Returns:
            The plotly figure.
        """
        title = "Change in count (test - control)"
        return _diff_figure(df, "diff_counts", title, show_image, export_image_path, top)

    @classmethod
    def visualize_duration_diff(
        cls, df: pd.DataFrame, show_image: bool = True, export_image_path: str | None = None,
        *, top: int = 30,
    ):  # fmt: skip
        """Bar chart of the ``top`` largest duration changes (µs).

        Args:
            df, show_image, export_image_path, top: as in :meth:`visualize_counts_diff`.

        Returns:
            The plotly figure.
        """
        title = "Change in total duration (µs, test - control)"
        return _diff_figure(df, "diff_duration", title, show_image, export_image_path, top)

    @classmethod
    def compare(
        cls,
        control,
        test,
        control_rank: int | None = None,
        test_rank: int | None = None,
        *,
        threshold: float = 0.05,
        top: int = 10,
        metrics: Iterable[str] = ("step",),
    ) -> Comparison:
        """Beyond the reference: temporal, kernel-type, top-kernel and per-step diffs of one rank
        of each trace, the regression gate and a text summary.

        Args:
            control, test: folders (read with the last step left out) or ``TraceAnalysis``.
            control_rank, test_rank: one rank of each (default: the first).
            threshold: a gate metric regresses when it grows by more (0.05: 5 %).
            top: how many kernels the top-changes table lists.
            metrics: what the gate checks (:data:`hta_lite.analyses.diff_gate.METRICS`):
                ``step`` (step time, the default), ``gpu_busy``, ``idle``, ``exposed_comm``,
                ``kernel_type``, ``memory_peak``; a metric one side lacks is not compared and
                ``gate["not_compared"]`` says why.

        Returns:
            :class:`~hta_lite.analyses.diff.Comparison` with ``ops``, ``temporal``,
            ``kernel_types``, ``top_kernels`` (``top`` largest changes), ``steps``, ``gate``
            (dict), ``summary`` (text) and ``findings`` (which findings of the two runs
            appeared, grew, shrank or disappeared; None when a run has none to give: one
            recorded with the CUPTI range profiler).
        """
        c, t = as_analysis(control), as_analysis(test)
        c_rank, t_rank = _ranks(c, control_rank, "control")[0], _ranks(t, test_rank, "test")[0]
        note = f"control rank {c_rank} of {c.ranks} vs test rank {t_rank} of {t.ranks}"
        ops = cls.compare_traces(c, t, c_rank, t_rank)
        result = diff.compare_ranks(
            c.traces[c_rank], t.traces[t_rank], ops, note, threshold, top, tuple(metrics)
        )
        try:
            result.findings = findings_changes(need(c.get_findings()), need(t.get_findings()))
        except MissingDataError:  # a run whose times give no savings (range profiler)
            return result
        moved = result.findings[result.findings["status"] != "same"]
        if len(moved):
            result.summary += "\nFindings: " + "; ".join(
                f"{r.kind} ({r.where}) {r.status}, {r.control_ms:.2f} -> {r.test_ms:.2f} ms/step"
                for r in moved.fillna(0).head(5).itertuples()
            )
        return result


def _diff_figure(df, column, title, show_image, export_image_path, top):
    fig = plots.plot_diff(df, column, title, top)
    if show_image:
        plots.show(fig)
    if export_image_path:
        path = str(export_image_path)
        fmt = path.rsplit(".", 1)[-1] if "." in Path(path).name else None
        write_atomically(path, fig.to_html() if fmt == "html" else fig.to_image(format=fmt))
    return fig
