"""Megatron-style timers from traces: elapsed time of named regions per rank and step.

A timer is a user annotation (``record_function`` / NVTX range): ``user_annotation`` events on
the CPU (``source="cpu"``) or ``gpu_user_annotation`` ranges on the GPU (``source="gpu"``), plus
``ProfilerStep``. Per (rank, step, name) the elapsed time is the length of the union of its
ranges in that step (nested or repeated ranges are not counted twice), in **ms** like Megatron.

Across ranks, as Megatron's ``Timers.log``: ``log_option="max"`` (the slowest rank),
``"minmax"`` (fastest and slowest), ``"all"`` (every rank); a rank that did not record a timer
is left out of min/max; ``normalizer`` divides the sum over steps (per-step values when it is
the number of steps).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

import numpy as np
import pandas as pd

from ..errors import SelectionError, TraceFormatError
from ..intervals import union_length_by_group
from ..kineto import CPU_ANNOTATION_CATEGORY, GPU_ANNOTATION_CATEGORY, STEP_PATTERN
from ..load.links import iteration_of, profiler_steps
from ..load.rank_trace import RankTrace
from .common import select, wanted

LogOption = Literal["max", "minmax", "all"]
STEP_TIMER = "ProfilerStep"


def _annotation_rows(trace: RankTrace, source: str) -> pd.DataFrame:
    """Rows ``name, ts, dur, step`` of the annotations of a rank (ProfilerStep#N named
    ``ProfilerStep``)."""
    if source == "gpu":
        anno = trace.gpu_annotations
        try:
            gpu_steps = profiler_steps(anno.assign(cat=GPU_ANNOTATION_CATEGORY))
        except TraceFormatError as exc:
            raise TraceFormatError(trace.path, exc.problem) from None
        step = iteration_of(anno["ts"].to_numpy(), gpu_steps if len(gpu_steps) else trace.steps)
    elif source == "cpu":
        anno = trace.cpu[trace.cpu["cat"] == CPU_ANNOTATION_CATEGORY]
        step = anno["iteration"].to_numpy()
    else:
        raise SelectionError(None, "source must be 'cpu' or 'gpu'")
    names = anno["name"].astype(str)
    own = names.str.extract(STEP_PATTERN, expand=False)  # a ProfilerStep is its own step
    own_step = pd.to_numeric(own, errors="coerce").fillna(-1).to_numpy(np.int64)
    step = np.where(own.notna().to_numpy(), own_step, step).astype(np.int64)
    names = names.where(own.isna(), STEP_TIMER)
    rows = pd.DataFrame(
        {
            "name": names.to_numpy(),
            "ts": anno["ts"].to_numpy(),
            "dur": anno["dur"].to_numpy(),
            "step": step,
        }
    )
    # a ProfilerStep of zero length measured nothing (a negative duration clamped: health's
    # profiler_step_empty): no 0.0 ms timer
    return rows[~((rows["name"] == STEP_TIMER) & (rows["dur"] <= 0))].reset_index(drop=True)


def annotation_timers(
    traces: Mapping[int, RankTrace],
    names: Iterable[str] | None = None,
    source: str = "cpu",
    ranks: Iterable[int] | None = None,
    steps: Iterable[int] | None = None,
) -> pd.DataFrame:
    """Tidy table ``rank, step, name, elapsed_ms``; annotations outside every step have step -1.
    A name of ``names`` or a step of ``steps`` that no selected rank has is a
    :class:`SelectionError`."""
    if source not in ("cpu", "gpu"):
        raise SelectionError(None, f"source must be 'cpu' or 'gpu', not {source!r}")
    all_rows = {t.rank: _annotation_rows(t, source) for t in select(traces, ranks)}
    every = pd.concat(all_rows.values()) if all_rows else pd.DataFrame({"name": [], "step": []})
    names = wanted(names, every["name"].unique(), f"{source} annotation(s)", "these ranks")
    steps = wanted(steps, every["step"].unique(), "ProfilerStep(s)", "these ranks' annotations")
    parts = []
    for rank, rows in all_rows.items():
        if names is not None:
            rows = rows[rows["name"].isin(names)]
        if steps is not None:
            rows = rows[rows["step"].isin(steps)]
        if rows.empty:
            continue
        key = pd.MultiIndex.from_arrays([rows["step"].to_numpy(), rows["name"].to_numpy()])
        groups, lengths = union_length_by_group(
            key.codes[0].astype(np.int64) * len(key.levels[1]) + key.codes[1],
            rows["ts"].to_numpy(),
            rows["ts"].to_numpy() + rows["dur"].to_numpy(),
        )
        step_codes, name_codes = np.divmod(groups, len(key.levels[1]))
        parts.append(
            pd.DataFrame(
                {
                    "rank": rank,
                    "step": key.levels[0].to_numpy()[step_codes],
                    "name": key.levels[1].to_numpy()[name_codes],
                    "elapsed_ms": lengths / 1e6,
                }
            )
        )
    if not parts:
        return pd.DataFrame(
            {
                "rank": pd.Series(dtype="int64"),
                "step": pd.Series(dtype="int64"),
                "name": pd.Series(dtype=object),
                "elapsed_ms": pd.Series(dtype=float),
            }
        )
    return pd.concat(parts, ignore_index=True).sort_values(
        ["name", "rank", "step"], ignore_index=True
    )


def timers_across_ranks(
    timers: pd.DataFrame, log_option: LogOption = "minmax", normalizer: float = 1.0
) -> pd.DataFrame:
    """Per timer: ``min_ms``/``max_ms`` (``"minmax"``), ``max_ms`` (``"max"``) or one column per
    rank (``"all"``, NaN where a rank did not record it). Values: sum over steps / normalizer."""
    if normalizer <= 0:
        raise SelectionError(None, "normalizer must be > 0")
    per_rank = timers.groupby(["name", "rank"])["elapsed_ms"].sum() / normalizer
    per_rank = per_rank[per_rank > 0]  # a timer a rank never recorded does not count
    if log_option == "all":
        return per_rank.unstack("rank").sort_index()
    agg = per_rank.groupby(level="name").agg(["min", "max", "idxmin", "idxmax"])
    out = pd.DataFrame(
        {
            "min_ms": agg["min"],
            "max_ms": agg["max"],
            "fastest_rank": [i[1] for i in agg["idxmin"]],
            "slowest_rank": [i[1] for i in agg["idxmax"]],
        }
    )
    if log_option == "max":
        return out[["max_ms", "slowest_rank"]]
    if log_option == "minmax":
        return out
    raise SelectionError(None, "log_option must be 'max', 'minmax' or 'all'")


def megatron_text(table: pd.DataFrame, log_option: LogOption = "minmax") -> str:
    """The text Megatron-LM's ``Timers.log`` prints, from :func:`timers_across_ranks`."""
    if log_option == "all":
        lines = ["times across ranks (ms):"]
        for name, row in table.iterrows():
            values = row.dropna()
            if len(values):
                lines.append(f"  {name}:")
                lines += [
                    f"     rank {int(rank):2d}: {value:.2f}" for rank, value in values.items()
                ]
        return "\n".join(lines)
    if log_option == "max":
        lines = ["max time across ranks (ms):"]
        lines += [
            f"    {(name + ' ').ljust(48, '.')}: {row['max_ms']:.2f}"
            for name, row in table.iterrows()
        ]
        return "\n".join(lines)
    lines = ["(min, max) time across ranks (ms):"]
    lines += [
        f"    {(name + ' ').ljust(48, '.')}: ({row['min_ms']:.2f}, {row['max_ms']:.2f})"
        for name, row in table.iterrows()
    ]
    return "\n".join(lines)
