"""Record the compile pair: a torch.compile'd training step whose batch size changes every step,
recompiled every step (the slow program) and compiled once with dynamic shapes (the user's fix),
each step measured live, so that the recompilation finding's saving can be checked against what
the fix saves; and a third run that compiles inside its first profiled step only (warm-up).

Variants (folders):
- ``recompile``: ``torch._dynamo.config.automatic_dynamic_shapes = False`` and a batch of
  ``32 + step`` rows: every step fails the shape guard and compiles the frame again;
- ``dynamic``: the same loop under ``torch.compile(dynamic=True)``: one compile, before the
  profiled steps;
- ``first_compile``: a fixed batch, profiled from the first step, which compiles.

A 3-layer MLP, forward, backward and SGD, one thread, the CPU. ``recompile`` and ``dynamic``
profile steps 2-5 (``schedule(wait=1, warmup=1, active=4)``), ``first_compile`` steps 0-3.
Each loop iteration is timed with ``time.perf_counter``; the folder gets
``live_step_times.csv`` (``step,seconds``).

Run: ``python record.py OUT_DIR`` (needs torch, the CPU build is enough, and a C++ compiler for
Inductor).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

VARIANTS = ("recompile", "dynamic", "first_compile")
ACTIVE = 4
STEPS = ACTIVE + 2


def run(variant: str, out_dir: str) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    torch.set_num_threads(1)
    if variant == "recompile":
        torch._dynamo.config.automatic_dynamic_shapes = False
        torch._dynamo.config.cache_size_limit = 64  # one compile per step, none refused
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    )  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    compiled = torch.compile(model, dynamic=True if variant == "dynamic" else None)
    first = variant == "first_compile"
    plan = schedule(wait=0 if first else 1, warmup=0 if first else 1, active=ACTIVE, repeat=1)
    live = []
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=plan,
        on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(out_dir, "rank-0.json.gz")),
    ) as prof:
        for step in range(STEPS):
            rows = 32 if first else 32 + step
            batch, target = torch.randn(rows, 256), torch.randint(0, 10, (rows,))
            started = time.perf_counter()
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(compiled(batch), target).backward()
            optimizer.step()
            live.append(time.perf_counter() - started)
            prof.step()
    rows = ["step,seconds"] + [f"{step},{seconds:.6f}" for step, seconds in enumerate(live)]
    with open(os.path.join(out_dir, "live_step_times.csv"), "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 3:  # one variant, in a fresh process (Dynamo's caches start empty)
        run(sys.argv[2], sys.argv[1])
    else:
        out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
        for variant in VARIANTS:
            folder = os.path.join(out, variant)
            os.makedirs(folder, exist_ok=True)
            subprocess.run([sys.executable, __file__, folder, variant], check=True)
