"""Record the gloo_pipeline sample: a pipeline of 4 processes linked by point-to-point sends.

Each step, rank 0 makes a 64x256 batch (``data-loading``) and every rank runs its stage
(``forward``: 10 matmuls + tanh; rank 2, the slow stage, runs 20), receiving its input from the
rank before (``dist.recv``) and sending its output to the rank after (``dist.send``). Recorded
with ``record_shapes=True``, so each ``c10d::send`` / ``c10d::recv_`` op names its peer.
Profiled steps: ProfilerStep#1..#6 (#0 is the warm-up; #6, the last, is dropped as HTA does).

Run: ``python record.py OUT_DIR`` (needs torch; the CPU build is enough).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, record_function, schedule

WORLD, STEPS, SLOW_RANK = 4, 7, 2


def worker(rank: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29543")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    weight = torch.randn(256, 256) / 16

    def on_trace_ready(prof):
        prof.export_chrome_trace(os.path.join(out_dir, f"rank-{rank}.json.gz"))

    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=schedule(wait=0, warmup=1, active=STEPS - 1),
        on_trace_ready=on_trace_ready,
    ) as prof:
        for _ in range(STEPS):
            x = torch.empty(64, 256)
            if rank == 0:
                with record_function("data-loading"):
                    x = torch.randn(64, 256)
            else:
                dist.recv(x, src=rank - 1)
            with record_function("forward"):
                for _ in range(20 if rank == SLOW_RANK else 10):
                    x = torch.tanh(x @ weight)
            if rank < WORLD - 1:
                dist.send(x, dst=rank + 1)
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    mp.spawn(worker, args=(out,), nprocs=WORLD)
