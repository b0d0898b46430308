"""Operator inputs: the shapes each operator is described by, and the ``nn.Module`` it ran in.

- A backward operator is linked to the forward operator autograd ran it for when the trace is
  loaded (``cpu.forward_row``: :mod:`hta_lite.load.forward_links`).
- A linked backward operator is described by its forward operator's shapes and types
  (``shapes_from == "forward"``): its own ``Input Dims`` are the gradients' (or empty in older
  traces), and the formulas of :mod:`.flops` are written for the forward shapes.
- Its module is the innermost ``python_function`` event named ``nn.Module: Name_N`` around it
  (around its forward operator, for a linked backward one), written as the path of the enclosing
  modules: ``BertModel_0.BertEncoder_0.BertLayer_3``.
"""

from __future__ import annotations

import numpy as np

from ...kineto import MODULE_PREFIX, PYTHON_FUNCTION_CATEGORY
from ...load.rank_trace import RankTrace
from ...rows import nearest_ancestor
from ..common import starts_with, text_values


def module_paths(trace: RankTrace) -> tuple[np.ndarray, np.ndarray]:
    """``(module_row, paths)``: per ``cpu`` row the row of its innermost ``nn.Module`` event (-1:
    none), and per ``cpu`` row of a module event its path (object array, None elsewhere)."""
    cpu = trace.cpu
    names = cpu["name"]
    is_module = np.asarray(
        (cpu["cat"] == PYTHON_FUNCTION_CATEGORY) & starts_with(names, MODULE_PREFIX)
    )
    parent = cpu["parent_row"].to_numpy()
    module_of = np.full(len(cpu), -1, np.int64)
    paths = np.full(len(cpu), None, dtype=object)
    if not is_module.any():
        return module_of, paths
    all_rows = np.arange(len(cpu))
    module_of[:] = nearest_ancestor(parent, is_module, all_rows)
    modules = np.flatnonzero(is_module)
    own = text_values(names, modules)
    paths[modules] = [n[len(MODULE_PREFIX) :] for n in own]
    # parents before children: extend each path by its enclosing module's, level by level
    outer = module_of[modules]
    level = np.zeros(len(modules), np.int64)
    current = outer.copy()
    while (current >= 0).any():
        level += current >= 0
        current = np.where(current >= 0, module_of[np.maximum(current, 0)], -1)
    for depth in range(1, int(level.max()) + 1):
        at = level == depth
        paths[modules[at]] = [f"{p}.{c}" for p, c in zip(paths[outer[at]], paths[modules[at]])]
    return module_of, paths
