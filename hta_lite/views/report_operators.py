"""The report's operator sections: time by operator and module, the roofline and its targets,
MFU, and the CUDA / HIP graph launches (:mod:`.report` puts them in the page)."""

from __future__ import annotations

import html
import warnings
from collections.abc import Callable

import pandas as pd

from .. import plots
from ..errors import MissingDataError
from ..facade.analysis import TraceAnalysis
from ..facade.missing import need
from . import report_sections as sections
from .html import Report, note, table
from .summary import (
    graph_launch_rows,
    mfu_rows,
    optimization_targets,
    quietly,
    shown,
    top_operators,
)


def operator_section(report: Report, analysis: TraceAnalysis) -> None:
    """Time by operator, by module, the roofline and its targets, MFU (what the traces allow)."""
    summary = analysis.get_operator_summary()
    if not (summary["calls"] > 0).any():
        return
    parts = [
        note(sections.OPERATORS_NOTE),
        report.chart(plots.plot_operator_summary(summary, 20)),
        sections.table_or_note(shown("operators", top_operators(analysis))),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        modules = analysis.get_operator_summary(by="module") if _has_modules(analysis) else None
        parts += module_parts(report, modules)
        try:
            roofline = need(analysis.get_operator_roofline())
        except MissingDataError as exc:
            roofline = exc.problem
        parts += roofline_parts(
            report,
            roofline,
            lambda: quietly(optimization_targets)(analysis),
            quietly(mfu_rows)(analysis),
        )
    report.section("operators", "Operators", *parts)
    graph_section(report, analysis.get_graph_launches(), analysis.get_graph_kernels())


def module_parts(report: Report, modules: pd.DataFrame | None) -> list[str]:
    """The operator section's time by ``nn.Module`` (``get_operator_summary(by="module")``;
    None: no call ran inside a module)."""
    if modules is None:
        return []
    return ["<h3>By nn.Module</h3>", report.chart(plots.plot_module_sunburst(modules))]


def roofline_parts(
    report: Report, roofline: pd.DataFrame | str, targets: Callable, mfu: pd.DataFrame | str
) -> list[str]:
    """The operator section's roofline, its optimization targets (``targets()``) and MFU: the
    tables the summary shows of them, or why there are none."""
    if isinstance(roofline, str):
        parts = ["<h3>Roofline</h3>", note(roofline)]
    else:
        known = roofline["peak_tflops"].notna().any()
        device = ", ".join(sorted(set(roofline["device"])))
        heading = f"Roofline ({device})" if known else "Achieved TFLOP/s (device unknown)"
        parts = [
            f"<h3>{html.escape(heading)}</h3>",
            report.chart(plots.plot_roofline(roofline, title=heading)),
        ]
        shown_targets = shown("optimization_targets", targets())
        if isinstance(shown_targets, str):
            parts.append(note(f"No roofs to measure against: {shown_targets}."))
        else:
            parts += [note("Furthest below their roof, weighted by time:"), table(shown_targets)]
    mfu = shown("mfu", mfu)
    return parts + [
        "<h3>Model FLOPs utilization</h3>",
        note(f"MFU unknown: {mfu}.") if isinstance(mfu, str) else table(mfu),
    ]


def graph_section(report: Report, launches: pd.DataFrame, kernels: pd.DataFrame) -> None:
    """CUDA / HIP graph launches: what each replayed, and how much is mapped to operators
    (``get_graph_launches()``, ``get_graph_kernels()``: no section where they have no rows)."""
    rows = shown("graph_launches", graph_launch_rows(launches))
    if rows is None:
        return
    parts = [
        note(
            "A graph launch replays many GPU events under one call. Each is mapped to the"
            " operator that issued the same kernel in a capture or an eager run of the same"
            " model (the traces' own, or --graph-capture); mapped events count for their"
            " operators in every view above (docs/analyses/operators.md)."
        ),  # fmt: skip
        table(rows),
    ]
    if "note" in rows.attrs:
        parts.append(note(rows.attrs["note"]))
    parts += [
        report.chart(plots.plot_graph_launches(launches, kernels)),
        "<h3>Replayed kernels</h3>",
        table(kernels, 30),
    ]
    report.section("graphs", "CUDA / HIP graph launches", *parts)


def _has_modules(analysis: TraceAnalysis) -> bool:
    return bool((analysis.get_operator_instances()["module"] != "").any())
