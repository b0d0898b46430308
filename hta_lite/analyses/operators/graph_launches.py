"""CUDA / HIP graph launches: one row per launch, and the kernels each replayed.

:func:`launch_table` columns: ``rank``, ``row`` (the launch call's ``cpu`` row), ``name``
(``cudaGraphLaunch`` / ``hipGraphLaunch``), ``ts`` (ns), ``iteration``, ``where`` (the
``nn.Module`` path around the launch, else the innermost operator, annotation or Python frame
around it), ``stream`` (the stream most of its events ran on), ``kernels`` (GPU events
replayed), ``gpu_time(us)`` (their summed durations), ``gpu_busy(us)`` (the union of their
intervals), ``span(us)`` (first start to last end), ``launch(us)`` (the host call),
``gpu_pctg`` (of the rank's GPU work), ``mapped_kernels`` and ``mapped_pctg`` (events mapped to
an operator, :mod:`.graph_replays`), ``source`` (``"capture in FILE"``, ``"eager in FILE"``,
``""``: none matched), ``mapped_by`` (``"kernel names"``, ``"launch order"``, ``""``),
``equally_good`` (other sources that matched as well).

:func:`graph_kernel_table` columns: ``rank``, ``launch_row``, ``kernel``, ``kernel_type``,
``operator`` (the operator it is mapped to; ``[graph replay]`` when not mapped), ``mapped``,
``kernels``,
``gpu_time(us)``, ``launch_pctg`` (of the launch's GPU time); per launch, heaviest first.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...intervals import union_length_by_group
from ...kineto import CPU_OP_CATEGORY
from ...rows import nearest_ancestor
from ..common import text_values, us
from .attribution import GRAPH_REPLAY, UNOWNED_LABELS
from .shapes import module_paths

LAUNCH_COLUMNS = [
    "rank", "row", "name", "ts", "iteration", "where", "stream", "kernels", "gpu_time(us)",
    "gpu_busy(us)", "span(us)", "launch(us)", "gpu_pctg", "mapped_kernels", "mapped_pctg",
    "source", "mapped_by", "equally_good",
]  # fmt: skip
#: why the graph views have no rows
NO_GRAPH_LAUNCH = "no cudaGraphLaunch / hipGraphLaunch replayed GPU events in these ranks"
KERNEL_COLUMNS = ["rank", "launch_row", "kernel", "kernel_type", "operator", "mapped", "kernels",
                  "gpu_time(us)", "launch_pctg"]  # fmt: skip


def launch_table(ranks: list) -> pd.DataFrame:
    """``ranks``: :class:`~hta_lite.analyses.operators.RankOperators` of the ranks."""
    parts = [_rank_launches(r) for r in ranks if r.replays]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=LAUNCH_COLUMNS)


def _rank_launches(r) -> pd.DataFrame:
    trace = r.attribution.trace
    cpu, gpu = trace.cpu, trace.gpu
    launch = np.array([p.launch for p in r.replays], np.int64)
    kernels = [p.kernels for p in r.replays]
    group = np.repeat(np.arange(len(launch)), [len(k) for k in kernels])
    rows = np.concatenate(kernels)
    ts = gpu["ts"].to_numpy()[rows]
    end = ts + gpu["dur"].to_numpy()[rows]
    _, busy = union_length_by_group(group, ts, end)
    dur = np.bincount(group, end - ts, minlength=len(launch))
    streams = pd.Series(gpu["stream"].to_numpy()[rows]).groupby(group).agg(lambda s: s.mode()[0])
    mapped = np.array([p.mapped_kernels for p in r.replays], np.int64)
    count = np.array([len(k) for k in kernels], np.int64)
    total = int(r.attribution.dur.sum())
    return pd.DataFrame(
        {
            "rank": trace.rank,
            "row": launch,
            "name": text_values(cpu["name"], launch),
            "ts": cpu["ts"].to_numpy()[launch],
            "iteration": cpu["iteration"].to_numpy()[launch],
            "where": _where(trace, launch),
            "stream": streams.to_numpy(),
            "kernels": count,
            "gpu_time(us)": us(dur),
            "gpu_busy(us)": us(busy),
            "span(us)": us(np.maximum.reduceat(end, _starts(count)) - ts[_starts(count)]),
            "launch(us)": us(cpu["dur"].to_numpy()[launch]),
            "gpu_pctg": np.round(100.0 * dur / total, 2) if total else np.nan,
            "mapped_kernels": mapped,
            "mapped_pctg": np.round(100.0 * mapped / count, 2),
            "source": [p.sequence.source if p.mapped_kernels else "" for p in r.replays],
            "mapped_by": [p.mapped_by if p.mapped_kernels else "" for p in r.replays],
            "equally_good": [p.equally_good if p.mapped_kernels else 0 for p in r.replays],
        }
    )


def _starts(count: np.ndarray) -> np.ndarray:
    return np.cumsum(count) - count


def _where(trace, launch: np.ndarray) -> np.ndarray:
    """The module path around each launch, else the name of the innermost operator around it,
    else of the event just around it ("" at top level)."""
    cpu = trace.cpu
    module_of, paths = module_paths(trace)
    parent = cpu["parent_row"].to_numpy()
    op = nearest_ancestor(parent, np.asarray(cpu["cat"] == CPU_OP_CATEGORY), launch)
    around = np.where(op >= 0, op, parent[launch])
    names = text_values(cpu["name"], np.maximum(around, 0))
    out = np.where(around >= 0, names, "").astype(object)
    has_module = module_of[launch] >= 0
    out[has_module] = paths[module_of[launch][has_module]]
    return out


def graph_kernel_table(ranks: list) -> pd.DataFrame:
    """``ranks``: as :func:`launch_table`."""
    parts = [_rank_kernels(r) for r in ranks if r.replays]
    if not parts:
        return pd.DataFrame(columns=KERNEL_COLUMNS)
    return pd.concat(parts, ignore_index=True)


def _rank_kernels(r) -> pd.DataFrame:
    attr = r.attribution
    trace = attr.trace
    rows = np.concatenate([p.kernels for p in r.replays])
    launch = np.repeat([p.launch for p in r.replays], [len(p.kernels) for p in r.replays])
    at = np.searchsorted(attr.kernels, rows)  # the kernels' places in the attribution
    owner = attr.owner[at]
    operator = text_values(trace.cpu["name"], np.maximum(owner, 0)).astype(object)
    unmapped = attr.owner_kind[at] == GRAPH_REPLAY
    operator[unmapped] = UNOWNED_LABELS[GRAPH_REPLAY]
    frame = pd.DataFrame(
        {
            "launch_row": launch,
            "kernel": text_values(trace.gpu["name"], rows),
            "kernel_type": text_values(trace.gpu["kernel_type"], rows),
            "operator": operator,
            "mapped": ~unmapped,
            "dur": attr.dur[at],
        }
    )
    keys = ["launch_row", "kernel", "kernel_type", "operator", "mapped"]
    out = frame.groupby(keys, sort=False).agg(kernels=("dur", "size"), ns=("dur", "sum"))
    out = out.reset_index()
    per_launch = out.groupby("launch_row")["ns"].transform("sum")
    out["gpu_time(us)"] = us(out["ns"].to_numpy())
    out["launch_pctg"] = np.round(100.0 * out["ns"] / per_launch, 2)
    out.insert(0, "rank", trace.rank)
    out = out.sort_values(["launch_row", "ns"], ascending=[True, False], kind="stable")
    return out[KERNEL_COLUMNS].reset_index(drop=True)
