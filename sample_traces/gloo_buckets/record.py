"""Record the gloo_buckets sample: 4 CPU processes over gloo, two gradient-sized all_reduces per
step issued back to back (as DDP issues two buckets) while both of the group's gloo worker
threads are busy.

Each of the 4 profiled steps: two ``all_reduce`` of 8 float32 are started asynchronously
(``async_op=True``) and wait for rank ``SLOW_RANK`` (2), which sleeps 30 ms first, so they
hold both worker threads of the world group; then two "buckets" of 524,800 and 525,312 float32
(the sizes of issue #37's report) are all-reduced asynchronously, 2 ms apart. They queue behind
the blocked calls and are taken by the two workers at nearly the same instant when rank 2
arrives, so a worker can record the second bucket's range a fraction of a µs before the first's:
pairing by the ranges' starts would pair different buckets; pairing in issue order (the
``c10d::allreduce_`` that enqueued each range) does not. ``record_shapes=True`` gives every call
its size.

Run: ``python record.py OUT_DIR`` (needs torch; the CPU build is enough).
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, record_function, schedule

WORLD = 4
SLOW_RANK = 2


def work(rank: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29541")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    buckets = [torch.ones(524_800), torch.ones(525_312)]

    def on_trace_ready(prof):
        prof.export_chrome_trace(os.path.join(out_dir, f"rank-{rank}.json.gz"))

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=4),
        on_trace_ready=on_trace_ready,
        record_shapes=True,
    ) as prof:
        for _ in range(6):
            with record_function("blockers"):
                if rank == SLOW_RANK:
                    time.sleep(0.03)
                pending = [dist.all_reduce(torch.ones(8), async_op=True) for _ in range(2)]
            with record_function("buckets"):
                for bucket in buckets:  # queued behind the blockers
                    pending.append(dist.all_reduce(bucket, async_op=True))
                    time.sleep(0.002)
            for work_ in pending:
                work_.wait()
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    mp.spawn(work, args=(out,), nprocs=WORLD, join=True)
