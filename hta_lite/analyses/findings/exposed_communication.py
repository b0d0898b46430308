"""Communication not hidden by computation.

Model: in each step, the communication on the job's critical path (collectives after their
last arrival, communication kernels) is hidden under the compute on the path of that step, up
to that compute: each collective's transfer (and each communication kernel's path time) is cut
by ``min(1, compute / communication)`` of it, and the job replayed. This is what overlapping
buckets with the backward pass (DDP / FSDP prefetch, ``overlap_grad_reduce``) gives at best.
The low end hides half of that.

Only device collectives (NCCL / RCCL kernels) are hidden: a host collective (gloo on CPU
ranks) shares the cores with the computation, and hiding it needs cores the trace does not show
are free — on the recorded pair (2 processes on 2 cores, DDP buckets of 1 MB against one bucket
after backward) overlapping saved nothing (the overlapped run was 4 ms per step slower).

In a run that does not train (no backward pass or optimizer step in the trace: inference), the
communication is the layers' own (tensor- or expert-parallel): what hides it there is two
micro-batches overlapped (one computes while the other communicates), and the advice says so,
with the faster and fused all-reduces that shorten it instead.

Blind spots: a collective whose result the next operation needs (a tensor-parallel all_reduce
inside a layer) cannot be hidden behind that operation; synchronizing collectives are the sync
kind's, not this one's; in a job not every rank of which is loaded, a collective's time
includes waiting for the absent ranks (the evidence then says how many collectives).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...classify import short_name
from ...units import fmt_us
from .context import Context
from .finding import Finding
from .replay import Cut
from .syncs import SYNC_COLLECTIVES, TINY_BYTES

COMMUNICATION = ("communication", "gpu_communication_bound")
COMPUTE = ("gpu_compute_bound", "cpu_bound")
TRAINING_ADVICE = (
    "overlap communication with compute: DDP buckets (bucket_cap_mb) issued during backward,"
    " FSDP prefetch, Megatron overlap_grad_reduce / overlap_param_gather; fewer, larger"
    " collectives"
)
INFERENCE_ADVICE = (
    "the layers' collectives wait for their inputs: overlap two micro-batches (SGLang's"
    " two-batch overlap); shorten them with a custom or symmetric-memory all-reduce (NVLS), the"
    " all-reduce fused with the next norm (FlashInfer / TensorRT-LLM allreduce_fusion), or a"
    " smaller tensor-parallel degree"
)


def find(ctx: Context) -> list[Finding]:
    path = ctx.job_path.path()
    if path.empty:
        return []
    by = path.groupby(["step", "bound_by"])["duration_us"].sum().unstack(fill_value=0.0)
    comm = by[[c for c in COMMUNICATION if c in by]].sum(axis=1)
    compute = by[[c for c in COMPUTE if c in by]].sum(axis=1)
    if not (comm > 0).any():
        return []
    share = (np.minimum(comm, compute) / comm.where(comm > 0)).fillna(0.0)
    inst = ctx.instances
    on_device = set(ctx.calls.loc[ctx.calls["source"] == "gpu", "instance"].tolist())
    movable = inst[~inst["collective"].isin(SYNC_COLLECTIVES)
                   & ~((inst["bytes"] >= 0) & (inst["bytes"] <= TINY_BYTES))
                   & inst["instance"].isin(on_device)]  # fmt: skip
    transfer = {
        int(i): ctx.replay.transfers.get(int(i), 0.0) * float(share.get(step, 0.0))
        for i, step in zip(movable["instance"].tolist(), movable["step"].tolist())
    }
    ev = ctx.events
    kernels = (ev["bound_by"] == "gpu_communication_bound").to_numpy()
    factor = pd.Series(ev["step"]).map(share).fillna(0.0).to_numpy()
    on_path = ctx.per_segment(kernels, ev["duration"].to_numpy(np.float64) * factor)
    cut = Cut(on_path, {k: v for k, v in transfer.items() if v > 0})
    if not cut.total() > 0:
        return []
    steps = max(ctx.replay.n_steps, 1)
    evidence = (
        f"{fmt_us(comm.sum() / steps)} per step of communication on the job's critical path,"
        f" beside {fmt_us(compute.sum() / steps)} of computation on it"
    )
    partial = int((~movable["complete"].astype(bool)).sum())
    if partial:
        evidence += (
            f"; {partial} of the {len(movable)} collectives have members that are not loaded:"
            " their time includes waiting for those ranks, so less of it is communication"
        )
    top = path[path["bound_by"].isin(COMMUNICATION)].groupby("name")["duration_us"].sum()
    top = top.sort_values(ascending=False).index.astype(str)  # whole names: the path's table
    return [
        Finding(
            "exposed_communication",
            ", ".join(list(dict.fromkeys(map(short_name, top)))[:3]),
            evidence,
            "communication on the path hidden under the path's computation of its step (up to"
            " it), job replayed",
            TRAINING_ADVICE if ctx.training else INFERENCE_ADVICE,
            cut,
            cut.scaled(0.5),
        )
    ]
