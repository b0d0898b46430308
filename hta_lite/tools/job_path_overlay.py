"""Write the job critical path as one trace for Perfetto / chrome://tracing.

Perfetto opens one file at a time and draws a flow arrow only between events of one file, so
the path of every rank goes into one new file (the inputs are never touched): a process per
rank (``rank N``, pid N) with a thread per CPU thread / GPU stream the path runs on, a slice per
path row (``args``: ``bound_by``, ``category``, ``step``), and at every hop a flow arrow from
the last rank's arrival to the rank that waited for it. Times are the ranks' own (absolute µs).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from ..analyses.job_path import JobCriticalPath
from ..safe_output import write_atomically

FILE_NAME = "job_critical_path.json"


def _lane(tid: int, stream: int) -> tuple[int, str]:
    if stream >= 0:
        return 1_000_000 + int(stream), f"GPU stream {stream}"
    if tid >= 0:
        return int(tid), f"CPU thread {tid}"
    return 0, "untracked"


def overlay_job_path(path: JobCriticalPath, output_dir: Path) -> Path:
    """``output_dir / job_critical_path.json``; returns its path."""
    events, lanes = [], {}
    for row in path.path().itertuples(index=False):
        tid, lane = _lane(row.tid, row.stream)
        lanes[(int(row.rank), tid)] = lane
        events.append({"ph": "X", "pid": int(row.rank), "tid": tid, "name": str(row.name),
                       "cat": "job_critical_path", "ts": float(row.start_us),
                       "dur": float(row.duration_us),
                       "args": {"bound_by": row.bound_by, "category": str(row.category),
                                "step": int(row.step)}})  # fmt: skip
    rows = path.path()
    for i, hop in enumerate(path.hops().itertuples(index=False)):
        here = rows[rows["step"] == hop.step]
        before = here[here["rank"] == hop.from_rank]
        before = before[before["start_us"] + before["duration_us"] <= hop.at_us + 1e-3]
        after = here[(here["rank"] == hop.to_rank) & (here["bound_by"] == "communication")]
        if before.empty or after.empty:
            continue
        source = before.iloc[int((before["start_us"] + before["duration_us"]).to_numpy().argmax())]
        target = after.iloc[int((after["start_us"] - hop.at_us).abs().to_numpy().argmin())]
        # each end inside its slice (a flow binds to the slice enclosing its point)
        ends = (
            (source, "s", float(source["start_us"] + source["duration_us"]) - 1e-3),
            (target, "f", float(target["start_us"]) + 1e-3),
        )
        for row, phase, ts in ends:
            lane = _lane(int(row["tid"]), int(row["stream"]))[0]
            args = {"collective": hop.collective, "wait_us": float(hop.wait_us)}
            flow = {"ph": phase, "id": i, "pid": int(row["rank"]), "tid": lane, "ts": ts,
                    "cat": "job_critical_path", "name": "hop", "args": args}  # fmt: skip
            if phase == "f":
                flow["bp"] = "e"
            events.append(flow)
    meta = [{"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"rank {rank}"}}
            for rank in sorted({r for r, _ in lanes})]  # fmt: skip
    meta += [{"ph": "M", "name": "thread_name", "pid": rank, "tid": tid, "args": {"name": lane}}
             for (rank, tid), lane in sorted(lanes.items())]  # fmt: skip
    document = msgspec.json.encode({"traceEvents": meta + events, "displayTimeUnit": "ms"})
    return write_atomically(Path(output_dir) / FILE_NAME, document)
