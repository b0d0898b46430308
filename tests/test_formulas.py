"""Each analysis formula pinned on generated traces whose answer is known by construction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.classify import kernel_type, kernel_types


def analyze(tmp_path, builder: TraceBuilder) -> TraceAnalysis:
    builder.write(tmp_path / "rank0.json")
    return TraceAnalysis(trace_dir=tmp_path, parallel=False)


def test_two_overlapping_kernels_on_two_streams(tmp_path):
    a = analyze(
        tmp_path, TraceBuilder().kernel("gemm_a", 0, 10, stream=7).kernel("gemm_b", 5, 15, stream=8)
    )
    row = a.get_temporal_breakdown(visualize=False).iloc[0]
    assert (
        row["kernel_time(us)"] == 20 and row["idle_time(us)"] == 0 and row["compute_time(us)"] == 20
    )
    assert row["compute_time_pctg"] == 100.0


def test_comm_half_under_compute(tmp_path):
    a = analyze(
        tmp_path,
        TraceBuilder()
        .kernel("gemm", 0, 10, stream=7)
        .kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 5, 10, stream=20),
    )
    row = a.get_temporal_breakdown(visualize=False).iloc[0]
    assert (
        row["kernel_time(us)"],
        row["compute_time(us)"],
        row["non_compute_time(us)"],
        row["idle_time(us)"],
    ) == (15, 10, 5, 0)
    assert a.get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].iloc[0] == 50.0


def test_idle_gap_causes(tmp_path):
    b = (
        TraceBuilder()
        .kernel("k1", 0, 10, launch_ts=-5)
        .kernel("k2", 25, 5, launch_ts=20)  # launched after k1 ended: host_wait 15
        .kernel("k3", 35, 5, launch_ts=21)  # queued in time, gap 5 < 30: kernel_wait 5
        .kernel("k4", 100, 10, launch_ts=22)  # queued in time, gap 60 >= 30: other 60
    )
    idle, stats = analyze(tmp_path, b).get_idle_time_breakdown(
        visualize=False, show_idle_interval_stats=True
    )
    got = idle.set_index("idle_category")["idle_time"].to_dict()
    assert got == {"host_wait": 15.0, "kernel_wait": 5.0, "other": 60.0}
    assert idle.set_index("idle_category")["idle_time_ratio"]["other"] == 0.75
    assert stats.set_index("idle_category")["count"].to_dict() == {
        "host_wait": 1,
        "kernel_wait": 1,
        "other": 1,
    }


def test_overlap_on_one_stream_never_makes_negative_idle(tmp_path):
    """B runs inside A on the same stream, as a programmatic dependent launch may (so A is not
    clipped); C starts 20 µs after A ends. The reference measures C's gap from B's end (60 µs,
    'other') and B's as -50 µs; the stream was idle 20 µs."""
    b = (
        TraceBuilder()
        .kernel("A", 100, 100, launch_ts=1)
        .kernel("B", 150, 10, launch_ts=2, launch_name="cudaLaunchKernelExC")
        .kernel("C", 220, 5, launch_ts=3)
    )
    idle = (
        analyze(tmp_path, b)
        .get_idle_time_breakdown(visualize=False)[0]
        .set_index("idle_category")["idle_time"]
    )
    assert idle.to_dict() == {"host_wait": 0.0, "kernel_wait": 20.0, "other": 0.0}


def test_overlaps_the_launch_allows_are_not_trace_problems(tmp_path):
    """On stream 7: B starts 1 µs before A ends, launched with cudaLaunchKernelEx (a programmatic
    dependent launch); D and E, two branches of one graph replay, run at once; G starts inside F
    though a plain cudaLaunchKernel launched it (a problem)."""
    b = (
        TraceBuilder()
        .kernel("A", 100, 10, launch_ts=1)
        .kernel("B", 109, 10, launch_ts=2, launch_name="cudaLaunchKernelExC")
        .kernel("D", 130, 10, launch_ts=3, launch_name="cudaGraphLaunch", correlation=77)
        .kernel("E", 132, 10, correlation=77)
        .kernel("F", 150, 10, launch_ts=4)
        .kernel("G", 155, 10, launch_ts=5)
    )
    health = analyze(tmp_path, b).health().set_index("code")
    overlaps = health[health.index.str.startswith("gpu_overlap")]
    assert overlaps[["severity", "count"]].to_dict("index") == {
        "gpu_overlap_dependent_launch": {"severity": "info", "count": 1},  # facts, not problems
        "gpu_overlap_in_graph": {"severity": "info", "count": 1},
        "gpu_overlap_on_stream": {"severity": "warning", "count": 1},
    }
    assert health.loc["gpu_overlap_on_stream", "item"].endswith("5.0 µs removed)")


