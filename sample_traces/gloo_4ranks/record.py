"""Record the gloo_4ranks sample: 4 CPU processes, DDP over gloo, a toy MLP, 3 profiled steps.

Rank 2 is made a host-bound straggler on purpose: its data loading sleeps 20 ms per step.
Every step is annotated like Megatron's timers (data-loading, forward-compute, backward-compute,
optimizer). Run: ``python record.py OUT_DIR`` (needs torch; CPU build is enough).
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile, record_function, schedule

WORLD = 4
SLOW_RANK = 2


def work(rank: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def on_trace_ready(prof):
        prof.export_chrome_trace(os.path.join(out_dir, f"rank-{rank}.json.gz"))

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=4),
        on_trace_ready=on_trace_ready,
    ) as prof:
        for _ in range(6):
            with record_function("data-loading"):
                batch = torch.randn(64, 256)
                target = torch.randint(0, 10, (64,))
                if rank == SLOW_RANK:
                    time.sleep(0.02)
            with record_function("forward-compute"):
                loss = torch.nn.functional.cross_entropy(model(batch), target)
            with record_function("backward-compute"):
                optimizer.zero_grad()
                loss.backward()  # DDP all-reduces gradients over gloo here
            with record_function("optimizer"):
                optimizer.step()
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    mp.spawn(work, args=(out,), nprocs=WORLD, join=True)
