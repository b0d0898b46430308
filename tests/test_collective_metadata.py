"""Collective sizes, dtypes and group sizes from every place Kineto writes them (issue #37),
each with its source, and a job of which not every rank is loaded."""

from __future__ import annotations

import math

import pytest
from conftest import DATA, SAMPLES, SHARED_TRACES, needs_shared
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.collective_names import (
    kernel_algorithm,
    kernel_dtype,
    kernel_group_size,
    other_collective_kind,
)
from hta_lite.kineto import torch_dtype

WORLD = 16


def one_rank_of_sixteen(tmp_path):
    """Rank 0 of a 16-rank job, one collective per stream, each described in one place only."""
    b = TraceBuilder(rank=0, world_size=WORLD).step(1, 0, 1000)
    b.meta["distributedInfo"]["pg_config"] = [
        {"pg_name": "5", "pg_desc": "tp", "backend_config": "cuda:nccl", "pg_size": 4,
         "ranks": [0, 1, 2, 3]},
    ]  # fmt: skip
    # stream 1: the kernel's own args
    b.kernel(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", 100, 10, stream=1, launch_ts=10,
        **{"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000,
           "Group size": 16, "dtype": "Float", "Process Group Name": "0",
           "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]"},
    )  # fmt: skip
    # stream 2: record_param_comms around the launch
    b.cpu_op(
        "record_param_comms", 20, 10,
        **{"Collective name": "broadcast", "In msg nelems": 64, "Out msg nelems": 64,
           "dtype": "Long", "Group size": 16, "Process Group Name": "0",
           "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]"},
    )  # fmt: skip
    b.kernel("ncclDevKernel_Broadcast_RING_LL(x)", 200, 10, stream=2, launch_ts=22)
    # stream 3: an old trace: c10d::allreduce_ records a TensorList without shapes; the nccl:
    # range records [[366336]] float; the kernel name says float too
    b.cpu_op("c10d::allreduce_", 40, 20, **{"Input Dims": [[]], "Input type": ["TensorList"]})
    b.cpu_op(
        "nccl:all_reduce", 41, 15, cat="user_annotation",
        **{"Input Dims": [[366336]], "Input type": ["float"]},
    )  # fmt: skip
    b.kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(x)", 300, 10, stream=3, launch_ts=42)
    # stream 4: c10d::_allgather_base_(output, input): 32 MiB gathered from 2 MiB per rank
    b.cpu_op(
        "c10d::_allgather_base_", 60, 20,
        **{"Input Dims": [[33554432], [2097152], []],
           "Input type": ["signed char", "signed char", ""]},
    )  # fmt: skip
    b.cpu_op("nccl:_all_gather_base", 61, 15, cat="user_annotation")
    b.kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t(x)", 400, 10, stream=4, launch_ts=62)
    # stream 5: nothing but the kernel name: a reducing kernel's type suffix is the data's
    b.kernel("ncclKernel_ReduceScatter_RING_LL_Sum_bf16(x)", 500, 10, stream=5, launch_ts=80)
    # stream 6: the group's name only: its size from distributedInfo.pg_config
    b.kernel(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", 600, 10, stream=6, launch_ts=90,
        **{"Collective name": "allreduce", "In msg nelems": 10, "Out msg nelems": 10,
           "dtype": "Float", "Process Group Name": "5"},
    )  # fmt: skip
    return b.write(tmp_path / "rank0.json")


def test_each_place_and_its_source(tmp_path):
    one_rank_of_sixteen(tmp_path)
    analysis = TraceAnalysis(trace_dir=tmp_path, parallel=False, cache=False)
    calls = analysis.get_collectives().calls.set_index("stream")
    columns = [
        "collective", "dtype", "in_bytes", "out_bytes", "group_size", "size_source",
        "dtype_source", "group_size_source",
    ]  # fmt: skip
    got = {s: tuple(calls.loc[s, columns]) for s in range(1, 7)}
    assert got == {
        1: ("all_reduce", "float32", 4000, 4000, 16, "kernel", "kernel", "kernel"),
        2: ("broadcast", "int64", 512, 512, 16, "record_param_comms", "record_param_comms",
            "record_param_comms"),
        3: ("all_reduce", "float32", 1_465_344, 1_465_344, -1, "nccl range", "nccl range", ""),
        4: ("all_gather", "int8", 2_097_152, 33_554_432, 16, "c10d op", "c10d op", "sizes"),
        5: ("reduce_scatter", "bfloat16", -1, -1, -1, "", "kernel name", ""),
        6: ("all_reduce", "float32", 40, 40, 4, "kernel", "kernel", "pg_config"),
    }  # fmt: skip


