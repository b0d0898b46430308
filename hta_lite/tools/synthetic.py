"""Generate multi-rank trace folders with an injected straggler, from one real trace.

Every rank is a copy of the template trace with a small random clock offset (0-20 µs). At the
last long communication kernel launched in each ProfilerStep (a collective, where ranks
synchronize) one rank, the straggler, arrives ``delay_us`` late:

- ``cause="compute"``: its last computation kernel before the collective runs ``delay_us``
  longer (and its GPU work after that kernel starts ``delay_us`` later); the other ranks wait
  for it at the first communication kernel after that kernel's end (the collective, or one
  before it);
- ``cause="host"``: its CPU issues the collective (and everything after it) only ``delay_us``
  after the GPU reached that point, so its GPU sits idle waiting for the host (the rank is then
  late by ``delay_us`` plus how far the CPU used to run ahead). The GPU times keep their
  template's distance from their launches, so the collective starts that run-ahead after its
  launch call returned, the GPU idle meanwhile: ``get_gpu_idle_by_cause()`` counts that part
  as ``other`` (launched work held), not ``host_wait``, and the findings say so.

Every other rank's collective kernel where it waits lasts that much longer, and everything after
it is that much later on every rank, as in a real job (no collective ends on one rank before it
starts on another). CPU ranges that enclose the point where time is inserted (the ProfilerStep,
the op that launches the collective) grow by the inserted time, so nesting and step membership
stay as in the template. Collective metadata that names the template's whole world as the group
names the new world. The straggler and the cause are the known answer for tests and benchmarks.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from ..classify import COMMUNICATION, COMPUTATION, kernel_type
from ..kineto import GPU_WORK_CATEGORIES, RUNTIME_CATEGORIES
from ..load.gzip_text import read_bytes


def _load(path: Path) -> dict:
    """A template trace (JSON or gzip): read as every trace file is (a clear error naming a file
    that cannot be read, is not a regular file or is corrupt gzip)."""
    return json.loads(read_bytes(path))


def injection_points(events: list[dict], min_dur_us: float = 100.0) -> list[float]:
    """Start of the last long communication kernel launched in each ProfilerStep (µs)."""
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("ph") == "X"
        and str(e.get("name", "")).startswith("ProfilerStep#")
        and e.get("cat") == "user_annotation"
    )
    launches = _launch_ts(events)
    comm = sorted(
        (launches.get(e["args"].get("correlation"), e["ts"]), e["ts"])
        for e in events
        if e.get("cat") == "kernel"
        and kernel_type(e["name"]) == COMMUNICATION
        and e.get("dur", 0) >= min_dur_us
    )
    points = []
    for start, end in steps:
        inside = [ts for launched, ts in comm if start <= launched < end]
        if inside:
            points.append(max(inside))
    return sorted(points)


def _launch_ts(events: list[dict]) -> dict:
    return {
        e["args"]["correlation"]: e["ts"]
        for e in events
        if e.get("cat") in RUNTIME_CATEGORIES and "correlation" in e.get("args", {})
    }


@dataclass
class _Point:
    """One injection point: the collective kernel (index, GPU start ``ts``, CPU ``launched``),
    the computation kernel that ends last before it (index, end) and the first communication
    kernel after that end (index, GPU start: where the others wait for a slower computation)."""

    collective: int
    ts: float
    launched: float
    compute: int
    compute_end: float
    wait: int


class _Template:
    """The template's events as arrays, parsed once for every rank."""

    def __init__(self, doc: dict, points: list[float]):
        self.doc = doc
        events = self.events = doc["traceEvents"]
        self.has_ts = np.array(["ts" in e for e in events])
        self.ts = np.array([float(e.get("ts", 0)) for e in events])
        self.dur = np.array([float(e.get("dur", 0) or 0) for e in events])
        self.is_x = np.array([e.get("ph") == "X" for e in events])
        self.is_gpu = self.is_x & np.array([e.get("cat") in GPU_WORK_CATEGORIES for e in events])
        types = np.array(
            [kernel_type(e["name"]) if g else "" for e, g in zip(events, self.is_gpu)], object
        )
        launches = _launch_ts(events)
        end = self.ts + self.dur
        world = (doc.get("distributedInfo") or {}).get("world_size")
        #: events whose collective metadata names the template's whole world as the group
        self.world_group = [
            i for i, e in enumerate(events) if (e.get("args") or {}).get("Group size") == world
        ]
        self.points = []
        for p in points:
            collective = int(
                np.flatnonzero(self.is_gpu & (self.ts == p) & (types == COMMUNICATION))[0]
            )
            before = np.flatnonzero((types == COMPUTATION) & (end <= p))
            compute = int(before[np.argmax(end[before])]) if len(before) else collective
            launched = launches.get(events[collective]["args"].get("correlation"), p)
            after = np.flatnonzero((types == COMMUNICATION) & (self.ts >= end[compute]))
            wait = int(after[np.argmin(self.ts[after])]) if len(after) else collective
            wait = wait if self.ts[wait] <= p else collective
            self.points.append(_Point(collective, p, launched, compute, float(end[compute]), wait))

    def rank(self, rank, world, straggler, cause, delay_us, clock_offset_us) -> bytes:
        shift = np.zeros(len(self.events))
        grow = np.zeros(len(self.events))
        cpu = self.has_ts & ~self.is_gpu
        for pt in self.points:
            # how late the straggler reaches the collective: with cause "host" its CPU issues it
            # delay_us after its GPU got there, on top of how far the CPU used to run ahead
            delay = delay_us + (pt.ts - pt.launched if cause == "host" else 0.0)
            waits = pt.wait if cause == "compute" else pt.collective  # for the straggler
            if rank != straggler:
                gpu_from, cpu_from = np.nextafter(self.ts[waits], np.inf), self.ts[waits]
                grow[waits] += delay
            elif cause == "compute":
                gpu_from, cpu_from = pt.compute_end, self.ts[waits]
                grow[pt.compute] += delay
            else:
                gpu_from, cpu_from = pt.ts, pt.launched
            shift += np.where(
                (self.is_gpu & (self.ts >= gpu_from)) | (cpu & (self.ts >= cpu_from)), delay, 0.0
            )
            spans = cpu & self.is_x & (self.ts < cpu_from) & (self.ts + self.dur > cpu_from)
            grow += np.where(spans, delay, 0.0)
        ts = np.round(self.ts + shift + clock_offset_us, 3)
        dur = np.round(self.dur + grow, 3)
        members = str(list(range(world)))
        events = []
        for i, e in enumerate(self.events):
            if self.has_ts[i]:
                e = {**e, "ts": float(ts[i])}
                if grow[i]:
                    e["dur"] = float(dur[i])
            events.append(e)
        for i in self.world_group:  # the template's world becomes this folder's
            args = dict(events[i]["args"], **{"Group size": world, "Process Group Ranks": members})
            events[i] = dict(events[i], args=args)
        doc = dict(self.doc, traceEvents=events)
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
        return msgspec.json.encode(doc)


