"""Time by ``nn.Module`` (traces recorded with ``with_stack=True`` or ``with_modules=True``).

One row per module path (``BertModel_0.BertEncoder_0.BertLayer_3``): ``depth`` (1 for the
outermost), ``calls`` (forward calls), ``host_total(us)`` (their summed duration),
``device_self_sum(us)`` (GPU events of the operators directly in it, not in a submodule),
``device_total_sum(us)`` and ``device_total(us)`` (every GPU event under it, submodules
included: sum, and union per rank), ``device_total_pctg`` (of all GPU work). A backward operator
linked to its forward operator counts in the forward operator's module; a CUDA-graph replay
event no operator was mapped to counts in the module around its graph launch. ``[no module]``,
``[graph replay]`` (replays launched outside every module) and ``[no operator]`` rows hold the
rest, so ``device_self_sum(us)`` adds up to all GPU work. Sorted as a tree: each module after
its parent, heavier siblings first.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...intervals import union_length_by_group
from ..common import us
from .attribution import GRAPH_REPLAY, OPERATOR, UNOWNED_LABELS, Attribution
from .shapes import module_paths

NO_MODULE = "[no module]"
COLUMNS = ["module", "depth", "calls", "host_total(us)", "device_self_sum(us)",
           "device_total_sum(us)", "device_total(us)"]  # fmt: skip


def rank_module_summary(attr: Attribution, inst: pd.DataFrame) -> pd.DataFrame:
    """One rank's rows (no percentages)."""
    cpu = attr.trace.cpu
    module_of, paths = module_paths(attr.trace)
    is_module = np.not_equal(paths, None)
    module_events = pd.DataFrame(
        {"module": paths[is_module], "dur": cpu["dur"].to_numpy()[is_module]}
    )
    per_module = module_events.groupby("module").agg(calls=("dur", "size"), host=("dur", "sum"))
    op_module = pd.Series(inst["module"].to_numpy(), index=inst["row"].to_numpy())
    owned = np.flatnonzero(attr.owner_kind == OPERATOR)
    kernel_module = op_module.reindex(attr.owner[owned]).fillna("").to_numpy(dtype=object)
    kernel_module[kernel_module == ""] = NO_MODULE
    replayed = _replays_in_modules(attr, module_of)
    owned = np.concatenate([owned, replayed])
    launch = attr.trace.gpu["launch_row"].to_numpy()[attr.kernels[replayed]]
    kernel_module = np.concatenate([kernel_module, paths[module_of[launch]]])
    # each kernel counts for its module and every enclosing one (the path's prefixes)
    names = sorted(set(kernel_module) | set(per_module.index))
    prefixes = {m: _prefixes(m) for m in names}
    code = {m: i for i, m in enumerate(names)}
    kernel_code = np.array([code[m] for m in kernel_module], np.int64)
    expand = [(code[m], code[p]) for m in names for p in prefixes[m] if p in code]
    child, ancestor = (np.array(x, np.int64) for x in zip(*expand)) if expand else ([], [])
    pair_kernel, pair_module = _expand(kernel_code, np.asarray(child), np.asarray(ancestor))
    ts, end, dur = attr.ts[owned], attr.end[owned], attr.dur[owned]
    n = len(names)
    groups, union = union_length_by_group(pair_module, ts[pair_kernel], end[pair_kernel])
    device_total = np.zeros(n, np.int64)
    device_total[groups] = union
    out = pd.DataFrame(
        {
            "module": names,
            "depth": [0 if m == NO_MODULE else m.count(".") + 1 for m in names],
            "calls": per_module["calls"].reindex(names).fillna(0).astype(np.int64).to_numpy(),
            "host_total(us)": us(per_module["host"].reindex(names).fillna(0).to_numpy()),
            "device_self_sum(us)": us(np.bincount(kernel_code, dur, minlength=n)),
            "device_total_sum(us)": us(np.bincount(pair_module, dur[pair_kernel], minlength=n)),
            "device_total(us)": us(device_total),
        }
    )
    unowned = _unowned(attr, replayed)
    return pd.concat([out, unowned], ignore_index=True) if len(unowned) else out


def _prefixes(path: str) -> list[str]:
    if path == NO_MODULE:
        return [path]
    parts = path.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _expand(kernel_code, child, ancestor) -> tuple[np.ndarray, np.ndarray]:
    """(kernel, module) for each kernel and each module that encloses its own."""
    order = np.argsort(child, kind="stable")
    child, ancestor = child[order], ancestor[order]
    starts = np.searchsorted(child, kernel_code, side="left")
    counts = np.searchsorted(child, kernel_code, side="right") - starts
    kernel = np.repeat(np.arange(len(kernel_code)), counts)
    offset = np.arange(len(kernel)) - np.repeat(np.cumsum(counts) - counts, counts)
    return kernel, ancestor[np.repeat(starts, counts) + offset]


def _replays_in_modules(attr: Attribution, module_of: np.ndarray) -> np.ndarray:
    """The kernels (indices into ``attr.kernels``) of graph replays launched inside a module."""
    replayed = np.flatnonzero(attr.owner_kind == GRAPH_REPLAY)
    launch = attr.trace.gpu["launch_row"].to_numpy()[attr.kernels[replayed]]
    return replayed[module_of[launch] >= 0]


def _unowned(attr: Attribution, in_modules: np.ndarray) -> pd.DataFrame:
    rows = []
    placed = np.zeros(len(attr.kernels), bool)
    placed[in_modules] = True
    for kind, label in UNOWNED_LABELS.items():
        mask = (attr.owner_kind == kind) & ~placed
        if mask.any():
            total = us(int(attr.dur[mask].sum()))
            _, span = union_length_by_group(
                np.zeros(int(mask.sum()), np.int64), attr.ts[mask], attr.end[mask]
            )
            rows.append([label, 0, 0, 0.0, total, total, us(int(span[0]))])
    return pd.DataFrame(rows, columns=COLUMNS)


def combine_modules(parts: list[pd.DataFrame], total_gpu_us: float) -> pd.DataFrame:
    """The ranks' rows added per module, in tree order, with ``device_total_pctg``."""
    frame = pd.concat([p for p in parts if len(p)] or [pd.DataFrame(columns=COLUMNS)])
    summed = COLUMNS[2:]
    out = frame.groupby(["module", "depth"], sort=False)[summed].sum().reset_index()
    out = out.iloc[_tree_order(out)].reset_index(drop=True)
    out["device_total_pctg"] = (
        np.round(100.0 * out["device_total_sum(us)"] / total_gpu_us, 2) if total_gpu_us else np.nan
    )
    return out


def _tree_order(frame: pd.DataFrame) -> list[int]:
    """Parents before children, heavier siblings first; the bracketed rows last."""
    weight = dict(zip(frame["module"], frame["device_total_sum(us)"]))

    def key(i: int):
        path = frame["module"].iat[i]
        if path.startswith("["):
            return (1, [], path)
        parts = _prefixes(path)
        return (0, [(-weight.get(p, 0.0), p) for p in parts], path)

    return sorted(range(len(frame)), key=key)
