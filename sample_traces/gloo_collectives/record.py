"""Record the gloo_collectives samples: CPU processes over gloo, every collective of known size.

Each profiled step (3 of them) runs, on two process groups that interleave — ``world`` (every
rank) and ``half`` (ranks split in two halves by ``new_subgroups``):

1. DDP backward of a two-layer MLP: one gradient bucket, an all_reduce of 12,448 float32
   (49,792 bytes) on ``world``;
2. ``all_gather_into_tensor``: 1,024 float32 in, ``world_size`` x 1,024 out, on ``world``;
3. ``broadcast``: 2,048 int64 (16,384 bytes) from the half's first rank, on ``half``;
4. ``all_to_all_single``: ``world_size`` x 256 float32 in and out, on ``world``;
5. ``all_reduce``: 4,096 float32 (16,384 bytes) on ``half``;
6. ``barrier`` on ``world``.

Rank ``SLOW_RANK`` (2) is delayed on purpose: its ``data-loading`` sleeps 100 ms per step, so every
other rank waits for it in the step's first collective (the gradient all_reduce).

Run: ``python record.py WORLD_SIZE OUT_DIR`` (needs torch; the CPU build is enough).
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

SLOW_RANK = 2
DELAY_S = 0.1


def work(rank: int, world: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29531")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    half, _ = dist.new_subgroups(group_size=world // 2)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32))
    )
    first_of_half = (rank // (world // 2)) * (world // 2)

    def on_trace_ready(prof):
        prof.export_chrome_trace(os.path.join(out_dir, f"rank-{rank}.json.gz"))

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=3),
        record_shapes=True,
        on_trace_ready=on_trace_ready,
    ) as prof:
        for _ in range(5):
            with record_function("data-loading"):
                batch = torch.randn(16, 64)
                if rank == SLOW_RANK:
                    time.sleep(DELAY_S)
            with record_function("forward-backward"):
                model(batch).sum().backward()
            with record_function("explicit-collectives"):
                gathered = torch.empty(world * 1024)
                dist.all_gather_into_tensor(gathered, torch.ones(1024))
                dist.broadcast(torch.arange(2048), src=first_of_half, group=half)
                dist.all_to_all_single(torch.empty(world * 256), torch.ones(world * 256))
                dist.all_reduce(torch.ones(4096), group=half)
                dist.barrier()
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(sys.argv[1])
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    mp.spawn(work, args=(world, out), nprocs=world)
