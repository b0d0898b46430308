"""Point-to-point send / recv (issue #40): paired by their peers, joined in the job critical
path. A constructed NCCL pipeline of 4 ranks whose path is known, the recorded gloo pipeline
(sample_traces/gloo_pipeline, record.py there: rank 2 the slow stage), and what is not paired."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import DATA, SAMPLES
from synth import TraceBuilder
from test_job_critical_path import check_covers_each_step

from hta_lite import TraceAnalysis
from hta_lite.tools.batch import summarize_folder

PIPELINE = SAMPLES / "gloo_pipeline"
SEND_RECV = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"


def open_(folder) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=folder, cache=False, parallel=False, progress=False)


def p2p(b: TraceBuilder, kind: str, peer: int | None, issued: float, start: float, end: float):
    """A ``c10d::send`` / ``c10d::recv_`` op at ``issued`` (naming ``peer`` unless None) that
    launches an NCCL send / recv kernel running ``start``..``end`` µs."""
    op = "c10d::send" if kind == "send" else "c10d::recv_"
    inputs = {"Concrete Inputs": ["", "", str(peer), "0"]} if peer is not None else {}
    b.cpu_op(op, issued, 5, **inputs)
    b.kernel(SEND_RECV, start, end - start, launch_ts=issued + 1,
             **{"Collective name": kind, "In msg nelems": 1024, "Out msg nelems": 1024,
                "dtype": "Float", "Process Group Name": "0",
                "Process Group Ranks": "[0, 1, 2, 3]"})  # fmt: skip


def pipeline(folder, ranks=range(4), peers=True):
    """Stage r computes until 400 + 200 r µs, then sends to r + 1, which waits in its recv
    from 30 µs until 10 µs after that send starts. Rank 3's step ends last, at 1100."""
    for rank in ranks:
        b = TraceBuilder(rank=rank, world_size=4)
        b.step(1, 0, 1100 if rank == 3 else 1000)
        arrival = 400 + 200 * rank
        if rank > 0:
            p2p(b, "recv", rank - 1 if peers else None, 25, 30, arrival - 190)
        b.kernel("gemm_kernel", 10 if rank == 0 else arrival - 190, 180 if rank else 390,
                 launch_ts=8)  # fmt: skip
        if rank < 3:
            p2p(b, "send", rank + 1 if peers else None, 20, arrival, arrival + 10)
        b.write(folder / f"rank-{rank}.json")
    return folder


def test_each_send_is_paired_with_its_recv(tmp_path):
    matching = open_(pipeline(tmp_path)).get_collectives()
    assert matching.problems.empty
    calls = matching.calls.sort_values("rank")
    assert calls[["rank", "collective", "peer"]].values.tolist() == [
        [0, "send", 1], [1, "recv", 0], [1, "send", 2], [2, "recv", 1], [2, "send", 3],
        [3, "recv", 2],
    ]  # fmt: skip
    instances = matching.instances
    assert (instances["collective"] == "send_recv").all() and len(instances) == 3
    assert instances["complete"].all() and (instances["group_size"] == 2).all()
    assert instances["last_rank"].tolist() == [0, 1, 2]  # each sender arrived last
    assert instances["arrival_skew_us"].tolist() == [370, 570, 770]


def test_the_job_path_walks_up_the_pipeline(tmp_path):
    """Rank 3's step ends last; it waited in its recv for rank 2's send, rank 2 for rank 1's,
    rank 1 for rank 0's: the path runs 0 -> 1 -> 2 -> 3."""
    path = open_(pipeline(tmp_path)).get_job_critical_path()
    check_covers_each_step(path)
    hops = path.hops()
    assert hops[["from_rank", "to_rank"]].values.tolist() == [[0, 1], [1, 2], [2, 3]]
    assert hops["at_us"].tolist() == [400, 600, 800]
    assert hops["wait_us"].tolist() == [370, 570, 770]
    assert path.by_rank().set_index("rank")["duration_us"].to_dict() == {
        0: 400, 1: 200, 2: 200, 3: 300,
    }  # fmt: skip
    assert path.steps().iloc[0][["start_rank", "end_rank", "hops"]].tolist() == [0, 3, 3]


def test_without_peers_nothing_is_paired_and_it_is_said(tmp_path):
    analysis = open_(pipeline(tmp_path, peers=False))
    matching = analysis.get_collectives()
    assert (matching.calls["instance"] == -1).all()
    assert set(matching.problems["reason"]) == {"point-to-point"}
    assert "record_shapes=True" in matching.problems["detail"].iloc[0]
    path = analysis.get_job_critical_path()
    assert path.hops().empty and "collective not matched" in set(path.problems["reason"])


