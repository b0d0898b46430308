"""Record the pipeline pair: a 3-stage pipeline over gloo point-to-point sends, with one slow
stage and balanced, each measured live, so that what balancing the stages saves is known.

Each step, rank 0 makes a 64x256 batch (``data-loading``); every rank receives its input from
the rank before (``dist.recv``), runs its stage (``forward``: a matmul and ``STAGE_S`` of
sleep, so that the processes contend little on two cores: variant ``slow`` gives rank
``SLOW_RANK`` twice that) and sends its output to the rank after (``dist.send``). Each rank
measures every loop iteration with ``time.perf_counter``; the folder gets
``live_step_times.csv`` (``rank,step,seconds``). 1 warm-up + ``ACTIVE`` profiled steps,
``record_shapes=True`` (each ``c10d::send`` / ``c10d::recv_`` op names its peer).

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

WORLD, ACTIVE, STAGE_S, SLOW_RANK = 3, 8, 0.004, 1
VARIANTS = ("slow", "balanced")


def worker(rank: int, variant: str, out_dir: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    weight = torch.randn(256, 256) / 16
    stage_s = STAGE_S * (2 if variant == "slow" and rank == SLOW_RANK else 1)
    live = {}

    def on_trace_ready(prof):
        prof.export_chrome_trace(os.path.join(out_dir, f"rank-{rank}.json.gz"))

    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=schedule(wait=0, warmup=1, active=ACTIVE),
        on_trace_ready=on_trace_ready,
    ) as prof:
        for _ in range(ACTIVE + 1):
            step = prof.step_num
            started = time.perf_counter()
            x = torch.empty(64, 256)
            if rank == 0:
                with record_function("data-loading"):
                    x = torch.randn(64, 256)
            else:
                dist.recv(x, src=rank - 1)
            with record_function("forward"):
                x = torch.tanh(x @ weight)
                time.sleep(stage_s)
            if rank < WORLD - 1:
                dist.send(x, dst=rank + 1)
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
        record(variant, os.path.join(out, variant), 29670 + k)
