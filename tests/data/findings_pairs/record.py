"""Record the findings pairs: one small DDP job over gloo (2 CPU processes), the same job with
one deliberate cause added, each measured live, so a finding's estimated saving can be checked
against the saving the fix really gives.

Variants (folders): ``baseline``; ``slow_loader`` (rank 1 sleeps ``STALL_S`` in
``data-loading`` every step); ``extra_sync`` (every step logs ``METRICS`` scalars, each with a
blocking all_reduce and ``.item()``, as a loss logger does). Each rank measures every loop
iteration with ``time.perf_counter`` and the folder gets ``live_step_times.csv``
(``rank,step,seconds``). 2 waiting + 1 warm-up + ``ACTIVE`` profiled steps, ``record_shapes=True``.

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

ACTIVE, STALL_S, METRICS = 20, 0.04, 16
VARIANTS = ("baseline", "slow_loader", "extra_sync")


def worker(rank: int, variant: str, out_dir: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    live = {}

    def on_trace_ready(prof):
        prof.export_chrome_trace(os.path.join(out_dir, f"rank-{rank}.json.gz"))

    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=schedule(wait=2, warmup=1, active=ACTIVE),
        on_trace_ready=on_trace_ready,
    ) as prof:
        for _ in range(ACTIVE + 3):
            step = prof.step_num
            started = time.perf_counter()
            with record_function("data-loading"):
                batch, target = torch.randn(64, 256), torch.randint(0, 10, (64,))
                if variant == "slow_loader" and rank == 1:
                    time.sleep(STALL_S)
            with record_function("forward"):
                loss = torch.nn.functional.cross_entropy(model(batch), target)
            with record_function("backward"):
                optimizer.zero_grad()
                loss.backward()
            with record_function("optimizer"):
                optimizer.step()
            if variant == "extra_sync":
                with record_function("logging"):
                    for _ in range(METRICS):
                        value = loss.detach().clone()
                        dist.all_reduce(value)
                        value.item()
            live[step] = time.perf_counter() - started
            prof.step()
    with open(os.path.join(out_dir, f".live-{rank}.json"), "w") as f:
        json.dump(live, f)
    dist.destroy_process_group()


def record(variant: str, out_dir: str, port: int) -> None:
    os.makedirs(out_dir, exist_ok=True)
    mp.spawn(worker, args=(variant, out_dir, port), nprocs=2)
    rows = ["rank,step,seconds"]
    for rank in range(2):
        part = os.path.join(out_dir, f".live-{rank}.json")
        with open(part) as f:
            rows += [
                f"{rank},{step},{s:.6f}"
                for step, s in sorted(json.load(f).items(), key=lambda p: int(p[0]))
            ]
        os.remove(part)
    with open(os.path.join(out_dir, "live_step_times.csv"), "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for i, name in enumerate(VARIANTS):
        record(name, os.path.join(out, name), 29541 + i)
