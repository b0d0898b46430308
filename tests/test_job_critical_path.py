"""The job critical path (issue #40): recorded gloo runs where rank 2 is late by construction,
the straggler generator's folders, constructed traces whose path is known, and the partials
route against the in-memory one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.errors import SelectionError
from hta_lite.tools.batch import summarize_folder
from hta_lite.tools.synthetic import make_straggler_folder

SAMPLES = Path(__file__).parent.parent / "sample_traces"
NCCL = Path(__file__).parent / "data" / "nccl_parser_config" / "nccl_data.json.gz"


def open_(folder) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=folder, cache=False, parallel=False)


def check_covers_each_step(path):
    """The rows of each step add up to the step's span: no gap, nothing counted twice; the
    columns keep their types."""
    assert path.path()[["start_us", "duration_us"]].dtypes.eq("float64").all()
    assert path.path()[["step", "rank", "tid", "stream"]].dtypes.eq("int64").all()
    sums = path.path().groupby("step")["duration_us"].sum()
    steps = path.steps().set_index("step")["step_us"]
    assert sums.to_dict() == pytest.approx(steps.to_dict(), abs=0.01)
    assert path.summary()["share_pctg"].sum() == pytest.approx(100, abs=0.05)


# ---- recorded runs: rank 2 sleeps in data loading -------------------------------------------


def test_gloo_4ranks_path_runs_through_rank_2s_data_loading_at_every_all_reduce():
    """gloo_4ranks: rank 2 sleeps 20 ms in ``data-loading`` every step; the gradient
    all-reduce of every step waits for it."""
    a = open_(SAMPLES / "gloo_4ranks")
    path = a.get_job_critical_path()
    check_covers_each_step(path)
    hops = path.hops()
    assert len(hops) == len(path.steps()) == 3
    assert set(hops["from_rank"]) == {2} and set(hops["collective"]) == {"all_reduce"}
    assert (hops["wait_us"] > 18_000).all()
    rows = path.path()
    loading = rows[rows["bound_by"] == "data_loading"]
    assert set(loading["rank"]) == {2} and set(loading["step"]) == {2, 3, 4}
    assert (loading.groupby("step")["duration_us"].sum() > 20_000).all()
    # on each step, rank 2's data loading comes before the hop at the all-reduce
    for step, hop in hops.set_index("step").iterrows():
        assert loading[loading["step"] == step]["start_us"].max() < hop["at_us"]
    top = path.summary().iloc[0]
    assert (top["rank"], top["bound_by"]) == (2, "data_loading") and top["share_pctg"] > 45
    assert path.by_rank().iloc[0]["rank"] == 2
    assert path.problems.empty


@pytest.mark.parametrize("world", ["4ranks", "8ranks"])
def test_gloo_collectives_gradient_all_reduce_waits_for_rank_2(world):
    """gloo_collectives: rank 2 sleeps 100 ms in ``data-loading`` each step; the DDP gradient
    all_reduce (49,792 bytes) on the world group is where every rank waits for it."""
    a = open_(SAMPLES / "gloo_collectives" / world)
    path = a.get_job_critical_path()
    check_covers_each_step(path)
    instances = a.get_collectives().instances
    gradient = instances[instances["bytes"] == 49_792]
    assert len(gradient) == len(path.steps()) and set(gradient["last_rank"]) == {2}
    # the path takes each gradient all-reduce from rank 2's arrival (hopping there, or
    # already on rank 2)
    rows = path.path()
    comm = rows[(rows["bound_by"] == "communication") & (rows["name"] == "gloo:all_reduce")]
    for row in gradient.itertuples():
        assert (comm["start_us"] == row.last_start / 1000).any()
    rows = path.path()
    loading = rows[rows["bound_by"] == "data_loading"].groupby(["step", "rank"])["duration_us"]
    assert set(loading.sum().index.get_level_values("rank")) == {2}
    assert (loading.sum() > 100_000).all()
    assert path.summary().iloc[0][["rank", "bound_by"]].tolist() == [2, "data_loading"]


def test_partials_from_the_workers_equal_the_in_memory_path():
    folder = SAMPLES / "gloo_collectives" / "8ranks"
    path = open_(folder).get_job_critical_path()
    tables = summarize_folder(folder, cache=False)
    pd.testing.assert_frame_equal(tables["job_critical_path"], path.path())
    pd.testing.assert_frame_equal(tables["job_critical_path_summary"], path.summary())
    pd.testing.assert_frame_equal(tables["job_critical_path_hops"], path.hops())
    pd.testing.assert_frame_equal(tables["job_critical_path_steps"], path.steps())


def test_one_step_and_a_step_that_is_not_there():
    a = open_(SAMPLES / "gloo_4ranks")
    one = a.get_job_critical_path(step=3)
    assert one.steps()["step"].tolist() == [3] and set(one.path()["step"]) == {3}
    with pytest.raises(SelectionError, match=r"step\(s\) \[99\] not profiled"):
        a.get_job_critical_path(step=99)


# ---- the straggler generator ----------------------------------------------------------------


@pytest.mark.parametrize("cause, n_ranks, straggler", [("host", 8, 3), ("compute", 8, 5),
                                                       ("host", 16, 11)])  # fmt: skip
def test_generated_straggler_is_where_the_path_hops_from(tmp_path, cause, n_ranks, straggler):
    """The generator delays one rank's arrival at the last collective of each step by 30 ms
    (host: its CPU issues it late, the op around the launch grows; compute: the kernel before
    it grows). The path hops from that rank at that collective, having waited ~30 ms (host:
    plus how far the CPU ran ahead), and the delay is on the straggler's part of the path."""
    make_straggler_folder(NCCL, tmp_path, n_ranks, straggler, cause, delay_us=30_000, seed=1)
    path = open_(tmp_path).get_job_critical_path()
    check_covers_each_step(path)
    hops = path.hops()
    late = hops[hops["wait_us"] > 1_000]
    assert len(late) == len(path.steps()) and set(late["from_rank"]) == {straggler}
    assert (late["wait_us"] >= 29_900).all()
    mine = path.summary().set_index(["rank", "bound_by"])["duration_us"]
    if cause == "host":  # the op that issues the collective, 30 ms longer, on the path
        assert mine.loc[(straggler, "cpu_bound")] >= 30_000 * len(path.steps())
    else:  # the trace records no dependency from that kernel: on the path as the launch wait
        assert mine.loc[straggler].sum() >= 30_000 * len(path.steps())


