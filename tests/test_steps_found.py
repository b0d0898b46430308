"""Steps of a Kineto trace without ProfilerSteps, found as in an Nsight Systems export
(hta_lite.load.steps_from_ranges): a repeating outermost range, else the repeating GPU work
closed by a host wait, else none (the whole trace is one step). Loops known by construction."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.analyses.findings import REPEATS_CAVEAT, WHOLE_RUN_CAVEAT
from hta_lite.tools.batch import summarize_folder

ITERATION_US = 1000
ALL_REDUCE = {"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000,
              "Group size": 2, "dtype": "Float", "Process Group Name": "0",
              "Process Group Ranks": "[0, 1]"}  # fmt: skip


def _loop(path: Path, iterations: int = 5, ranges: str = "", wait: bool = True,
          starts: list[int] | None = None, rank: int = 0, after: bool = False,
          first: int = 0, send: bool = False) -> Path:  # fmt: skip
    """Three start-up kernels, then ``iterations`` of a loop (each ``ITERATION_US`` apart, or at
    ``starts``): a gemm (300 µs) and a relu (50 µs), then (``wait``) a device-to-host copy of the
    loss and a ``cudaStreamSynchronize`` from 50 to 405 µs into the iteration, until the copy is
    done. ``ranges``: "sequential" wraps each iteration in a 900 µs ``train_step`` range;
    "concurrent" puts 1,500 µs ``request`` ranges on alternating threads (they overlap).
    ``after``: an operator 100 µs after the loop. Each iteration all-reduces the gradients of
    the two ranks (a 40 µs NCCL kernel after the relu); ``first``: the capture starts that many
    iterations into the loop (the iterations keep their times: the other rank's start 0);
    ``send``: each iteration sends to the next pipeline stage (a ``c10d::send`` op)."""
    b = TraceBuilder(rank=rank, world_size=2)
    for i in range(3):
        b.kernel(f"init_{i}", 100 + 10 * i, 5, launch_ts=50 + 10 * i)
    default = [1000 + ITERATION_US * k for k in range(first, first + iterations)]
    for k, s in enumerate(starts or default):
        if ranges == "sequential":
            b.cpu_op("train_step", s, 900, cat="user_annotation")
        elif ranges == "concurrent":
            b.cpu_op("request", s, 1500, tid=2 + k % 2, cat="user_annotation")
        b.cpu_op("aten::mm", s + 5, 20)
        if send:
            b.cpu_op("c10d::send", s + 1, 3)
        b.kernel("gemm", s + 20, 300, launch_ts=s + 10)
        b.kernel("relu", s + 330, 50, launch_ts=s + 30)
        b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", s + 340, 40, stream=9,
                 launch_ts=s + 35, **ALL_REDUCE)  # fmt: skip
        if wait:
            b.kernel("Memcpy DtoH (Device -> Pageable)", s + 390, 10, launch_ts=s + 40,
                     cat="gpu_memcpy", launch_name="cudaMemcpyAsync")  # fmt: skip
            b.cpu_op("cudaStreamSynchronize", s + 50, 355, cat="cuda_runtime")
    if after:
        b.cpu_op("aten::empty", s + ITERATION_US + 100, 5)
    return b.write(path / f"rank{rank}.json")


def _analysis(path: Path, **kwargs) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=path.parent, cache=False, progress=False, **kwargs)


def test_a_repeating_range_is_the_step(tmp_path):
    """train_step ranges, one after another: the steps are those ranges, and the trace has
    steps. Nothing follows the last range (the profiler may have closed it when it stopped): it
    is left out, as the reference leaves out the last ProfilerStep."""
    analysis = _analysis(_loop(tmp_path, ranges="sequential"))
    trace = analysis.trace(0)
    assert trace.health["steps_from_range:train_step"] == 1
    assert trace.steps["ts"].tolist() == [(1000 + ITERATION_US * k) * 1000 for k in range(5)]
    assert (trace.steps["dur"] == 900_000).all()
    steps = analysis.get_step_breakdown()
    assert steps["step"].tolist() == [0, 1, 2, 3]
    assert (steps["gpu_busy"] == 360.0).all()  # gemm, relu and the copy
    health = analysis.health()
    assert not health["code"].str.startswith("no_profiler_step").any()


@pytest.mark.parametrize("named", [False, True])
def test_a_last_range_the_program_closed_is_kept(tmp_path, named):
    """The same loop, then an operator after the last train_step range: the program closed that
    range, so it is a whole iteration and kept (all five gemms are in a step), whether the range
    is found or named; nothing is counted as left out."""
    path = _loop(tmp_path, ranges="sequential", after=True)
    kwargs = {"step_range": "train_step"} if named else {}
    analysis = _analysis(path, **kwargs)
    trace = analysis.trace(0)
    assert trace.steps["step"].tolist() == [0, 1, 2, 3, 4]
    assert analysis.get_step_breakdown()["step"].tolist() == [0, 1, 2, 3, 4]
    assert (trace.gpu[trace.gpu["name"] == "gemm"]["iteration"] == [0, 1, 2, 3, 4]).all()
    assert not any("last_step" in k for k in trace.health)


def test_ranges_of_concurrent_requests_are_not_steps(tmp_path):
    """request ranges that overlap (two threads) are not iterations: the steps come from the
    repeating GPU work instead, each from one host resume (405 µs into an iteration) to the
    next: 1,000 µs, the first iteration in none."""
    analysis = _analysis(_loop(tmp_path, ranges="concurrent"))
    trace = analysis.trace(0)
    assert not any(k.startswith("steps_from_range") for k in trace.health)
    assert trace.health["steps_from_kernels:gemm"] == 1
    assert trace.steps["step"].tolist() == [1, 2, 3, 4]
    assert trace.steps["ts"].iloc[0] == (1000 + 405) * 1000
    assert (trace.steps["dur"] == ITERATION_US * 1000).all()


def test_the_repeating_gpu_work_of_a_loop_without_ranges_is_the_step(tmp_path):
    """No range: the iterations, from one host resume to the next; the findings say where the
    steps came from."""
    analysis = _analysis(_loop(tmp_path))
    steps = analysis.get_step_breakdown()
    assert steps["step"].tolist() == [1, 2, 3, 4]
    assert (steps["step_time"] == float(ITERATION_US)).all()
    names = analysis.trace(0).gpu["name"].astype(str)
    in_steps = names[analysis.trace(0).gpu["iteration"] >= 0]
    assert not in_steps.str.startswith("init_").any() and (in_steps == "gemm").sum() == 4
    findings = analysis.get_findings()
    assert len(findings) and REPEATS_CAVEAT in findings.attrs["caveat"]


@pytest.mark.parametrize(
    "case",
    [
        {"wait": False},  # the kernels repeat, no iteration waits for the GPU: layers, not steps
        {"starts": [1000, 1500, 40_000]},  # iterations 500 and 38,500 µs apart: not a loop
    ],
    ids=["no_host_wait", "irregular"],
)
def test_without_a_loop_the_trace_keeps_no_step(tmp_path, case):
    analysis = _analysis(_loop(tmp_path, **case))
    assert analysis.trace(0).steps.empty
    health = analysis.health()
    assert health["code"].str.startswith("no_profiler_step").any()
    findings = analysis.get_findings()  # "per step" means over the trace, findings or none
    assert WHOLE_RUN_CAVEAT in findings.attrs.get("caveat", "")


def test_a_named_range_is_taken_over_the_found_one(tmp_path):
    """step_range names the step: nothing is found, and health says only what was named."""
    analysis = _analysis(_loop(tmp_path, ranges="sequential"), include_last_profiler_step=False,
                         step_range="aten::mm")  # fmt: skip
    health = analysis.trace(0).health
    assert health["steps_named:aten::mm"] == 1
    assert not any(k.startswith(("steps_from_", "steps_whole")) for k in health)
    assert len(analysis.trace(0).steps) == 5


def test_data_loader_fetches_are_not_steps(tmp_path):
    """A data-bound loop: each iteration first fetches its batch for 600 µs in a DataLoader
    range (60 % of the capture, one fetch after another) that launches nothing, then the model
    launches its work: the fetches are not the steps; the iterations are (from the GPU work)."""
    b = TraceBuilder()
    for k in range(5):
        s = 1000 + ITERATION_US * k
        b.cpu_op("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", s, 600,
                 cat="user_annotation")  # fmt: skip
        b.kernel("gemm", s + 620, 300, launch_ts=s + 610)
        b.kernel("Memcpy DtoH (Device -> Pageable)", s + 930, 10, launch_ts=s + 615,
                 cat="gpu_memcpy", launch_name="cudaMemcpyAsync")  # fmt: skip
        b.cpu_op("cudaStreamSynchronize", s + 620, 325, cat="cuda_runtime")
    trace = _analysis(b.write(tmp_path / "rank0.json")).trace(0)
    assert not any(k.startswith("steps_from_range") for k in trace.health)
    assert trace.health["steps_from_kernels:gemm"] == 1
    assert (trace.steps["dur"] == ITERATION_US * 1000).all() and len(trace.steps) == 4


@pytest.mark.parametrize("unlike", [True, False])
def test_ranks_whose_steps_are_found_otherwise_are_said(tmp_path, unlike):
    """Two ranks of the loop, rank 0 with train_step ranges and rank 1 without (its steps from
    the repeating GPU work): health warns on both that step N may not be the same iteration;
    both with the ranges: no warning."""
    _loop(tmp_path, ranges="sequential", rank=0)
    _loop(tmp_path, ranges="" if unlike else "sequential", rank=1)
    health = _analysis(tmp_path / "rank0.json").health()
    warned = health[health["code"] == "steps_unlike_other_ranks"]
    if not unlike:
        assert warned.empty
        return
    items = warned.set_index("rank")["item"]
    assert list(items.index) == [0, 1]
    assert items[0].startswith("this rank's steps are the repeating range 'train_step',")
    assert items[1].startswith("this rank's steps are the repetitions of its GPU work,")
    assert (warned["severity"] == "warning").all()


@pytest.mark.parametrize("ranges", ["sequential", ""], ids=["range", "gpu_work"])
def test_found_steps_are_numbered_alike_on_every_rank(tmp_path, ranges):
    """Rank 1's capture starts one iteration before rank 0's (6 iterations to rank 0's 5, the
    same loop at the same times): each rank numbers its found steps from its own capture's
    start, so rank 0's are renumbered after rank 1's (+1: health says so) and step N is one
    iteration on both ranks. Each all-reduce is then matched with the other rank's of the same
    iteration: nobody waits, and neither view names a straggler. Without the renumbering rank
    0 "arrives" a whole iteration (1,000 µs) late."""
    _loop(tmp_path, ranges=ranges, rank=0, iterations=5, first=1)
    _loop(tmp_path, ranges=ranges, rank=1, iterations=6, first=0)
    analysis = _analysis(tmp_path / "rank0.json")
    starts = {r: analysis.trace(r).steps.set_index("step")["ts"] for r in (0, 1)}
    common = starts[0].index.intersection(starts[1].index)
    assert len(common) >= 3 and (starts[0][common] == starts[1][common]).all()
    assert analysis.trace(0).health["steps_renumbered:+1"] == 1
    assert not any(k.startswith("steps_renumbered") for k in analysis.trace(1).health)
    iteration = analysis.trace(0).gpu["iteration"]  # the iteration columns are renumbered too
    kept, numbers = iteration[iteration >= 0], analysis.trace(0).steps["step"]
    assert set(kept) <= set(numbers) and kept.min() == numbers.min() >= 1
    calls = analysis.get_collectives().calls
    matched = calls[(calls["instance"] >= 0) & (calls["step"] >= 0)]
    assert len(matched) and (matched.groupby("instance")["ts"].nunique() == 1).all()
    assert (matched["wait"] == 0).all()
    # the calls outside the steps (each rank's first repetition of the GPU work, in no step:
    # iteration 1 on rank 0, 0 on rank 1) are other iterations on each rank: not matched
    assert (analysis.get_collective_summary()["wait_us"] == 0).all()
    outside = calls[calls["step"] < 0]
    assert (outside["instance"] == -1).all() and len(outside) == (2 if ranges == "" else 0)
    problems = analysis.get_collectives().problems
    assert (problems["reason"] == "outside the steps").sum() == (1 if ranges == "" else 0)
    key = analysis.get_key_findings().set_index("kind")
    assert key.loc["straggler", "finding"].startswith("No straggler")
    assert "straggler" not in set(analysis.get_findings()["kind"])


def test_numbers_stay_at_zero_or_more(tmp_path):
    """Rank 0's capture starts one iteration earlier but holds fewer steps: the reference is
    rank 1 (more steps, numbered from 0), rank 0's first range would be step -1, so both
    ranks' steps move up by one."""
    _loop(tmp_path, ranges="sequential", rank=0, iterations=5, first=0)
    _loop(tmp_path, ranges="sequential", rank=1, iterations=6, first=1)
    analysis = _analysis(tmp_path / "rank0.json")
    assert analysis.trace(0).steps["step"].tolist() == [0, 1, 2, 3, 4]
    assert analysis.trace(1).steps["step"].tolist() == [1, 2, 3, 4, 5, 6]
    assert analysis.trace(1).health["steps_renumbered:+1"] == 1


def test_steps_that_start_apart_are_not_renumbered_but_said(tmp_path):
    """Rank 1's train_step ranges start half an iteration after rank 0's: no step of one rank
    starts with a step of the other, so nothing is renumbered and health warns on rank 1."""
    _loop(tmp_path, ranges="sequential", rank=0)
    _loop(tmp_path, ranges="sequential", rank=1,
          starts=[1500 + ITERATION_US * k for k in range(5)])  # fmt: skip
    analysis = _analysis(tmp_path / "rank0.json")
    assert analysis.trace(1).steps["step"].tolist() == [0, 1, 2, 3, 4]
    health = analysis.health()
    warned = health[health["code"] == "steps_not_aligned"]
    assert warned["rank"].tolist() == [1] and (warned["severity"] == "warning").all()


def test_profiler_steps_keep_the_program_s_numbers(tmp_path):
    """ProfilerSteps are numbered by the program: ranks whose captures start at different
    steps keep their numbers (rank 0's steps 2-5, rank 1's 1-5: the last left out)."""
    for rank, first in ((0, 2), (1, 1)):
        b = TraceBuilder(rank=rank, world_size=2)
        for n in range(first, 7):
            s = 1000 + ITERATION_US * n
            b.step(n, s, 900)
            b.kernel("gemm", s + 20, 300, launch_ts=s + 10)
        b.write(tmp_path / f"rank{rank}.json")
    analysis = _analysis(tmp_path / "rank0.json")
    assert analysis.get_step_breakdown().groupby("rank")["step"].min().tolist() == [2, 1]
    assert not any(k.startswith("steps_") for r in (0, 1) for k in analysis.trace(r).health)


def test_the_batch_numbers_found_steps_as_the_analysis_does(tmp_path):
    """summarize_folder (per-rank tables made in workers, matched in the driver) renumbers
    rank 0's steps as TraceAnalysis does: the same step numbers, collective calls, lateness and
    findings (reopened from the cache)."""
    _loop(tmp_path, rank=0, iterations=5, first=1)
    _loop(tmp_path, rank=1, iterations=6, first=0)
    options = {"cache": tmp_path / "cache", "progress": False}
    summary = summarize_folder(tmp_path, executor="serial", **options)
    analysis = TraceAnalysis(trace_dir=tmp_path, **options)
    by_rank = summary["step_breakdown"].groupby("rank")["step"].apply(list).to_dict()
    assert by_rank == analysis.get_step_breakdown().groupby("rank")["step"].apply(list).to_dict()
    assert by_rank[0][0] == 2
    calls = analysis.get_collectives().calls
    assert summary["collective_calls"]["step"].tolist() == calls["step"].tolist()
    assert (summary["rank_lateness"]["lateness_us"] == 0).all()
    pd.testing.assert_frame_equal(summary["findings"], analysis.get_findings(), check_like=True)


def test_pipeline_stages_keep_the_numbers_of_their_captures(tmp_path):
    """Two pipeline stages (rank 0 sends to rank 1), each capturing the same five iterations,
    rank 1 running each a step after rank 0 (as a stage runs after the one before it): time
    cannot say which steps are one iteration, so the steps keep their captures' numbers (both
    0-4, the same iterations here; in the batch too) and health says so, as information (not a
    problem: the batch counts none); without the send, rank 1's would be renumbered after the
    steps that start with them."""
    _loop(tmp_path, ranges="sequential", rank=0, send=True)
    _loop(tmp_path, ranges="sequential", rank=1, first=1)
    analysis = _analysis(tmp_path / "rank0.json")
    assert all(analysis.trace(r).steps["step"].tolist() == [0, 1, 2, 3, 4] for r in (0, 1))
    assert not any(k.startswith(("steps_renumbered", "steps_not_aligned"))
                   for r in (0, 1) for k in analysis.trace(r).health)  # fmt: skip
    health = analysis.health()
    said = health[health["code"] == "steps_numbered_per_capture"]
    assert said["rank"].tolist() == [0, 1] and (said["severity"] == "info").all()
    batch = summarize_folder(tmp_path, executor="serial", cache=False, progress=False)
    assert (batch["step_breakdown"].groupby("rank")["step"].min() == 0).all()  # the same there
    assert batch["health_summary"].set_index("rank")["problems"].to_dict() == (
        analysis.health_summary().set_index("rank")["problems"].to_dict()
    )
    _loop(tmp_path, ranges="sequential", rank=0)  # no longer a pipeline: rank 1 moves
    assert _analysis(tmp_path / "rank0.json").trace(1).steps["step"].tolist() == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("measured_us", [3_000, 9_500])
def test_a_trace_without_steps_is_told_which_range_could_be_its_step(tmp_path, measured_us):
    """A benchmark as cs336's: a 5,000 µs init_model range that launches one kernel, then a
    benchmark_loop range whose kernels (eight, no host wait: no loop is found) run back to back.
    The whole trace is one step, and the caveat names the range that launches most of the GPU
    work (8 of 9 launches). A range spanning most of the trace (9,500 of 10,000 µs, after a
    400 µs init_model) is the whole run, not a step: no name."""
    b = TraceBuilder()
    b.cpu_op("init_model", 100, 5_000 if measured_us == 3_000 else 400, cat="user_annotation")
    b.kernel("fill", 200, 10, launch_ts=150)
    start = 10_100 - measured_us
    b.cpu_op("benchmark_loop", start, measured_us, cat="user_annotation")
    for k in range(8):
        b.kernel("gemm", start + 50 + 100 * k, 90, launch_ts=start + 10 + 5 * k)
    analysis = _analysis(b.write(tmp_path / "rank0.json"))
    caveat = analysis.get_findings().attrs["caveat"]
    assert caveat.startswith(WHOLE_RUN_CAVEAT)
    hint = "Here, perhaps step_range='benchmark_loop' (--step-range 'benchmark_loop'): that range"
    assert (hint in caveat) == (measured_us == 3_000)
    if measured_us == 3_000:
        assert "launches 88.9 % of the GPU work" in caveat
