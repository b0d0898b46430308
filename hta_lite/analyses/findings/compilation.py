"""One-time work inside the profile: JIT compilation (torch.compile, nvFuser, Triton's JIT) and
CUDA / HIP graph capture.

Found: the ranges of :mod:`..one_time` (compile ranges; captures with the calls that instantiate
a graph), their time per step, and the steps that do the work again or for the first time.

- ``recompilation`` / ``recapture``: model: the repeating steps' ranges (and what runs inside
  them on their thread) take no time, as when the guards hold or the graph is replayed; each
  rank's step graphs are replayed, then the job (:mod:`.host_ranges`). The low end removes
  half. Checked against a recorded pair (tests/data/compile_pair: a recompile every step, and
  the same loop with dynamic shapes) and constructed programs.
- ``warmup`` (first compiles, first captures): no step time of the steady state is saved; the
  time is claimed, so that no general kind (host_bound) prices it as a fix. The finding says the
  profile holds warm-up, and how much.

Blind spots: a recompile or recapture the fix cannot avoid (a new shape the program must see
once) is priced all the same; compilation in a worker thread or process (Inductor's parallel
compile) is seen only where the host waits for it inside a named range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...units import fmt_pct, fmt_us
from .. import one_time
from .context import Context
from .finding import Finding
from .host_ranges import free_cut, per_step


@dataclass(frozen=True)
class Work:
    """One kind of one-time work: ``kind`` (its finding when it repeats), ``verb`` (what the
    rank does), ``first`` (the warm-up's wording), ``method`` and ``advice`` (when it
    repeats)."""

    kind: str
    verb: str
    first: str
    method: str
    advice: str


COMPILE = Work(
    "recompilation",
    "compiles",
    "the first compile of each compiled function is the run's warm-up",
    "the recompiling steps' compile ranges made free in each rank's step graph (the guards"
    " hold), critical path and job replayed",
    "see why it recompiles: TORCH_LOGS=recompiles (torch._logging.set_logs(recompiles=True)); a"
    " shape that changes: torch._dynamo.mark_dynamic(x, dim) or torch.compile(dynamic=True), or"
    " pad to a few sizes; a Python number or flag that changes: pass it as a tensor; past"
    " torch._dynamo.config.cache_size_limit recompiles the frame runs eager",
)
CAPTURE = Work(
    "recapture",
    "captures a CUDA graph",
    "the first capture of each graph is the run's warm-up",
    "the recapturing steps' captures made free in each rank's step graph (the graph is"
    " replayed), critical path and job replayed",
    "capture once and replay: keep the captured shapes static (pad the batch to a few sizes and"
    " capture one graph per size, as vLLM and SGLang do); torch.compile(mode='reduce-overhead')"
    " records a graph for each new shape, so mark the dynamic dimensions or pad them",
)


def find(ctx: Context) -> list[Finding]:
    if ctx.segments.empty:
        return []
    found = []
    for work, ranges_of, label in (
        (COMPILE, one_time.compile_ranges, one_time.compiler),
        (CAPTURE, one_time.capture_ranges, lambda t: "CUDA graph capture"),
    ):
        ranges = {rank: ranges_of(t) for rank, t in ctx.traces.items()}
        ranges = {r: v for r, v in ranges.items() if v}
        if ranges:
            found += _one_time(ctx, work, ranges, label)
    return found


def _one_time(ctx: Context, work: Work, ranges: dict, label) -> list[Finding]:
    """The repeating work's finding and the warm-up's, of ``ranges`` (``{rank: ranges}``)."""
    doing = {key: ns for key, ns in per_step(ctx, ranges).items() if ns > 0}
    steps = ctx.segments.drop_duplicates(["rank", "step"])
    again = set()
    for rank in {r for r, _ in doing}:
        mine = {s for r, s in doing if r == rank}
        again |= {(rank, s) for s in one_time.again(ctx.traces[rank], mine, ctx.step_bounds(rank),
                                                    numbered=work is COMPILE)}  # fmt: skip
    found = []
    if again:
        repeated = {rank: _within(ranges[rank], _bounds(steps, rank, again)) for rank in
                    {r for r, _ in again}}  # fmt: skip
        on_path, cut = free_cut(ctx, repeated)
        _, low = free_cut(ctx, repeated, 0.5)
        for rank, spans in repeated.items():  # priced here, by no general kind
            ctx.claim(rank, [tuple(p) for m in spans.values() for p in m.tolist()])
        per_rank = {rank: sum(doing[k] for k in again if k[0] == rank) for rank in repeated}
        worst = max(per_rank, key=per_rank.get)
        n_steps = int((steps["rank"] == worst).sum())
        k = sum(1 for r, _ in again if r == worst)
        frames = _frames(ctx.traces[worst], worst, again, steps) if work is COMPILE else ""
        found.append(
            Finding(
                work.kind,
                label(ctx.traces[worst]),
                f"rank {worst} {work.verb} again in {k} of its {n_steps} steps{frames}:"
                f" {fmt_us(per_rank[worst] / 1e3 / max(n_steps, 1))} per step",
                work.method,
                work.advice,
                cut,
                low,
                ctx.main_rank(on_path) if on_path.any() else worst,
            )
        )
    first = {key: ns for key, ns in doing.items() if key not in again}
    for rank in {r for r, _ in first}:  # not step time of the steady state: no other kind's
        spans = _within(ranges[rank], _bounds(steps, rank, first))
        ctx.claim(rank, [tuple(p) for m in spans.values() for p in m.tolist()])
    if first:
        found.append(_warmup(ctx, work, first, label))
    return found


def _frames(trace, rank, again, steps) -> str:
    """`` (torch.compile'd frame 0, compiles 0/2 to 0/5)`` where the frames are named."""
    regions = one_time.compiled_regions(trace)
    if not len(regions):
        return ""
    spans = _bounds(steps, rank, again)
    inside = np.zeros(len(regions), bool)
    for start, end in spans:
        inside |= (regions[:, 0] >= start) & (regions[:, 0] < end)
    runs = regions[inside & (regions[:, 2] > 0)]
    if not len(runs):
        return ""
    frames = sorted(set(runs[:, 1].tolist()))
    ids = [f"{f}/{c}" for f, c in runs[:, 1:].tolist()]
    listed = ids[0] if len(ids) == 1 else f"{ids[0]} to {ids[-1]}"
    return f" (torch.compile'd frame {', '.join(map(str, frames[:5]))}: compiles {listed})"


def _warmup(ctx: Context, work: Work, first: dict, label) -> Finding:
    ranks = sorted({r for r, _ in first})
    total = sum(first.values())
    profiled = ctx.replay.base * len(ranks)  # the job's time on each of those ranks
    share = 100 * total / profiled if profiled > 0 else np.nan
    worst = max(first, key=first.get)
    step = "the capture" if ctx.whole_run_is_one_step else f"step {worst[1]}"
    most = f"{step} of rank {worst[0]}"
    if len(first) > 1:
        listed = f"{', '.join(map(str, ranks[:8]))}{' ...' if len(ranks) > 8 else ''}"
        most = (
            f"{len(first)} steps of rank(s) {listed}, the most,"
            f" {fmt_us(first[worst] / 1e3)}, in {most}"
        )
    where = label(ctx.traces[worst[0]])
    return Finding(
        "warmup",
        f"compilation ({where})" if work is COMPILE else where,
        f"the program {work.verb} for the first time inside the profile: {fmt_us(total / 1e3)}"
        f" ({fmt_pct(share)} of the profiled time) in {most}, which the run does once",
        f"no step time: {work.first}",
        "profile after warm-up (torch.profiler.schedule(wait=1, warmup=1, active=...), or skip"
        " the first iterations): the steps that do it are longer than the run's, and every"
        " share of the step here counts that time",
        rank=ranks[0] if len(ranks) == 1 else None,
    )


def _bounds(steps, rank: int, keys) -> list[tuple[int, int]]:
    """[start, end) ns of the rank's steps among ``keys`` ((rank, step) pairs)."""
    mine = steps[steps["rank"] == rank]
    wanted = {s for r, s in keys if r == rank}
    return [(int(a), int(b)) for s, a, b in mine[["step", "step_start", "step_end"]].itertuples(
        index=False) if int(s) in wanted]  # fmt: skip


def _within(spans: dict, bounds: list[tuple[int, int]]) -> dict[int, np.ndarray]:
    """``spans`` (per thread) clipped to ``bounds``."""
    out = {}
    for tid, merged in spans.items():
        parts = [np.stack([np.clip(merged[:, 0], a, b), np.clip(merged[:, 1], a, b)], axis=1)
                 for a, b in bounds]  # fmt: skip
        joined = np.concatenate(parts) if parts else np.zeros((0, 2), np.int64)
        joined = joined[joined[:, 1] > joined[:, 0]]
        if len(joined):
            out[tid] = joined[np.argsort(joined[:, 0], kind="stable")]
    return out