def test_a_stage_not_loaded_makes_its_pairs_partial(tmp_path):
    analysis = open_(pipeline(tmp_path, ranks=(0, 1, 3)))
    instances = analysis.get_collectives().instances
    alone = instances[instances["ranks_present"] == 1]
    assert len(alone) == 2 and not alone["complete"].any()  # rank 1's send, rank 3's recv
    assert "partial collective" in set(analysis.get_job_critical_path().problems["reason"])


def test_recorded_gloo_pipeline():
    """Rank 2 runs twice the matmuls of the others: every send and recv is paired, and the slow
    stage bounds most of each step; the path hops to rank 3 only where rank 3's step ends
    last."""
    analysis = open_(PIPELINE)
    matching = analysis.get_collectives()
    assert matching.problems.empty
    assert (matching.calls["instance"] >= 0).all() and len(matching.instances) == 15
    assert set(matching.calls["peer"]) == {0, 1, 2, 3}
    path = analysis.get_job_critical_path()
    check_covers_each_step(path)
    assert path.by_rank().iloc[0]["rank"] == 2 and path.by_rank().iloc[0]["share_pctg"] > 75
    hops = path.hops()
    assert set(map(tuple, hops[["from_rank", "to_rank"]].values.tolist())) == {(2, 3)}
    # a gloo send / recv runs on the calling thread: its call spans the c10d op and the range
    raw = json.loads(__import__("gzip").decompress((PIPELINE / "rank-2.json.gz").read_bytes()))
    ops = [e for e in raw["traceEvents"] if e.get("name") == "c10d::send"]
    sends = matching.calls[(matching.calls["rank"] == 2) & (matching.calls["collective"] == "send")]
    assert sends["ts"].iloc[0] == pytest.approx(min(e["ts"] for e in ops) * 1000, abs=1)


PIPELINE_PAIR = DATA / "pipeline_pair"


def live_step_ms(folder) -> float:
    """The mean of every rank's live step time (ms) over the steps the analyses keep (1-7)."""
    live = pd.read_csv(folder / "live_step_times.csv")
    return 1e3 * float(live.loc[live["step"].between(1, 7), "seconds"].mean())


def test_a_slow_pipeline_stage_is_named_and_priced_by_what_balancing_saves():
    """A recorded 3-stage gloo pipeline whose middle stage works 8 ms a step and the others 4
    (tests/data/pipeline_pair, record.py there), and the same balanced: the send / recv pairs
    are no collectives, so no straggler is named (before: rank 1, "8.7 ms per step after the
    others (88.7 % of the step)", cause "waiting on others"; and in the balanced run rank 1
    again, 0.66 ms); rank 1 is the slowest stage, named by the report, the key findings, the
    findings and the batch alike, and balancing it saves what the balanced run measured live,
    within 25 %. The balanced run names nothing."""
    slow = open_(PIPELINE_PAIR / "slow")
    report = slow.get_straggler_report()
    assert report.stragglers == [] and report.slow_stage == 1
    assert "14 point-to-point send / recv pair(s) are not compared" in str(report)
    assert "Rank 1 is the pipeline's slowest stage" in str(report)
    stages = slow.get_pipeline_stages().set_index("rank")
    assert stages.loc[1, "work_us"] == pytest.approx(8000, rel=0.15)  # 8 ms of sleep, a matmul
    assert stages.loc[[0, 2], "work_us"].tolist() == pytest.approx([4000, 4000], rel=0.35)
    keys = slow.get_key_findings().set_index("kind")
    assert "straggler" not in keys.index and keys.loc["pipeline_stage", "rank"] == 1
    found = slow.get_findings()
    top = found.iloc[0]
    assert (top["kind"], top["rank"]) == ("pipeline_stage", 1)
    known = live_step_ms(PIPELINE_PAIR / "slow") - live_step_ms(PIPELINE_PAIR / "balanced")
    assert top["saving_ms_per_step"] == pytest.approx(known, rel=0.25)
    batch = summarize_folder(PIPELINE_PAIR / "slow", executor="serial", cache=None)
    pd.testing.assert_frame_equal(batch["pipeline_stages"], report.stages)
    assert batch["findings"]["kind"].tolist() == found["kind"].tolist()
    balanced = open_(PIPELINE_PAIR / "balanced")
    assert balanced.get_straggler_report().slow_stage is None
    assert balanced.get_findings().empty
    assert not {"straggler", "pipeline_stage"} & set(balanced.get_key_findings()["kind"])