def test_generated_folder_without_a_straggler_has_no_long_wait(tmp_path):
    make_straggler_folder(NCCL, tmp_path, 8, -1, "compute", delay_us=0, seed=4)
    path = open_(tmp_path).get_job_critical_path()
    check_covers_each_step(path)
    assert (path.hops()["wait_us"] < 100).all()  # the generator's clock jitter: < 20 µs


# ---- constructed traces with known paths ----------------------------------------------------

ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def nccl_rank(rank: int, world: int, phases: list[tuple[float, float]], step_end: float):
    """A rank whose step runs compute kernels and all-reduces on one stream: ``phases`` =
    ``[(compute_start, compute_end), ...]``, each followed by an all-reduce that starts at
    ``compute_end`` (its arrival) and ends at the ``(end)`` of the phase after it."""
    b = TraceBuilder(rank=rank, world_size=world)
    b.step(1, 0, step_end)
    ranks = str(list(range(world)))
    for (start, arrival), end in phases:
        b.kernel("gemm_kernel", start, arrival - start, launch_ts=max(start - 2, 0))
        b.kernel(ALL_REDUCE, arrival, end - arrival, launch_ts=max(start - 1, 0),
                 **{"Collective name": "allreduce", "In msg nelems": 1000,
                    "Out msg nelems": 1000, "dtype": "Float", "Group size": world,
                    "Process Group Name": "0", "Process Group Ranks": ranks})  # fmt: skip
    return b


