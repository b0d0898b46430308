"""Operator view: GPU time per operator, input shape, call stack and ``nn.Module``; FLOPs and
bytes per call; roofline efficiency, optimization targets and MFU; kernel launch efficiency.

The modules, in the order data flows through them:

- :mod:`.graph_sources`, :mod:`.graph_replays`: CUDA-graph replays mapped to the operators that
  issued the same kernels in a capture or an eager run (the trace the others read, expanded);
- :mod:`.attribution`: each GPU event's owner (operator, graph replay, none) and the op tree;
- :mod:`.shapes`: forward operator of each backward one, module paths, input texts parsed;
- :mod:`.work`, :mod:`.matrix`, :mod:`.memory_bound`, :mod:`.flops`: FLOPs / bytes per call;
- :mod:`.instances`: one row per call (times, shapes, module, work);
- :mod:`.summaries`, :mod:`.modules`: sums by name / shapes / stack, by module;
- :mod:`.devices`, :mod:`.roofline`: device peaks, roofline, targets, MFU;
- :mod:`.efficiency`: kernel launch efficiency (CUPTI args).

:class:`RankOperators` holds one rank's attribution and instance columns (computed once, reused
by every table; the instance table's text is made only when a table shows it); the functions
below take a list of them (one per rank).
"""

from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from ...kineto import CPU_OP_CATEGORY
from ...load.health_items import record
from ...load.rank_trace import RankTrace
from .attribution import Attribution
from .devices import DEVICES, DeviceSpec, architecture_hint, detect, resolve
from .efficiency import kernel_efficiency
from .graph_replays import Replay, expand, match, replays
from .graph_sources import KernelSequence, sequences
from .instances import as_table, instance_columns
from .modules import COLUMNS as MODULE_COLUMNS
from .modules import combine_modules, rank_module_summary
from .roofline import (
    ROOFLINE_INPUTS,
    device_name,
    group_sums,
    mfu,
    optimization_targets,
    roofline,
    roofs,
    with_peaks,
)
from .summaries import combine, rank_summary

__all__ = [
    "DEVICES", "DeviceSpec", "RankOperators", "kernel_efficiency", "operator_summary", "mfu_table",
    "optimization_targets", "roofline_table", "devices_of", "device_name", "architecture_hint",
    "nsys_operator_hint", "operator_ranges", "recorded_hint", "rank_roofline_sums",
    "roofline_of_sums", "tf32_ranks", "with_peaks", "NO_MODEL", "NO_MODULES", "rank_modules",
    "combine_modules",
]  # fmt: skip

#: why there is no time by module
NO_MODULES = "no nn.Module events: record with with_stack=True or with_modules=True"
#: why there is no roofline (nor MFU) where no Nsight Systems export says more
NO_MODEL = (
    "no operator with a FLOP model ran GPU work (shapes need record_shapes=True; the modelled"
    " operators are listed in docs/analyses/operators.md)"
)


@dataclass
class RankOperators:
    attribution: Attribution  # over the trace with its graph replays expanded
    columns: dict  # the instance table's columns, text as LazyText
    replays: list[Replay]  # the rank's graph launches, mapped where a source matched
    problems: Counter  # what its data could not give (health codes -> counts)

    @classmethod
    def of(cls, trace: RankTrace, captures: list[RankTrace] = ()) -> RankOperators:
        """``captures``: other traces of the run (a capture, an eager run) whose kernel
        sequences graph replays are matched against, after the rank's own."""
        found = replays(trace)
        if found:
            sources: list[KernelSequence] = sequences(trace)
            for other in captures:
                sources += sequences(other)
            match(trace, found, sources)
        expanded = expand(trace, found)
        problems = _unmapped(found)
        attribution = Attribution.of(expanded)
        return cls(attribution, instance_columns(expanded, attribution, problems), found, problems)

    @cached_property
    def instances(self) -> pd.DataFrame:
        """The instance table (columns in :mod:`.instances`)."""
        return as_table(self.columns)

    @property
    def rank(self) -> int:
        return self.attribution.trace.rank

    @property
    def gpu_time_us(self) -> float:
        return float(self.attribution.dur.sum()) / 1e3


def _unmapped(found: list[Replay]) -> Counter:
    """Health items for replayed events left unmapped, and for ambiguous matches."""
    problems: Counter = Counter()
    unmapped = sum(len(r.kernels) - r.mapped_kernels for r in found)
    launches = sum(r.mapped_kernels < len(r.kernels) for r in found)
    record(problems, "graph_replay_unmapped", unmapped, f"{launches} of {len(found)}")
    ambiguous = [r for r in found if r.mapped_kernels and r.equally_good]
    if ambiguous:
        detail = str(ambiguous[0].equally_good + 1)
        record(problems, "graph_replay_ambiguous", len(ambiguous), detail)
    return problems


def operator_summary(ranks: list[RankOperators], by: str = "name", stack_depth: int = 3):
    """GPU and host time by ``by``: ``"name"``, ``"shape"`` (name, input dims and types),
    ``"stack"`` (the operator under its ``stack_depth - 1`` enclosing CPU events) or
    ``"module"``; columns in :mod:`.summaries` / :mod:`.modules`."""
    total = sum(r.gpu_time_us for r in ranks)
    if by == "module":
        return combine_modules(
            [rank_module_summary(r.attribution, r.instances) for r in ranks], total
        )
    parts = [rank_summary(r.attribution, r.columns, by, stack_depth) for r in ranks]
    return combine(parts, total)


