"""Record memory_ranks: 4 processes, DDP over gloo (CPU), a small MLP trained with SGD for 5
profiled steps with ``profile_memory=True``. Known by construction:

- rank 2 keeps each step's logits in a list (64 x 10 float32 = 2,560 bytes per step, by
  ``aten::addmm`` of the ``head`` Linear): a leak on rank 2 only;
- rank 3 makes a 4 MiB scratch tensor in each step (``aten::empty`` in a ``scratch``
  annotation) and frees it in the step: its peak is 4 MiB above the other ranks', no leak.

Run: ``python record.py OUT_DIR`` (needs torch; the CPU build is enough).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, record_function, schedule

WORLD = 4
SCRATCH_ELEMENTS = 1 << 20  # float32: 4 MiB


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU())
        self.head = torch.nn.Linear(512, 10)

    def forward(self, x):
        return self.head(self.encoder(x))


def run(rank: int, out_dir: str) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    model = torch.nn.parallel.DistributedDataParallel(MLP())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = []

    def on_trace_ready(prof):
        prof.export_chrome_trace(os.path.join(out_dir, f"rank{rank}.json.gz"))

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=6),
        on_trace_ready=on_trace_ready,
        profile_memory=True,
    ) as prof:
        for _ in range(8):
            batch = torch.randn(64, 256)
            target = torch.randint(0, 10, (64,))
            logits = model(batch)
            loss = torch.nn.functional.cross_entropy(logits, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if rank == 2:
                kept.append(logits)  # the leak
            if rank == 3:
                with record_function("scratch"):
                    scratch = torch.empty(SCRATCH_ELEMENTS).fill_(1.0)
                del scratch
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    mp.spawn(run, args=(out,), nprocs=WORLD)