def make_straggler_folder(
    template: str | Path,
    out_dir: str | Path,
    n_ranks: int,
    straggler: int,
    cause: str = "compute",
    delay_us: float = 5000.0,
    seed: int = 0,
    gz: bool = True,
) -> Path:
    """Write ``n_ranks`` trace files (``rank-N.json[.gz]``) into ``out_dir``; returns the folder."""
    if cause not in ("compute", "host"):
        raise ValueError("cause must be 'compute' or 'host'")
    doc = _load(Path(template))
    points = injection_points(doc["traceEvents"])
    if not points:
        raise ValueError(
            f"{template}: no long communication kernel inside a ProfilerStep to inject at"
        )
    base = _Template(doc, points)
    rng = np.random.default_rng(seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for rank in range(n_ranks):
        data = base.rank(rank, n_ranks, straggler, cause, delay_us, float(rng.uniform(0, 20)))
        name = f"rank-{rank}.json" + (".gz" if gz else "")
        (out / name).write_bytes(gzip.compress(data, 1) if gz else data)
    return out


def replicate_trace(
    template: str | Path, out_dir: str | Path, n_ranks: int, gz: bool = True
) -> Path:
    """``n_ranks`` byte-for-byte copies of a real trace, each with its own ``distributedInfo.rank``
    (for scale benchmarks: the events are untouched, so every rank parses exactly like the
    template)."""
    data = read_bytes(Path(template))
    top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    events = top.pop("traceEvents")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for rank in range(n_ranks):
        meta = dict(
            top,
            distributedInfo=msgspec.Raw(
                msgspec.json.encode({"backend": "nccl", "rank": rank, "world_size": n_ranks})
            ),
        )
        parts = [msgspec.json.encode(k) + b":" + bytes(v) for k, v in meta.items()]
        document = b"{" + b",".join(parts + [b'"traceEvents":' + bytes(events)]) + b"}"
        name = f"rank-{rank}.json" + (".gz" if gz else "")
        (out / name).write_bytes(gzip.compress(document, 1) if gz else document)
    return out
