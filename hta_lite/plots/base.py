"""Shared helpers of the figure builders: escaping every label, showing a figure in a notebook.

Plotly reads a subset of HTML in text (``<a href>`` makes a link, ``<b>``, ``<br>``), and names
come from other people's traces. So builders write plain text, a line break as ``"\n"``, and
:func:`escaped` -- applied to every ``plot_*`` figure in one place (:mod:`hta_lite.plots`) --
escapes every text a trace or the layout shows, turning ``"\n"`` into ``<br>``. Hover
templates are the builders' own and are left as written: they never hold a name, only
``%{...}`` references to escaped values.

``show(fig)`` displays a figure only inside a notebook kernel, so that
``visualize=True`` never opens a browser or blocks a batch script.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

#: the trace properties that show text (``hovertemplate`` and ``texttemplate`` excepted)
_TRACE_TEXT = ("x", "y", "text", "hovertext", "name", "labels", "ids", "parents", "customdata",
               "header", "cells")  # fmt: skip
#: layout text: titles, axis titles and tick labels, annotations
_AXIS_TEXT = ("title", "ticktext")


def escape_text(value: str) -> str:
    """One text as plotly shows it literally: ``<``, ``>``, ``&`` escaped, ``"\n"`` a line."""
    return html.escape(value, quote=False).replace("\n", "<br>")


def _escaped_value(value):
    if isinstance(value, str):
        return escape_text(value)
    if isinstance(value, dict):
        return {k: _escaped_value(v) for k, v in value.items()}
    kind = getattr(getattr(value, "dtype", None), "kind", "")
    if isinstance(value, (list, tuple)) or kind in ("O", "U", "S"):
        return [_escaped_value(v) for v in value]
    return value  # numbers, numeric arrays, None


def escaped(fig: go.Figure) -> go.Figure:
    """``fig`` with every text of its traces and layout escaped (see the module); in place."""
    for trace in fig.data:
        for name in _TRACE_TEXT:
            if name in trace and trace[name] is not None:
                value = trace[name]
                if hasattr(value, "to_plotly_json"):  # header / cells of a table
                    value = value.to_plotly_json()
                trace[name] = _escaped_value(value)
    layout = fig.layout
    if layout.title and layout.title.text:
        layout.title.text = escape_text(layout.title.text)
    for axis in [k for k in layout.to_plotly_json() if k.startswith(("xaxis", "yaxis"))]:
        axis_obj = layout[axis]
        if axis_obj.title and axis_obj.title.text:
            axis_obj.title.text = escape_text(axis_obj.title.text)
        if axis_obj.ticktext is not None:
            axis_obj.ticktext = [escape_text(str(t)) for t in axis_obj.ticktext]
    for note in layout.annotations or ():
        if note.text:
            note.text = escape_text(note.text)
    return fig


def bytes_axis(values) -> dict:
    """A log axis of bytes with ticks at powers of two, labelled in binary units
    (``64 KiB``, ``2 GiB``; plotly's own would read ``2.1G`` or ``2.1B``)."""
    import math

    from ..units import fmt_bytes

    finite = [float(v) for v in values if v and v > 0 and math.isfinite(v)]
    if not finite:
        return {"type": "log"}
    low, high = math.floor(math.log2(min(finite))), math.ceil(math.log2(max(finite)))
    if high - low < 2:  # one size (or close ones): a range wide enough to hold labelled ticks
        low, high = low - 1, high + 1
    step = max(1, (high - low) // 8 + 1)
    ticks = [2.0**e for e in range(low, high + 1, step)]
    labels_ = [fmt_bytes(t).replace(".0 ", " ") for t in ticks]
    # the range spans the ticks (log10 units): plotly's own range around one size holds none
    bounds = [math.log10(2.0**low) - 0.05, math.log10(2.0**high) + 0.05]
    return {"type": "log", "tickvals": ticks, "ticktext": labels_, "range": bounds}


def step_axis(steps, title: str = "ProfilerStep") -> dict:
    """An x axis of step numbers: whole numbers only (never 2.5), about ten ticks."""
    import math

    values = [int(v) for v in steps]
    span = (max(values) - min(values)) if values else 0
    return {"title": title, "tickformat": "d", "tick0": 0, "dtick": max(1, math.ceil(span / 10))}


def in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def show(fig: go.Figure, renderer: str | None = None) -> None:
    """Display ``fig`` in a notebook; with a plotly ``renderer`` (``"notebook"``,
    ``"jupyterlab"``, ``"browser"``, ``"png"``, ... : ``plotly.io.renderers``) display it there
    wherever this runs, as the reference's ``image_renderer`` does."""
    if renderer:
        fig.show(renderer=renderer)
    elif in_notebook():
        fig.show()
