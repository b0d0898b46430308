"""Time to find the steps of a capture without step ranges from its repeating GPU work
(hta_lite.load.steps_from_gpu_work) on a synthetic loop: ``--kernels`` launches in iterations of
``--per-iteration`` launches (50 kernel names over and over, then a ``loss`` kernel), each ending
in a host wait (a stream synchronization); the worst case for the search is the same loop
without any wait (every name is tried and none qualifies).

    python benchmarks/bench_kernel_steps.py --kernels 2000000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

from hta_lite.load.steps_from_gpu_work import repeating_steps


def capture(kernels: int, per_iteration: int, waits: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    i = np.arange(kernels, dtype=np.int64)
    launch = 1_000 + i * 10_000
    at = i % per_iteration  # 50 names over and over, then the iteration's loss kernel
    kernel = [f"kernel_{k}" for k in at % 50]
    names = pd.Categorical(np.where(at == per_iteration - 1, "loss", kernel))
    gpu = pd.DataFrame({"ts": launch + 5_000, "dur": np.full(kernels, 4_000), "name": names,
                        "cat": pd.Categorical(["kernel"] * kernels), "correlation": i})  # fmt: skip
    cpu = pd.DataFrame({"ts": launch, "dur": np.full(kernels, 2_000), "correlation": i,
                        "name": pd.Categorical(["cudaLaunchKernel"] * kernels)})  # fmt: skip
    if waits:  # a stream synchronization at the end of each iteration
        ends = launch[per_iteration - 1 :: per_iteration] + 6_000
        sync = pd.DataFrame({"ts": ends, "dur": np.full(len(ends), 1_000),
                             "name": pd.Categorical(["Stream Sync"] * len(ends)),
                             "cat": pd.Categorical(["cuda_sync"] * len(ends)),
                             "correlation": np.full(len(ends), -1)})  # fmt: skip
        gpu = pd.concat([gpu, sync], ignore_index=True)
    return cpu, gpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kernels", type=int, default=2_000_000)
    parser.add_argument("--per-iteration", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for waits in (True, False):
        cpu, gpu = capture(args.kernels, args.per_iteration, waits)
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            found = repeating_steps(cpu, gpu)
            times.append(time.perf_counter() - start)
        steps = 0 if found is None else len(found[1])
        print(json.dumps({"kernels": args.kernels, "waits": waits, "steps": steps,
                          "seconds": [round(t, 3) for t in times]}))  # fmt: skip


if __name__ == "__main__":
    main()