def test_two_ranks_alternating_as_the_last_arrival(tmp_path):
    """Rank 0 computes 0-300 and rank 1 0-100 before all-reduce 1 (ends 350 on both); then
    rank 0 computes 350-400 and rank 1 350-600 before all-reduce 2 (ends 650). The path:
    rank 0's compute to 300, all-reduce 1 on rank 1 after rank 0 arrives, rank 1's compute
    to 600, all-reduce 2 on rank 0 after rank 1 arrives, rank 0's rest of the step."""
    for rank, (first, second) in enumerate([(300, 400), (100, 600)]):
        b = nccl_rank(rank, 2, [((1, first), 350), ((351, second), 650)], 700)
        b.write(tmp_path / f"rank-{rank}.json")
    path = open_(tmp_path).get_job_critical_path()
    check_covers_each_step(path)
    hops = path.hops()
    assert hops[["from_rank", "to_rank"]].values.tolist() == [[0, 1], [1, 0]]
    assert hops["at_us"].tolist() == [300, 600] and hops["wait_us"].tolist() == [200, 200]
    rows = path.path()
    compute = rows[rows["bound_by"] == "gpu_compute_bound"]
    assert compute[["rank", "start_us", "duration_us"]].values.tolist() == [
        [0, 1, 299], [1, 351, 249],
    ]  # fmt: skip
    comm = rows[rows["bound_by"] == "communication"]
    assert comm[["rank", "start_us", "duration_us"]].values.tolist() == [
        [1, 300, 50], [0, 600, 50],
    ]  # fmt: skip
    assert path.steps().iloc[0][["step_us", "end_rank", "start_rank"]].tolist() == [700, 0, 0]
    assert path.by_rank().set_index("rank")["duration_us"].to_dict() == {0: 400, 1: 300}


def gpu_behind_cpu_ranks(folder: Path, gemm_us=(3000, 3200), steps=5) -> None:
    """Ranks whose CPU launches each step in 1,000 µs and moves on while the GPU runs a gemm
    (``gemm_us`` per rank) and an all-reduce that ends 300 µs after the last rank arrives: the
    GPU's period is 3,500 µs, and each step's extent (its CPU range to the end of its GPU
    work) starts 2,500 µs more before the end of the one before it than the last."""
    for rank, gemm in enumerate(gemm_us):
        b, free = TraceBuilder(rank=rank, world_size=len(gemm_us)), 0
        for step in range(1, steps + 1):
            base = step * 1000
            b.step(step, base, 1000)
            b.cpu_op("aten::mm", base + 5, 20)
            start = max(base + 20, free)
            b.kernel("gemm", start, gemm, launch_ts=base + 10)
            free = start + max(gemm_us) + 300
            b.kernel(ALL_REDUCE, start + gemm, free - start - gemm, launch_ts=base + 15,
                     **{"Collective name": "allreduce", "In msg nelems": 1000,
                        "Out msg nelems": 1000, "dtype": "Float", "Group size": len(gemm_us),
                        "Process Group Name": "0",
                        "Process Group Ranks": str(list(range(len(gemm_us))))})  # fmt: skip
        b.write(folder / f"rank-{rank}.json")


def test_the_job_paths_steps_are_the_step_tables_when_the_gpu_runs_behind(tmp_path):
    """Extents of 3,520 / 6,020 / 8,520 / 11,020 µs; the steps, as in the step table, are the
    GPU's 3,500 µs period (the first 3,520: its launch latency): rank 1's gemm (3,200 µs, the
    last arrival) and the all-reduce's 300 µs after it, not the queue before them."""
    gpu_behind_cpu_ranks(tmp_path)
    a = open_(tmp_path)
    path = a.get_job_critical_path()
    check_covers_each_step(path)
    table = a.get_step_breakdown().groupby("step")["step_time"].max()
    assert path.steps()["step_us"].tolist() == table.tolist() == [3520, 3500, 3500, 3500]
    assert path.steps()["start_us"].tolist() == [1000, 4520, 8020, 11520]
    later = path.path()[path.path()["step"] > 1]
    assert later[["rank", "bound_by", "duration_us"]].values.tolist() == [
        [1, "gpu_compute_bound", 3200], [0, "communication", 300],
    ] * 3  # fmt: skip
    assert path.hops()["wait_us"].tolist() == [200] * 4
    assert path.steps()[["start_rank", "hops"]].values.tolist() == [[1, 1]] * 4