def test_unknown_group_size_gives_unknown_bandwidth_and_partial_figures(tmp_path):
    """One rank loaded of 16: a group not recorded has no size (busbw NaN, never the 0.0 GB/s
    of a group of 1), every collective is partial, and the key findings say the job is."""
    one_rank_of_sixteen(tmp_path)
    analysis = TraceAnalysis(trace_dir=tmp_path, parallel=False, cache=False)
    instances = analysis.get_collectives().instances.set_index("pg")
    assert instances.at["stream 3", "group_size"] == -1
    assert math.isnan(instances.at["stream 3", "busbw_gbps"])
    assert instances.at["stream 4", "busbw_gbps"] == pytest.approx(33_554_432 / 10_000 * 15 / 16)
    assert not instances["complete"].any()
    summary = analysis.get_collective_summary().set_index("pg")
    assert summary["partial"].all()
    assert summary.at["stream 5", "size_range"] == "unknown"  # a size no place records
    assert summary["size_bucket"].isna().sum() == 1
    findings = analysis.get_key_findings().set_index("kind")
    assert "1 of the job's 16 ranks" in findings.at["partial_job", "finding"]


def test_two_ranks_of_a_128_rank_job():
    """sample_traces/two_ranks (PyTorch 2.0-era NCCL job, no c10d metadata): the all_gather's
    input is the nccl: range's (16 MiB), its output c10d::_allgather_base_'s first argument
    (1 GiB), so the group has 64 ranks; the all_reduce sizes come from the nccl: range's float
    tensors (19,618,307 x 4 bytes); no dtype comes from the SendRecv kernels' ``int8_t``."""
    analysis = TraceAnalysis(trace_dir=SAMPLES / "two_ranks", parallel=False)
    calls = analysis.get_collectives().calls
    gather = calls[calls["collective"] == "all_gather"].iloc[0]
    assert (gather["in_bytes"], gather["out_bytes"], gather["group_size"]) == (
        16_777_216, 1_073_741_824, 64,
    )  # fmt: skip
    assert (gather["size_source"], gather["group_size_source"]) == ("nccl range", "sizes")
    reduces = calls[calls["collective"] == "all_reduce"]
    assert set(reduces["dtype"]) == {"float32"} and 78_473_228 in set(reduces["in_bytes"])
    assert (reduces["group_size"] == -1).all()  # not recorded, 2 of 128 ranks loaded
    assert set(calls["dtype_source"]) == {"nccl range"}
    summary = analysis.get_collective_summary()
    assert summary["partial"].all()
    assert summary.loc[summary["collective"] == "all_reduce", "busbw_median_gbps"].isna().all()
    findings = analysis.get_key_findings().set_index("kind")
    assert "2 of the job's 128 ranks" in findings.at["partial_job", "finding"]


def test_a_whole_job_has_no_partial_finding():
    analysis = TraceAnalysis(trace_dir=SAMPLES / "gloo_collectives" / "4ranks", parallel=False)
    assert "partial_job" not in set(analysis.get_key_findings()["kind"])
    assert not analysis.get_collective_summary()["partial"].any()
    calls = analysis.get_collectives().calls
    sized = calls[calls["in_bytes"] >= 0]
    assert set(sized["size_source"]) == {"gloo range"}
    assert set(calls["group_size_source"]) == {"pg_config"}


@needs_shared
def test_b200_one_rank_of_eight_is_partial():
    analysis = TraceAnalysis(trace_dir=SHARED_TRACES / "tracelens" / "b200_eager", cache=False)
    assert analysis.get_collective_summary()["partial"].all()
    findings = analysis.get_key_findings().set_index("kind")
    assert "1 of the job's 8 ranks" in findings.at["partial_job", "finding"]


