"""Several trace files of one rank joined into one series of steps (a long run profiled in
windows).

``torch.profiler.schedule(..., repeat=k)`` writes one file per profiled window per rank, and a
run profiled again later adds more. Windows of one rank never overlap in time; joined in time
order they are one :class:`RankTrace` whose tables hold every window's rows:

- a ``window`` column (0, 1, ... in time order) on ``cpu``, ``gpu``, ``gpu_annotations`` and
  ``steps``;
- row references (``parent_row``, ``op_row``, ``launch_row``: rows of ``cpu``) moved by the
  rows of the windows before,
  and ids that link events of one file (``correlation``, ``external_id``, flow ``id``) moved
  past the previous windows' ids, so no two windows share one;
- ``metadata["windows"]``: one dict per window (``window``, ``path``, ``start_ns``,
  ``end_ns``: its first event's start and last event's end); the time between two windows
  was not profiled and is never idle time (the analyses compare the ``window`` column);
- health counters summed, and ``windows_joined`` counting the files joined.

Files of one rank that overlap in time cannot be windows of one run: that is a
:class:`DuplicateRankError` naming both.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from ..errors import DuplicateRankError
from .rank_trace import RankTrace

WINDOW_TABLES = ("cpu", "gpu", "gpu_annotations", "steps")
#: per table, its columns that hold a row of another (or the same) table
ROW_REFERENCES = {
    "cpu": {"parent_row": "cpu", "op_row": "cpu", "forward_row": "cpu"},
    "gpu": {"launch_row": "cpu"},
}
IDS = {
    "cpu": ("correlation", "external_id"),
    "gpu": ("correlation", "external_id"),
    "gpu_annotations": ("correlation", "external_id"),
    "flows": ("id",),
}


def time_range(trace: RankTrace) -> tuple[int, int]:
    """``(first start, last end)`` in ns over the trace's CPU and GPU events and steps."""
    starts, ends = [], []
    for name in ("cpu", "gpu", "steps"):
        table = getattr(trace, name)
        if len(table):
            ts = table["ts"].to_numpy()
            starts.append(ts.min())
            ends.append((ts + table["dur"].to_numpy()).max())
    if not starts:
        return 0, 0
    return int(min(starts)), int(max(ends))


def join_windows(parts: list[RankTrace]) -> RankTrace:
    """One trace of the rank of ``parts`` (its files, any order), windows in time order; a
    single part is returned as it is. Overlapping parts raise :class:`DuplicateRankError`."""
    if len(parts) == 1:
        return parts[0]
    ranges = [time_range(t) for t in parts]
    order = sorted(range(len(parts)), key=lambda i: ranges[i])
    for before, after in zip(order, order[1:]):
        if ranges[after][0] < ranges[before][1]:
            raise DuplicateRankError(
                parts[after].path,
                f"claims rank {parts[after].rank}, already claimed by {parts[before].path}, and"
                " their events overlap in time: not two profiled windows of one run",
            )
    traces = [parts[i] for i in order]
    id_base = _id_bases(traces)
    tables = {name: _concat(name, traces, id_base) for name in RankTrace.TABLES}
    health = Counter()
    events_read = Counter()
    for t in traces:
        health.update(t.health)
        events_read.update(t.events_read)
    health["windows_joined"] = len(traces)
    metadata = dict(traces[0].metadata)
    metadata["windows"] = [
        {"window": w, "path": t.path, "start_ns": ranges[i][0], "end_ns": ranges[i][1]}
        for w, (i, t) in enumerate(zip(order, traces))
    ]
    return RankTrace(
        rank=traces[0].rank,
        path=traces[0].path,
        metadata=metadata,
        events_read=dict(events_read),
        health=dict(health),
        **tables,
    )


def _concat(name: str, traces: list[RankTrace], id_base: np.ndarray) -> pd.DataFrame:
    """The table ``name`` of every window, one after another (categoricals over the union of
    their categories; row references and ids moved; a ``window`` column where it belongs). The
    plain columns are concatenated by one ``pd.concat`` (a column at a time costs ~80 µs per
    window and column: 3 s for 100 windows)."""
    every = [getattr(t, name) for t in traces]
    held = [i for i, f in enumerate(every) if len(f)]  # empty tables add nothing
    if not held:
        return _with_window(every[0].copy(), name, np.zeros(0, np.int64))
    frames = [every[i] for i in held]
    lengths = [len(f) for f in frames]
    window = np.repeat(np.array(held, np.int64), lengths)
    columns = list(dict.fromkeys(c for f in frames for c in f.columns))
    like = {c: next(f[c] for f in frames if c in f.columns) for c in columns}
    categorical = [c for c in columns if isinstance(like[c].dtype, pd.CategoricalDtype)]
    plain = [c for c in columns if c not in categorical]
    table = pd.concat([_with(f, plain, like)[plain] for f in frames], ignore_index=True)
    moves = {c: np.asarray(id_base)[window] for c in IDS.get(name, ()) if c in plain}
    for column, target in ROW_REFERENCES.get(name, {}).items():
        if column in plain:
            before = np.cumsum([0] + [len(getattr(t, target)) for t in traces[:-1]])
            moves[column] = before[window]
    for column, by in moves.items():
        values = table[column].to_numpy()
        table[column] = np.where(values >= 0, values + by, values)  # -1 (absent) stays
    for column in categorical:
        pieces = [f[column] if column in f.columns else None for f in frames]
        table[column] = _categorical_concat(pieces, lengths)
    return _with_window(table[columns].copy(deep=False), name, window)  # a frame of its own


def _with_window(table: pd.DataFrame, name: str, window: np.ndarray) -> pd.DataFrame:
    if name in WINDOW_TABLES:
        table["window"] = window
    return table


def _with(frame: pd.DataFrame, columns: list[str], like: dict) -> pd.DataFrame:
    """``frame`` with the plain ``columns`` it lacks added as -1 (absent), of their dtype."""
    absent = [c for c in columns if c not in frame.columns]
    if not absent:
        return frame
    filled = {c: pd.Series(np.full(len(frame), -1), dtype=like[c].dtype) for c in absent}
    return frame.assign(**filled)


def _id_bases(traces: list[RankTrace]) -> list[int]:
    """Per window, what its ids are moved by: past the largest id of any kind in the windows
    before (every id column of a window moves by the same amount, so a correlation still
    matches its launch and a flow its event)."""
    largest = []
    for t in traces:
        tops = [
            int(getattr(t, table)[column].max())
            for table, columns in IDS.items()
            for column in columns
            if column in getattr(t, table).columns and len(getattr(t, table))
        ]
        largest.append(max(tops, default=-1) + 1)
    return [0] + [int(x) for x in np.cumsum(largest[:-1])]


def _categorical_concat(pieces: list, lengths: list[int]) -> pd.Categorical:
    """Categorical pieces (None: a window without the column, all missing) as one, over the
    union of their categories in order of appearance."""
    present = [p for p in pieces if p is not None]
    categories = present[0].cat.categories
    if len(present) > 1:
        categories = categories.append([p.cat.categories for p in present[1:]]).unique()
    codes = []
    for piece, n in zip(pieces, lengths):
        if piece is None:
            codes.append(np.full(n, -1, np.int64))
            continue
        own = piece.cat.codes.to_numpy()
        where = categories.get_indexer(piece.cat.categories)
        codes.append(np.append(where, -1)[own])  # code -1 (missing) stays -1
    return pd.Categorical.from_codes(np.concatenate(codes), categories=categories)
