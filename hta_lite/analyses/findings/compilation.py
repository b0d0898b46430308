"""One-time work inside the profile: JIT compilation (torch.compile, nvFuser, Triton's JIT) and
CUDA / HIP graph capture.

Found: the host ranges named as compilation (``kineto.COMPILE_PATTERNS``), and each capture (a
``BeginCapture`` call to the next ``EndCapture`` call of its thread) with the calls that
instantiate a graph, their time per step. A
step *compiles again* when it compiles and runs a torch.compile'd frame whose compile number is
not 0 (``Torch-Compiled Region: 0/3``: a guard failed, the frame was compiled again), or, for a
compiler that names no compile number, when it is not the rank's first step that compiles; a
step *captures again* when it is not the rank's first step that captures. Any other compile or
capture is the program's first: warm-up.

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

import re
from dataclasses import dataclass

import numpy as np

from ...intervals import merge
from ...kineto import COMPILE_PATTERNS, COMPILED_REGION, GRAPH_INSTANTIATE_NAMES
from ...units import fmt_pct, fmt_us
from ..common import GpuIntervals, one_of
from ..operators.graph_sources import capture_calls
from .context import Context
from .finding import Finding
from .graph_replay import covered
from .host_ranges import free_cut, per_step, ranges_named

COMPILING = re.compile("|".join(f"(?:{p})" for p in COMPILE_PATTERNS.values()))


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
        (COMPILE, lambda t: ranges_named(t, COMPILING), _compiler),
        (CAPTURE, _capture_ranges, lambda t: "CUDA graph capture"),
    ):
        ranges = {rank: ranges_of(t) for rank, t in ctx.traces.items()}
        ranges = {r: v for r, v in ranges.items() if v}
        if ranges:
            found += _one_time(ctx, work, ranges, label)
    return found


def _one_time(ctx: Context, work: Work, ranges: dict, label) -> list[Finding]:
    """The repeating work's finding and the warm-up's, of ``ranges`` (``{rank: ranges}``)."""
    doing = {key: ns for key, ns in per_step(ctx, ranges).items() if ns > 0}
    again = _repeating_steps(ctx, doing, numbered=work is COMPILE)
    steps = ctx.segments.drop_duplicates(["rank", "step"])
    found = []
    if again:
        repeated = {rank: _within(ranges[rank], _bounds(steps, rank, again)) for rank in
                    {r for r, _ in again}}  # fmt: skip
        on_path, cut = free_cut(ctx, repeated)
        _, low = free_cut(ctx, repeated, 0.5)
        for rank, spans in repeated.items():  # priced here, by no general kind
            ctx.claim(rank, np.concatenate(list(spans.values())).tolist())
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
        ctx.claim(rank, np.concatenate(list(spans.values())).tolist())
    if first:
        found.append(_warmup(ctx, work, first, label))
    return found


def _capture_ranges(trace) -> dict[int, np.ndarray]:
    """``{tid: merged [start, end) ns}`` of the rank's graph captures, each from its
    ``BeginCapture`` call's start to its ``EndCapture`` call's end, and of the calls that
    instantiate a captured graph."""
    pairs = np.array(capture_calls(trace), np.int64).reshape(-1, 2)
    made = np.flatnonzero(one_of(trace.cpu["name"], GRAPH_INSTANTIATE_NAMES)) if len(
        trace.cpu) else np.zeros(0, np.int64)  # fmt: skip
    if not len(pairs) and not len(made):
        return {}
    ts, dur = trace.cpu["ts"].to_numpy(), trace.cpu["dur"].to_numpy()
    start = np.r_[ts[pairs[:, 0]], ts[made]]
    end = np.r_[ts[pairs[:, 1]] + dur[pairs[:, 1]], ts[made] + dur[made]]
    tids = trace.cpu["tid"].to_numpy()[np.r_[pairs[:, 0], made]]
    out = {}
    for tid in np.unique(tids).tolist():
        lo, hi = merge(start[tids == tid], end[tids == tid])
        out[int(tid)] = np.stack([lo, hi], axis=1)
    return out


def idle_while_compiling(trace) -> tuple[float, str]:
    """(ns during which the rank's GPU runs nothing, between its first and last work, while a
    host thread is in a compile range; the compiler), ``(0.0, "")`` where it never compiles."""
    ranges = ranges_named(trace, COMPILING)
    gpu = GpuIntervals.of(trace)
    if not ranges or not len(gpu.ts):
        return 0.0, ""
    spans = np.concatenate(list(ranges.values()))
    lo, hi = merge(np.clip(spans[:, 0], gpu.ts.min(), gpu.end.max()),
                   np.clip(spans[:, 1], gpu.ts.min(), gpu.end.max()))  # fmt: skip
    busy = np.stack(merge(gpu.ts, gpu.end), axis=1)
    idle = (hi - lo) - (covered(busy, hi) - covered(busy, lo))
    return float(np.maximum(idle, 0).sum()), _compiler(trace)


def _repeating_steps(ctx: Context, doing: dict, numbered: bool) -> set[tuple[int, int]]:
    """The (rank, step) of ``doing`` that do the work again (module docstring); ``numbered``:
    torch.compile's compile numbers say where they are written."""
    steps = ctx.segments.drop_duplicates(["rank", "step"])
    out = set()
    for rank in {r for r, _ in doing}:
        regions = _regions(ctx.traces[rank]) if numbered else np.zeros((0, 3), np.int64)
        mine = steps[steps["rank"] == rank].sort_values("step_start")
        first = True
        for step, start, end in mine[["step", "step_start", "step_end"]].itertuples(index=False):
            if (rank, int(step)) not in doing:
                continue
            ids = regions[(regions[:, 0] >= start) & (regions[:, 0] < end), 2]
            if (ids > 0).any() or (not len(regions) and not first):
                out.add((rank, int(step)))
            first = False
    return out


def _regions(trace) -> np.ndarray:
    """``(n, 3)`` ts, frame, compile number of the rank's torch.compile'd frame runs."""
    cpu = trace.cpu
    names = cpu["name"].astype("category")
    rows = []
    for code, name in enumerate(names.cat.categories):
        match = COMPILED_REGION.match(str(name))
        if match:
            for ts in cpu["ts"].to_numpy()[names.cat.codes.to_numpy() == code].tolist():
                rows.append((ts, int(match.group(1)), int(match.group(2))))
    return np.array(rows, np.int64).reshape(-1, 3)


def _frames(trace, rank, again, steps) -> str:
    """`` (torch.compile'd frame 0, compiles 0/2 to 0/5)`` where the frames are named."""
    regions = _regions(trace)
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
    profiled = ctx.replay.base * len(ranks) / max(len(ctx.traces), 1)
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


def _compiler(trace) -> str:
    """The compiler whose ranges hold the most time on the rank."""
    names = trace.cpu["name"].astype("category")
    ns = np.bincount(names.cat.codes.to_numpy() + 1, trace.cpu["dur"].to_numpy(np.float64),
                     minlength=len(names.cat.categories) + 1)[1:]  # fmt: skip
    per = {compiler: sum(float(ns[i]) for i, n in enumerate(names.cat.categories)
                         if re.search(pattern, str(n)))
           for compiler, pattern in COMPILE_PATTERNS.items()}  # fmt: skip
    return max(per, key=per.get)


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