def custom_all_reduce_rank(tmp_path):
    """Rank 0 of 2 serving a model: a GEMM (100-200 µs, stream 7), vLLM's custom all-reduce of
    888 x 2880 bf16 on the same stream (200-250 µs, under ``vllm::all_reduce`` >
    ``_C_custom_ar::all_reduce``), a symmetric-memory reduce_scatter of 4,096 bf16 (300-320 µs,
    its kernel named after the all-reduce it shares) and a GEMM on stream 8 over its first 10 µs."""
    b = TraceBuilder(rank=0, world_size=2).step(1, 0, 1000)
    b.kernel("gemm", 100, 100, launch_ts=10)
    dims = {"Input Dims": [[888, 2880]], "Input type": ["c10::BFloat16"]}
    b.cpu_op("vllm::all_reduce", 20, 20, **dims).cpu_op("_C_custom_ar::all_reduce", 21, 18, **dims)
    b.kernel("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*)", 200, 50,
             launch_ts=25)  # fmt: skip
    b.cpu_op(
        "symm_mem::reduce_scatter_out", 50, 10,
        **{"Input Dims": [[4096], [], [], [2048]],
           "Input type": ["c10::BFloat16", "", "Scalar", "c10::BFloat16"]},
    )  # fmt: skip
    b.kernel(
        "void (anonymous namespace)::two_shot_all_reduce_kernel<c10::BFloat16, 16, 2, true, false>"
        "(c10::BFloat16**, c10::BFloat16*, unsigned long)", 300, 20, launch_ts=52,
    )  # fmt: skip
    b.kernel("gemm", 300, 10, stream=8, launch_ts=55)
    return TraceAnalysis(trace_dir=b.write(tmp_path / "rank-0.json").parent, cache=False)


def test_collective_kernels_that_are_not_nccl_are_communication(tmp_path):
    """Custom all-reduce and symmetric-memory kernels are collectives: communication time, not
    computation (the reference counts them as computation: docs/differences-from-hta.md #22),
    with the collective the launching op names and its size from the op's input."""
    analysis = custom_all_reduce_rank(tmp_path)
    types = analysis.get_gpu_kernel_breakdown(visualize=False)[0].set_index("kernel_type")["sum"]
    overlapping = types["COMPUTATION overlapping COMMUNICATION"]
    assert (types["COMMUNICATION"], types["COMPUTATION"], overlapping) == (60, 100, 10)
    row = analysis.get_temporal_breakdown(visualize=False).iloc[0]
    # busy [100, 250] + [300, 320] = 170 µs, of which computation [100, 200] + [300, 310]
    assert (row["compute_time(us)"], row["non_compute_time(us)"]) == (110, 60)
    overlap = analysis.get_comm_comp_overlap(visualize=False).iloc[0]["comp_comm_overlap_pctg"]
    assert overlap == pytest.approx(100 * 10 / 70, abs=0.01)
    calls = analysis.get_collectives().calls.sort_values("ts")
    assert calls["collective"].tolist() == ["all_reduce", "reduce_scatter"]
    assert calls["in_bytes"].tolist() == [888 * 2880 * 2, 4096 * 2]
    assert calls["out_bytes"].iloc[0] == 888 * 2880 * 2  # an all_reduce's output is its input
    assert calls["dtype"].tolist() == ["bfloat16", "bfloat16"]
    assert set(calls["size_source"]) == {"launching op"}
    # the group size from the kernels' template arguments (<__nv_bfloat16, 2>, <..., 16, 2, ...>)
    assert calls["group_size"].tolist() == [2, 2]
    assert set(calls["group_size_source"]) == {"kernel name"}
    assert calls["out_bytes"].iloc[1] == 4096 * 2 // 2  # reduce_scatter: a half per rank
    instances = analysis.get_collectives().instances.sort_values("first_start")
    # 5,114,880 bytes in 50 µs on 2 ranks: busbw = algbw x 2(n-1)/n = algbw
    assert instances["busbw_gbps"].iloc[0] == pytest.approx(5_114_880 / 50e-6 / 1e9)


@pytest.mark.parametrize(
    ("kernel", "op", "expected"),
    [
        ("void (anonymous namespace)::two_shot_all_reduce_kernel<float, 16, 8, true, false>(x)",
         "symm_mem::reduce_scatter_out", "reduce_scatter"),
        ("void (anonymous namespace)::two_shot_all_reduce_kernel<float, 16, 8>(x)", "",
         "all_reduce"),
        ("void (anonymous namespace)::multimem_one_shot_reduce_kernel<float, 16>(x)",
         "symm_mem::multimem_one_shot_all_reduce", "all_reduce"),
        ("void (anonymous namespace)::multimem_one_shot_reduce_kernel<float, 16>(x)", "", "reduce"),
        ("void <unnamed>::multimem_all_gather_kernel<16>(char *, char *)", "", "all_gather"),
        ("void userbuffers_fp16_sum_inplace_gpu_rr_rs_oop<8>(int)", "", "reduce_scatter"),
        ("void userbuffers_fp16_sum_inplace_gpu_rw_ag<2>(int)", "", "all_gather"),
        ("void userbuffers_fp16_sum_inplace_gpu_rw<4>(int)", "", "all_reduce"),
        ("void vllm::cross_device_reduce_2stage<float, 8>(x)", "vllm::all_reduce", "all_reduce"),
        ("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(x)", "", "all_to_all"),
        ("void at::native::reduce_kernel<512, 1>(x)", "c10d::allreduce_", ""),  # not a collective
    ],
)  # fmt: skip
def test_the_collective_of_a_kernel_that_is_not_nccl(kernel, op, expected):
    assert other_collective_kind(kernel, op) == expected


