"""Shared helpers of the figure builders: escaped labels, showing a figure in a notebook.

``show(fig)`` displays a figure only inside a notebook kernel, so that
``visualize=True`` never opens a browser or blocks a batch script.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go


def label(name) -> str:
    """A kernel/op name as plotly text: plotly reads a subset of HTML in labels, so ``<`` and ``&``
    are escaped to show names such as ``kernel<float, 4>`` literally (and never as markup)."""
    return html.escape(str(name), quote=False)


def labels(values) -> list[str]:
    return [label(v) for v in values]


def bytes_axis(values) -> dict:
    """A log axis of bytes with ticks at powers of two, labelled in binary units
    (``64 KiB``, ``2 GiB``; plotly's own would read ``2.1G`` or ``2.1B``)."""
    import math

    from ..units import fmt_bytes

    finite = [float(v) for v in values if v and v > 0 and math.isfinite(v)]
    if not finite:
        return {"type": "log"}
    low, high = math.floor(math.log2(min(finite))), math.ceil(math.log2(max(finite)))
    step = max(1, (high - low) // 8 + 1)
    ticks = [2.0**e for e in range(low, high + 1, step)]
    labels_ = [fmt_bytes(t).replace(".0 ", " ") for t in ticks]
    return {"type": "log", "tickvals": ticks, "ticktext": labels_}


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