def test_a_missing_rank_is_a_problem_row_not_a_silent_path(tmp_path):
    """Of a 3-rank job, rank 2 is not loaded: its all-reduces are partial, and the path says
    it is a lower bound there."""
    for rank, (first, second) in enumerate([(300, 400), (100, 600)]):
        b = nccl_rank(rank, 3, [((1, first), 350), ((351, second), 650)], 700)
        b.write(tmp_path / f"rank-{rank}.json")
    path = open_(tmp_path).get_job_critical_path()
    assert set(path.problems["reason"]) == {"partial collective"}
    assert "lower bound" in path.problems["detail"].iloc[0]
    assert len(path.hops()) == 2  # measured over the ranks present


def test_a_rank_without_the_step_is_a_problem_row(tmp_path):
    for rank in (0, 1):
        nccl_rank(rank, 2, [((1, 300), 350)], 400).write(tmp_path / f"rank-{rank}.json")
    doc = json.loads((tmp_path / "rank-1.json").read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not e["name"].startswith("Profiler")]
    (tmp_path / "rank-1.json").write_text(json.dumps(doc))
    path = open_(tmp_path).get_job_critical_path()
    problem = path.problems.iloc[0]
    assert (problem["reason"], problem["rank"]) == ("rank without step", "1")


def test_traces_without_steps_are_one_step_each(tmp_path):
    """As in the findings: each rank's trace, first event to last, is step -1."""
    b = TraceBuilder()
    b.cpu_op("aten::mm", 0, 8).kernel("gemm", 10, 5, launch_ts=2)
    b.write(tmp_path / "rank0.json")
    path = open_(tmp_path).get_job_critical_path()
    assert path.steps()["step"].tolist() == [-1]
    assert path.steps()["step_us"].iloc[0] == pytest.approx(15.0)
    with pytest.raises(SelectionError, match="the traces have no ProfilerStep"):
        open_(tmp_path).get_job_critical_path(step=3)


def test_overlay_opens_as_one_trace_with_an_arrow_per_hop(tmp_path):
    shutil.copytree(SAMPLES / "gloo_4ranks", tmp_path / "in", ignore=shutil.ignore_patterns("*.py"))
    a = open_(tmp_path / "in")
    path = a.get_job_critical_path()
    written = Path(a.overlay_job_critical_path(path, tmp_path / "out"))
    doc = json.loads(written.read_text())
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(path.path())
    starts = [e for e in doc["traceEvents"] if e["ph"] == "s"]
    ends = [e for e in doc["traceEvents"] if e["ph"] == "f"]
    assert len(starts) == len(ends) == len(path.hops())
    assert {e["pid"] for e in starts} == {2} and {e["pid"] for e in ends} == {0, 1, 3}
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert names == {"rank 0", "rank 1", "rank 2", "rank 3"}


def test_segments_in_the_worker_processes_equal_the_in_process_ones(tmp_path):
    """Ranks reopened from the cache: their segments are computed in the loader's worker
    processes (each reads its rank's tables from the cache), the same path as here."""
    from hta_lite.load import cache

    folder = SAMPLES / "gloo_collectives" / "8ranks"
    pooled = TraceAnalysis(trace_dir=folder, cache=tmp_path, progress=False)
    assert all(cache.by_address(pooled.trace(r)) is not None for r in pooled.ranks)
    here = open_(folder).get_job_critical_path()
    there = pooled.get_job_critical_path()
    pd.testing.assert_frame_equal(there.path(), here.path())
    pd.testing.assert_frame_equal(there.hops(), here.hops())


def test_untracked_time_is_where_it_lies():
    """tests/data/host_bound/host_unrecorded: 20 kernels of 50 µs, 4 ms of Python no event
    records, 20 more. The path's time that no edge weighs is shown where it lies (from the end
    of the first 20 kernels, 2,014 µs, to the step's end), not at the step's start."""
    path = open_(Path(__file__).parent / "data/host_bound/host_unrecorded").get_job_critical_path(
        step=1
    )
    check_covers_each_step(path)
    rows = path.path()
    gaps = rows[rows["bound_by"] == "untracked"].sort_values("duration_us")
    assert gaps["start_us"].iat[-1] == 2014.0 and gaps["duration_us"].iat[-1] == 4180.0
    kernels = rows[rows["bound_by"] == "gpu_compute_bound"]
    assert kernels["start_us"].min() == 1014.0 and len(kernels) == 20
