"""Record the stall pair: a 4-rank DDP job over gloo whose gradients go in two buckets, with and
without a data-loading stall on one rank, each measured live, so that the straggler finding's
saving (and every cross-rank figure) can be checked against what removing the stall saves.

Variants (folders): ``stall`` (rank ``SLOW_RANK`` sleeps ``STALL_S`` in a ``data-loading``
range every step, as a slow input pipeline does) and ``no_stall``. DDP with ``bucket_cap_mb``
small enough for two gradient buckets, each all-reduced asynchronously during the backward pass.
Each rank measures every loop iteration with ``time.perf_counter``; the folder gets
``live_step_times.csv`` (``rank,step,seconds``). 1 waiting + 1 warm-up + ``ACTIVE`` profiled
steps, ``record_shapes=True``.

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

WORLD, ACTIVE, STALL_S, SLOW_RANK = 4, 4, 0.25, 2
VARIANTS = ("stall", "no_stall")


def worker(rank: int, variant: str, out_dir: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    layers = [torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
              torch.nn.ReLU(), torch.nn.Linear(512, 10)]  # fmt: skip
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(*layers),
        bucket_cap_mb=1.0,  # 2.1 MB of gradients: two buckets
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    live = {}

    def on_trace_ready(prof):
        prof.export_chrome_trace(os.path.join(out_dir, f"rank-{rank}.json.gz"))

    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=schedule(wait=1, warmup=1, active=ACTIVE),
        on_trace_ready=on_trace_ready,
    ) as prof:
        for _ in range(ACTIVE + 2):
            step = prof.step_num
            started = time.perf_counter()
            with record_function("data-loading"):
                batch, target = torch.randn(256, 512), torch.randint(0, 10, (256,))
                if variant == "stall" and rank == SLOW_RANK:
                    time.sleep(STALL_S)
            with record_function("forward"):
                loss = torch.nn.functional.cross_entropy(model(batch), target)
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


def record(variant: str, out_dir: str, port: int) -> None:
    os.makedirs(out_dir, exist_ok=True)
    mp.spawn(worker, args=(variant, out_dir, port), nprocs=WORLD)
    rows = ["rank,step,seconds"]
    for rank in range(WORLD):
        path = os.path.join(out_dir, f".live-{rank}.json")
        with open(path) as f:
            for step, seconds in sorted(json.load(f).items(), key=lambda kv: int(kv[0])):
                rows.append(f"{rank},{step},{seconds:.6f}")
        os.remove(path)
    with open(os.path.join(out_dir, "live_step_times.csv"), "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for k, variant in enumerate(VARIANTS):
        record(variant, os.path.join(out, variant), 29650 + k)
