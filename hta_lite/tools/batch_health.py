"""The batch's step numbers and health counts, as ``TraceAnalysis`` gives them.

Each rank's health summary is made where the rank is loaded, with what the checks of its own
data found (:func:`checks_found`); the driver then numbers found steps alike across ranks
(:func:`number_steps_alike`) and counts in ``problems`` what a rank's health says only next to
the other ranks' (:func:`count_across`) and what matching the collectives found
(:func:`count_matching`).
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from ..analyses.collectives import checks
from ..analyses.health import (
    COLUMNS,
    across_ranks,
    problem_count,
    rank_facts,
    rank_rows,
    skipped_rows,
    step_source,
)
from ..load import step_alignment


def checks_found(calls: pd.DataFrame, operators, memory: Counter) -> Counter:
    """What the checks ``health()`` runs found in one rank's data: its collective calls'
    recorded values (``calls.attrs["problems"]``), its ``operators``' (shapes, graph replays:
    a :class:`~hta_lite.analyses.operators.RankOperators`) and its memory totals (``memory``:
    :func:`~hta_lite.analyses.memory.per_rank.rank_memory`'s)."""
    found = Counter(calls.attrs.get("problems", {}))
    found.update(operators.problems)
    found.update(memory)
    return found


def number_steps_alike(ranked: dict, by_path: dict) -> dict[int, tuple[int, dict[str, int]]]:
    """The found steps of every rank numbered alike, as the loader does
    (:mod:`~hta_lite.load.step_alignment`): the ``step`` columns of a renumbered rank's tables
    in ``by_path`` moved, its stub's health replaced (a warning counted in its health summary's
    ``problems``); returns the moves, for the ranks reopened by the findings."""
    tables = {rank: by_path[stub.path, stub.part] for rank, stub in ranked.items()}
    moves = step_alignment.renumbering(
        {rank: stub.health for rank, stub in ranked.items()},
        lambda rank: tables[rank]["steps"],
        _sends(tables),
    )
    for rank, (by, health) in moves.items():
        stub = ranked[rank]
        moved = {name: step_alignment.moved(t, "step", by) for name, t in tables[rank].items()}
        warned = problem_count((key, n) for key, n in health.items() if key not in stub.health)
        moved["health_summary"] = _more_problems(moved["health_summary"], warned)
        by_path[stub.path, stub.part], stub.health = moved, health
    return moves


def count_across(ranked: dict, by_path: dict) -> dict[int, list[str]]:
    """Count in each rank's health summary (in ``by_path``) what its health says only next to
    the other ranks' (:func:`~hta_lite.analyses.health.across_ranks`), and return it."""
    tables = {rank: by_path[stub.path, stub.part] for rank, stub in ranked.items()}
    across = across_ranks(
        {rank: step_source(ranked[rank].health, len(t["steps"])) for rank, t in tables.items()},
        lambda rank: tables[rank]["steps"],
        _sends(tables),
    )
    for rank, keys in across.items():
        summary = tables[rank]["health_summary"]
        tables[rank]["health_summary"] = _more_problems(
            summary, problem_count((key, 1) for key in keys)
        )
    return across


def clock_offsets(summary: pd.DataFrame, facts: pd.DataFrame) -> pd.DataFrame:
    """The health summary of all ranks with ``clock_offset_us`` measured from the earliest
    rank's first event (``facts``: the ranks' ``rank_facts``), as over all ranks at once (each
    worker saw only its own rank)."""
    firsts = facts.set_index("rank")["first_event_ns"].astype("Int64")
    origin = firsts.min() if firsts.notna().any() else 0
    offsets = ((firsts - origin) / 1000.0).astype("float64")
    return summary.assign(clock_offset_us=summary["rank"].map(offsets).to_numpy())


def count_matching(summary: pd.DataFrame, problems: pd.DataFrame) -> pd.DataFrame:
    """The health summary of all ranks with what matching the collectives found of each rank's
    data (``problems``: the matching's problems table) counted in ``problems``."""
    found = checks.found(problems)
    extra = summary["rank"].map(lambda rank: problem_count(found.get(rank, {}).items()))
    return _more_problems(summary, extra.to_numpy())


def _sends(tables: dict):
    """Whether a rank sends point to point, from its worker's ``point_to_point`` table."""
    return lambda rank: bool(tables[rank]["point_to_point"]["sends"].iat[0])


def _more_problems(summary: pd.DataFrame, count) -> pd.DataFrame:
    return summary.assign(problems=summary["problems"] + count)


def health_items(trace, found: Counter) -> pd.DataFrame:
    """``part, key, count``: what one rank's health table is made of where it is loaded — its
    facts (:func:`~hta_lite.analyses.health.rank_facts`, ``part`` ``fact``) and what the checks
    of its data found (``found``)."""
    facts = rank_facts(trace)
    return pd.DataFrame({
        "part": ["fact"] * len(facts) + ["found"] * len(found),
        "key": [k for k, _ in facts] + list(found),
        "count": [n for _, n in facts] + list(found.values()),
    })  # fmt: skip


def health_table(
    ranked: dict, by_path: dict, across: dict, problems: pd.DataFrame, skipped
) -> pd.DataFrame:
    """``TraceAnalysis.health()`` of the batch: each rank's :func:`health_items`, its health
    (renumbered steps included), what it says next to the other ranks (``across``:
    :func:`count_across`'s) and what matching the collectives found (``problems``: the
    matching's problems table), then the ``skipped`` files (``{path: problem}``)."""
    matched = checks.found(problems)
    rows = []
    for rank, stub in sorted(ranked.items()):
        items = by_path[stub.path, stub.part]["health_items"]
        facts, found = items[items["part"] == "fact"], items[items["part"] == "found"]
        found = Counter(dict(zip(found["key"], found["count"])))
        found.update(matched.get(rank, {}))
        counted = {**stub.health, **found}
        rows += rank_rows(
            rank, stub.path, across[rank], list(zip(facts["key"], facts["count"])), counted
        )
    return pd.DataFrame(rows + skipped_rows(skipped), columns=COLUMNS)
