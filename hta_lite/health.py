"""Trace health: what the loader read, skipped, clamped or excluded, per rank."""
from __future__ import annotations

from typing import Mapping

import pandas as pd

from .rank_trace import RankTrace


def health_table(traces: Mapping[int, RankTrace], skipped_files: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Long table ``rank, file, item, count``: events read by phase, then every counted problem.

    Files that could not be loaded appear with rank -1 and the error as ``item``.
    """
    rows = []
    for rank, trace in sorted(traces.items()):
        for phase, count in sorted(trace.events_by_phase.items()):
            rows.append((rank, trace.path, f"events read, phase {phase!r}", count))
        rows.append((rank, trace.path, "GPU events kept", len(trace.gpu)))
        rows.append((rank, trace.path, "CPU events kept", len(trace.cpu)))
        rows.append((rank, trace.path, "ProfilerSteps", len(trace.steps)))
        if trace.is_cpu_only:
            rows.append((rank, trace.path, "no GPU events (CPU-only trace)", 1))
        for item, count in sorted(trace.health.items()):
            rows.append((rank, trace.path, item, count))
    for path, reason in (skipped_files or {}).items():
        rows.append((-1, path, f"file skipped: {reason}", 1))
    return pd.DataFrame(rows, columns=["rank", "file", "item", "count"])
