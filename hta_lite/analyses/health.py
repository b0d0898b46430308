"""Trace health: what the loader read, skipped, clamped or excluded, per rank.

``health_table`` is the long form (one row per rank and item); ``health_summary``
has one row per rank with the facts a user checks first. docs/health.md explains
every item.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from ..load import step_alignment
from ..load.health_items import EXCLUDED, PROBLEMS, describe
from ..load.rank_trace import RankTrace

#: what :func:`step_source` says of ranks whose steps are the program's
PROFILER_STEPS = "its ProfilerSteps"

COLUMNS = ["rank", "file", "code", "severity", "item", "count"]


def health_table(
    traces: Mapping[int, RankTrace],
    skipped_files: Mapping[str, str] | None = None,
    found: Mapping[int, Mapping[str, int]] | None = None,
) -> pd.DataFrame:
    """Long table ``rank, file, code, severity, item, count``: per rank the events read by phase
    and category and what was kept (severity ``info``), then every item loading counted and
    every item the checks of its data ``found`` (``{rank: {code: count}}``)
    (:mod:`hta_lite.load.health_items`: ``info``, ``excluded``, ``warning``); files that could
    not be loaded with rank -1 and severity ``error``."""
    found = found or {}
    rows = []
    across = _across(traces)
    for rank, trace in sorted(traces.items()):
        counted = {**trace.health, **found.get(rank, {})}
        rows += rank_rows(rank, trace.path, across[rank], rank_facts(trace), counted)
    return pd.DataFrame(rows + skipped_rows(skipped_files), columns=COLUMNS)


def rank_facts(trace: RankTrace) -> list[tuple[str, int]]:
    """``[(health key, count)]`` of what one rank's tables say of it: the events read by phase
    and category, what was kept, and :func:`_own_facts`."""
    facts = []
    for key, count in sorted(trace.events_read.items()):
        phase, _, cat = key.partition("/")
        detail = f"phase {phase!r}" + (f", category {cat!r}" if cat else "")
        facts.append((f"events_read:{detail}", count))
    return [
        *facts,
        ("gpu_events_kept", len(trace.gpu)),
        ("cpu_events_kept", len(trace.cpu)),
        ("profiler_steps", len(trace.steps)),
        *_own_facts(trace),
    ]


def rank_rows(rank: int, path: str, across: list[str], facts: list, counted: Mapping) -> list:
    """One rank's rows of :func:`health_table`: what it says next to the other ranks
    (``across``: :func:`across_ranks`), its ``facts`` (:func:`rank_facts`) and every item
    counted (``{key: count}``: loading's and the checks'), by key."""
    keyed = [*((key, 1) for key in across), *facts, *sorted(counted.items())]
    return [(rank, path, *describe(key), count) for key, count in keyed]


def skipped_rows(skipped_files: Mapping[str, str] | None) -> list:
    """The rows (rank -1, severity ``error``) of files that could not be loaded."""
    return [(-1, path, *describe(f"file_skipped:{problem}"), 1)
            for path, problem in (skipped_files or {}).items()]  # fmt: skip


def _own_facts(trace: RankTrace) -> list[tuple[str, int]]:
    """What a rank's tables say of it alone: CPU only, no ProfilerStep, no distributedInfo."""
    return [(code, 1) for code, missing in (
        ("cpu_only", trace.is_cpu_only),
        ("no_profiler_step", trace.steps.empty),
        ("no_distributed_info", not trace.meta.has_distributed_info),
    ) if missing]  # fmt: skip


def _across(traces: Mapping[int, RankTrace]) -> dict[int, list[str]]:
    """:func:`across_ranks` of loaded traces."""
    return across_ranks(
        {rank: step_source(trace.health, len(trace.steps)) for rank, trace in traces.items()},
        lambda rank: traces[rank].steps,
        lambda rank: step_alignment.point_to_point(traces[rank].cpu),
    )


def across_ranks(
    sources: Mapping[int, str],
    steps: Callable[[int], pd.DataFrame],
    sends: Callable[[int], bool],
) -> dict[int, list[str]]:
    """``{rank: [health key, ...]}``: what a rank's health says only next to the other ranks',
    from each rank's :func:`step_source`, ``steps(rank)`` (its steps table) and ``sends(rank)``
    (whether it sends point to point): ``steps_unlike_other_ranks:<source>`` where the ranks'
    steps come from different sources, ``profiler_steps_apart:<...>`` where ProfilerSteps are
    numbered apart (:func:`~hta_lite.load.step_alignment.program_numbers_apart`)."""
    unlike = len(set(sources.values())) > 1
    profiler_steps = len(sources) > 1 and set(sources.values()) == {PROFILER_STEPS}
    apart = {} if not profiler_steps else step_alignment.program_numbers_apart(
        {rank: steps(rank) for rank in sources}, sends
    )  # fmt: skip
    return {
        rank: [f"steps_unlike_other_ranks:{source}"] * unlike
        + ([f"profiler_steps_apart:{apart[rank]}"] if rank in apart else [])
        for rank, source in sources.items()
    }


