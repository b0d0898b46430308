"""CUDA / HIP graph replays mapped back to the operators that issued their kernels.

A graph launch (``cudaGraphLaunch`` / ``hipGraphLaunch``) replays many kernels under one call;
the trace links them to that call only. Where the kernel sequence is known from elsewhere (a
capture, or an eager run of the same model: :mod:`.graph_sources`), each replayed event is
mapped to the launch that issued the same kernel there, and so to its operator:

1. The replay's events, in GPU order, are compared with every window of each sequence: the
   window with the most equal kernel names position by position wins (a capture that holds as
   many launches as the replay has events is also tried whole).
2. In that window the k-th replayed event of a kernel name is mapped to the window's k-th
   launch of that name (so events of several streams, interleaved on the GPU, still map). A
   capture whose launches name no kernel (CUDA writes no ``kernel`` arg) maps by launch order,
   and only when it holds exactly as many launches. Fewer than half mapped: no match.
3. :func:`expand` copies, for each launch, the mapped launch calls and the operators,
   ``nn.Module`` frames and annotations around them that lie within the window (not the
   ProfilerStep) under the graph launch's parent: the replayed kernels then have operators,
   shapes and modules, and the operator summaries, the module view, the roofline and MFU count
   them like any other. A copied call has the graph launch's time, no duration (replaying it
   costs no host time) and ``graph_launch_row`` = the launch's row.

Where two sources match equally well (captures of several batch sizes hold the same kernel
names), the first is used and ``equally_good`` says how many others did as well: their shapes,
and so their FLOPs, may differ.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...kineto import (
    CPU_ANNOTATION_CATEGORY,
    CPU_OP_CATEGORY,
    GRAPH_LAUNCH_NAMES,
    MODULE_PREFIX,
    STEP_PREFIX,
)
from ...load.rank_trace import RankTrace
from ...rows import nearest_ancestor
from ..common import one_of, starts_with, text_values
from .graph_sources import KernelSequence

BY_NAMES, BY_ORDER = "kernel names", "launch order"
_CHUNK = 1 << 22  # window comparisons per numpy call


@dataclass
class Replay:
    """One graph launch: ``launch`` (its ``cpu`` row), ``kernels`` (the ``gpu`` rows it replayed,
    in GPU order) and what they were mapped to: ``sequence``, ``mapped`` (per kernel, its
    position in ``sequence.launch``; -1: not mapped), ``mapped_by``, ``equally_good``."""

    launch: int
    kernels: np.ndarray
    sequence: KernelSequence | None = None
    mapped: np.ndarray | None = None
    mapped_by: str = ""
    equally_good: int = 0

    @property
    def mapped_kernels(self) -> int:
        return 0 if self.mapped is None else int((self.mapped >= 0).sum())


def replays(trace: RankTrace) -> list[Replay]:
    """The trace's graph launches that replayed GPU events, in launch order."""
    cpu, gpu = trace.cpu, trace.gpu
    if not len(gpu) or not len(cpu):
        return []
    is_graph = one_of(cpu["name"], GRAPH_LAUNCH_NAMES)
    launch = gpu["launch_row"].to_numpy()
    rows = np.flatnonzero((launch >= 0) & is_graph[np.maximum(launch, 0)])
    if not len(rows):
        return []
    rows = rows[np.lexsort((rows, gpu["ts"].to_numpy()[rows], launch[rows]))]
    cut = np.flatnonzero(np.diff(launch[rows])) + 1
    return [Replay(int(launch[part[0]]), part) for part in np.split(rows, cut)]


def match(trace: RankTrace, found: list[Replay], sources: list[KernelSequence]) -> None:
    """Map each replay's events to the best of ``sources`` (sets their ``sequence``,
    ``mapped``, ``mapped_by``, ``equally_good``)."""
    if not found or not sources:
        return
    names = [text_values(trace.gpu["name"], r.kernels) for r in found]
    codes, _ = pd.factorize(np.concatenate(names + [s.names for s in sources]).astype(object))
    cuts = np.cumsum([len(n) for n in names] + [len(s.names) for s in sources])[:-1]
    parts = np.split(codes, cuts)
    replay_codes, source_codes = parts[: len(found)], parts[len(found) :]
    for replay, wanted in zip(found, replay_codes):
        best = []
        for source, have in zip(sources, source_codes):
            mapped, how = _map(wanted, have, source.has_names)
            best.append(((mapped >= 0).sum(), mapped, how, source))
        top = max(b[0] for b in best)
        if top == 0 or 2 * top < len(wanted):
            continue
        first = next(b for b in best if b[0] == top)
        replay.mapped, replay.mapped_by, replay.sequence = first[1], first[2], first[3]
        replay.equally_good = sum(b[0] == top for b in best) - 1


