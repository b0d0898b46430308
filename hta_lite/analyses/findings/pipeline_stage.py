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
the stages are few; a stage that is also the straggler at the collectives is that finding; so
is, on a GPU rank, a stage slow on its host (cause host-bound): the host-side kinds price it
at its code site (host_bound, data_loading, ...), and balancing layers would not fix it.
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_us
from ..straggler_causes import cause_of
from .context import Context
from .finding import Finding
from .replay import Cut


def find(ctx: Context) -> list[Finding]:
    report = ctx.stragglers
    rank = getattr(report, "slow_stage", None)
    if rank is None or rank in report.stragglers or ctx.segments.empty:
        return []
    row = report.stages.set_index("rank").loc[rank]
    share = float(row["excess_us"]) / float(row["work_us"]) if row["work_us"] > 0 else 0.0
    mine = ctx.segments["rank"].to_numpy() == rank
    cut = np.where(mine, ctx.replay.spans * share, 0.0)
    if not cut.any():
        return []
    cause, region = cause_of(report.causes, rank)
    if cause == "host-bound" and not ctx.traces[rank].is_cpu_only:
        return []  # its GPU waits for its host: the host-side kinds price that, at its site
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
            "balance the stages: move layers from this stage to the others (Megatron-LM:"
            " --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers; a"
            " custom split in torch.distributed.pipelining), or remove what makes this stage"
            " slower (its cause above)",
            Cut(cut),
            Cut(cut / 2),
            rank,
        )
    ]