def step_source(health: Mapping[str, int], steps: int) -> str:
    """What a rank's steps are, from its ``health`` counters and its number of ``steps``: its
    ProfilerSteps, the ranges named by ``step_range``, a range or the repeating GPU work found
    in it, the whole capture, or none."""
    codes = {key.partition(":")[0]: key.partition(":")[2] for key in health}
    if "steps_named" in codes:
        return f"the ranges named {codes['steps_named']!r}"
    if "steps_from_range" in codes:
        return f"the repeating range {codes['steps_from_range']!r}"
    if "steps_from_kernels" in codes:
        return "the repetitions of its GPU work"
    if "steps_whole_capture" in codes:
        return "its whole capture"
    return PROFILER_STEPS if steps else "none (no ProfilerStep)"


def problems(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a health table about data quality: severity ``warning`` or ``error``."""
    return table[table["severity"].isin(PROBLEMS)]


def device_type(trace: RankTrace) -> str:
    """CUDA, ROCm, MTIA or CPU, from the trace's metadata and categories."""
    if (trace.gpu["cat"] == "mtia_ccp_events").any() or (trace.cpu["cat"] == "mtia_runtime").any():
        return "MTIA"
    if trace.meta.rocm:
        return "ROCm"
    if trace.is_cpu_only:
        return "CPU"
    return "CUDA"


def first_event_ns(trace: RankTrace) -> int | None:
    starts = [t["ts"].min() for t in (trace.cpu, trace.gpu) if len(t)]
    return int(min(starts)) if starts else None


def _more_windows(trace: RankTrace) -> str:
    """`` (+N more windows)`` for a rank joined from several files, else nothing."""
    n = trace.meta.windows
    return f" (+{n - 1} more windows)" if n > 1 else ""


def health_summary(
    traces: Mapping[int, RankTrace], found: Mapping[int, Mapping[str, int]] | None = None
) -> pd.DataFrame:
    """One row per rank: its file (the first, and how many more windows: several files of one
    rank are one series), ``windows``, device, GPU name, schema version, time unit, distributedInfo,
    ProfilerSteps, kept events, ``clock_offset_us`` (first event relative to the earliest rank's
    first event; large values mean unsynchronized clocks or late starts),
    ``excluded_outside_steps`` (events left out with the last ProfilerStep) and ``problems``
    (the counts of the rank's warnings in :func:`health_table`, all reasons together: events
    skipped, clamped or not linked, steps unknown or unlike the other ranks', and what the checks
    of the data ``found``)."""
    found = found or {}
    across = _across(traces)
    firsts = {r: first_event_ns(t) for r, t in traces.items()}
    known = [v for v in firsts.values() if v is not None]
    origin = min(known) if known else 0
    rows = []
    for rank, trace in sorted(traces.items()):
        gpu_name = _gpu_name(trace)
        rows.append(
            {
                "rank": rank,
                "file": trace.path + _more_windows(trace),
                "windows": trace.meta.windows or 1,
                "device_type": device_type(trace),
                "gpu_name": gpu_name,
                "schema_version": trace.meta.schema_version,
                "display_time_unit": trace.meta.display_time_unit,
                "has_distributed_info": trace.meta.has_distributed_info,
                "profiler_steps": len(trace.steps),
                "gpu_events": len(trace.gpu),
                "cpu_events": len(trace.cpu),
                "clock_offset_us": np.nan
                if firsts[rank] is None
                else (firsts[rank] - origin) / 1000.0,
                "excluded_outside_steps": sum(
                    n for key, n in trace.health.items() if describe(key)[1] == EXCLUDED
                ),
                "problems": problem_count(
                    [
                        *_own_facts(trace),
                        *((key, 1) for key in across[rank]),
                        *{**trace.health, **found.get(rank, {})}.items(),
                    ]
                ),  # fmt: skip
            }
        )
    return pd.DataFrame(rows)


def problem_count(items) -> int:
    """The counts of the ``(health key, count)`` items that are problems (warning or error)."""
    return sum(n for key, n in items if describe(key)[1] in PROBLEMS)


def _gpu_name(trace) -> str | None:
    """The GPU a rank ran on as the other views name it: its ``deviceProperties`` name, else the
    device its properties can only be (as roofline and MFU infer it, said so), else what its
    kernel names say; None without GPU work or properties."""
    from .operators.devices import architecture_hint, described, detect

    ids = trace.gpu["device"].value_counts().index.tolist() if len(trace.gpu) else []
    chosen = described(trace.meta, ids)
    if chosen is not None and chosen.name:
        return chosen.name
    spec = detect(trace.meta, ids)
    if spec is not None:
        return f"{spec.name} (inferred from its properties)"
    if len(trace.gpu):
        hint = architecture_hint(trace.gpu["name"].unique())
        return f"not named (its kernels: {hint})" if hint else "not named"
    return None