def test_an_end_that_overruns_the_next_event_on_its_stream_is_clipped(tmp_path):
    """A ROCm-style deferred completion timestamp: an attention kernel that ran 40 µs is written
    as 1 s long, and the 100 kernels of 5 µs after it on its stream (every 10 µs from 40 µs) all
    start inside it. A stream runs one thing at a time, so its end is the next one's start: 40 µs
    in every view (the reference sums the 1 s in the kernel breakdown and counts it busy), the
    999,960 µs removed said in health; kernels starting at the same time are left whole."""
    b = TraceBuilder().kernel("fmha_bwd", 100, 1_000_000, launch_ts=1)
    for i in range(100):
        b.kernel("k", 140 + 10 * i, 5, launch_ts=2 + i / 1000)
    b.kernel("same_start_a", 2000, 10, launch_ts=3).kernel("same_start_b", 2000, 4, launch_ts=4)
    a = analyze(tmp_path, b)
    kernels = a.get_gpu_kernel_breakdown(visualize=False)[1].set_index("name")["sum (us)"]
    assert kernels["fmha_bwd"] == 40 and kernels["k"] == 500
    assert kernels["same_start_a"] + kernels["same_start_b"] == 14
    temporal = a.get_temporal_breakdown(visualize=False).iloc[0]
    assert temporal["compute_time(us)"] == 40 + 500 + 10
    health = a.health().set_index("code").loc["gpu_overlap_on_stream"]
    assert health["count"] == 102  # as read: all start inside the 1 s, the same-start pair too
    assert health["item"].endswith("999,960.0 µs removed)")


def test_consecutive_kernel_delay_is_in_microseconds(tmp_path):
    a = analyze(
        tmp_path, TraceBuilder().kernel("k1", 0, 10, launch_ts=-5).kernel("k2", 50, 5, launch_ts=1)
    )
    assert (
        a.get_idle_time_breakdown(visualize=False)[0].set_index("idle_category")["idle_time"][
            "other"
        ]
        == 40
    )
    idle = a.get_idle_time_breakdown(visualize=False, consecutive_kernel_delay=41)[0]
    assert idle.set_index("idle_category")["idle_time"]["kernel_wait"] == 40


def test_memory_only_gap_is_non_compute(tmp_path):
    b = (
        TraceBuilder()
        .kernel("Memcpy HtoD (Pageable -> Device)", 0, 10, cat="gpu_memcpy")
        .kernel("gemm", 20, 10)
    )
    row = analyze(tmp_path, b).get_temporal_breakdown(visualize=False).iloc[0]
    assert (row["idle_time(us)"], row["compute_time(us)"], row["non_compute_time(us)"]) == (
        10,
        10,
        10,
    )
    assert row[["idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"]].tolist() == [
        33.33,
        33.33,
        33.33,
    ]


