"""What the finding kinds read: the job's replay, its segments' paths, the views they rest on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import MissingDataError
from ...intervals import sums_by_key
from ...kineto import PYTORCH_NAME_MARKS
from ...load.contract import REPEATS, WHOLE_CAPTURE
from ...load.rank_trace import RankTrace
from ...missing_data import need
from .. import one_time
from ..job_path import JobCriticalPath
from ..job_path.segments import CALL_KEY
from .graph_replay import Change, RankGraphs
from .replay import Cut, Replay

TARGET = ["rank", "step", "target_ts", "target_tid", "target_stream"]


@dataclass
class Context:
    """``replay``: the job under cuts (:mod:`.replay`); ``events``: the events on each
    segment's local path (the job path partials' ``events``), ``event_segment`` the segment row
    of each; ``gaps``: the time of those paths no edge weighs (the partials' ``gaps``; None:
    not known), ``gap_segment`` the segment row of each; ``job_path``; ``calls`` /
    ``instances`` (collectives matching); ``traces``; ``patterns``: the data-loading regexes;
    the views: ``stragglers`` (:class:`~..stragglers.StragglerReport` or None),
    ``anomalies`` (``get_step_anomalies`` or None), ``memory_peaks`` (or None),
    ``memory_leaks`` (:func:`~..memory.lifetimes.steady_leaks` or None), ``roofline``
    (``get_operator_roofline`` or None) and ``capacity(rank, device)`` (bytes, NaN unknown); a
    CUDA memory snapshot of the run, when given: ``snapshot_name`` (its file),
    ``snapshot_summary`` (``MemorySnapshot.summary()``) and ``snapshot_oom``
    (``MemorySnapshot.oom()``, empty without an ``oom`` entry)."""

    replay: Replay
    events: pd.DataFrame
    job_path: JobCriticalPath
    calls: pd.DataFrame
    instances: pd.DataFrame
    traces: dict[int, RankTrace]
    patterns: list[str]
    stragglers: object = None
    anomalies: pd.DataFrame | None = None
    memory_peaks: pd.DataFrame | None = None
    memory_leaks: pd.DataFrame | None = None
    roofline: pd.DataFrame | None = None
    capacity: Callable[[int, str], float] = lambda rank, device: np.nan
    snapshot_name: str = ""
    snapshot_summary: pd.DataFrame | None = None
    snapshot_oom: pd.DataFrame | None = None
    gaps: pd.DataFrame | None = None
    _pending: list = field(default_factory=list)
    _claims: dict = field(default_factory=dict)
    _after_call: np.ndarray | None = None  # per segment: the call it starts after, numbered
    _warmup: dict = field(default_factory=dict)  # warmup_delay() per rank, once

    def __post_init__(self):
        seg = self.replay.segments
        rows = pd.Series(np.arange(len(seg)), index=pd.MultiIndex.from_frame(seg[TARGET]))
        keys = pd.MultiIndex.from_frame(self.events[TARGET]) if len(self.events) else None
        self.event_segment = (
            rows.reindex(keys).to_numpy(np.int64) if keys is not None else np.zeros(0, np.int64)
        )
        gaps = self.gaps if self.gaps is not None and len(self.gaps) else None
        self.gap_segment = (
            rows.reindex(pd.MultiIndex.from_frame(gaps[TARGET])).to_numpy(np.int64)
            if gaps is not None
            else np.zeros(0, np.int64)
        )
        self.call_instance = dict(
            zip(
                zip(self.calls["rank"].tolist(), *(self.calls[k].tolist() for k in CALL_KEY)),
                self.calls["instance"].tolist(),
            )
        )

    @classmethod
    def of(
        cls,
        segments: pd.DataFrame,
        events: pd.DataFrame,
        job_path: JobCriticalPath,
        calls: pd.DataFrame,
        instances: pd.DataFrame,
        traces,
        *,
        patterns: list[str],
        stragglers=None,
        anomalies: pd.DataFrame | None = None,
        memory_peaks: pd.DataFrame | None = None,
        memory_leaks: pd.DataFrame | None = None,
        roofline: pd.DataFrame | None = None,
        capacity: Callable[[int, str], float] | None = None,
        gaps: pd.DataFrame | None = None,
    ) -> Context:
        """The context of the job path's ``segments`` / ``events`` and the matched collectives
        (``calls``, ``instances``), the views by name: the one place it is built (the facade's
        ``get_findings`` and the batch's findings)."""
        extra = {} if capacity is None else {"capacity": capacity}
        return cls(
            replay=Replay(segments, calls, instances), events=events, job_path=job_path,
            calls=calls, instances=instances, traces=traces, patterns=patterns,
            stragglers=stragglers, anomalies=anomalies, memory_peaks=memory_peaks,
            memory_leaks=memory_leaks, roofline=roofline, gaps=gaps, **extra,
        )  # fmt: skip

    def add_snapshot(self, snapshot) -> None:
        """A CUDA memory snapshot of the run (a :class:`hta_lite.MemorySnapshot`): its file's
        name, ``summary()`` and ``oom()`` (None where it has no out-of-memory), whose findings
        join the memory findings (:mod:`.memory`)."""
        self.snapshot_name = Path(snapshot.path).name
        self.snapshot_summary = snapshot.summary()
        try:
            self.snapshot_oom = need(snapshot.oom())
        except MissingDataError:
            self.snapshot_oom = None

    @property
    def segments(self) -> pd.DataFrame:
        return self.replay.segments

    @property
    def step_ns(self) -> float:
        """The mean step (ns) over ranks and steps, each the time it adds to its rank's run (its
        extent, to the end of its CPU and GPU work, from the later of its start and the end of
        the rank's earlier steps, as :func:`..steps.step_lengths`): the one step length every
        "% of the step" uses."""
        seg = self.replay.segments
        if seg.empty:
            return np.nan
        steps = seg.drop_duplicates(["rank", "step"])
        return float((steps["step_end"] - _length_start(steps)).clip(lower=0).mean())

    @property
    def whole_run_is_one_step(self) -> bool:
        """Whether no rank has steps: each trace is one step (no ProfilerStep; an Nsight Systems
        export's whole capture), so one-time work (start-up, compilation) counts in it."""
        seg = self.replay.segments
        return bool(len(seg)) and all(
            (t.steps.empty or list(t.steps["name"]) == [WHOLE_CAPTURE])
            for t in self.traces.values()
        )

    @property
    def steps_from_repeats(self) -> bool:
        """Whether a rank's steps were found from its repeating GPU work (a trace without a
        step range: :mod:`...load.steps_from_gpu_work`)."""
        return any(
            len(t.steps) and (t.steps["name"].astype(str) == REPEATS).any()
            for t in self.traces.values()
        )

    def warmup_delay(self, rank: int) -> np.ndarray:
        """The rank's :func:`..one_time.warmup_delay` (``(n, 2)`` ns): the warm-up by which
        its work started later than once warm."""
        if rank not in self._warmup:
            self._warmup[rank] = one_time.warmup_delay(self.traces[rank])
        return self._warmup[rank]

    def step_bounds(self, rank: int) -> pd.DataFrame:
        """``step``, ``start``, ``end`` (ns) of the rank's steps, as :attr:`step_ns` measures
        them (to the end of the GPU work each launched, from the end of the earlier steps where
        that is later than the step's start): they do not overlap."""
        seg = self.segments
        mine = seg[seg["rank"].to_numpy() == rank].drop_duplicates("step")
        end = mine["step_end"].to_numpy()
        start = np.minimum(_length_start(mine).to_numpy(), end)
        return pd.DataFrame({"step": mine["step"].to_numpy(), "start": start, "end": end})

    @property
    def runs_pytorch(self) -> bool:
        """Whether the run shows PyTorch, so that advice naming its calls fits: a Kineto trace
        (PyTorch's profiler wrote it), or an Nsight Systems export with an aten operator range
        (emit_nvtx) or a kernel of PyTorch's (``at::native::``, ``at::cuda::``, ``c10::``)."""
        for trace in self.traces.values():
            if trace.source_format != "nsys":
                return True
            for table in (trace.cpu, trace.gpu):
                names = table["name"].astype("category").cat.categories if len(table) else []
                if any(m in str(n) for n in names for m in PYTORCH_NAME_MARKS):
                    return True
        return False

    @property
    def training(self) -> bool:
        """Whether the run trains (a backward pass or an optimizer step in a rank's trace), so
        that advice about gradients and optimizers fits it; an inference run gets none."""
        marks = ("autograd::engine", "Backward", "Optimizer.step", "optimizer.step")
        for trace in self.traces.values():
            names = trace.cpu["name"].astype("category").cat.categories if len(trace.cpu) else []
            if any(m in str(n) for n in names for m in marks):
                return True
        return False

    @property
    def replays_graphs(self) -> bool:
        """Whether the run already replays CUDA / HIP graphs (so "capture a CUDA graph" is not
        news: the advice is then about what runs outside them)."""
        from ...kineto import GRAPH_LAUNCH_NAMES

        return any(
            bool(t.cpu["name"].isin(GRAPH_LAUNCH_NAMES).any())
            for t in self.traces.values()
            if len(t.cpu)
        )

    def claim(self, rank: int, spans) -> None:
        """A specific kind prices the time in ``spans`` (``[(start, end)]`` ns, any thread or
        stream of ``rank``): the general kinds (:mod:`.launch_overhead`, :mod:`.host_bound`,
        host syncs) leave it to it, so that one stretch of time is not priced twice."""
        self._claims.setdefault(rank, []).extend((int(a), int(b)) for a, b in spans)

    def claimed(self, rank: int) -> np.ndarray:
        """``(n, 2)`` merged, sorted [start, end) ns claimed on ``rank``."""
        from ...intervals import merge

        spans = self._claims.get(rank, [])
        if not spans:
            return np.zeros((0, 2), np.int64)
        starts, ends = merge(*(np.array(v, np.int64) for v in zip(*spans)))
        return np.stack([starts, ends], axis=1)

    def claimed_events(self) -> np.ndarray:
        """Per path event (``events`` row): it starts in a claimed span of its rank."""
        ev = self.events
        out = np.zeros(len(ev), bool)
        ranks, start = ev["rank"].to_numpy(), ev["start"].to_numpy()
        for rank in self._claims:
            spans, mine = self.claimed(rank), np.flatnonzero(ranks == rank)
            out[mine] = within(spans, start[mine])
        return out

    def per_segment(self, mask: np.ndarray, values: np.ndarray | None = None) -> np.ndarray:
        """Sum per segment row of the path events' ``duration`` (or ``values``) where ``mask``."""
        values = self.events["duration"].to_numpy(np.float64) if values is None else values
        return np.bincount(self.event_segment[mask], values[mask], minlength=len(self.segments))

    def graph_cut(self, on_path: np.ndarray, change_of: Callable[[int], Change], extra=None) -> Cut:
        """A fix that changes the ranks' graphs (``change_of(rank)``: the change on that
        rank's): each rank-step's segments are cut by the path time the fix touches there
        (``on_path`` ns per segment), scaled down to what the rank's replayed critical path
        saves in that step when that is less; plus ``extra`` (ns per segment) the fix removes
        off the graphs' edges (time their dependencies of zero weight span).

        The cut is filled by :meth:`replay_graphs`, which replays every graph cut asked for,
        one rank's step graphs at a time: until then it holds ``extra`` only."""
        n = len(self.segments)
        cut = Cut(np.zeros(n) if extra is None else np.asarray(extra, np.float64).copy())
        self._pending.append((on_path, change_of, cut))
        return cut

    def replay_graphs(self) -> None:
        """Fill the cuts :meth:`graph_cut` made: each rank's step graphs are built once, every
        change that touches the rank replayed on them, and let go before the next rank's."""
        seg = self.segments
        ranks, steps = seg["rank"].to_numpy(), seg["step"].to_numpy()
        touched = sorted({int(r) for on_path, _, _ in self._pending for r in ranks[on_path > 0]})
        for rank in touched:
            graphs = RankGraphs(self.traces[rank], self.patterns)
            for on_path, change_of, cut in self._pending:
                mine = (ranks == rank) & (on_path > 0)
                if not mine.any():
                    continue
                for step, saved in graphs.savings(change_of(rank)).items():
                    rows = np.flatnonzero((ranks == rank) & (steps == step))
                    total = self._side_by_side(rows, on_path)
                    if total > 0:
                        cut.segment[rows] += on_path[rows] * min(1.0, saved / total)
        self._pending.clear()

    def _side_by_side(self, rows: np.ndarray, values: np.ndarray) -> float:
        """The sum of ``values`` over the segments ``rows`` of one rank's step, segments that
        start after the same call (side by side in time) counted once (their largest)."""
        if self._after_call is None:
            keys = [f"prev_{k}" for k in CALL_KEY]  # object columns where a step holds none
            self._after_call = self.segments.groupby(keys, sort=False, dropna=False).ngroup()
            self._after_call = self._after_call.to_numpy()
        groups, at = np.unique(self._after_call[rows], return_inverse=True)
        largest = np.full(len(groups), -np.inf)
        np.maximum.at(largest, at.ravel(), values[rows])
        return float(largest.sum())

    def main_rank(self, per_segment: np.ndarray) -> int | None:
        """The rank that holds more than half of ``per_segment`` (ns per segment), else None
        (a finding of the job)."""
        ranks, per_rank = sums_by_key(self.segments["rank"].to_numpy(), per_segment)
        worst = int(np.argmax(per_rank))
        return int(ranks[worst]) if per_rank[worst] > 0.5 * per_rank.sum() else None

    def instance_of_segment(self, point: str = "target") -> np.ndarray:
        """The collective instance each segment ends at (``point="prev"``: starts after; -1:
        the step's end / start, or unmatched)."""
        seg = self.segments
        keys = zip(seg["rank"].tolist(), *(seg[f"{point}_{k}"].tolist() for k in CALL_KEY))
        return np.array([self.call_instance.get(k, -1) for k in keys], np.int64)


def _length_start(steps: pd.DataFrame) -> pd.Series:
    """Where each step's length starts (ns; rows of the segments table): the later of its
    start and the end of the rank's earlier steps (``after``)."""
    return np.maximum(steps["step_start"], steps["after"])


def within(spans: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per time: inside one of the merged, sorted ``spans`` (``(n, 2)`` [start, end))."""
    if not len(spans):
        return np.zeros(len(t), bool)
    j = np.searchsorted(spans[:, 0], t, side="right") - 1
    return (j >= 0) & (t < spans[np.maximum(j, 0), 1])
