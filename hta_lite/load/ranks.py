"""Which rank a trace file holds, and the range a rank must be in.

A file's rank is ``distributedInfo.rank``; when absent, a number in the file name (``rank-3``,
``rank_3``, ``rank3``, ``worker3``); otherwise the smallest unused rank, assigned in file-name
order. A rank is ``0 <= rank < RANK_LIMIT`` wherever it comes from: a rank sizes tables and is a
key everywhere, so one read from a hostile file is bounded where it is read, and a file claiming
another is refused with a :class:`~hta_lite.errors.TraceFormatError` naming it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RankNotFoundError, TraceFormatError

if TYPE_CHECKING:
    from .rank_trace import RankTrace

_RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)

#: ranks are ``0 <= rank < RANK_LIMIT``
RANK_LIMIT = 2**31


def rank_from_metadata(metadata: dict[str, Any], path: str | Path = "") -> int | None:
    """``distributedInfo.rank`` (an integer or a string of ASCII digits), None when absent or
    negative; a rank of ``RANK_LIMIT`` or more is a :class:`TraceFormatError` naming ``path``."""
    info = metadata.get("distributedInfo")
    if not isinstance(info, dict):
        return None
    rank = info.get("rank")
    if isinstance(rank, str) and rank.isascii() and rank.isdigit() and len(rank) <= 20:
        rank = int(rank)
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
        return None
    return checked_rank(rank, path, "distributedInfo.rank")


def checked_rank(rank: int, path: str | Path, source: str) -> int:
    """``rank`` if ``0 <= rank < RANK_LIMIT``, else a :class:`TraceFormatError` naming the file."""
    if not 0 <= rank < RANK_LIMIT:
        shown = (
            str(rank) if len(str(rank)) <= 30 else f"{str(rank)[:20]}... ({len(str(rank))} digits)"
        )
        raise TraceFormatError(
            path, f"{source} is {shown}: a rank is an integer from 0 to {RANK_LIMIT - 1}"
        )
    return rank


def rank_from_filename(path: str | Path) -> int | None:
    """The rank in the file name (``rank-3``, ``rank_3``, ``rank3``, ``worker3``), None when it
    names none; a number past the rank range is a :class:`TraceFormatError` naming the file."""
    match = _RANK_IN_NAME.search(Path(path).name)
    if not match:
        return None
    digits = match.group(1).lstrip("0") or "0"
    if len(digits) > 10:  # past the range, whatever the digits: no int of 10,000 digits made
        raise TraceFormatError(
            path,
            f"the rank in the file name has {len(digits)} digits: a rank is an integer"
            f" from 0 to {RANK_LIMIT - 1}",
        )
    return checked_rank(int(digits), path, "the rank in the file name")


def assign_ranks(
    loaded: list[RankTrace],
    warn: Callable[[str], None],
    join: Callable[[list[RankTrace]], RankTrace] | None = None,
) -> dict[int, RankTrace]:
    """``{rank: trace}`` in rank order: ``distributedInfo.rank``, else the rank in the file name,
    else the smallest unused rank in file-name order (with a warning when there are several
    files). Several files of one rank are its profiled windows, joined by ``join``
    (:func:`~hta_lite.load.series.join_windows`: one series in time order; files that overlap in
    time raise :class:`DuplicateRankError` naming both)."""
    if join is None:
        from .series import join_windows as join
    by_rank: dict[int, list[RankTrace]] = {}
    unranked = []
    for trace in loaded:
        if trace.rank < 0:
            unranked.append(trace)
            continue
        by_rank.setdefault(trace.rank, []).append(trace)
    next_rank = 0
    for trace in unranked:
        while next_rank in by_rank:
            next_rank += 1
        trace.rank = next_rank
        trace.health["rank_assigned"] = 1
        if len(loaded) > 1:
            warn(
                f"{trace.path}: no distributedInfo.rank and no rank in the file name;"
                f" assigned rank {next_rank}"
            )
        by_rank[next_rank] = [trace]
    return {rank: join(parts) for rank, parts in sorted(by_rank.items())}


def select_ranks(by_rank: dict[int, Any], ranks, where: str | Path | None) -> dict[int, Any]:
    """``by_rank`` restricted to ``ranks`` (None: all), in rank order.

    Raises:
        RankNotFoundError: none asked for, or a rank asked for is not in ``by_rank`` (the
            message lists both), never an empty or partial selection.
    """
    if ranks is None:
        return by_rank
    wanted = sorted({int(r) for r in ranks})
    missing = [r for r in wanted if r not in by_rank]
    if not wanted:
        raise RankNotFoundError(where, f"no rank asked for; ranks: {sorted(by_rank)}")
    if missing:
        raise RankNotFoundError(
            where, f"rank(s) {missing} not in the folder; ranks: {sorted(by_rank)}"
        )
    return {r: by_rank[r] for r in wanted}
