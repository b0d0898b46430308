"""Generate multi-rank trace folders with an injected straggler, from one real trace.

Every rank is a copy of the template trace with a small random clock offset. At the last long
communication kernel launched in each ProfilerStep (a collective, where ranks synchronize) one
rank, the straggler, arrives ``delay_us`` late:

- ``cause="compute"``: its last computation kernel before the collective runs ``delay_us`` longer;
- ``cause="host"``: its CPU issues the collective (and everything after it) only ``delay_us``
  after the GPU reached that point, so its GPU sits idle waiting for the host (the rank is then
  late by ``delay_us`` plus how far the CPU used to run ahead).

Every other rank's collective kernel lasts ``delay_us`` longer (it waits), and everything after
the collective is ``delay_us`` later on every rank, as in a real job. The straggler and the cause
are the known answer for tests and benchmarks (the scale issue reuses this for large folders).
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import numpy as np

from ..classify import COMMUNICATION, COMPUTATION, kernel_type
from ..kineto import GPU_WORK_CATEGORIES, RUNTIME_CATEGORIES


def _load(path: Path) -> dict:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


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


def make_rank(
    template: dict,
    rank: int,
    world: int,
    points: list[float],
    straggler: int,
    cause: str,
    delay_us: float,
    clock_offset_us: float,
) -> dict:
    doc = copy.deepcopy(template)
    doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    events = doc["traceEvents"]
    launches = _launch_ts(events)
    is_gpu = np.array([e.get("ph") == "X" and e.get("cat") in GPU_WORK_CATEGORIES for e in events])
    has_ts = np.array(["ts" in e for e in events])
    ts = np.array([float(e.get("ts", 0)) for e in events])
    shift = np.zeros(len(events))
    for p in points:
        collective = next(
            i
            for i, e in enumerate(events)
            if is_gpu[i] and e["ts"] == p and kernel_type(e["name"]) == COMMUNICATION
        )
        launched = launches.get(events[collective]["args"].get("correlation"), p)
        # host cause: the CPU issues the collective only delay_us after the GPU reached it
        delay = delay_us if cause == "compute" else delay_us + (p - launched)
        after_gpu = is_gpu & (ts >= p) if rank == straggler else is_gpu & (ts > p)
        cpu_from = launched if (rank == straggler and cause == "host") else p
        shift += np.where(after_gpu | (~is_gpu & has_ts & (ts >= cpu_from)), delay, 0.0)
        if rank != straggler:
            events[collective]["dur"] += delay  # waits for the straggler
        elif cause == "compute":
            before = [
                i
                for i, e in enumerate(events)
                if is_gpu[i] and e["ts"] + e["dur"] <= p and kernel_type(e["name"]) == COMPUTATION
            ]
            events[max(before, key=lambda i: events[i]["ts"] + events[i]["dur"])]["dur"] += delay
    for i, e in enumerate(events):
        if has_ts[i]:
            e["ts"] = e["ts"] + shift[i] + clock_offset_us
    return doc


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
    rng = np.random.default_rng(seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for rank in range(n_ranks):
        rank_doc = make_rank(
            doc, rank, n_ranks, points, straggler, cause, delay_us, float(rng.uniform(0, 20))
        )
        data = json.dumps(rank_doc).encode()
        name = f"rank-{rank}.json" + (".gz" if gz else "")
        (out / name).write_bytes(gzip.compress(data, 1) if gz else data)
    return out


def replicate_trace(
    template: str | Path, out_dir: str | Path, n_ranks: int, gz: bool = True
) -> Path:
    """``n_ranks`` byte-for-byte copies of a real trace, each with its own ``distributedInfo.rank``
    (for scale benchmarks: the events are untouched, so every rank parses exactly like the
    template)."""
    import msgspec

    from ..load.decode import read_bytes

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
