"""What-if replay of the job: the profiled steps re-run with some work shortened or removed.

The model is the job critical path's (:mod:`..job_path`): each rank runs its steps as segments
of local work between collective calls; a measured collective ends on each member at the last
member's arrival plus that member's transfer time. The replay walks every segment of every
rank in the order they arrived (which is a topological order: a collective's arrivals precede
its ends, which precede the segments after it) and recomputes, from the cuts a fix makes:

- a segment's arrival = the end of the call it starts after (or its step's start) + its span
  - its cut (never below the start);
- a measured collective's end on rank r = max(its own arrival, the latest member's arrival +
  r's transfer - the transfer cut); an unmatched or unmeasured one keeps its span; a *dropped*
  one (a synchronization removed) ends at its arrival;
- a rank's next step starts where its previous step ended (its delta carries over), so a fix
  that lets one rank run ahead is seen at the next step's collectives.

The job's time is from the first rank's first step start to the last rank's last step end; the
saving per step is the drop of that time divided by the steps replayed. With no cut the replay
reproduces the trace's times exactly (tested).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..job_path.segments import CALL_KEY


@dataclass
class Cut:
    """What a fix changes: ``segment`` ns removed from each segment's span (aligned with the
    segments table's rows), ``transfer`` ns removed from an instance's transfer on every member
    (``{instance: ns}``), ``dropped`` instances removed altogether."""

    segment: np.ndarray
    transfer: dict[int, float] = field(default_factory=dict)
    dropped: frozenset = frozenset()

    def scaled(self, factor: float) -> Cut:
        """The same fix, ``factor`` of it made (dropped instances kept only at 1)."""
        return Cut(
            self.segment * factor,
            {k: v * factor for k, v in self.transfer.items()},
            self.dropped if factor >= 1 else frozenset(),
        )

    def total(self) -> float:
        """ns the fix removes in all, summed without any replay (a first-order bound)."""
        return float(self.segment.sum()) + float(sum(self.transfer.values()))


def combine(cuts: list[Cut], spans: np.ndarray, transfers: dict[int, float]) -> Cut:
    """Several fixes made together. Where they cut the same segment (or transfer) they are
    discounted multiplicatively: each removes its share of what the others leave, so the time
    left is ``span x prod(1 - cut_k / span)`` and two fixes of the same 20 ms never remove 40."""
    left = np.ones(len(spans))
    safe = np.where(spans > 0, spans, 1)
    kept: dict[int, float] = {}
    for cut in cuts:
        left *= 1 - np.clip(cut.segment / safe, 0, 1)
        for k, v in cut.transfer.items():
            share = min(v / transfers[k], 1.0) if transfers.get(k, 0) > 0 else 0.0
            kept[k] = kept.get(k, 1.0) * (1 - share)
    return Cut(
        spans * (1 - left),
        {k: transfers[k] * (1 - v) for k, v in kept.items()},
        frozenset().union(*(c.dropped for c in cuts)) if cuts else frozenset(),
    )


class Replay:
    """The job's segments and collectives, ready to be replayed under cuts.

    ``segments``: the ranks' :func:`..job_path.segments.segments` tables concatenated;
    ``calls`` / ``instances``: a collectives matching's tables."""

    def __init__(self, segments: pd.DataFrame, calls: pd.DataFrame, instances: pd.DataFrame):
        self.segments = segments.reset_index(drop=True)
        s = self.segments
        self.spans = (s["end"] - s["start"]).to_numpy(np.float64) if len(s) else np.zeros(0)
        order = np.lexsort((s["rank"].to_numpy(), s["end"].to_numpy())) if len(s) else []
        self.order = list(map(int, order))
        self.n_steps = int(s["step"].nunique()) if len(s) else 0
        self.t0 = int(s["step_start"].min()) if len(s) else 0  # times are replayed from here
        self._calls(calls, instances)
        self.base = self._run(Cut(np.zeros(len(s))))

    def _calls(self, calls: pd.DataFrame, instances: pd.DataFrame) -> None:
        """Per call (rank, ts, tid, stream): its instance, orig end, whether it joins."""
        self.call: dict[tuple, tuple[int, int]] = {}
        self.members: dict[int, list[tuple]] = {}
        self.last_start: dict[int, int] = {}
        self.transfers: dict[int, float] = {}
        if calls.empty:
            return
        joined = instances[
            instances["consistent"] & instances["ordered"] & (instances["ranks_present"] >= 2)
        ]
        self.last_start = {
            i: t - self.t0
            for i, t in zip(joined["instance"].tolist(), joined["last_start"].tolist())
        }
        keys = zip(calls["rank"].tolist(), *(calls[k].tolist() for k in CALL_KEY))
        for key, instance, end in zip(keys, calls["instance"].tolist(), calls["end"].tolist()):
            self.call[key] = (int(instance), int(end) - self.t0)
            if instance in self.last_start:
                self.members.setdefault(int(instance), []).append(key)
        for i, last in self.last_start.items():
            ends = [self.call[k][1] for k in self.members.get(i, [])]
            self.transfers[i] = float(max(ends) - last) if ends else 0.0

    def first_order(self, cut: Cut) -> float:
        """ns per step the cut removes without a replay (a bound that ignores what becomes
        critical instead), counting segments that run side by side once: segments of a rank's
        step that start at the same point (after the same call: two gradient buckets in flight)
        overlap in time, so of their cuts the largest counts, not the sum."""
        if not self.n_steps or not len(self.segments):
            return 0.0
        s = self.segments
        keys = pd.MultiIndex.from_arrays(
            [s["rank"], s["step"], *(s[f"prev_{k}"] for k in CALL_KEY)]
        )
        segment = pd.Series(np.clip(cut.segment, 0, None), index=keys)
        total = float(segment.groupby(level=list(range(keys.nlevels))).max().sum())
        return (total + float(sum(cut.transfer.values()))) / self.n_steps

    def saving_per_step(self, cut: Cut) -> float:
        """ns per step the cut saves (the base job time minus the replayed one, per step)."""
        if not self.n_steps:
            return 0.0
        return (self.base - self._run(cut)) / self.n_steps

    def _run(self, cut: Cut) -> float:
        s = self.segments
        if s.empty:
            return 0.0
        rank, step = s["rank"].tolist(), s["step"].tolist()
        end, step_start = (s["end"] - self.t0).tolist(), (s["step_start"] - self.t0).tolist()
        target = list(zip(rank, *(s[f"target_{k}"].tolist() for k in CALL_KEY)))
        prev = list(zip(rank, *(s[f"prev_{k}"].tolist() for k in CALL_KEY)))
        spans = (self.spans - np.minimum(np.clip(cut.segment, 0, None), self.spans)).tolist()
        arrived: dict[tuple, float] = {}  # call key -> replayed arrival
        seen: dict[int, tuple[int, float]] = {}  # rank -> (step, delta) of its latest segment
        ended: dict[int, tuple[int, float]] = {}  # rank -> (step, delta) of its latest step end
        shift: dict[tuple[int, int], float] = {}  # (rank, step) -> the step start's delta
        job_end = -np.inf
        for i in self.order:
            r, k = rank[i], step[i]
            if prev[i][1] == -1:  # at its step's start, shifted as the rank's previous step
                if (r, k) not in shift:
                    e, a = ended.get(r), seen.get(r)
                    carried = e if e and (not a or e[0] >= a[0]) else a
                    shift[(r, k)] = carried[1] if carried and carried[0] < k else 0.0
                base = step_start[i] + shift[(r, k)]
            else:
                base = self._end(prev[i], arrived, cut)
            at = base + spans[i]
            arrived[target[i]] = at
            seen[r] = (k, at - end[i])
            if target[i][1] == -1:  # the step's end
                ended[r] = seen[r]
                job_end = max(job_end, at)
        return job_end

    def _end(self, key: tuple, arrived: dict, cut: Cut) -> float:
        """The replayed end of the call ``key`` on its rank."""
        instance, orig_end = self.call.get(key, (-1, key[1] - self.t0))
        own = arrived.get(key, float(key[1] - self.t0))
        if instance in cut.dropped:
            return own
        if instance not in self.last_start:
            return orig_end + (own - (key[1] - self.t0))
        last = max(arrived.get(m, float(m[1] - self.t0)) for m in self.members[instance])
        transfer = orig_end - self.last_start[instance]
        transfer -= min(cut.transfer.get(instance, 0.0), max(transfer, 0.0))
        return max(own, last + transfer)
