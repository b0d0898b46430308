"""Augmented trace files: the original events plus hta_lite's results, for Perfetto / chrome://tracing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Flag, auto
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from ..analyses import counters
from ..analyses.common import select
from ..load.rank_trace import RankTrace
from .writer import counter_event, output_path, us_text, write_trace

_event_fields = msgspec.json.Decoder(dict[str, msgspec.Raw])


def counter_events(queue: pd.DataFrame | None, bandwidth: pd.DataFrame | None) -> list[bytes]:
    """``Queue Length (stream S)`` per stream and ``Memory Bandwidth (KIND)`` per memcpy kind."""
    events = []
    if queue is not None:
        for ts, pid, stream, value in zip(
            queue["ts"].tolist(),
            queue["pid"].tolist(),
            queue["stream"].tolist(),
            queue["queue_length"].tolist(),
        ):
            events.append(
                counter_event(
                    f"Queue Length (stream {stream})", pid, stream, ts, "queue_length", int(value)
                )
            )
    if bandwidth is not None:
        for ts, pid, name, value in zip(
            bandwidth["ts"].tolist(),
            bandwidth["pid"].tolist(),
            bandwidth["name"].tolist(),
            bandwidth["memory_bw_gbps"].tolist(),
        ):
            events.append(
                counter_event(
                    f"Memory Bandwidth ({name})",
                    pid,
                    0,
                    ts,
                    "memory_bw_gbps",
                    round(max(value, 0.0), 6),
                )
            )
    return events


class TimeSeriesTypes(Flag):
    """Which counters :func:`generate_trace_with_counters` adds (the reference's flag)."""

    QUEUE_LENGTH = auto()
    MEMCPY_BANDWIDTH = auto()


ALL_SERIES = TimeSeriesTypes.QUEUE_LENGTH | TimeSeriesTypes.MEMCPY_BANDWIDTH


def generate_trace_with_counters(
    traces: Mapping[int, RankTrace],
    time_series: TimeSeriesTypes | None = None,
    ranks: Iterable[int] | None = None,
    output_suffix: str = "_with_counters",
    output_dir: str | Path | None = None,
) -> dict[int, Path | list[Path]]:
    """Write, per rank, its trace plus counter events; returns ``{rank: written path}`` (a list
    of paths for a rank profiled in several windows: each window's file with its counters).

    ``time_series``: ``TimeSeriesTypes.QUEUE_LENGTH`` (one ``Queue Length (stream S)`` series
    per stream), ``TimeSeriesTypes.MEMCPY_BANDWIDTH`` (one ``Memory Bandwidth (KIND)`` per copy
    kind), or both (``|``, the default). The default ``output_dir`` is a sibling of the first
    trace's folder named ``<folder><output_suffix>`` (writing into the trace folder would add a
    second file per rank).
    """
    selected = select(traces, ranks)
    wanted = time_series if time_series is not None else ALL_SERIES
    rank_list = [t.rank for t in selected]
    queue = (
        counters.queue_length_time_series(traces, rank_list)
        if TimeSeriesTypes.QUEUE_LENGTH in wanted
        else {}
    )
    bandwidth = (
        counters.memory_bw_time_series(traces, rank_list)
        if TimeSeriesTypes.MEMCPY_BANDWIDTH in wanted
        else {}
    )
    if output_dir is None:
        folder = Path(selected[0].path).parent
        output_dir = folder.parent / (folder.name + output_suffix)
    written: dict[int, Path | list[Path]] = {}
    for trace in selected:
        windows = trace.metadata.get("windows") or [{"path": trace.path, "start_ns": 0}]
        parts = [
            _in_window(table, windows)
            for table in (queue.get(trace.rank), bandwidth.get(trace.rank))
        ]
        paths = []
        for k, window in enumerate(windows):  # a rank profiled in several windows: each file
            dst = output_path(Path(window["path"]), Path(output_dir), output_suffix)
            events = counter_events(*(None if p is None else p[k] for p in parts))
            paths.append(write_trace(window["path"], dst, events))
        written[trace.rank] = paths[0] if len(paths) == 1 else paths
    return written


def _in_window(table: pd.DataFrame | None, windows: list[dict]) -> list | None:
    """``table``'s rows split by window: a row goes to the last window starting at or before
    it (the first window for earlier rows)."""
    if table is None:
        return None
    starts = [int(w["start_ns"]) for w in windows]
    which = np.maximum(np.searchsorted(starts, table["ts"].to_numpy(), side="right") - 1, 0)
    return [table[which == k] for k in range(len(windows))]


def overlay_patterns(
    trace: RankTrace,
    patterns: pd.DataFrame,
    top_k: int,
    output_dir: str | Path,
    compress_other_kernels: bool = True,
) -> Path:
    """The trace plus one GPU range per occurrence of each of the ``top_k`` patterns.

    Ranges are ``gpu_user_annotation`` events named ``Pattern N (count C): ...`` on the stream
    of the pattern's first kernel. With ``compress_other_kernels``, kernels outside every
    shown pattern lose their args and are renamed ``other kernel`` (smaller file)."""
    gpu = trace.gpu
    extra, in_patterns = [], set()
    for i, row in enumerate(patterns.head(top_k).itertuples(index=False)):
        rows = list(row.pattern_indices)
        in_patterns.update(gpu["correlation"].to_numpy()[rows].tolist())
        label = f"Pattern {i} (count {row.count}): {row.pattern[:200]}"
        # one range per occurrence: consecutive rows of one root are contiguous in pattern_indices
        occurrence = gpu.iloc[rows].sort_values("ts")
        n = len(row.pattern.split("|")) - 1
        for start in range(0, len(occurrence), max(n, 1)):
            part = occurrence.iloc[start : start + n]
            begin, end = int(part["ts"].min()), int((part["ts"] + part["dur"]).max())
            head = msgspec.json.encode(
                {
                    "ph": "X",
                    "cat": "gpu_user_annotation",
                    "name": label,
                    "pid": int(part["pid"].iloc[0]),
                    "tid": int(part["tid"].iloc[0]),
                }
            )
            extra.append(
                head[:-1] + b',"ts":' + us_text(begin) + b',"dur":' + us_text(end - begin) + b"}"
            )

    def compress(raw: msgspec.Raw) -> bytes:
        fields = _event_fields.decode(raw)
        if "cat" not in fields or msgspec.json.decode(fields["cat"]) != "kernel":
            return bytes(raw)
        args = msgspec.json.decode(fields["args"]) if "args" in fields else {}
        if isinstance(args, dict) and args.get("correlation") in in_patterns:
            return bytes(raw)
        fields["name"], fields["args"] = msgspec.Raw(b'"other kernel"'), msgspec.Raw(b"{}")
        return msgspec.json.encode(fields)  # other values stay raw: timestamps keep every digit

    dst = Path(output_dir) / ("overlaid_" + Path(trace.path).name)
    return write_trace(trace.path, dst, extra, compress if compress_other_kernels else None)
