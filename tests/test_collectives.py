"""Collectives across ranks: calls, matching, bandwidth, waits, and the stragglers built on them.

Known answers come from construction (call tables written here), from our recorded gloo runs
(sample_traces/gloo_collectives/record.py: every size, group and the delayed rank are chosen
there) and from real NCCL metadata checked by hand."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pandas as pd
import pytest
from conftest import DATA, SAMPLES, SHARED_TRACES, needs_shared

from hta_lite import TraceAnalysis
from hta_lite.analyses.collectives import summaries
from hta_lite.analyses.collectives.bandwidth import bus_factor
from hta_lite.analyses.collectives.calls import CALL_COLUMNS
from hta_lite.analyses.collectives.matching import match
from hta_lite.tools.batch import summarize_folder
from hta_lite.tools.synthetic import make_straggler_folder

GLOO = SAMPLES / "gloo_collectives"
NCCL = DATA / "nccl_parser_config" / "nccl_data.json.gz"
TWO_RANKS = SAMPLES / "two_ranks"


# ---- by construction ----------------------------------------------------------------------


def call(rank, pg, ts, dur=10, collective="all_reduce", nbytes=1024, members="0,1,2,3", step=1):
    return {
        "rank": rank, "step": step, "pg": pg, "pg_desc": "", "members": members,
        "group_size": members.count(",") + 1 if members else -1, "collective": collective,
        "name": collective, "dtype": "Float", "in_bytes": nbytes, "out_bytes": nbytes,
        "ts": ts, "end": ts + dur, "dur": dur, "issued": ts, "stream": 7, "tid": 7, "source": "gpu",
        "world_size": -1,
        "pg_source": "metadata",
    }  # fmt: skip


def test_interleaved_groups_are_matched_by_group_not_by_name():
    # rank 0, 1 in half "A"; 2, 3 in half "B"; all four in "W". Same name and size everywhere.
    rows = []
    for r in range(4):
        half, members = ("A", "0,1") if r < 2 else ("B", "2,3")
        rows += [
            call(r, "W", 1000 + r),
            call(r, half, 2000 + 10 * r, members=members),
            call(r, "W", 3000 + (50 if r == 3 else 0)),
        ]
    m = match(pd.DataFrame(rows, columns=CALL_COLUMNS), range(4))
    assert m.problems.empty
    ranks = m.calls.groupby("instance")["rank"].apply(sorted).tolist()
    assert sorted(ranks) == [[0, 1], [0, 1, 2, 3], [0, 1, 2, 3], [2, 3]]
    table = m.instances.set_index(["pg", "ordinal"])
    assert table.loc[("W", 1), "last_rank"] == 3 and table.loc[("W", 1), "arrival_skew_us"] == 0.05
    assert table.loc[("A", 0), "last_rank"] == 1 and table.loc[("B", 0), "group_size"] == 2
    # the waits the last ranks caused are the waits the others suffered
    by_rank = summaries.by_rank(m)
    assert math.isclose(by_rank["wait_caused_us"].sum(), by_rank["wait_suffered_us"].sum())
    # rank 3 last at W#0 (waits 3 + 2 + 1 ns), W#1 (3 x 50 ns) and B#0 (10 ns)
    assert by_rank.set_index("rank").loc[3, "wait_caused_us"] == pytest.approx(0.006 + 0.15 + 0.01)


def test_missing_rank_count_mismatch_disagreement_and_p2p_are_reported_not_raised():
    rows = [call(r, "W", 100 + r) for r in (0, 1, 2)]  # rank 3 of the group is not loaded
    rows += [call(r, "W", 200 + r) for r in (0, 1)]  # rank 2 misses this call: count mismatch
    rows += [call(0, "V", 300, members="0,1"), call(1, "V", 301, members="0,1", nbytes=2048)]
    rows += [call(0, "V", 400, collective="send", members="0,1")]
    m = match(pd.DataFrame(rows, columns=CALL_COLUMNS), [0, 1, 2])
    reasons = m.problems.set_index(["pg", "reason"])
    assert reasons.loc[("W", "missing ranks"), "ranks"] == "3"
    assert reasons.loc[("W", "count mismatch"), "calls"] == 2
    assert ("V", "metadata disagree") in reasons.index
    assert ("V", "point-to-point") in reasons.index
    first = m.instances[(m.instances["pg"] == "W")].iloc[0]
    assert (first["ranks_present"], first["complete"]) == (3, False)
    assert (m.calls["instance"] < 0).sum() == 3  # 2 beyond the count, the send
    assert not m.instances.set_index("pg").loc["V", "consistent"]
    assert set(m.measured()["pg"]) == {"W"}


def test_bus_factors_and_bandwidth_follow_nccl_tests():
    assert bus_factor("all_reduce", 8) == 1.75
    assert bus_factor("all_gather", 8) == bus_factor("reduce_scatter", 8) == 0.875
    assert bus_factor("all_to_all", 4) == 0.75
    assert bus_factor("broadcast", 8) == bus_factor("send_recv", 2) == 1.0
    assert math.isnan(bus_factor("barrier", 8))
    rows = [call(r, "W", 0, dur=1000 + r, nbytes=8_000_000) for r in range(4)]
    row = match(pd.DataFrame(rows, columns=CALL_COLUMNS), range(4)).instances.iloc[0]
    assert row["transfer_us"] == 1.0  # the shortest duration
    assert row["algbw_gbps"] == 8000.0  # 8e6 bytes in 1 µs
    assert row["busbw_gbps"] == 8000.0 * 2 * 3 / 4


def test_no_collectives_give_empty_tables(tmp_path):
    from synth import TraceBuilder

    TraceBuilder().kernel("gemm", 10, 5).write(tmp_path / "rank0.json")
    a = TraceAnalysis(trace_dir=tmp_path, cache=False)
    m = a.get_collectives()
    assert m.calls.empty and m.instances.empty and m.problems.empty
    assert list(a.get_collective_summary().columns) == summaries.COLLECTIVE_COLUMNS


# ---- real metadata --------------------------------------------------------------------------


def test_nccl_metadata_sizes_and_partial_group():
    """nccl_parser_config: rank 0 of a 2-rank job. c10d wrote In/Out msg nelems and dtype on
    the kernels: allreduce of 2,049,000 Float = 8,196,000 bytes; broadcast 53,120 Float."""
    a = TraceAnalysis(trace_dir=NCCL.parent, cache=False)
    m = a.get_collectives()
    assert set(m.calls["pg_source"]) == {"metadata"} and set(m.calls["members"]) == {"0,1"}
    assert 8_196_000 in set(m.calls.loc[m.calls["collective"] == "all_reduce", "in_bytes"])
    assert 212_480 in set(m.calls.loc[m.calls["collective"] == "broadcast", "in_bytes"])
    problem = m.problems.iloc[0]
    assert (problem["reason"], problem["ranks"]) == ("missing ranks", "1")
    assert not m.instances["complete"].any() and (m.instances["group_size"] == 2).all()
    row = m.instances[m.instances["bytes"] == 8_196_000].iloc[0]
    assert row["busbw_gbps"] == pytest.approx(8_196_000 / (row["transfer_us"] * 1000) * 2 * 1 / 2)


@needs_shared
def test_b200_all_gather_by_hand():
    """b200_eager: one _allgather_base of 25,136 BFloat16 per rank into 201,088 on 8 ranks,
    21.953 µs: algbw = 402,176 B / 21,953 ns = 18.32 GB/s, busbw x 7/8."""
    a = TraceAnalysis(trace_dir=SHARED_TRACES / "tracelens" / "b200_eager", cache=False)
    row = a.get_collectives().calls.iloc[0]
    assert (row["collective"], row["dtype"], row["in_bytes"], row["out_bytes"]) == (
        "all_gather", "bfloat16", 50_272, 402_176,
    )  # fmt: skip
    inst = a.get_collectives().instances.iloc[0]
    assert inst["algbw_gbps"] == pytest.approx(402_176 / 21_953)
    assert inst["busbw_gbps"] == pytest.approx(402_176 / 21_953 * 7 / 8)


# ---- recorded gloo runs ---------------------------------------------------------------------


@pytest.mark.parametrize("world", [4, 8])
def test_recorded_gloo_runs(world):
    """Sizes, groups and bus factors as record.py chose them; rank 2 (100 ms late each step)
    arrives last at every step's gradient all_reduce and causes most of the waiting."""
    a = TraceAnalysis(trace_dir=GLOO / f"{world}ranks", cache=False, parallel=False)
    m = a.get_collectives()
    assert m.problems.empty and (m.calls["instance"] >= 0).all()
    assert set(m.calls["pg_source"]) == {"thread order"}
    inst = m.instances
    half = world // 2
    expected = {
        "all_reduce": {49_792, 16_384}, "all_gather": {4096 * world}, "broadcast": {16_384},
        "all_to_all": {1024 * world}, "barrier": {-1},
    }  # fmt: skip
    assert inst.groupby("collective")["bytes"].apply(set).to_dict() == expected
    # interleaved groups: every half-group collective has exactly its half's ranks
    for instance, ranks in m.calls.groupby("instance")["rank"]:
        group = inst.set_index("instance").loc[instance, "group_size"]
        assert len(ranks) == group and group in (world, half)
        if group == half:
            assert len({r // half for r in ranks}) == 1
    world_reduce = inst[(inst["collective"] == "all_reduce") & (inst["group_size"] == world)]
    assert (world_reduce["last_rank"] == 2).all() and (
        world_reduce["arrival_skew_us"] > 90_000
    ).all()
    reduce_ = world_reduce.iloc[0]
    assert reduce_["busbw_gbps"] == pytest.approx(reduce_["algbw_gbps"] * 2 * (world - 1) / world)
    by_rank = a.get_collective_summary("rank")
    assert by_rank.iloc[0]["rank"] == 2
    assert by_rank["wait_caused_us"].sum() == pytest.approx(by_rank["wait_suffered_us"].sum())
    report = a.get_straggler_report()
    assert report.stragglers == [2] and report.causes.iloc[0]["cause"] == "host-bound"
    assert a.get_potential_stragglers(num_candidates=1) == [2]


def test_folder_with_a_missing_rank_reports_it(tmp_path):
    for r in (0, 1, 2):
        shutil.copy(GLOO / "4ranks" / f"rank-{r}.json.gz", tmp_path)
    a = TraceAnalysis(trace_dir=tmp_path, cache=False, parallel=False)
    m = a.get_collectives()
    missing = m.problems[m.problems["reason"] == "missing ranks"]
    assert set(missing["ranks"]) == {"3"} and len(missing) == 2  # the world and half [2, 3]
    assert not m.instances[m.instances["pg"] != "1"]["complete"].any()
    assert m.instances[m.instances["pg"] == "1"]["complete"].all()
    assert a.get_straggler_report().stragglers == [2]


# ---- generated folders: the generator's defaults (5 ms) --------------------------------------

GENERATED = [
    (NCCL, 8, "host", 0), (NCCL, 8, "compute", 1), (NCCL, 16, "host", 3),
    (NCCL, 16, "compute", 3), (NCCL, 64, "host", 7), (NCCL, 64, "compute", 2),
    (TWO_RANKS / "sampled_rank-0.json.gz", 8, "host", 2),
    (TWO_RANKS / "sampled_rank-0.json.gz", 16, "compute", 3),
    (TWO_RANKS / "sampled_rank-0.json.gz", 64, "host", 9),
    (TWO_RANKS / "sampled_rank-1.json.gz", 16, "host", 3),
    (TWO_RANKS / "sampled_rank-1.json.gz", 32, "compute", 6),
]  # fmt: skip
SHARED_GENERATED = [
    ("hta/diff_control/control.json.gz", 8, "host", 3),
    ("hta/diff_control/control.json.gz", 8, "compute", 4),
    ("hta/diff_test/test.json.gz", 8, "host", 3),
    ("hta/diff_test/test.json.gz", 8, "compute", 5),
]


def check_generated(template, tmp_path, n_ranks, cause, seed):
    straggler = (seed * 7 + 5) % n_ranks
    make_straggler_folder(template, tmp_path, n_ranks, straggler, cause, seed=seed, gz=False)
    a = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    report = a.get_straggler_report()
    assert report.stragglers == [straggler]
    assert report.causes.set_index("rank").loc[straggler, "cause"] == f"{cause}-bound"
    assert a.get_potential_stragglers(num_candidates=1) == [straggler]
    by_rank = a.get_collective_summary("rank")
    assert by_rank.iloc[0]["rank"] == straggler
    assert by_rank["wait_caused_us"].sum() == pytest.approx(by_rank["wait_suffered_us"].sum())
    assert not (a.get_collectives().problems["reason"] == "count mismatch").any()


@pytest.mark.parametrize("template, n_ranks, cause, seed", GENERATED)
def test_generated_stragglers(template, tmp_path, n_ranks, cause, seed):
    check_generated(template, tmp_path, n_ranks, cause, seed)


@needs_shared
@pytest.mark.parametrize("template, n_ranks, cause, seed", SHARED_GENERATED)
def test_generated_stragglers_on_large_traces(template, tmp_path, n_ranks, cause, seed):
    check_generated(SHARED_TRACES / template, tmp_path, n_ranks, cause, seed)


def test_clock_offsets_alone_make_no_straggler(tmp_path):
    """Rank 15 has the latest clock for seed 3 (offsets 0-20 µs): a finder that probes a
    collective nobody waited in names it; ours names the delayed rank."""
    offsets = np.random.default_rng(3).uniform(0, 20, 16)
    assert int(np.argmax(offsets)) == 15
    check_generated(NCCL, tmp_path, 16, "host", 3)  # straggler 10


def test_batch_summaries_match_across_ranks_from_worker_partials(tmp_path):
    folder = make_straggler_folder(NCCL, tmp_path / "f", 64, 41, "compute", seed=7, gz=False)
    summary = summarize_folder(folder, executor="process", cache=False)
    by_rank = summary["collectives_by_rank"]
    assert by_rank.iloc[0]["rank"] == 41 and len(by_rank) == 64
    a = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    pd.testing.assert_frame_equal(by_rank, a.get_collective_summary("rank"))
    pd.testing.assert_frame_equal(summary["collectives"], a.get_collective_summary())
    report = a.get_straggler_report()
    assert report.stragglers == [41] and summary["rank_lateness"].iloc[0]["rank"] == 41
    pd.testing.assert_frame_equal(summary["rank_lateness"], report.ranks)
    pd.testing.assert_frame_equal(summary["straggler_causes"], report.causes)
    assert report.causes["cause"].tolist() == ["compute-bound"]
    pd.testing.assert_frame_equal(summary["timers"], a.get_timers_across_ranks().reset_index())


def test_cross_rank_tables_on_a_dask_cluster_equal_the_process_pool(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    folder = make_straggler_folder(NCCL, tmp_path / "f", 8, 5, "host", seed=3, gz=False)
    pooled = summarize_folder(folder, executor="process", cache=False)
    assert pooled["straggler_causes"]["rank"].tolist() == [5]
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster) as client:
            via_dask = summarize_folder(folder, executor=client, cache=False)
    assert set(via_dask) == set(pooled)
    for name in pooled:
        pd.testing.assert_frame_equal(pooled[name], via_dask[name])


def test_sizes_from_the_launching_ops_inputs_when_metadata_has_none(tmp_path):
    """No c10d metadata: the size comes from the first tensor of the enclosing
    record_param_comms' recorded inputs; the collective from the nccl: range, the group from the
    stream."""
    from synth import TraceBuilder

    for rank in (0, 1):
        b = TraceBuilder(rank=rank, world_size=2).step(1, 0, 100)
        b.cpu_op(
            "record_param_comms",
            10,
            20,
            **{"Input Dims": [[4, 1024]], "Input type": ["c10::BFloat16"]},
        )
        b.cpu_op("nccl:all_gather", 11, 10, cat="user_annotation")
        b.kernel("ncclDevKernel_AllGather_RING_LL(x)", 40 + 5 * rank, 20 - 5 * rank, launch_ts=12)
        b.write(tmp_path / f"rank{rank}.json")
    m = TraceAnalysis(trace_dir=tmp_path, cache=False, parallel=False).get_collectives()
    assert m.calls[
        ["collective", "dtype", "in_bytes", "out_bytes", "pg"]
    ].drop_duplicates().values.tolist() == [["all_gather", "bfloat16", 8192, 16384, "stream 7"]]
    row = m.instances.iloc[0]
    assert (row["last_rank"], row["arrival_skew_us"], row["transfer_us"]) == (1, 5.0, 15.0)
    assert row["busbw_gbps"] == pytest.approx(16384 / 15_000 * 0.5)