def test_the_slowest_stage_is_named_by_its_typical_step():
    """Stage work by construction: one step of 9 ms on a 4 ms stage is no slow stage (its
    median step is 4 ms); a stage 10 % above the median of the others is named, 5 % is not."""
    from hta_lite.analyses.pipeline_stages import slow_stage

    def work(per_rank: dict[int, list[float]]) -> pd.DataFrame:
        rows = [(r, s, w, 6000.0) for r, ws in per_rank.items() for s, w in enumerate(ws)]
        return pd.DataFrame(rows, columns=["rank", "step", "work_us", "step_us"])

    _, slow = slow_stage(work({0: [4000] * 5, 1: [4000, 9000, 4000, 4000, 4000], 2: [4000] * 5}))
    assert slow is None
    table, slow = slow_stage(work({0: [4000] * 5, 1: [4420] * 5, 2: [4000] * 5}))
    assert slow == 1 and table.iloc[0]["excess_us"] == 420
    assert slow_stage(work({0: [4000] * 5, 1: [4200] * 5, 2: [4000] * 5}))[1] is None


def test_the_recorded_four_stage_pipeline_names_its_slow_stage_not_a_straggler():
    """sample_traces/gloo_pipeline (rank 2 runs twice the matmuls): before, the straggler
    report named ranks 2 and 1 ("also late"), 18 ms per step (97.7 % of the step)."""
    report = open_(PIPELINE).get_straggler_report()
    assert report.stragglers == [] and report.slow_stage == 2


def test_a_gpu_pipeline_stage_is_its_gpu_work(tmp_path):
    """The constructed NCCL pipeline: rank 0's GEMM runs 390 µs, the other stages' 180: its GPU
    work (not its step, 1 ms on the host) makes it the slowest stage, 210 µs over the median,
    compute-bound; made the median's, the job's one step ends 210 µs earlier (within 10 %)."""
    analysis = open_(pipeline(tmp_path))
    report = analysis.get_straggler_report()
    assert report.stragglers == [] and report.slow_stage == 0
    assert report.stages.set_index("rank")["work_us"].to_dict() == {0: 390, 1: 180, 2: 180, 3: 180}
    assert report.causes.set_index("rank").loc[0, "cause"] == "compute-bound"
    top = analysis.get_findings().iloc[0]
    assert (top["kind"], top["rank"]) == ("pipeline_stage", 0)
    assert top["saving_ms_per_step"] * 1e3 == pytest.approx(210, rel=0.1)
    # the receives wait for the slow stage: exposed communication says so, as it did when the
    # pairs were compared as collectives
    keys = analysis.get_key_findings().set_index("kind")
    assert "up to 428 µs of it waiting for the last rank" in keys.loc["exposed_communication",
                                                                      "finding"]  # fmt: skip


ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def test_a_slow_stage_that_is_also_the_straggler_of_its_data_parallel_group_is_one_finding(
    tmp_path,
):
    """Two stages of two data-parallel ranks each (0, 1 send to 2, 3), each group all-reducing
    after its stage's GEMM; rank 2's GEMM runs 360 µs, every other 180: it is the straggler at
    its group's all_reduce and the slowest stage, one cause: one finding (straggler), one key
    finding, and the send / recv pairs are said to be left out of the straggler test."""
    for rank in range(4):
        b = TraceBuilder(rank=rank, world_size=4)
        b.step(1, 0, 1200)
        group = "[0, 1]" if rank < 2 else "[2, 3]"
        if rank < 2:
            b.kernel("gemm_kernel", 10, 180, launch_ts=8)
            p2p(b, "send", rank + 2, 20, 190, 200)
            start = 200
        else:
            p2p(b, "recv", rank - 2, 25, 30, 200)
            work = 360 if rank == 2 else 180
            b.kernel("gemm_kernel", 200, work, launch_ts=8)
            start = 200 + work
        b.kernel(ALL_REDUCE, start, 560 - start + 40, launch_ts=9, stream=9,
                 **{"Collective name": "allreduce", "In msg nelems": 1000,
                    "Out msg nelems": 1000, "dtype": "Float", "Group size": 2,
                    "Process Group Name": group, "Process Group Ranks": group})  # fmt: skip
        b.write(tmp_path / f"rank-{rank}.json")
    analysis = open_(tmp_path)
    report = analysis.get_straggler_report()
    assert report.stragglers == [2] and report.slow_stage == 2
    assert "2 point-to-point send / recv pair(s) not compared" in report.rule
    assert "pipeline's slowest stage" not in str(report)
    kinds = analysis.get_findings()["kind"].tolist()
    assert "straggler" in kinds and "pipeline_stage" not in kinds
    keys = set(analysis.get_key_findings()["kind"])
    assert "straggler" in keys and "pipeline_stage" not in keys