def rank_modules(r: RankOperators) -> pd.DataFrame:
    """One rank's rows of ``operator_summary(by="module")`` before they are added across ranks
    (none where no call ran inside an ``nn.Module``): the batch's per-rank partial, which
    ``combine_modules([rows of all ranks], total)`` adds up."""
    calls = pd.DataFrame({"module": r.columns["module"].take(), "row": r.columns["row"]})
    if not (calls["module"] != "").any():
        return pd.DataFrame(columns=MODULE_COLUMNS)
    return rank_module_summary(r.attribution, calls)


def devices_of(traces: list[RankTrace], device: str | DeviceSpec | None = None):
    """``{rank: DeviceSpec or None}``: the user's choice for every rank, else each rank's device
    from its trace; a rank whose device is not in the table gets None and a warning naming it."""
    chosen = resolve(device)
    out = {}
    for trace in traces:
        if chosen is not None:
            out[trace.rank] = chosen
            continue
        ids = trace.gpu["device"].value_counts().index.tolist() if len(trace.gpu) else []
        out[trace.rank] = detect(trace.meta, ids)
        if out[trace.rank] is None and len(trace.gpu):
            names = [d.name for d in trace.meta.devices]
            hint = architecture_hint(pd.unique(trace.gpu["name"]))
            said = f" (its kernel names say {hint})" if hint else ""
            warnings.warn(
                f"rank {trace.rank}: device {names[:1] or 'not named'}{said} is not in the peak"
                f" table; pass device=<one of {list(DEVICES)}> or a DeviceSpec for roofline and"
                " MFU",
                stacklevel=3,
            )
    return out


def roofline_table(ranks: list[RankOperators], devices: dict) -> pd.DataFrame:
    if not ranks:
        return pd.DataFrame()
    parts = [_modelled_calls(r) for r in ranks]
    inst = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    return roofline(inst, devices, sum(r.gpu_time_us for r in ranks))


def _modelled_calls(r: RankOperators) -> pd.DataFrame:
    """The counted calls that ran GPU work, the only rows the roofline reads."""
    rows = np.flatnonzero(r.columns["counted"] & (r.columns["device_total(us)"] > 0))
    return as_table({c: r.columns[c] for c in ROOFLINE_INPUTS}, rows)


def rank_roofline_sums(r: RankOperators, devices: dict) -> pd.DataFrame:
    """One rank's modelled calls summed by roofline group (:func:`.roofline.group_sums`), which
    :func:`roofline_of_sums` joins across ranks: the batch's per-rank partial."""
    return group_sums(_modelled_calls(r), devices)


def roofline_of_sums(sums: pd.DataFrame, devices: dict, total_gpu_us: float) -> pd.DataFrame:
    """:func:`roofline_table` of the ranks whose :func:`rank_roofline_sums` are ``sums``
    (concatenated; ``total_gpu_us``: all their GPU work)."""
    return roofs(group_sums(sums, devices), devices, total_gpu_us)


def tf32_ranks(devices: dict, table: pd.DataFrame) -> dict[int, bool]:
    """``{rank: its float32 products ran as TF32}``: on a device where the roofline ``table``
    found a float32 product faster than the FP32 peak."""
    inferred = set(table.loc[table["tf32_inferred"], "device"]) if len(table) else set()
    return {rank: spec is not None and spec.name in inferred for rank, spec in devices.items()}


def mfu_table(ranks: list[RankOperators], devices: dict, table: pd.DataFrame) -> pd.DataFrame:
    """MFU per rank and step; float32 counts as TF32 on a device where the roofline ``table``
    found a float32 product faster than the FP32 peak."""
    tf32 = tf32_ranks({r.rank: devices.get(r.rank) for r in ranks}, table)
    return mfu([(r.attribution, r.columns) for r in ranks], devices, tf32)


def nsys_operator_hint(traces) -> str | None:
    """What to record for the operator models, where a selected trace is an Nsight Systems
    export (None for Kineto traces): operator ranges, or the input types they lack."""
    return recorded_hint([operator_ranges(t) for t in traces])


def operator_ranges(trace: RankTrace) -> bool | None:
    """Whether an Nsight Systems export has operator ranges (None: a Kineto trace)."""
    if trace.source_format != "nsys":
        return None
    return bool((trace.cpu["cat"] == CPU_OP_CATEGORY).any())


def recorded_hint(ranges: list[bool | None]) -> str | None:
    """:func:`nsys_operator_hint` of each trace's :func:`operator_ranges`."""
    exports = [found for found in ranges if found is not None]
    if not exports:
        return None
    if not any(exports):
        return (
            "the Nsight Systems export has no operator ranges: run the steps under"
            " torch.autograd.profiler.emit_nvtx(record_shapes=True) (docs/nsight-systems.md)"
        )
    return (
        "emit_nvtx records operators' shapes but not their input types, which the FLOP models"
        " need: time by operator and shape is there; for the roofline and MFU record a step"
        " with torch.profiler (record_shapes=True)"
    )