def _map(wanted: np.ndarray, have: np.ndarray, named: bool) -> tuple[np.ndarray, str]:
    """Per replayed event, its position in ``have`` (-1: none), and how it was mapped."""
    m, n = len(wanted), len(have)
    none = np.full(m, -1, np.int64)
    if not named:
        return (np.arange(m), BY_ORDER) if n == m else (none, "")
    starts = _best_starts(wanted, have)
    if n == m:
        starts.append(0)
    best = none
    for start in starts:
        window = have[start : start + m]
        mapped = _by_occurrence(wanted, window)
        mapped = np.where(mapped >= 0, mapped + start, -1)
        if (mapped >= 0).sum() > (best >= 0).sum():
            best = mapped
    return best, BY_NAMES if (best >= 0).any() else ""


def _best_starts(wanted: np.ndarray, have: np.ndarray) -> list[int]:
    """The window start of ``have`` with the most positions equal to ``wanted`` (candidates:
    where the replay's three rarest kernels sit); [] when none shares a kernel."""
    m, n = len(wanted), len(have)
    if n < m or not m:
        return []
    counts = np.bincount(have[have >= 0], minlength=int(max(wanted.max(), have.max())) + 1)
    freq = np.where(wanted >= 0, counts[np.maximum(wanted, 0)], 0).astype(np.float64)
    freq[freq == 0] = np.inf  # not in the sequence (or not named): no anchor
    anchors = [int(j) for j in np.argsort(freq, kind="stable")[:3] if np.isfinite(freq[j])]
    starts = [np.flatnonzero(have == wanted[j]) - j for j in anchors]
    if not starts:
        return []
    starts = np.unique(np.concatenate(starts))
    starts = starts[(starts >= 0) & (starts <= n - m)]
    best, best_score = [], 0
    step = max(1, _CHUNK // m)
    for chunk in (starts[i : i + step] for i in range(0, len(starts), step)):
        score = (have[chunk[:, None] + np.arange(m)] == wanted).sum(axis=1)
        k = int(np.argmax(score))
        if score[k] > best_score:
            best, best_score = [int(chunk[k])], int(score[k])
    return best


def _by_occurrence(wanted: np.ndarray, window: np.ndarray) -> np.ndarray:
    """Per position of ``wanted``: the position in ``window`` of the same kernel's occurrence of
    the same number (-1: the window has fewer of it)."""
    scale = max(len(wanted), len(window)) + 1
    key_w = np.where(window >= 0, window * scale + _occurrence(window), -1)
    key = wanted * scale + _occurrence(wanted)
    order = np.argsort(key_w, kind="stable")
    pos = np.minimum(np.searchsorted(key_w[order], key), len(order) - 1)
    hit = (key_w[order][pos] == key) & (wanted >= 0) if len(order) else np.zeros(len(key), bool)
    return np.where(hit, order[pos], -1)


def _occurrence(codes: np.ndarray) -> np.ndarray:
    """Per position: how many earlier positions hold the same code."""
    return pd.Series(codes).groupby(codes).cumcount().to_numpy()


# ---- the expanded trace ---------------------------------------------------------------------
def expand(trace: RankTrace, found: list[Replay]) -> RankTrace:
    """The trace with the mapped calls of each replay copied under its graph launch and its
    mapped events launched by the copies (see the module docstring; ``cpu`` gains
    ``graph_launch_row``); ``trace`` itself when no replay was mapped. A replayed event whose
    operator is not within the window stays unmapped."""
    blocks, kernels, launch_rows = [], [], []
    total = len(trace.cpu)
    for replay in found:
        if not replay.mapped_kernels:
            continue
        block, kernel, launch = _copies(trace, replay, total)
        replay.mapped[~np.isin(replay.kernels, kernel)] = -1
        if len(block):
            blocks.append(block)
            kernels.append(kernel)
            launch_rows.append(launch)
            total += len(block)
    if not blocks:
        return trace
    gpu_launch = trace.gpu["launch_row"].to_numpy().copy()
    gpu_launch[np.concatenate(kernels)] = np.concatenate(launch_rows)
    return trace.with_tables(
        cpu=_append(trace.cpu, blocks), gpu=trace.gpu.assign(launch_row=gpu_launch)
    )


def _copies(trace: RankTrace, replay: Replay, base: int):
    """``(rows, kernels, launch_rows)``: the copied ``cpu`` rows of one replay (numbered from
    ``base``), the ``gpu`` rows now launched by a copy, and the row of the copy of each."""
    sequence = replay.sequence
    source = sequence.trace.cpu
    mapped = replay.mapped >= 0
    positions = replay.mapped[mapped]
    lo, hi = sequence.bounds(int(positions.min()), int(positions.max() - positions.min() + 1))
    launches = sequence.launch[positions]
    ts, end = source["ts"].to_numpy(), (source["ts"] + source["dur"]).to_numpy()
    parent = source["parent_row"].to_numpy()
    kept = one_of(source["cat"], (CPU_OP_CATEGORY, CPU_ANNOTATION_CATEGORY)) | starts_with(
        source["name"], MODULE_PREFIX
    )
    kept &= (ts > lo) & (end < hi) & ~starts_with(source["name"], STEP_PREFIX)
    kept &= ~one_of(source["name"], _modules_around(trace, replay.launch))  # there already
    chosen = np.zeros(len(source), bool)
    chosen[launches] = True
    frontier = np.unique(launches)
    while len(frontier):  # the kept events around the launches, up to the first one outside
        frontier = np.unique(parent[frontier])
        frontier = frontier[frontier >= 0]
        inside = (ts[frontier] > lo) & (end[frontier] < hi)
        frontier = frontier[inside & ~chosen[frontier]]
        chosen[frontier[kept[frontier]]] = True
    owner = source["op_row"].to_numpy()[launches]
    owned = (owner >= 0) & chosen[np.maximum(owner, 0)]
    chosen[launches[~owned]] = False  # its operator is not the window's alone: not mapped
    rows = np.flatnonzero(chosen)
    new_row = np.full(len(source), -1, np.int64)
    new_row[rows] = base + np.arange(len(rows))
    up = nearest_ancestor(parent, chosen, rows)
    at = trace.cpu.iloc[replay.launch]
    block = source.iloc[rows].reset_index(drop=True)
    block = block.assign(
        ts=np.int64(at["ts"]), dur=np.int64(0), pid=at["pid"], tid=at["tid"],
        iteration=at["iteration"], depth=at["depth"] + 1,
        parent_row=np.where(up >= 0, new_row[np.maximum(up, 0)], at["parent_row"]),
        op_row=np.where(block["op_row"] >= 0, new_row[block["op_row"].clip(lower=0)], -1),
        correlation=-1, external_id=-1, sequence_number=-1, fwd_thread_id=-1,
        graph_launch_row=replay.launch,
    )  # fmt: skip
    kernel = replay.kernels[mapped][owned]
    return block, kernel, new_row[launches[owned]]


def _modules_around(trace: RankTrace, row: int) -> tuple[str, ...]:
    """The ``nn.Module: Name_N`` events around a ``cpu`` row, by name."""
    cpu = trace.cpu
    parent, names = cpu["parent_row"].to_numpy(), cpu["name"]
    out = []
    row = int(parent[row])
    while row >= 0:
        name = names.iat[row]
        if isinstance(name, str) and name.startswith(MODULE_PREFIX):
            out.append(name)
        row = int(parent[row])
    return tuple(out)


def _append(cpu: pd.DataFrame, blocks: list[pd.DataFrame]) -> pd.DataFrame:
    """``cpu`` and the copied rows, categorical columns kept categorical (categories joined),
    with ``graph_launch_row`` (-1 on the trace's own rows)."""
    out = {}
    own = pd.Series(np.full(len(cpu), -1, np.int64), name="graph_launch_row")
    for column in [*cpu.columns, own.name]:
        parts = [own if column == own.name else cpu[column], *(b[column] for b in blocks)]
        if all(isinstance(p.dtype, pd.CategoricalDtype) for p in parts):
            out[column] = pd.api.types.union_categoricals(
                [p.array for p in parts], ignore_order=True
            )
        else:
            out[column] = pd.concat(parts, ignore_index=True)
    return pd.DataFrame(out)
