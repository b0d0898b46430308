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