def test_a_job_without_sends_has_no_stages_and_says_why():
    stages = open_(SAMPLES / "gloo_4ranks").get_pipeline_stages()
    assert stages.empty and stages.attrs["slow_stage"] is None
    assert stages.attrs["why"].startswith("no pipeline: fewer than two ranks send or receive")


def host_pipeline(folder, slow_host=True, delay_us=230):
    """4 NCCL stages, each a 10 µs prep kernel then a 180 µs GEMM; stage 0's host launches its
    GEMM at 18 + ``delay_us`` µs (slow: loading a batch while its GPU idles) or 18 µs; each next
    stage runs its GEMM after its receive, then sends."""
    launch0 = 18 + delay_us if slow_host else 18
    arrival = None
    for rank in range(4):
        b = TraceBuilder(rank=rank, world_size=4)
        b.step(1, 0, 300)
        b.kernel("prep_kernel", 10, 10, launch_ts=8)
        if rank == 0:
            start = launch0 + 2
            b.kernel("gemm_kernel", start, 180, launch_ts=launch0)
        else:
            p2p(b, "recv", rank - 1, 25, 30, arrival + 10)
            start = arrival + 10
            b.kernel("gemm_kernel", start, 180, launch_ts=9)
        arrival = start + 180
        if rank < 3:
            p2p(b, "send", rank + 1, launch0 + 1 if rank == 0 else 40, arrival, arrival + 10)
        b.write(folder / f"rank-{rank}.json")
    return folder


def test_a_gpu_stage_slow_on_its_host_is_named_and_priced_at_its_host(tmp_path):
    """Stage 0's GPU idles 230 µs a step waiting for its host: every later stage waits for it
    (the last stage's step: 1,000 µs, 770 without the wait). Its GPU work equals the others'
    (190 µs), so comparing GPU work alone named no stage; with the host wait it is named,
    host-bound, and priced once, by host_bound on rank 0 (not also by pipeline_stage: balancing
    layers would not fix it), within 10 % of the 230 µs known."""
    (tmp_path / "slow").mkdir()
    (tmp_path / "fast").mkdir()
    slow, fast = (
        open_(host_pipeline(tmp_path / "slow")),
        open_(host_pipeline(tmp_path / "fast", False)),
    )
    last = [a.get_step_breakdown(visualize=False)["step_time"].iloc[-1] for a in (slow, fast)]
    known = last[0] - last[1]
    assert known == 230
    report = slow.get_straggler_report()
    assert report.slow_stage == 0 and report.stragglers == []
    assert report.stages.set_index("rank").loc[0, "work_us"] == 420  # 190 of GPU work, 230 waiting
    assert report.causes.set_index("rank").loc[0, "cause"] == "host-bound"
    table = slow.get_findings()
    assert (table.iloc[0]["kind"], table.iloc[0]["rank"]) == ("host_bound", 0)
    assert table.iloc[0]["saving_ms_per_step"] * 1e3 == pytest.approx(known, rel=0.1)
    assert "pipeline_stage" not in set(table["kind"])
    assert "pipeline_stage" in set(slow.get_key_findings()["kind"])
    assert fast.get_straggler_report().slow_stage is None


@pytest.mark.parametrize("delay_us", [60, 120])
def test_a_gpu_stage_a_little_slow_on_its_host_is_priced_as_the_stage(tmp_path, delay_us):
    """Stage 0's host delays its GEMM 60 or 120 µs: too little host time on the path for
    host_bound (20 % of it), so no host-side kind prices it; the stage's finding does, with
    advice for its host: 114 µs for 120 (within 10 %), 52 µs for 60 (13 % under: the model
    shortens each of the stage's segments alike, and part of the cut falls after its send,
    where the others do not wait for it)."""
    slow = open_(host_pipeline(tmp_path, delay_us=delay_us))
    report = slow.get_straggler_report()
    assert report.slow_stage == 0
    assert report.causes.set_index("rank").loc[0, "cause"] == "host-bound"
    top = slow.get_findings().iloc[0]
    assert (top["kind"], top["rank"]) == ("pipeline_stage", 0)
    assert top["saving_ms_per_step"] * 1e3 == pytest.approx(delay_us, rel=0.15)
    assert top["advice"].startswith("its GPU waits for its host")
