"""Build small Kineto-format traces whose right answers are known by construction."""

from __future__ import annotations

import gzip
import json
from pathlib import Path


class TraceBuilder:
    """Accumulates events; times in µs (floats allowed), like Kineto writes them."""

    def __init__(self, rank: int | None = 0, world_size: int = 1):
        self.events: list[dict] = []
        self.meta: dict = {"schemaVersion": 1, "deviceProperties": []}
        if rank is not None:
            self.meta["distributedInfo"] = {
                "backend": "nccl",
                "rank": rank,
                "world_size": world_size,
            }
        self._corr = 1000

    def cpu_op(self, name, ts, dur, tid=1, cat="cpu_op", **args):
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": 10,
                "tid": tid,
                "ts": ts,
                "dur": dur,
                "args": args,
            }
        )
        return self

    def step(self, n, ts, dur):
        return self.cpu_op(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")

    def kernel(
        self,
        name,
        ts,
        dur,
        stream=7,
        launch_ts=None,
        launch_dur=1,
        cat="kernel",
        launch_name=None,
        correlation=None,
        **args,
    ):
        """A GPU event; with ``launch_ts`` also its launching runtime call (cudaLaunchKernel by
        default). Events given one ``correlation`` share a launch (a graph launch)."""
        if correlation is None:
            self._corr += 1
            correlation = self._corr
        gpu_args = {
            "stream": stream,
            "device": 0,
            "correlation": correlation,
            "External id": correlation,
            **args,
        }
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": 0,
                "tid": stream,
                "ts": ts,
                "dur": dur,
                "args": gpu_args,
            }
        )
        if launch_ts is not None:
            runtime = launch_name or (
                "cudaMemcpyAsync" if cat == "gpu_memcpy" else "cudaLaunchKernel"
            )
            self.events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": runtime,
                    "pid": 10,
                    "tid": 1,
                    "ts": launch_ts,
                    "dur": launch_dur,
                    "args": {"correlation": correlation, "External id": correlation},
                }
            )
        return self

    def document(self) -> dict:
        return {**self.meta, "traceEvents": self.events}

    def write(self, path: Path, gz: bool = False) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(self.document()).encode()
        path.write_bytes(gzip.compress(data) if gz else data)
        return path


def gpu_behind_cpu(path: Path, steps: int = 5) -> Path:
    """A rank whose CPU launches each step in 1,000 µs and moves on without waiting (no sync at
    the step's end) while the step's GPU work takes 3,500 µs: a 3,000 µs kernel, then a 500 µs
    pageable host-to-device copy. The GPU runs further behind each step: step N's extent
    (its CPU range to the end of its GPU work) overlaps the next steps', and the GPU's period,
    3,500 µs, is the step (the first one's 20 µs launch latency aside)."""
    b = TraceBuilder()
    gpu_free = 0
    for step in range(1, steps + 1):
        base = step * 1000
        b.step(step, base, 1000)
        b.cpu_op("aten::mm", base + 5, 20)
        start = max(base + 20, gpu_free)
        b.kernel("gemm", start, 3000, launch_ts=base + 10)
        b.cpu_op("aten::copy_", base + 100, 20)
        start = max(base + 130, start + 3000)
        b.kernel("Memcpy HtoD (Pageable -> Device)", start, 500, launch_ts=base + 105,
                 cat="gpu_memcpy", launch_name="cudaMemcpyAsync")  # fmt: skip
        gpu_free = start + 500
    return b.write(path)