def test_kernel_type_overlap_combinations(tmp_path):
    b = (
        TraceBuilder()
        .kernel("gemm", 0, 10, stream=7)
        .kernel("ncclKernel_AllGather", 5, 10, stream=20)
        .kernel("Memcpy DtoD (Device -> Device)", 8, 12, stream=21, cat="gpu_memcpy")
    )
    type_df, _ = analyze(tmp_path, b).get_gpu_kernel_breakdown(visualize=False)
    got = type_df.set_index("kernel_type")["sum"].to_dict()
    assert got == {
        "COMPUTATION": 5.0,
        "COMPUTATION overlapping COMMUNICATION": 3.0,
        "COMPUTATION overlapping COMMUNICATION overlapping MEMORY": 2.0,
        "COMMUNICATION overlapping MEMORY": 5.0,
        "MEMORY": 5.0,
    }
    assert type_df["percentage"].sum() == pytest.approx(100.0, abs=0.2)
    no_mem, _ = analyze(tmp_path, b).get_gpu_kernel_breakdown(
        visualize=False, include_memory_kernels=False
    )
    assert set(no_mem["kernel_type"]) == {
        "COMPUTATION",
        "COMPUTATION overlapping COMMUNICATION",
        "COMMUNICATION",
    }


def test_kernel_stats_are_true_per_kernel_statistics(tmp_path):
    b = TraceBuilder()
    t = 0
    for dur in (2, 4, 6):
        b.kernel("gemm_a", t, dur)
        t += 10
    b.kernel("gemm_b", t, 1)
    _, kernel_df = analyze(tmp_path, b).get_gpu_kernel_breakdown(visualize=False)
    row = kernel_df.set_index("name").loc["gemm_a"]
    assert (row["sum (us)"], row["max (us)"], row["min (us)"], row["mean (us)"], row["stddev"]) == (
        12,
        6,
        2,
        4,
        2,
    )
    assert kernel_df.set_index("name").loc["gemm_b", "stddev"] == 0


def test_small_kernels_pooled_as_others_with_true_stats(tmp_path):
    b = TraceBuilder()
    t = 0
    for i in range(12):  # kernel i runs twice, 100 - 5i µs each time
        for _ in range(2):
            b.kernel(f"k{i:02d}", t, 100 - 5 * i)
            t += 200
    _, kernel_df = analyze(tmp_path, b).get_gpu_kernel_breakdown(
        visualize=False, num_kernels=3, duration_ratio=1.0
    )
    names = set(kernel_df["name"])
    assert names == {"k00", "k01", "k02", "others"}
    others = kernel_df.set_index("name").loc["others"]
    durations = [100 - 5 * i for i in range(3, 12)] * 2
    assert others["sum (us)"] == sum(durations)
    assert (others["max (us)"], others["min (us)"]) == (85, 45)
    assert others["mean (us)"] == pytest.approx(np.mean(durations))


def test_gpu_kernels_with_user_annotations_innermost(tmp_path):
    b = TraceBuilder().kernel("k_in", 12, 2).kernel("k_outer_only", 30, 2).kernel("k_none", 60, 2)
    b.events += [
        {
            "ph": "X",
            "cat": "gpu_user_annotation",
            "name": "outer",
            "pid": 0,
            "tid": 7,
            "ts": 10,
            "dur": 40,
        },
        {
            "ph": "X",
            "cat": "gpu_user_annotation",
            "name": "inner",
            "pid": 0,
            "tid": 7,
            "ts": 11,
            "dur": 5,
        },
    ]
    a = analyze(tmp_path, b)
    got = a.get_gpu_kernels_with_user_annotations(0).set_index(a.gpu_events(0)["name"].astype(str))[
        "user_annotation"
    ]
    assert got["k_in"] == "inner" and got["k_outer_only"] == "outer" and pd.isna(got["k_none"])
    b2 = TraceBuilder().kernel("void gemm<float, 4>(int)", 12, 2)
    b2.write(tmp_path / "short" / "rank0.json")
    short_names = TraceAnalysis(trace_dir=tmp_path / "short")
    short = short_names.get_gpu_kernels_with_user_annotations(0)  # the reference's defaults
    assert short["s_name"].tolist() == ["gemm"] and short["name"].tolist() == [b2.events[0]["name"]]
    full = short_names.get_gpu_kernels_with_user_annotations(0, shorten_names=False)
    assert full["s_name"].tolist() == [b2.events[0]["name"]]
    with pytest.warns(DeprecationWarning, match="shorten_names"):  # the spelling before HTA 0.6
        old = short_names.get_gpu_kernels_with_user_annotations(0, shortern_names=False)
    assert old["s_name"].tolist() == full["s_name"].tolist()
    assert "s_name" not in short_names.get_gpu_kernels_with_user_annotations(0, expand_names=False)
    breakdown = a.get_gpu_user_annotation_breakdown(visualize=False)
    assert breakdown.set_index("name")["sum (us)"].to_dict() == {"outer": 40, "inner": 5}


