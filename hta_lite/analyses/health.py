"""Trace health: what the loader read, skipped, clamped or excluded, per rank.

``health_table`` is the long form (one row per rank and item); ``health_summary``
has one row per rank with the facts a user checks first. docs/health.md explains
every item.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..load.rank_trace import RankTrace

# items that describe the trace rather than a problem in it
INFO_PREFIXES = (
    "events read",
    "GPU events kept",
    "CPU events kept",
    "ProfilerSteps",
    "rank taken",
    "rank assigned",
    "text pid",
    "text tid",
)


def health_table(
    traces: Mapping[int, RankTrace], skipped_files: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Long table ``rank, file, item, count``: events read by phase and category, then every
    counted problem. Files that could not be loaded appear with rank -1 and the error as
    ``item``."""
    rows = []
    for rank, trace in sorted(traces.items()):
        for key, count in sorted(trace.events_read.items()):
            phase, _, category = key.partition("/")
            item = f"events read, phase {phase!r}" + (
                f", category {category!r}" if category else ""
            )
            rows.append((rank, trace.path, item, count))
        rows.append((rank, trace.path, "GPU events kept", len(trace.gpu)))
        rows.append((rank, trace.path, "CPU events kept", len(trace.cpu)))
        rows.append((rank, trace.path, "ProfilerSteps", len(trace.steps)))
        if trace.is_cpu_only:
            rows.append((rank, trace.path, "no GPU events (CPU-only trace)", 1))
        if trace.steps.empty:
            rows.append((rank, trace.path, "no ProfilerStep in the trace (iterations unknown)", 1))
        if "distributedInfo" not in trace.metadata:
            rows.append((rank, trace.path, "no distributedInfo in the trace", 1))
        for item, count in sorted(trace.health.items()):
            rows.append((rank, trace.path, item, count))
    for path, reason in (skipped_files or {}).items():
        rows.append((-1, path, f"file skipped: {reason}", 1))
    return pd.DataFrame(rows, columns=["rank", "file", "item", "count"])


def is_problem(item: str) -> bool:
    """Health items about data quality (not the by-design exclusion of the last step)."""
    return not item.startswith(INFO_PREFIXES) and "(excluded)" not in item


def device_type(trace: RankTrace) -> str:
    """CUDA, ROCm, MTIA or CPU, from the trace's metadata and categories."""
    meta = trace.metadata
    if (trace.gpu["cat"] == "mtia_ccp_events").any() or (trace.cpu["cat"] == "mtia_runtime").any():
        return "MTIA"
    if "roctracer_version" in meta or "hip_runtime_version" in meta:
        return "ROCm"
    if trace.is_cpu_only:
        return "CPU"
    return "CUDA"


def first_event_ns(trace: RankTrace) -> int | None:
    starts = [t["ts"].min() for t in (trace.cpu, trace.gpu) if len(t)]
    return int(min(starts)) if starts else None


def health_summary(traces: Mapping[int, RankTrace]) -> pd.DataFrame:
    """One row per rank: device, GPU name, schema version, time unit, distributedInfo,
    ProfilerSteps, kept events, ``clock_offset_us`` (first event relative to the earliest rank's
    first event; large values mean unsynchronized clocks or late starts),
    ``excluded_outside_steps`` (events left out with the last ProfilerStep) and ``problems``
    (events skipped, clamped or not linked, all reasons together)."""
    firsts = {r: first_event_ns(t) for r, t in traces.items()}
    known = [v for v in firsts.values() if v is not None]
    origin = min(known) if known else 0
    rows = []
    for rank, trace in sorted(traces.items()):
        props = trace.metadata.get("deviceProperties") or []
        gpu_name = (
            props[0].get("name")
            if isinstance(props, list) and props and isinstance(props[0], dict)
            else None
        )
        rows.append(
            {
                "rank": rank,
                "file": trace.path,
                "device_type": device_type(trace),
                "gpu_name": gpu_name,
                "schema_version": trace.metadata.get("schemaVersion"),
                "display_time_unit": trace.metadata.get("displayTimeUnit"),
                "has_distributed_info": "distributedInfo" in trace.metadata,
                "profiler_steps": len(trace.steps),
                "gpu_events": len(trace.gpu),
                "cpu_events": len(trace.cpu),
                "clock_offset_us": np.nan
                if firsts[rank] is None
                else (firsts[rank] - origin) / 1000.0,
                "excluded_outside_steps": sum(
                    n for item, n in trace.health.items() if "(excluded)" in item
                ),
                "problems": sum(n for item, n in trace.health.items() if is_problem(item)),
            }
        )
    return pd.DataFrame(rows)
