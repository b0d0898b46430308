"""Record the long_run sample: 2 processes, DDP over gloo, a small MLP trained for 40 profiled
steps (ProfilerStep#2..#41 kept; #42, the last, is dropped as HTA does) with known anomalies:

- rank 1 stalls in ``data-loading`` for 25 ms at every step N with N % 10 == 7 (steps 7, 17, 27,
  37): a periodic host stall; rank 0 then waits for it in the gradient all_reduce;
- rank 0 runs 40 extra 256x256 matmuls in ``forward`` at step 23 only: a one-off compute spike.

Each rank also measures its steps live (``time.perf_counter`` around each loop iteration) and
writes them to ``live_step_times.csv`` beside the traces (``rank,step,seconds``).

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
from torch.profiler import ProfilerActivity, profile, record_function, schedule

STEPS = 43  # wait 1 + warmup 1 + active 41
STALL_S, PERIOD, PHASE, SPIKE_STEP = 0.025, 10, 7, 23


def worker(rank: int, world: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    live = {}

    def on_trace_ready(prof):
        prof.export_chrome_trace(os.path.join(out_dir, f"rank-{rank}.json.gz"))

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=STEPS - 2),
        on_trace_ready=on_trace_ready,
    ) as prof:
        for _ in range(STEPS):
            step = prof.step_num
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
