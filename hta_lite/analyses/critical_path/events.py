"""One numbering of a rank's events for the critical path, and the launch / record lookups.

Events: ``cpu`` rows first (``0..C-1``), then ``gpu`` rows (``C..C+G-1``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...classify import COMMUNICATION
from ...errors import SelectionError
from ...kineto import EVENT_RECORD_NAMES, LAUNCH_NAMES, STREAM_WAIT_NAMES
from ...load.rank_trace import RankTrace


class Text:
    """A text column of every event as codes into its distinct values: tests run once per
    distinct value (``isin``, ``where``), rows are looked up on demand (``text[rows]``)."""

    def __init__(self, cpu: pd.Series, gpu: pd.Series):
        first, second = cpu.astype("category"), gpu.astype("category")
        head = [str(v) for v in first.cat.categories]
        tail = [str(v) for v in second.cat.categories]
        self.values = np.array(head + tail + [""], dtype=object)  # code -1: ""
        missing = len(self.values) - 1
        a, b = first.cat.codes.to_numpy(np.int64), second.cat.codes.to_numpy(np.int64)
        self.codes = np.concatenate([np.where(a < 0, missing, a),
                                     np.where(b < 0, missing, b + len(head))])  # fmt: skip

    def __getitem__(self, rows):
        return self.values[self.codes[rows]]

    def isin(self, wanted) -> np.ndarray:
        return np.isin(self.values, list(wanted))[self.codes]

    def where(self, predicate) -> np.ndarray:
        return np.fromiter((bool(predicate(v)) for v in self.values), bool)[self.codes]


@dataclass
class Events:
    """Every event of the rank in one numbering (cpu rows, then gpu rows): start / end ns, name,
    category (:class:`Text`), thread, stream (-1 on the CPU), the cpu row of a GPU event's
    launch call."""

    ts: np.ndarray
    end: np.ndarray
    name: Text
    cat: Text
    pid: np.ndarray
    tid: np.ndarray
    stream: np.ndarray
    launch: np.ndarray
    n_cpu: int

    @classmethod
    def of(cls, trace: RankTrace) -> Events:
        cpu, gpu = trace.cpu, trace.gpu

        def both(column, gpu_values=None):
            g = gpu[column].to_numpy() if gpu_values is None else gpu_values
            return np.concatenate([cpu[column].to_numpy(), g])

        ts = both("ts")
        return cls(
            ts=ts,
            end=ts + both("dur"),
            name=Text(cpu["name"], gpu["name"]),
            cat=Text(cpu["cat"], gpu["cat"]),
            pid=both("pid"),
            tid=both("tid"),
            stream=np.concatenate([np.full(len(cpu), -1), gpu["stream"].to_numpy()]),
            launch=np.concatenate([np.full(len(cpu), -1), gpu["launch_row"].to_numpy()]),
            n_cpu=len(cpu),
        )


class Records:
    """Launch calls and event records of the whole trace: which kernel a recorded event stands
    for, and which kernel a stream wait holds back."""

    def __init__(self, trace: RankTrace, ev: Events):
        gpu = trace.gpu
        launch = gpu["launch_row"].to_numpy()
        linked = np.flatnonzero(launch >= 0)
        calls, first = np.unique(launch[linked], return_index=True)  # each call's first event
        is_launch = ev.name.isin(LAUNCH_NAMES)[: ev.n_cpu]
        keep = is_launch[calls]
        rows = calls[keep].astype(np.int64)
        self.kernel = (linked[first[keep]] + ev.n_cpu).astype(np.int64)
        self.ts = ev.ts[rows] if len(rows) else np.zeros(0, np.int64)
        self.thread = (ev.pid[rows], ev.tid[rows]) if len(rows) else (rows, rows)
        self.stream = ev.stream[self.kernel] if len(rows) else rows
        self.device = ev.pid[self.kernel] if len(rows) else rows
        order = np.argsort(self.ts, kind="stable")
        self.kernel, self.ts = self.kernel[order], self.ts[order]
        self.thread = (self.thread[0][order], self.thread[1][order])
        self.stream, self.device = self.stream[order], self.device[order]
        corr = trace.cpu["correlation"].to_numpy()
        is_record = ev.name.isin(EVENT_RECORD_NAMES)[: ev.n_cpu]
        record_ts = ev.ts[: ev.n_cpu][is_record]
        self.record_ts = {int(c): int(t) for c, t in zip(corr[is_record], record_ts)}
        self.wait_stream = gpu["wait_on_stream"].to_numpy()
        self.wait_record = gpu["wait_on_record"].to_numpy()
        self.ev = ev
        self.is_wait_call = ev.name.isin(STREAM_WAIT_NAMES)

    def recorded_kernel(self, e: int) -> int:
        """The kernel a ``Stream Wait Event`` / ``Event Sync`` waits for: the last one launched on
        the recorded stream before the ``cudaEventRecord`` (-1 when unknown)."""
        g = e - self.ev.n_cpu
        record = int(self.wait_record[g])
        if record < 0 or record not in self.record_ts:
            return -1
        chosen = (
            (self.stream == self.wait_stream[g])
            & (self.device == self.ev.pid[e])
            & (self.ts <= self.record_ts[record])
        )
        hits = np.flatnonzero(chosen)
        return int(self.kernel[hits[-1]]) if len(hits) else -1

    def next_kernel(self, wait_call: int, stream: int) -> int:
        """The first kernel launched on ``stream`` by the thread of a ``cudaStreamWaitEvent``
        call at or after it (-1 when none)."""
        if wait_call < 0 or not self.is_wait_call[wait_call]:
            return -1
        ev = self.ev
        chosen = (
            (self.thread[0] == ev.pid[wait_call])
            & (self.thread[1] == ev.tid[wait_call])
            & (self.stream == stream)
            & (self.ts >= ev.ts[wait_call])
        )
        hits = np.flatnonzero(chosen)
        return int(self.kernel[hits[0]]) if len(hits) else -1


def data_load_pattern(data_load_events: list[str] | None) -> re.Pattern | None:
    """One regex of the user's data-loading event names (None: none given)."""
    if not data_load_events:
        return None
    try:
        return re.compile("|".join(f"(?:{p})" for p in data_load_events))
    except re.error as exc:
        raise SelectionError(
            None, f"data_load_events: not a regular expression ({exc}): {data_load_events}"
        ) from None


def is_communication(trace: RankTrace, events: Events, event: np.ndarray) -> np.ndarray:
    """Per event: a communication kernel."""
    gpu = event - events.n_cpu
    types = trace.gpu["kernel_type"].to_numpy()
    ok = (gpu >= 0) & (gpu < len(types))
    out = np.zeros(len(event), bool)
    out[ok] = types[gpu[ok]] == COMMUNICATION
    return out
