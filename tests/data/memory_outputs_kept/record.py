"""Record memory_outputs_kept: one CPU process trains a small MLP for 5 profiled steps with
``profile_memory=True`` and keeps each step's logits in a list, as code that gathers outputs
for a metric after the loop does, without ``.detach()`` or ``.item()``.

Known by construction: the logits (64 x 10 float32 = 2,560 bytes, made by ``aten::addmm`` of the
``head`` Linear) are never freed, one per step: a leak of 2,560 bytes per step. SGD with momentum
allocates its momentum buffers in the first step only: a cache that stops growing, not a leak.

Run: ``python record.py OUT_DIR`` (needs torch; the CPU build is enough).
"""

from __future__ import annotations

import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile, schedule


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU())
        self.head = torch.nn.Linear(512, 10)

    def forward(self, x):
        return self.head(self.encoder(x))


def main(out_dir: str) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = MLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    kept = []

    def on_trace_ready(prof):
        prof.export_chrome_trace(os.path.join(out_dir, "rank-0.json.gz"))

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=6),
        on_trace_ready=on_trace_ready,
        profile_memory=True,
        record_shapes=True,
        with_stack=True,
    ) as prof:
        for _ in range(8):
            batch = torch.randn(64, 256)
            target = torch.randint(0, 10, (64,))
            logits = model(batch)
            loss = torch.nn.functional.cross_entropy(logits, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            kept.append(logits)  # the leak: logits kept, with their graph
            prof.step()


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    main(out)
