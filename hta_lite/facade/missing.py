"""The one policy for a view the traces cannot give (docs/missing-data.md).

- A **table view** (a public method that returns a table) never raises for what the traces did
  not record (memory events, shapes, steps, a FLOP model, graph launches, an ``oom`` entry): it
  returns its table with no rows and the columns it has when there is data, and
  ``table.attrs["why"]`` says what is missing and how to record it. A notebook's "Run all" runs
  to the end; ``why(table)`` tells an empty answer from a missing one.
- An **object view** (a critical path, a raw memory timeline) raises
  :class:`~hta_lite.errors.MissingDataError` when there is nothing to build it from: the
  object has no empty form to hand back.
- A **selection** that matches nothing (a rank not loaded, a step, an annotation, a stream, a
  name, a device) raises :class:`~hta_lite.errors.SelectionError`
  (:class:`~hta_lite.errors.RankNotFoundError`): it is the caller's argument, never the data.

The CLI and the report print ``why`` where the table would be.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import pandas as pd

from ..errors import MissingDataError
from ..missing_data import NO_STEPS, missing, need, no_gpu_work_in, why

__all__ = ["empty_says", "missing", "need", "no_gpu_work", "no_steps", "table_view", "why"]


def table_view(columns: Sequence[str], index: Sequence[str] = ()) -> Callable:
    """Decorate a public table view: a ``MissingDataError`` inside becomes :func:`missing`
    ``columns`` with its sentence."""

    def wrap(method):
        @functools.wraps(method)
        def view(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            except MissingDataError as exc:
                return missing(columns, exc.problem, index)

        return view

    return wrap


def no_gpu_work(analysis) -> str | None:
    """Why a GPU view is empty: no loaded rank ran GPU work (None when one did)."""
    if all(t.gpu.empty for t in analysis.traces.values()):
        return no_gpu_work_in(analysis.traces)
    return None


def no_steps(analysis) -> str | None:
    """Why a per-step view is empty: no loaded rank has a ProfilerStep (None when one has)."""
    if all(t.steps.empty for t in analysis.traces.values()):
        return NO_STEPS
    return None


def empty_says(reason: Callable) -> Callable:
    """Decorate a table view whose tables are empty when the traces lack what ``reason(analysis)``
    checks: each empty table of its answer (a table, or a tuple / list of them) gets that
    reason as ``attrs["why"]``."""

    def wrap(method):
        @functools.wraps(method)
        def view(self, *args, **kwargs):
            out = method(self, *args, **kwargs)
            tables = out if isinstance(out, (tuple, list)) else [out]
            empty = [t for t in tables if isinstance(t, pd.DataFrame) and t.empty]
            if empty and not any(why(t) for t in empty):
                said = reason(self)
                for table in empty if said else ():
                    table.attrs["why"] = said
            return out

        return view

    return wrap