@pytest.mark.parametrize(
    ("kernel", "expected"),
    [
        ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*)", 8),
        ("void vllm::cross_device_reduce_2stage<__nv_bfloat16, (int)4>(vllm::RankData *)", 4),
        ("void vllm::cross_device_reduce_1stage<std::pair<int, float>, 8>(x)", 8),  # nested
        ("void (anonymous namespace)::two_shot_all_reduce_kernel<float, 16, 8, true, false>(x)", 8),
        ("void (anonymous namespace)::one_shot_all_reduce_kernel<float, 16, -1>(x)", -1),  # dynamic
        ("void userbuffers_fp16_sum_inplace_gpu_rr_rs<2>(int)", 2),
        ("void userbuffers_fp16_sum_inplace_gpu_rr_rs<99999999>(int)", -1),  # not a rank count
        ("void vllm::cross_device_reduce_1stage<float", -1),  # cut short
        ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(x)", -1),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", -1),
    ],
)  # fmt: skip
def test_the_group_size_a_kernel_was_compiled_for(kernel, expected):
    assert kernel_group_size(kernel) == expected


@needs_shared
def test_b200_symmetric_memory_all_reduces_are_communication():
    """b200_eager (vLLM, 8 GPUs): 73 ``multimem_all_reduce_kernel`` launched by
    ``symm_mem::multimem_all_reduce_``, 2,119.548 µs, are communication; with its one NCCL
    all_gather (21.953 µs) that is 2,141.501 µs."""
    analysis = TraceAnalysis(trace_dir=SHARED_TRACES / "tracelens" / "b200_eager", cache=False)
    types = analysis.get_gpu_kernel_breakdown(visualize=False)[0].set_index("kernel_type")["sum"]
    assert types["COMMUNICATION"] == pytest.approx(2141.501, abs=1e-3)
    calls = analysis.get_collectives().calls
    reduces = calls[calls["collective"] == "all_reduce"]
    assert len(reduces) == 73 and reduces["dur"].sum() == 2_119_548
    assert reduces.iloc[0]["in_bytes"] == 888 * 2880 * 2


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
         ("RING", "LL")),
        ("ncclDevKernel_AllReduce_Sum_bf16_TREE_LL128(ncclDevComm*, unsigned long, ncclWork*)",
         ("TREE", "LL128")),
        ("ncclDevKernel_AllGather_NVLS_TREE_SIMPLE", ("NVLS_TREE", "SIMPLE")),
        ("ncclDevKernel_ReduceScatter_Sum_f32_COLLNET_DIRECT_SIMPLE", ("COLLNET_DIRECT", "SIMPLE")),
        ("ncclDevKernel_AllGather_RING_LL", ("RING", "LL")),
        ("ncclDevKernel_Generic", ("", "")),
        ("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", ("", "")),
        ("void at::native::vectorized_elementwise_kernel<4, RING_LL>", ("", "")),
    ],
)  # fmt: skip
def test_algorithm_and_protocol_from_the_kernel_name(name, expected):
    assert kernel_algorithm(name) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
         "float32"),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
         "float32"),
        ("ncclDevKernel_ReduceScatter_Sum_bf16_NVLS_TREE_SIMPLE", "bfloat16"),
        ("ncclDevKernel_AllReduce_Sum_f8e4m3_RING_LL128", "float8_e4m3fn"),
        ("ncclDevKernel_AllGather_RING_LL", ""),
        ("ncclDevKernel_Generic", ""),
    ],
)  # fmt: skip
def test_the_element_type_from_the_kernel_name(name, expected):
    """NCCL 2.19+ names the type before the algorithm and protocol, in short (f32, bf16)."""
    assert torch_dtype(kernel_dtype(name)) == expected


def test_calls_carry_the_algorithm_and_protocol():
    folder = DATA / "nccl_parser_config"
    calls = TraceAnalysis(trace_dir=folder, parallel=False, cache=False).get_collectives().calls
    by_collective = calls.groupby("collective")[["algorithm", "protocol"]].first()
    assert by_collective.loc["all_reduce"].tolist() == ["RING", "LL"]
    assert by_collective.loc["broadcast"].tolist() == ["RING", "LL"]
