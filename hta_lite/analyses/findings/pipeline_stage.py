"""A pipeline's slowest stage: the stages after it wait in their receives for it (and, where a
send waits to be received, those before it in their sends).

Model: the stage's work (:mod:`..pipeline_stages`: its GPU's time outside communication and
waiting for its host, or on a CPU-only rank its time outside its calls) made the median other
stage's: each of its segments
shortened by the same share, ``excess / work``, and the job replayed through its send / recv
pairs; low end: half of it. The stage the straggler report names (one rule, so the key findings
and this table never disagree).

Blind spots: the share is the same in every segment (a stage slow in one part only is priced as
slow throughout; on a GPU rank the segments also hold host time and idle, shortened alike);
moving work to another stage makes that one slower, which the median stage does not see when
the stages are few; a stage that is also the straggler at the collectives is that finding. On a
GPU rank, a stage slow on its host (cause host-bound) is priced here with advice for its host
(balancing layers would not fix it), unless a host-side kind (:data:`HOST_KINDS`) has a finding
on its rank: that one prices it at its code site (:func:`priced_at_host`).
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_us
from ..straggler_causes import cause_of
from .context import Context
from .finding import Finding
from .replay import Cut

#: kinds that price a GPU's wait for its host at the code site (launch_overhead, found on most
#: GPU ranks and small, is not one of them)
HOST_KINDS = ("host_bound", "data_loading", "sync_in_loop", "launch_bound_loop", "queue_drained",
              "host_sync")  # fmt: skip
HOST_BOUND = "cause: host-bound"  # in the evidence of a stage whose GPU waits for its host

BALANCE_ADVICE = (
    "balance the stages: move layers from this stage to the others (Megatron-LM:"
    " --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers; a custom split in"
    " torch.distributed.pipelining), or remove what makes this stage slower (its cause above)"
)
HOST_ADVICE = (
    "its GPU waits for its host before it works: shorten the host's work there (load batches"
    " ahead: DataLoader workers, pin_memory, prefetch; move syncs out of the step; capture the"
    " step in a CUDA graph) — moving layers to other stages would not fix it"
)


def priced_at_host(found: list[Finding]) -> list[Finding]:
    """``found`` less a host-bound stage's finding where a host-side kind has one on its rank
    (one fix, priced once)."""
    at_host = {f.rank for f in found if f.kind in HOST_KINDS}
    return [
        f for f in found
        if not (f.kind == "pipeline_stage" and HOST_BOUND in f.evidence and f.rank in at_host)
    ]  # fmt: skip


def find(ctx: Context) -> list[Finding]:
    report = ctx.stragglers
    rank = getattr(report, "slow_stage", None)
    if rank is None or rank in report.stragglers or ctx.segments.empty:
        return []
    row = report.stages.set_index("rank").loc[rank]
    cause, region = cause_of(report.causes, rank)
    at_host = cause == "host-bound" and not ctx.traces[rank].is_cpu_only
    share = float(row["excess_us"]) / float(row["work_us"]) if row["work_us"] > 0 else 0.0
    mine = ctx.segments["rank"].to_numpy() == rank
    cut = np.where(mine, ctx.replay.spans * share, 0.0)
    if not cut.any():
        return []
    cause = (f"; cause: {cause}" + (f" in '{region}'" if region else "")) if cause else ""
    return [
        Finding(
            "pipeline_stage",
            f"rank {rank}",
            f"rank {rank} works {fmt_us(row['work_us'])} per step outside communication, the"
            f" median other stage {fmt_us(row['typical_us'])}: the stages after it wait for it"
            f" in their receives{cause}",
            "the stage's work made the median stage's (each of its segments shortened by"
            f" {100 * share:.0f} %), job replayed through the send / recv pairs",
            HOST_ADVICE if at_host else BALANCE_ADVICE,
            Cut(cut),
            Cut(cut / 2),
            rank,
        )
    ]
