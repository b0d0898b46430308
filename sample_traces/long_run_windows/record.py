"""Record the long_run_windows sample: the long_run job profiled in windows, as
``torch.profiler.schedule(wait=1, warmup=1, active=12, repeat=3)`` with
``tensorboard_trace_handler`` writes it: three files per rank
(``rank<R>.<ns>.pt.trace.json.gz``), steps 2-13, 16-27 and 30-41 (the last step of each file
is dropped as HTA does: 2-12, 16-26, 30-40 are kept). 2 processes, DDP over gloo, a small MLP:

- rank 1 stalls in ``data-loading`` for 25 ms at every step N with N % 7 == 4 (4, 11, 18, 25,
  32, 39: all in kept steps); rank 0 then waits for it in the gradient all_reduce;
- rank 0 runs 40 extra 256x256 matmuls in ``forward`` at step 20 only.

Each rank measures its steps live (``time.perf_counter`` around each loop iteration) and writes
them to ``live_step_times.csv`` (``rank,step,seconds``). Between two windows lie the unprofiled
steps (wait, warmup) and the export of the window before: a known gap, not idle time.

Run: ``python record.py OUT_DIR`` (needs torch; the CPU build is enough).
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import (
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    tensorboard_trace_handler,
)

WAIT, WARMUP, ACTIVE, REPEAT = 1, 1, 12, 3
STEPS = (WAIT + WARMUP + ACTIVE) * REPEAT
STALL_S, PERIOD, PHASE, SPIKE_STEP = 0.025, 7, 4, 20


def worker(rank: int, world: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29537")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    live = {}
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=REPEAT),
        on_trace_ready=tensorboard_trace_handler(out_dir, worker_name=f"rank{rank}", use_gzip=True),
    ) as prof:
        for step in range(STEPS):
            started = time.perf_counter()
            with record_function("data-loading"):
                batch, target = torch.randn(32, 128), torch.randint(0, 10, (32,))
                if rank == 1 and step % PERIOD == PHASE:
                    time.sleep(STALL_S)
            with record_function("forward"):
                loss = torch.nn.functional.cross_entropy(model(batch), target)
                if rank == 0 and step == SPIKE_STEP:
                    x = torch.randn(256, 256)
                    for _ in range(40):
                        x = torch.tanh(x @ x)
            with record_function("backward"):
                optimizer.zero_grad()
                loss.backward()
            with record_function("optimizer"):
                optimizer.step()
            live[step] = time.perf_counter() - started
            prof.step()
    with open(os.path.join(out_dir, f".live-{rank}.json"), "w") as f:
        json.dump(live, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    mp.spawn(worker, args=(2, out), nprocs=2)
    live = {}
    for rank in range(2):
        part = os.path.join(out, f".live-{rank}.json")
        with open(part) as f:
            live[rank] = json.load(f)
        os.remove(part)
    with open(os.path.join(out, "live_step_times.csv"), "w") as f:  # not *.json: not a trace
        f.write("rank,step,seconds\n")
        for rank, times in live.items():
            f.writelines(f"{rank},{step},{seconds:.6f}\n" for step, seconds in times.items())
