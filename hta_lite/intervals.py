"""Interval math on int64 nanosecond arrays: merge, total length, coverage by combination."""

from __future__ import annotations

import numpy as np


def sums_by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct keys, sum of values per key)``: a bincount over keys of any size (a rank,
    a step: values read from files never size an array)."""
    distinct, inverse = np.unique(keys, return_inverse=True)
    return distinct, np.bincount(inverse.ravel(), values, minlength=len(distinct))


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of [start, end) intervals as sorted, disjoint intervals (touching ones joined)."""
    if len(starts) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new_group = np.empty(len(s), bool)
    new_group[0] = True
    new_group[1:] = s[1:] > reach[:-1]
    group_start = np.flatnonzero(new_group)
    group_end = np.append(group_start[1:], len(s)) - 1
    return s[group_start], reach[group_end]


def total(starts: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union of the intervals (ns)."""
    s, e = merge(starts, ends)
    return int((e - s).sum())


def subtract(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """The union of ``a`` less the union of ``b``: sorted, disjoint [start, end) intervals."""
    a, b = merge(*a), merge(*b)
    points = np.unique(np.concatenate([*a, *b]))
    if len(points) < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lo, hi = points[:-1], points[1:]

    def inside(s, e):  # each elementary piece [lo, hi) lies inside the set
        return np.searchsorted(s, lo, "right") > np.searchsorted(e, lo, "right")

    keep = inside(*a) & ~inside(*b)
    return merge(lo[keep], hi[keep])


def length_before(starts: np.ndarray, ends: np.ndarray, at: np.ndarray) -> np.ndarray:
    """For each point of ``at``, the length (ns) of the sorted, disjoint intervals before it."""
    done = np.concatenate([[0], np.cumsum(ends - starts)])
    begun = np.searchsorted(starts, at, "right")  # intervals that start at or before the point
    last = np.maximum(begun - 1, 0)
    beyond = np.where(begun > 0, np.maximum(ends[last] - at, 0), 0) if len(ends) else 0
    return done[begun] - beyond


def coverage_by_combination(interval_sets: list[tuple[np.ndarray, np.ndarray]]) -> dict[int, int]:
    """Time covered by each combination of the given interval sets.

    Set ``i`` is bit ``1 << i``; the result maps a non-zero bitmask to the ns
    during which exactly those sets are active.
    """
    times, deltas = [], []
    for i, (starts, ends) in enumerate(interval_sets):
        s, e = merge(starts, ends)
        times += [s, e]
        deltas += [np.full(len(s), 1 << i, np.int64), np.full(len(e), -(1 << i), np.int64)]
    if not times or sum(len(t) for t in times) == 0:
        return {}
    t = np.concatenate(times)
    d = np.concatenate(deltas)
    order = np.argsort(t, kind="stable")
    t, state = t[order], np.cumsum(d[order])
    seg = np.diff(t)
    state = state[:-1]
    active = state > 0
    sums = np.bincount(state[active], weights=seg[active])
    return {int(k): int(v) for k, v in enumerate(sums) if k and v}


def overlap(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    """Length of the intersection of the unions of two interval sets (ns)."""
    return coverage_by_combination([a, b]).get(3, 0)


def running_max_by_group(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Running max of ``values`` restarting where ``first`` is True (rows sorted by group)."""
    if len(values) == 0:
        return values.copy()
    group = np.cumsum(first) - 1
    low = values.min()
    band = int(values.max() - low) + 1
    if (int(group[-1]) + 1) * band >= 2**62:  # bands past int64 (times decades apart): pandas
        import pandas as pd

        return pd.Series(values).groupby(group).cummax().to_numpy()
    shifted = (values - low) + group * band  # each group lives in its own band: no mixing
    return np.maximum.accumulate(shifted) - group * band + low


def sorted_by_group(group: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row order by (group, ts) and the mask of each group's first row in that order."""
    order = np.lexsort((ts, group))
    first = np.ones(len(order), bool)
    first[1:] = group[order][1:] != group[order][:-1]
    return order, first


def overlapping_by_group(group: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per event (in the given order): it starts before an earlier event of its group ended."""
    order, first = sorted_by_group(group, ts)
    reach = running_max_by_group(end[order], first)
    out = np.zeros(len(order), bool)
    if len(order) > 1:
        out[order[1:]] = ~first[1:] & (ts[order][1:] < reach[:-1])
    return out


def union_length_by_group(
    group: np.ndarray, ts: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Length of the union of each group's intervals: ``(groups, lengths)``, groups sorted."""
    if len(group) == 0:
        return group[:0], np.zeros(0, np.int64)
    order, first = sorted_by_group(group, ts)
    g, s, e = group[order], ts[order], end[order]
    reach = running_max_by_group(e, first)
    prev_reach = np.empty_like(reach)
    prev_reach[1:] = reach[:-1]
    # each event adds what it covers beyond what its group already covered
    added = np.where(first, e - s, np.maximum(reach - np.maximum(prev_reach, s), 0))
    starts = np.flatnonzero(first)
    return g[starts], np.add.reduceat(added, starts)
