"""Traces of a host and one GPU stream simulated together, so that a program and the program a
user's fix makes give step times known by construction (their difference: the fix's saving).

The host runs one thread of operators; a kernel starts ``LATENCY`` µs after its launch call
returns, or when the stream is free if later; a blocking read (``.item()``, ``.cpu()``: a
device-to-host copy then a stream synchronization) waits for the stream. Events are written as
PyTorch 2.x's profiler writes them, with the GPU-side sync events of
``enable_cuda_sync_events`` (``sync_events=False`` leaves them out, as older traces do).
"""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

LATENCY = 6.0  # µs from a launch call's return to its kernel's start on an idle stream
STREAM = 7


class Sim:
    """One rank's program, op by op; times in µs."""

    def __init__(self, sync_events: bool = True, rank: int = 0, world_size: int = 1,
                 mark_steps: bool = True):  # fmt: skip
        self.b = TraceBuilder(rank=rank, world_size=world_size)
        self.mark_steps = mark_steps  # False: no ProfilerStep written (the steps are found)
        self.t = 1000.0  # host clock
        self.gpu_free = 0.0  # when the stream has run everything queued
        self.sync_events = sync_events
        self._step_start = None
        self.steps: list[tuple[float, float]] = []  # (start, end incl. its GPU work) per step

    # ---- host work ---------------------------------------------------------------------------
    def host(self, name: str, dur: float, cat: str = "cpu_op"):
        """Host time with no GPU work (an operator, a Python region)."""
        self.b.cpu_op(name, self.t, dur, cat=cat)
        self.t += dur
        return self

    def python(self, dur: float):
        """Host time no event records (Python between operators, without with_stack)."""
        self.t += dur
        return self

    def region(self, name: str, body, cat: str = "user_annotation"):
        """A range (``record_function``, a data loader) around what ``body(self)`` runs."""
        start = self.t
        index = len(self.b.events)
        body(self)
        self.b.events.insert(index, {"ph": "X", "cat": cat, "name": name, "pid": 10, "tid": 1,
                                     "ts": start, "dur": self.t - start, "args": {}})  # fmt: skip
        return self

    def launch(self, op: str, kernel: str, kernel_us: float, pre: float = 3, call: float = 5,
               post: float = 1):  # fmt: skip
        """An operator that launches one kernel: ``pre`` µs, the launch call, ``post`` µs."""
        op_start = self.t
        call_start = op_start + pre
        start = max(call_start + call + LATENCY, self.gpu_free)
        self.b.kernel(kernel, start, kernel_us, stream=STREAM, launch_ts=call_start,
                      launch_dur=call)  # fmt: skip
        self.gpu_free = start + kernel_us
        self.t = call_start + call + post
        self.b.cpu_op(op, op_start, self.t - op_start)
        return self

    def read(self, op: str = "aten::item", copy_us: float = 2, pre: float = 4, call: float = 5,
             post: float = 3):  # fmt: skip
        """A blocking device-to-host read: the copy queued behind the stream's work, the host
        waiting in cudaStreamSynchronize until it is done."""
        op_start = self.t
        call_start = op_start + pre
        start = max(call_start + call + LATENCY, self.gpu_free)
        self.b.kernel("Memcpy DtoH (Device -> Pageable)", start, copy_us, stream=STREAM,
                      launch_ts=call_start, launch_dur=call, cat="gpu_memcpy",
                      launch_name="cudaMemcpyAsync")  # fmt: skip
        self.gpu_free = start + copy_us
        sync_start = call_start + call
        sync_end = max(sync_start + 1, self.gpu_free + 1)
        self.b._corr += 1
        corr = self.b._corr
        self.b.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize",
                              "pid": 10, "tid": 1, "ts": sync_start, "dur": sync_end - sync_start,
                              "args": {"correlation": corr}})  # fmt: skip
        if self.sync_events:
            self.b.events.append({"ph": "X", "cat": "cuda_sync", "name": "Stream Sync",
                                  "pid": 0, "tid": STREAM, "ts": self.gpu_free,
                                  "dur": max(sync_end - self.gpu_free, 0),
                                  "args": {"correlation": corr, "stream": STREAM,
                                           "device": 0}})  # fmt: skip
        self.t = sync_end + post
        self.b.cpu_op(op, op_start, self.t - op_start)
        return self

    def copy_back(self, op: str = "aten::copy_", copy_us: float = 2,
                  call: str = "hipMemcpyWithStream", pre: float = 4, post: float = 3):  # fmt: skip
        """A blocking copy to the host in one call (PyTorch on ROCm: ``hipMemcpyWithStream``):
        queued behind the stream's work, the call returning when it is done."""
        op_start = self.t
        call_start = op_start + pre
        start = max(call_start + 5 + LATENCY, self.gpu_free)
        self.gpu_free = start + copy_us
        self.b.kernel("Memcpy DtoH (Device -> Host)", start, copy_us, stream=STREAM,
                      launch_ts=call_start, launch_dur=self.gpu_free + 1 - call_start,
                      cat="gpu_memcpy", launch_name=call)  # fmt: skip
        self.t = self.gpu_free + 1 + post
        self.b.cpu_op(op, op_start, self.t - op_start)
        return self

    def held(self, us: float):
        """The stream runs ``us`` of work the trace does not show (launched before the profiler
        started, another process): what is queued next waits for it."""
        self.gpu_free = max(self.gpu_free, self.t) + us
        return self

    # ---- steps -------------------------------------------------------------------------------
    def step(self, n: int, body):
        """``ProfilerStep#n`` around ``body(self)``; the step's time runs to the end of its GPU
        work (the definition every "% of the step" uses)."""
        start = self.t
        body(self)
        self.t += 2
        if self.mark_steps:
            self.b.step(n, start, self.t - start)
        self.steps.append((start, max(self.t, self.gpu_free)))
        self.t = max(self.t, self.gpu_free) + 5  # the next step starts when this one is done
        return self

    def mean_step_us(self, skip_last: bool = True) -> float:
        """The mean step as the analyses see it (the last step is left out, as HTA does)."""
        kept = self.steps[:-1] if skip_last and len(self.steps) > 1 else self.steps
        return sum(end - start for start, end in kept) / len(kept)

    def write(self, folder: Path, name: str = "rank-0.json") -> Path:
        self.b.write(Path(folder) / name)
        return Path(folder)


def run(body, steps: int = 4, **kwargs) -> Sim:
    """A program of ``steps`` ProfilerSteps, each running ``body(sim)``."""
    sim = Sim(**kwargs)
    for n in range(1, steps + 1):
        sim.step(n, body)
    return sim
