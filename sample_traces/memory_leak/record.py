"""Record the memory_leak sample: one CPU process, a small MLP trained for 3 profiled steps with
``profile_memory=True``, and a deliberate leak.

Each step appends a tensor of 262,144 float32 (exactly 1 MiB, made by ``aten::empty`` inside a
``leak`` annotation) to a list that is never cleared, so allocated memory grows by 1 MiB per
step on top of what the step frees. ``with_stack=True`` records the ``nn.Module`` events, so
allocations are attributed to modules too.

Run: ``python record.py OUT_DIR`` (needs torch; the CPU build is enough).
"""

from __future__ import annotations

import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

LEAK_ELEMENTS = 262_144  # float32: 1 MiB per step


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
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    leaked = []

    def on_trace_ready(prof):
        prof.export_chrome_trace(os.path.join(out_dir, "rank-0.json.gz"))

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=4),
        on_trace_ready=on_trace_ready,
        profile_memory=True,
        record_shapes=True,
        with_stack=True,
    ) as prof:
        for _ in range(6):
            batch = torch.randn(64, 256)
            target = torch.randint(0, 10, (64,))
            loss = torch.nn.functional.cross_entropy(model(batch), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            with record_function("leak"):
                leaked.append(torch.empty(LEAK_ELEMENTS))
            prof.step()


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    main(out)
