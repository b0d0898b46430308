"""Generic row helpers over numpy arrays: look rows up, follow parent links, group rows by
their codes. Used by the readers and by analyses alike (beside :mod:`hta_lite.intervals`)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def first_row_by_key(keys: np.ndarray, candidates: np.ndarray) -> tuple[pd.Index, np.ndarray]:
    """Unique index of ``keys[candidates]`` (first occurrence kept) and the rows behind it."""
    cand_keys = keys[candidates]
    uniq, first = np.unique(cand_keys, return_index=True)
    return pd.Index(uniq), candidates[first]


def gather(values: np.ndarray, rows: np.ndarray, fill) -> np.ndarray:
    """``values[rows]`` where ``rows >= 0``, ``fill`` elsewhere (safe on empty ``values``)."""
    if len(values) == 0:
        return np.full(
            len(rows), fill, dtype=np.result_type(values.dtype, np.min_scalar_type(fill))
        )
    return np.where(rows >= 0, values[np.maximum(rows, 0)], fill)


def lookup(index: pd.Index, rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    return gather(rows, index.get_indexer(wanted), -1)


def first_seen(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``codes`` renumbered 0, 1, ... in order of first appearance, and the row where each first
    appears: with ``values[codes[rows]]`` as the distinct values, what :func:`factorize` gives.
    Codes below twice the row count (the usual: codes of distinct values) take a table; others
    pandas' hash table (5-8x faster than ``np.unique``'s sort on 30 thousand to a million rows):
    a row is the first of its group where the running maximum of the new codes grows."""
    n = len(codes)
    top = int(codes.max()) + 1 if n else 0
    if n and codes.min() >= 0 and top <= 2 * n:
        first = np.full(top, n, np.int64)
        np.minimum.at(first, codes, np.arange(n))
        rows = np.sort(first[first < n])
        renumber = np.empty(top, np.int64)
        renumber[codes[rows]] = np.arange(len(rows))
        return renumber[codes], rows
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    renumbered = pd.factorize(codes)[0].astype(np.int64, copy=False)  # in order of appearance
    highest = np.maximum.accumulate(renumbered)
    return renumbered, np.flatnonzero(np.append(True, highest[1:] > highest[:-1]))


def combine_codes(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's group among the distinct combinations of integer code columns (codes >= -1,
    -1 a value of its own), numbered in order of first appearance, and the first row of each
    group: the distinct rows of a table, found from its columns' codes with no tuple per row."""
    n = len(columns[0]) if columns else 0
    key, size = np.zeros(n, np.int64), 1
    for codes in columns:
        codes = np.asarray(codes, np.int64) + 1
        top = int(codes.max()) + 1 if n else 1
        size *= top
        if size >= 2**62:  # the combined key would overflow: one column of row-wise uniques
            _, key = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
            return first_seen(key.ravel())
        key = key * top + codes
    return first_seen(key)


def nearest_ancestor(parent: np.ndarray, is_target: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows``, the closest ancestor (following ``parent``) where ``is_target``
    (-1: none). Pointer jumping: each pass doubles how far every row has looked, so a chain of
    N nested events takes log2(N) passes over the rows, not N."""
    return gather(_nearest_target_above(parent, is_target), rows, -1)


def _nearest_target_above(parent: np.ndarray, is_target: np.ndarray) -> np.ndarray:
    """Per row, its nearest ancestor where ``is_target`` (-1: none). ``jump[r]`` is an ancestor
    with no target strictly between it and ``r``; a row is settled when its jump is a target or
    -1, else it jumps to its jump's jump (which keeps that true)."""
    jump = parent.astype(np.int64, copy=True)
    pending = np.flatnonzero(jump >= 0)
    pending = pending[~is_target[jump[pending]]]
    while len(pending):
        jump[pending] = jump[jump[pending]]
        pending = pending[jump[pending] >= 0]
        pending = pending[~is_target[jump[pending]]]
    return jump


def ancestors_where(parent: np.ndarray, is_target: np.ndarray) -> np.ndarray:
    """Per row, how many of its ancestors (following ``parent``) are ``is_target``: the depth in
    the tree of the target rows. Pointer jumping with counts (log2 of the depth passes)."""
    above = _nearest_target_above(parent, is_target)  # the target tree: each row's next target
    count = (above >= 0).astype(np.int64)
    jump = above.copy()
    pending = np.flatnonzero(jump >= 0)
    while len(pending):
        count[pending] += count[jump[pending]]  # both sides read before any write
        jump[pending] = jump[jump[pending]]
        pending = pending[jump[pending] >= 0]
    return count