@pytest.mark.parametrize(
    "name, expected",
    [
        ("ncclKernel_AllReduce_RING_LL_Sum_float", "COMMUNICATION"),
        ("ncclDevKernel_Generic", "COMMUNICATION"),
        ("void ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "COMMUNICATION"),
        ("rcclGenericKernel", "COMMUNICATION"),
        ("hcclAllReduce", "COMMUNICATION"),
        # collective kernels that are not NCCL's (docs/differences-from-hta.md #22)
        (
            "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>("
            "c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)",
            "COMMUNICATION",
        ),
        (
            "void (anonymous namespace)::two_shot_all_reduce_kernel<float, 16, 8, true, false>"
            "(float**)",
            "COMMUNICATION",
        ),
        (
            "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*)",
            "COMMUNICATION",
        ),
        ("void sglang::cross_device_reduce_2stage<__half, 4>(sglang::RankData*)", "COMMUNICATION"),
        (
            "quickreduce::allreduce_prototype_twoshot<AllReduceTwoshot<__half,"
            " CodecQ4<__half, 4>, true>, __half>",
            "COMMUNICATION",
        ),
        (
            "void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<"
            "(AllReduceFusionPattern)1, __nv_bfloat16, 8, true, true>(AllReduceFusionParams)",
            "COMMUNICATION",
        ),
        ("void userbuffers_fp16_sum_inplace_gpu_rr_rs_oop_fp8<8>(int, int)", "COMMUNICATION"),
        ("void deep_ep::internode_ll::dispatch<true, 3, 10, 7168>(void*, float*)", "COMMUNICATION"),
        ("void deep_ep::intranode::cached_notify_combine<8>(void**, int*)", "COMMUNICATION"),
        ("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)", "COMPUTATION"),
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>", "COMPUTATION"),
        ("triton_per_fused_all_reduce_sum_0", "COMPUTATION"),
        ("Memcpy HtoD (Pageable -> Device)", "MEMORY"),
        ("Memset (Device)", "MEMORY"),
        ("hipMemcpyAsync", "MEMORY"),
        ("dma_transfer", "MEMORY"),
        ("Context Sync", "OTHER"),
        ("Stream Wait Event", "OTHER"),
        ("cudaLaunchKernel", "OTHER"),
        ("void at::native::vectorized_elementwise_kernel<4>", "COMPUTATION"),
        ("triton_poi_fused_add_0", "COMPUTATION"),
    ],
)
def test_kernel_classification(name, expected):
    assert kernel_type(name) == expected
    assert kernel_types(pd.Series([name]))[0] == expected  # the loader's path (RE2)


def test_ranks_restrict_and_unknown_rank_is_clear(two_ranks):
    assert two_ranks.get_temporal_breakdown(visualize=False, ranks=[1])["rank"].tolist() == [1]
    with pytest.raises(KeyError, match="rank\\(s\\) \\[9\\] not loaded"):
        two_ranks.get_comm_comp_overlap(visualize=False, ranks=[9])


def test_breakdown_invariants_on_samples(two_ranks):
    t = two_ranks.get_temporal_breakdown(visualize=False)
    total = t["idle_time(us)"] + t["compute_time(us)"] + t["non_compute_time(us)"]
    assert np.allclose(total, t["kernel_time(us)"])
    pct = t[["idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"]]
    assert ((pct >= 0) & (pct <= 100)).all().all()


def test_gpu_side_syncs_are_not_gpu_work(tmp_path):
    """A sync is the device waiting: not busy time, not a gap-closing event, not a kernel."""
    b = (
        TraceBuilder()
        .kernel("gemm", 0, 10)
        .kernel("Stream Sync", 10, 10, cat="cuda_sync")  # on stream 7, between the kernels
        .kernel("Context Sync", 35, 5, cat="cuda_sync", stream=4294967295)  # after them
        .kernel("gemm", 20, 10)
    )
    a = analyze(tmp_path, b)
    row = a.get_temporal_breakdown(visualize=False).iloc[0]
    assert (row["kernel_time(us)"], row["idle_time(us)"], row["compute_time(us)"]) == (30, 10, 20)
    assert row["non_compute_time(us)"] == 0
    types = a.get_gpu_kernel_breakdown(visualize=False)[0]
    assert types["kernel_type"].tolist() == ["COMPUTATION"] and types["sum"].tolist() == [20.0]
    idle = a.get_idle_time_breakdown(visualize=False)[0]
    assert idle["idle_time"].sum() == 10 and set(idle["stream"]) == {7}
    assert a.get_step_breakdown(visualize=False).empty  # no ProfilerStep: nothing per step


def test_queue_changes_at_one_instant(tmp_path):
    """At one instant a queued op starts before a new one is enqueued (never a zero-length state
    above the true length), and an op enqueued as it starts is enqueued first (never below 0)."""
    b = (
        TraceBuilder()
        .kernel("a", 10, 5, launch_ts=0)  # queued 0 -> 10
        .kernel("b", 20, 5, launch_ts=10)  # enqueued at 10, when a starts
        .kernel("c", 30, 5, launch_ts=30)  # enqueued as it starts
    )
    series = analyze(tmp_path, b).get_queue_length_time_series()[0]
    assert series["queue_length"].tolist() == [1, 0, 1, 0, 1, 0]
    assert (series["ts"] // 1000).tolist() == [0, 10, 10, 20, 30, 30]


def test_running_max_by_group_with_times_decades_apart():
    """A time 0 among epoch times (a corrupt ts) made the bands of the groups overflow int64."""
    from hta_lite.intervals import running_max_by_group, union_length_by_group

    epoch = 1_682_725_898_084_336_000
    values = np.array([0, 7_000] + [epoch + i for i in range(10)], np.int64)
    first = np.zeros(len(values), bool)
    first[[0, 2, 4, 6, 8, 10]] = True
    expected = np.concatenate(
        [
            np.maximum.accumulate(values[s:e])
            for s, e in [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10), (10, 12)]
        ]
    )
    assert (running_max_by_group(values, first) == expected).all()
    groups, lengths = union_length_by_group(np.arange(12) // 2, values, values + 1_000)
    assert (lengths >= 0).all() and lengths.tolist() == [2_000, 1_001, 1_001, 1_001, 1_001, 1_001]


def test_interval_subtraction_and_length_before_a_point():
    """[0,5) [10,20) [30,40) less [3,12) [15,35) leaves [0,3) [12,15) [35,40); against a brute
    force over every ns, with overlapping and touching inputs; the length before points in,
    between and past the intervals (none: 0)."""
    from hta_lite.intervals import length_before, subtract

    a = (np.array([0, 10, 30]), np.array([5, 20, 40]))
    b = (np.array([3, 15]), np.array([12, 35]))
    assert [x.tolist() for x in subtract(a, b)] == [[0, 12, 35], [3, 15, 40]]
    rng = np.random.default_rng(7)
    for _ in range(50):
        sa, sb = rng.integers(0, 90, 6), rng.integers(0, 90, 5)
        a, b = (sa, sa + rng.integers(0, 12, 6)), (sb, sb + rng.integers(0, 12, 5))
        cover = np.zeros(110, bool)
        for s, e in zip(*a):
            cover[s:e] = True
        for s, e in zip(*b):
            cover[s:e] = False
        lo, hi = subtract(a, b)
        got = np.zeros(110, bool)
        for s, e in zip(lo, hi):
            got[s:e] = True
        assert (got == cover).all() and (lo[1:] > hi[:-1]).all()
    starts, ends = np.array([0, 10]), np.array([5, 20])
    at = np.array([-1, 0, 3, 5, 7, 12, 25])
    assert length_before(starts, ends, at).tolist() == [0, 0, 3, 5, 5, 7, 15]
    assert length_before(starts[:0], ends[:0], at).tolist() == [0] * 7
