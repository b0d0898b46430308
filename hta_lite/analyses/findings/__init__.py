"""Findings ranked by the step time a fix would save (docs/analyses/findings.md).

Every kind is a module with ``find(ctx) -> list[Finding]``: it reads the views it rests on
(:class:`.context.Context`) and states its fix as a :class:`.replay.Cut` — what the fix would
shorten or remove. :mod:`.ranking` replays each cut (:mod:`.replay`: the job's segments and
collectives; :mod:`.graph_replay`: a rank's step graphs) and ranks the findings by the saving;
the cumulative column replays the top fixes together, overlapping cuts discounted.

Kinds: :mod:`.straggler`, :mod:`.pipeline_stage` (a pipeline's slowest stage), :mod:`.host_work`
(data loading), :mod:`.syncs` (host syncs, synchronizing collectives),
:mod:`.exposed_communication`, :mod:`.launch_overhead`,
:mod:`.tiny_kernels` (fusion), :mod:`.below_roof` (GEMMs and convolutions), :mod:`.memcpy`
(pageable copies), :mod:`.compilation` (recompiles; a first compile is warm-up),
:mod:`.step_anomalies`, :mod:`.warmup` and :mod:`.memory` (no step time); :mod:`.held_work`
says where the GPU waited, work launched, on what the trace does not show (no finding);
:mod:`.step_hint` names the range that could mark a step where the trace has none.
A new kind is a new module here, added to ``KINDS``.
"""

from __future__ import annotations

import pandas as pd

from ...errors import MissingDataError
from . import (
    below_roof,
    compilation,
    exposed_communication,
    held_work,
    host_bound,
    host_work,
    launch_loop,
    launch_overhead,
    memcpy,
    memory,
    pipeline_stage,
    queue_drained,
    step_anomalies,
    straggler,
    sync_in_loop,
    syncs,
    tiny_kernels,
    warmup,
)
from .context import Context
from .ranking import COLUMNS, rank_findings
from .replay import Cut, Replay
from .step_hint import step_range_hint

KINDS = (
    straggler, pipeline_stage, host_work, compilation, sync_in_loop, launch_loop, queue_drained,
    syncs, exposed_communication, launch_overhead, tiny_kernels, below_roof, memcpy, warmup,
    host_bound, step_anomalies, memory,
)  # fmt: skip

__all__ = ["COLUMNS", "Context", "Cut", "Replay", "findings", "refuse_range_profiled"]


def refuse_range_profiled(traces) -> None:
    """Raise ``MissingDataError`` when a rank of ``traces`` (``{rank: RankTrace}``) was recorded
    with the CUPTI range profiler: each kernel launch waits there for the profiler's replays of
    the kernel, so no saving can be read off its times."""
    profiled = [rank for rank, trace in traces.items() if len(trace.kernel_counters)]
    if profiled:
        raise MissingDataError(
            None,
            f"rank(s) {sorted(profiled)} were recorded with the CUPTI range profiler"
            " (cuda_profiler_range events): each kernel launch waits there for the"
            " profiler's replays of the kernel, so the trace's times are not the run's and"
            " no saving can be estimated from them; record without profiler_metrics for"
            " findings (get_cupti_counter_data_with_operators() reads these counters)",
        )


def findings(ctx: Context) -> pd.DataFrame:
    """Every kind's findings over ``ctx``, ranked (columns :data:`COLUMNS`)."""
    found = pipeline_stage.priced_at_host([f for kind in KINDS for f in kind.find(ctx)])
    ctx.replay_graphs()  # the graph cuts the kinds asked for, one rank at a time
    table = rank_findings(ctx, found)
    caveats = (  # what "per step" means
        [WHOLE_RUN_CAVEAT + step_range_hint(ctx.traces)] if ctx.whole_run_is_one_step else []
    )
    caveats += [REPEATS_CAVEAT] if ctx.steps_from_repeats and len(table) else []
    caveats += [NOT_PYTORCH_CAVEAT] if not ctx.runs_pytorch and len(table) else []
    caveats += [c for c in [held_work.caveat(ctx)] if c]
    if caveats:
        table.attrs["caveat"] = " ".join(caveats)
    return table


#: ``attrs["caveat"]`` of findings over traces without steps
WHOLE_RUN_CAVEAT = (
    "The whole trace is one step (no ProfilerStep, no repeating NVTX range or GPU work), so"
    " one-time work (start-up, initialization, compilation) counts as step time: name the"
    " range that marks a step (step_range=..., --step-range) to leave it out."
)
#: ... and over traces whose steps are the repetitions of their GPU work
REPEATS_CAVEAT = (
    "The trace marks no step: its steps are the repetitions of its GPU work, each closed by a"
    " host wait (health: steps_from_kernels); name the range that marks a step"
    " (step_range=..., --step-range) if they are not your iterations."
)
#: ... and over a capture of a program that shows no PyTorch (an Nsight Systems export)
NOT_PYTORCH_CAVEAT = (
    "The capture shows no PyTorch (no aten operator, no PyTorch kernel): the advice names"
    " PyTorch's calls; in CUDA code the same fixes are one cudaMemcpy after the loop for"
    " .item() / .cpu() in it, cudaStreamSynchronize on one stream for torch.cuda.synchronize(),"
    " page-locked memory (cudaHostAlloc, cudaHostRegister) with cudaMemcpyAsync for"
    " pin_memory() and non_blocking copies, fused kernels for torch.compile, and CUDA graphs"
    " (cudaStreamBeginCapture) for graph capture."
)
