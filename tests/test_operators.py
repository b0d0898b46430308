"""Operator view: attribution, summaries, FLOP models, roofline and MFU, against traces whose
answer is known by construction and against real GEMMs / attention calls checked by hand."""

from __future__ import annotations

import math
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLES, SHARED, assert_missing, needs_shared
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.analyses.operators.flops import model
from hta_lite.analyses.operators.work import Inputs
from hta_lite.kineto import GPU_WORK_CATEGORIES

BF16 = "c10::BFloat16"
N = 4096  # the synthetic GEMMs are N x N x N
GEMM_FLOPS = 2 * N**3


# ---- a trace whose every number is known --------------------------------------------------
def _launch(b: TraceBuilder, kernel: str, launch_ts, ts, dur, stream=7, tid=1):
    b.kernel(kernel, ts, dur, stream=stream)
    corr = b.events[-1]["args"]["correlation"]
    b.events.append(
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": tid,
         "ts": launch_ts, "dur": 2, "args": {"correlation": corr, "External id": corr}}
    )  # fmt: skip


def build(tmp_path, flows: bool = False):
    """One step (0..2000 µs). Module Net_0 > Linear_0 > aten::linear > aten::addmm (two
    overlapping GEMM kernels on two streams) + a bias kernel launched by aten::linear itself;
    aten::relu in Net_0; on thread 2 the backward of addmm (wrapper > node > aten::mm); a graph
    launch of two kernels; a kernel without launch; a launch outside every operator."""
    b = TraceBuilder()
    b.meta["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]
    b.step(1, 0, 2000)
    b.cpu_op("nn.Module: Net_0", 5, 1500, cat="python_function")
    b.cpu_op("nn.Module: Linear_0", 10, 150, cat="python_function")
    b.cpu_op("aten::linear", 10, 140, **{"Input Dims": [[N, N], [N, N], [N]],
                                         "Input type": [BF16] * 3})  # fmt: skip
    b.cpu_op("aten::addmm", 12, 120, **{"Input Dims": [[N], [N, N], [N, N], [], []],
                                        "Input type": [BF16] * 3 + ["Scalar"] * 2,
                                        "Sequence number": 1, "Fwd thread id": 0})  # fmt: skip
    _launch(b, "gemm", 20, 100, 200, stream=7)
    _launch(b, "gemm_splitk", 30, 150, 200, stream=8)
    _launch(b, "bias", 140, 400, 10)
    b.cpu_op("aten::relu", 200, 20, **{"Input Dims": [[N, N]], "Input type": [BF16]})
    _launch(b, "relu_kernel", 205, 420, 6)
    backward = {"Sequence number": 1, "Fwd thread id": 1, "Input Dims": [[N, N]],
                "Input type": [BF16]}  # fmt: skip
    b.cpu_op("autograd::engine::evaluate_function: AddmmBackward0", 300, 60, tid=2, **backward)
    b.cpu_op("AddmmBackward0", 301, 55, tid=2, **backward)
    b.cpu_op("aten::mm", 305, 20, tid=2, **{"Input Dims": [[N, N], [N, N]],
                                            "Input type": [BF16] * 2})  # fmt: skip
    _launch(b, "mm_bwd", 306, 430, 200, tid=2)
    b.kernel("g1", 800, 8, launch_ts=700, launch_name="cudaGraphLaunch", correlation=900)
    b.kernel("g2", 810, 8, correlation=900)
    b.kernel("orphan", 900, 3)
    _launch(b, "loose", 950, 960, 2)
    if flows:
        for ph, tid, ts in (("s", 1, 12), ("f", 2, 301)):
            b.events.append({"ph": ph, "id": 5, "pid": 10, "tid": tid, "ts": ts,
                             "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"})  # fmt: skip
    return TraceAnalysis(trace_dir=b.write(tmp_path / "t" / "rank-0.json").parent, parallel=False)


def by_name(df):
    return df.set_index("name")


def test_instances_by_construction(tmp_path):
    inst = by_name(build(tmp_path).get_operator_instances())
    addmm, linear = inst.loc["aten::addmm"], inst.loc["aten::linear"]
    assert (addmm["kernels"], addmm["device_self(us)"], addmm["device_self_sum(us)"]) == (
        2,
        250,
        400,
    )
    assert (linear["kernels"], linear["kernels_total"]) == (1, 3)
    assert (linear["device_self(us)"], linear["device_total(us)"]) == (10, 260)
    assert linear["device_total_sum(us)"] == 410
    assert (linear["host_total(us)"], linear["host_self(us)"]) == (140, 140 - 120 - 2)
    assert linear["module"] == "Net_0.Linear_0" and inst.loc["aten::relu", "module"] == "Net_0"
    # the backward operators: described by the forward addmm (sequence number 1), in its module
    for name in ("AddmmBackward0", "autograd::engine::evaluate_function: AddmmBackward0"):
        row = inst.loc[name]
        assert (
            row["shapes_from"] == "forward"
            and row["input_dims"] == f"[[{N}], [{N}, {N}], [{N}, {N}], [], []]"
        )
        assert row["module"] == "Net_0.Linear_0"
    assert inst.loc["aten::mm", "module"] == "Net_0.Linear_0"  # called by a linked backward op
    assert inst.loc["aten::mm", "shapes_from"] == "own"
    # FLOPs: counted once, at the innermost modelled call that does the work: aten::linear
    # launches a kernel of its own (the bias), so it is one computation with its addmm; the
    # backward wrapper and node launch nothing themselves: their aten::mm is what ran
    assert linear["flops"] == GEMM_FLOPS and linear["counted"] and not addmm["counted"]
    wrapper = inst.loc["autograd::engine::evaluate_function: AddmmBackward0"]
    assert wrapper["flops"] == 2 * GEMM_FLOPS and not wrapper["counted"]
    assert not inst.loc["AddmmBackward0", "counted"] and inst.loc["aten::mm", "counted"]
    assert inst.loc["aten::mm", "flops"] == GEMM_FLOPS
    assert inst.loc["aten::relu", "flops"] == N * N and inst.loc["aten::relu", "bytes"] == 4 * N * N


def test_fwdbwd_flows_link_the_operators_they_point_at(tmp_path):
    inst = build(tmp_path, flows=True).get_operator_instances()
    node = inst[inst["name"] == "AddmmBackward0"].iloc[0]
    addmm_row = inst.loc[inst["name"] == "aten::addmm", "row"].iloc[0]
    assert node["forward_row"] == addmm_row and node["shapes_from"] == "forward"
    wrapper = inst[inst["name"].str.startswith("autograd::")].iloc[0]
    assert wrapper["forward_row"] == -1  # the flows are authoritative: no sequence-number guess
    assert not node["counted"] and node["flops"] == 2 * GEMM_FLOPS  # its aten::mm is counted


def test_summary_accounts_every_gpu_event_once(tmp_path):
    analysis = build(tmp_path)
    summary = by_name(analysis.get_operator_summary())
    assert summary["device_self_sum(us)"].sum() == pytest.approx(637)
    assert summary.loc["[graph replay]", "device_self_sum(us)"] == 16
    assert summary.loc["[no operator]", "device_self_sum(us)"] == 5
    assert summary.loc["aten::linear", "device_total_sum(us)"] == 410
    assert summary["cumulative_pctg"].iloc[-1] == pytest.approx(100.0)
    assert list(summary.index[:2]) == ["aten::addmm", "aten::mm"]  # heaviest self time first
    stack = analysis.get_operator_summary(by="stack", stack_depth=3).set_index("stack")
    assert (
        stack.loc["nn.Module: Linear_0 > aten::linear > aten::addmm", "device_self_sum(us)"] == 400
    )
    shape = analysis.get_operator_summary(by="shape")
    assert (shape["name"] == "aten::linear").sum() == 1 and "input_dims" in shape


def test_module_summary_is_a_tree_that_adds_up(tmp_path):
    modules = build(tmp_path).get_operator_summary(by="module").set_index("module")
    # the graph launch's 16 µs, mapped to no operator, count in Net_0 around the launch
    assert modules.loc["Net_0", "device_total_sum(us)"] == 400 + 10 + 6 + 200 + 16
    assert modules.loc["Net_0.Linear_0", "device_total_sum(us)"] == 610
    assert modules.loc["Net_0", "device_self_sum(us)"] == 6 + 16
    assert modules.loc["Net_0", "calls"] == 1 and modules.loc["Net_0.Linear_0", "depth"] == 2
    assert list(modules.index[:2]) == ["Net_0", "Net_0.Linear_0"]
    assert modules["device_self_sum(us)"].sum() == pytest.approx(637)


def test_roofline_and_mfu_by_construction(tmp_path):
    analysis = build(tmp_path)
    roof = analysis.get_operator_roofline().set_index("name")
    linear = roof.loc["aten::linear"]
    assert linear["device"] == "H100 SXM" and linear["peak_tflops"] == 989.4
    assert linear["achieved_tflops"] == pytest.approx(GEMM_FLOPS / 260e-6 / 1e12)
    nbytes = (3 * N * N + N) * 2
    assert linear["intensity"] == pytest.approx(GEMM_FLOPS / nbytes)
    assert linear["bound"] == "compute"  # intensity 1365 > ridge 989.4 / 3.35 = 295
    assert linear["roof_pctg"] == round(100 * GEMM_FLOPS / 260e-6 / 1e12 / 989.4, 2)
    relu = roof.loc["aten::relu"]
    assert relu["bound"] == "memory" and relu["attainable_tflops"] == pytest.approx(0.25 * 3.35)
    targets = analysis.get_optimization_targets(top=1)
    assert targets["name"].tolist() == [roof["time_below_roof(us)"].idxmax()]
    mfu = analysis.get_mfu().iloc[0]
    achieved = 2 * GEMM_FLOPS / 2000e-6 / 1e12  # linear + the backward's mm, over the 2 ms step
    assert mfu["step"] == 1 and mfu["achieved_tflops"] == pytest.approx(achieved)
    assert mfu["mfu_pctg"] == round(100 * achieved / 989.4, 2)
    # GPU work launched in the step: all but the kernel without launch (634 µs); under counted
    # calls: 410 (linear) + 6 (relu) + 200 (backward)
    assert mfu["gpu_time(us)"] == 634 and mfu["modelled_gpu_pctg"] == round(100 * 616 / 634, 2)


def test_unknown_device_says_so(tmp_path):
    b = TraceBuilder()
    b.cpu_op("aten::mm", 0, 10, **{"Input Dims": [[8, 8], [8, 8]], "Input type": ["float"] * 2})
    _launch(b, "k", 1, 20, 5)
    analysis = TraceAnalysis(trace_dir=b.write(tmp_path / "u" / "r.json").parent, parallel=False)
    with pytest.warns(UserWarning, match="not in the peak table"):
        roof = analysis.get_operator_roofline()
    assert roof["device"].tolist() == ["unknown"] and roof["roof_pctg"].isna().all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_missing(analysis.get_optimization_targets(), "device")
    assert analysis.get_operator_roofline(device="MI300X")["peak_tflops"].iloc[0] == 163.4
    assert_missing(analysis.get_operator_summary(by="module"), "nn.Module")


def test_float32_product_faster_than_the_fp32_peak_is_measured_as_tf32(tmp_path):
    """On H100 NVL (FP32 60, TF32 417.5 TFLOP/s) a float32 product at ~220 TFLOP/s ran as TF32:
    its roof is TF32's, even where every other peak of the table is a whole number (pandas
    refused to write 417.5 into the column of whole numbers: a TypeError before)."""
    n = 8192
    b = TraceBuilder()
    b.cpu_op("aten::mm", 0, 10, **{"Input Dims": [[n, n], [n, n]], "Input type": ["float"] * 2})
    _launch(b, "k", 1, 20, 5000)
    analysis = TraceAnalysis(trace_dir=b.write(tmp_path / "t" / "r.json").parent, parallel=False)
    row = analysis.get_operator_roofline(device="H100 NVL").iloc[0]
    assert row["achieved_tflops"] == pytest.approx(2 * n**3 / 5000e-6 / 1e12)  # ~220
    assert row["tf32_inferred"] and row["precision"] == "tf32" and row["peak_tflops"] == 417.5
    assert row["roof_pctg"] == round(100 * row["achieved_tflops"] / 417.5, 2)


def test_analysis_pickles_after_the_operator_view(tmp_path):
    """The operator view's per-rank state (its text kept as codes until shown) travels with the
    analysis through pickle (a process pool, a notebook's cache) and gives the same tables."""
    analysis = build(tmp_path)
    summary, roof = analysis.get_operator_summary(by="shape"), analysis.get_operator_roofline()
    again = pickle.loads(pickle.dumps(analysis))
    pd.testing.assert_frame_equal(again.get_operator_summary(by="shape"), summary)
    pd.testing.assert_frame_equal(again.get_operator_roofline(), roof)
    pd.testing.assert_frame_equal(again.get_operator_instances(), analysis.get_operator_instances())


# ---- FLOP models: shapes known by construction -------------------------------------------
def work(name, dims, types, concrete=None, forward=False):
    return model(name, Inputs(dims, types, concrete), forward_inputs=forward)


@pytest.mark.parametrize(
    "name, dims, flops",
    [
        ("aten::mm", [[3, 5], [5, 7]], 2 * 3 * 5 * 7),
        ("aten::addmm", [[7], [3, 5], [5, 7], [], []], 2 * 3 * 5 * 7),
        ("aten::bmm", [[4, 3, 5], [4, 5, 7]], 2 * 4 * 3 * 5 * 7),
        ("aten::baddbmm", [[4, 3, 7], [4, 3, 5], [4, 5, 7], [], []], 2 * 4 * 3 * 5 * 7),
        ("aten::matmul", [[2, 1, 3, 5], [4, 5, 7]], 2 * 8 * 3 * 5 * 7),  # broadcast batch 2x4
        ("aten::matmul", [[5], [5, 7]], 2 * 5 * 7),
        ("aten::linear", [[2, 3, 5], [7, 5], [7]], 2 * 6 * 5 * 7),
    ],
)
def test_matrix_product_flops(name, dims, flops):
    result = work(name, dims, ["float"] * len(dims))
    assert result.flops == flops and result.kind == "matmul" and result.precision == "fp32"


def test_gemm_bytes_and_backward_nodes():
    mm = work("aten::mm", [[3, 5], [5, 7]], [BF16, BF16])
    assert mm.bytes == (15 + 35 + 21) * 2
    assert work("MmBackward0", [[3, 5], [5, 7]], [BF16, BF16]) is None  # own (gradient) shapes
    assert work("MmBackward0", [[3, 5], [5, 7]], [BF16, BF16], forward=True).flops == 2 * mm.flops
    assert work("aten::mm", [[3, 5], [6, 7]], [BF16, BF16]) is None  # do not fit
    fp8 = work(
        "aten::_scaled_mm", [[16, 32], [32, 8], [], []], ["c10::Float8_e4m3fn"] * 2 + [""] * 2
    )
    assert (fp8.flops, fp8.precision, fp8.bytes) == (2 * 16 * 32 * 8, "fp8", 512 + 256 + 16 * 8 * 2)


def test_convolution_flops():
    # 2 images, 3 -> 8 channels, 3x3 kernel, 32x32 input, stride 2, padding 1: 16x16 output
    dims = [[2, 3, 32, 32], [8, 3, 3, 3], [8]]
    conc = ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"]
    conv = work(
        "aten::conv2d",
        dims + [[], [], [], []],
        ["float"] * 3 + ["ScalarList"] * 3 + ["Scalar"],
        conc,
    )
    assert conv.flops == 2 * 2 * 16 * 16 * 8 * 3 * 3 * 3 and conv.precision == "tf32"
    assert conv.bytes == (2 * 3 * 32 * 32 + 8 * 27 + 2 * 8 * 16 * 16) * 4
    no_tf32 = [
        *conc[:3],
        "[2, 2]",
        "[1, 1]",
        "[1, 1]",
        "False",
        "[0, 0]",
        "1",
        "False",
        "False",
        "True",
        "False",
    ]
    conv = work("aten::_convolution", dims, ["float"] * 3, no_tf32)
    assert conv.precision == "fp32" and conv.flops == 2 * 2 * 16 * 16 * 8 * 27
    assert work("aten::conv2d", dims, ["float"] * 3, None) is None  # stride unknown: no guess
    grad = work("aten::convolution_backward", [[2, 8, 16, 16], [2, 3, 32, 32], [8, 3, 3, 3]],
                ["float"] * 3, [""] * 10 + ["[False, True, True]"])  # fmt: skip
    assert grad.flops == 2 * 16 * 16 * 2 * 8 * 27  # the weight gradient only


def test_attention_flops():
    q = [2, 4, 128, 64]  # B, H, L, E
    types = [BF16] * 3 + [""] * 5
    full = work("aten::scaled_dot_product_attention", [q, q, q, [], [], [], [], []], types,
                ["", "", "", "", "0.", "False", "", "False"])  # fmt: skip
    assert full.flops == 2 * 2 * 4 * 128 * 128 * (64 + 64) and full.kind == "attention"
    causal = work("aten::scaled_dot_product_attention", [q, q, q, [], [], [], [], []], types,
                  ["", "", "", "", "0.", "True", "", "False"])  # fmt: skip
    assert causal.flops == 2 * 2 * 4 * (128 * 129 // 2) * 128
    # flash-attn layout [B, L, H, E], bottom-right causal: one query row sees every key
    kv = [2, 128, 4, 64]
    decode = work("flash_attn::_flash_attn_forward", [[2, 1, 4, 64], kv, kv],
                  [BF16] * 3, ["", "", "", "0.0", "0.125", "True"])  # fmt: skip
    assert decode.flops == 2 * 2 * 4 * 128 * 128
    backward = work("aten::_scaled_dot_product_flash_attention_backward",
                    [q, q, q, q, q, [], [], [], [], [], [], []], [BF16] * 5 + [""] * 7,
                    [""] * 11 + ["False"])  # fmt: skip
    assert backward.flops == 2.5 * full.flops


def test_bytes_bound_models():
    x = [[64, 1, 8], [1, 32, 8]]  # broadcast to 64 x 32 x 8
    add = work("aten::add", [*x, []], ["float", "float", "Scalar"])
    assert add.flops == 64 * 32 * 8 and add.bytes == (64 * 8 + 32 * 8 + 64 * 32 * 8) * 4
    norm = work("aten::layer_norm", [[16, 512], [], [512], [512], [], []],
                [BF16, "", BF16, BF16, "Scalar", "Scalar"])  # fmt: skip
    assert norm.bytes == 2 * 16 * 512 * 2 + 2 * 512 * 2 and norm.kind == "norm"
    soft = work("aten::_softmax", [[8, 1024], [], []], ["float", "Scalar", "Scalar"])
    assert soft.bytes == 2 * 8 * 1024 * 4
    assert work("aten::copy_", [[10], [10], []], ["c10::Half", "float", "Scalar"]).bytes == 60
    assert work("aten::sum", [[4, 5], [], [], []], ["float", "", "Scalar", ""]).bytes == 80
    assert work("aten::unknown_op", [[4]], ["float"]) is None


# ---- real traces: calls checked by hand ---------------------------------------------------
def test_bert_linear_and_attention_by_hand():
    """h100_bert_small: linear [1, 141, 512] x [512, 512]^T + bias, bf16: 2*141*512*512 FLOPs;
    bytes (141*512 in + 512*512 weight + 512 bias + 141*512 out) * 2. SDPA q = k = v =
    [1, 8, 141, 64], not causal: 2 * 8 * 141 * 141 * (64 + 64) FLOPs."""
    inst = TraceAnalysis(
        trace_dir=SAMPLES / "h100_bert_small", parallel=False
    ).get_operator_instances()
    linear = inst[
        (inst["name"] == "aten::linear")
        & (inst["input_dims"] == "[[1, 141, 512], [512, 512], [512]]")
    ]
    assert len(linear) == 17
    assert linear["flops"].iloc[0] == 73_924_608 and linear["bytes"].iloc[0] == 814_080
    sdpa = inst[inst["name"] == "aten::scaled_dot_product_attention"].iloc[0]
    assert sdpa["input_dims"].startswith("[[1, 8, 141, 64], [1, 8, 141, 64], [1, 8, 141, 64]")
    assert sdpa["flops"] == 40_716_288 and not sdpa["counted"]
    # counted where it runs: the flash kernel's op, [B, L, H, E], the same work
    flash = inst[inst["name"] == "aten::_flash_attention_forward"].iloc[0]
    assert flash["flops"] == 40_716_288 and flash["counted"]
    assert not linear["counted"].any()  # its aten::addmm is


@needs_shared
def test_real_gemms_by_hand():
    """b200_eager: addmm bias [640] + [888, 2880] @ [2880, 640], bf16: 2*888*2880*640 FLOPs,
    (888*2880 + 2880*640 + 888*640 + 640) * 2 bytes. diff_control: bmm [1024, 647, 96] @
    [1024, 96, 30], fp32: 2*1024*647*96*30 FLOPs."""
    b200 = TraceAnalysis(trace_dir=SHARED / "traces/tracelens/b200_eager", parallel=False)
    inst = b200.get_operator_instances()
    addmm = inst[
        (inst["name"] == "aten::addmm") & inst["input_dims"].str.startswith("[[640], [888, 2880]")
    ]
    assert addmm["flops"].iloc[0] == 3_273_523_200 and addmm["bytes"].iloc[0] == 9_939_200
    diff = TraceAnalysis(trace_dir=SHARED / "traces/hta/diff_control", parallel=False)
    inst = diff.get_operator_instances()
    bmm = inst[
        (inst["name"] == "aten::bmm") & (inst["input_dims"] == "[[1024, 647, 96], [1024, 96, 30]]")
    ]
    assert bmm["flops"].iloc[0] == 3_816_161_280 and bmm["precision"].iloc[0] == "fp32"


def test_backward_operators_get_forward_shapes_on_real_traces():
    mi250 = TraceAnalysis(trace_dir=SAMPLES / "amd_mi250", parallel=False).get_operator_instances()
    node = mi250[mi250["name"] == "AddmmBackward0"].iloc[0]  # linked by a fwdbwd flow
    assert node["shapes_from"] == "forward" and node["input_dims"].startswith("[[128], [5, 128]")
    assert node["flops"] == 2 * 2 * 5 * 128 * 128
    two = TraceAnalysis(trace_dir=SAMPLES / "two_ranks", parallel=False).get_operator_instances()
    linked = two[two["shapes_from"] == "forward"]  # by sequence number (no flows in the trace)
    assert len(linked) > 50 and linked["name"].str.contains("Backward|CppNode<").all()
    mm = linked[linked["name"] == "MmBackward0"].iloc[0]
    assert mm["input_dims"] == "[[2048, 2], [2, 1]]" and mm["flops"] == 2 * 2 * 2048 * 2 * 1


SHAPE_TRACES = ["hta/two_ranks", "hta/diff_control", "tracelens/b200_eager",
                "tracelens/h100_bert_small", "tracelens/mi300_bert_small",
                "tracelens/sglang_decode", "hta/amd_mi250"]  # fmt: skip


@needs_shared
@pytest.mark.parametrize("case", SHAPE_TRACES)
def test_every_gpu_event_is_accounted_once(case):
    """Per operator name plus the graph and no-operator rows: the kernel table's total, event
    for event; per instance: the same from each call's own events."""
    analysis = TraceAnalysis(trace_dir=SHARED / "traces" / case, parallel=False)
    gpu = [analysis.gpu_events(r) for r in analysis.ranks]
    work_events = [g[g["cat"].isin(GPU_WORK_CATEGORIES)] for g in gpu]
    total_us = sum(int(g["dur"].sum()) for g in work_events) / 1000
    count = sum(len(g) for g in work_events)
    summary = analysis.get_operator_summary()
    assert summary["device_self_sum(us)"].sum() == pytest.approx(total_us, rel=1e-12)
    assert summary["kernels"].sum() == count
    inst = analysis.get_operator_instances()
    unowned = summary[summary["name"].str.startswith("[")]["device_self_sum(us)"].sum()
    assert inst["device_self_sum(us)"].sum() + unowned == pytest.approx(total_us, rel=1e-12)
    modules = analysis.get_operator_summary(by="module") if (inst["module"] != "").any() else None
    if modules is not None:
        assert modules["device_self_sum(us)"].sum() == pytest.approx(total_us, rel=1e-12)
    if case == "tracelens/sglang_decode":  # CUDA-graph decode: nearly all replay
        share = summary.set_index("name").loc["[graph replay]", "device_self_pctg"]
        assert share > 95 and math.isfinite(share)
    assert np.isfinite(summary["cumulative_pctg"]).all()


def test_where_tracelens_differs():
    """docs/analyses/operators.md §6: each case has a model here, with the exact value."""
    q, types = [1, 8, 1, 128], [BF16] * 3 + [""] * 5
    kv = [1, 8, 1000, 128]
    decode = work("aten::_scaled_dot_product_flash_attention", [q, kv, kv, [], [], [], []],
                  types[:7], ["", "", "", "0.", "True", "False", ""])  # fmt: skip
    assert decode.flops == 2 * 8 * 1 * 256  # L != S, causal, top-left: row 0 sees key 0 only
    square = work("aten::_scaled_dot_product_flash_attention", [kv, kv, kv, [], [], [], []],
                  types[:7], ["", "", "", "0.", "True", "False", ""])  # fmt: skip
    assert square.flops == 2 * 8 * (1000 * 1001 // 2) * 256  # the diagonal is attended to
    mla = work("aten::scaled_dot_product_attention", [[1, 4, 10, 192], [1, 4, 10, 192],
               [1, 4, 10, 128], [], [], [], [], []], types, [""] * 8)  # fmt: skip
    assert mla.flops == 2 * 4 * 100 * (192 + 128)
    fp32 = work("aten::scaled_dot_product_attention", [q, q, q, [], [], [], [], []],
                ["float"] * 3 + [""] * 5, [""] * 8)  # fmt: skip
    assert fp32.bytes == 4 * 8 * 128 * 4  # q, k, v, out at 4 bytes each
    fp8 = work("aten::mm", [[4, 4], [4, 4]], ["c10::Float8_e4m3fn"] * 2)
    assert fp8.precision == "fp8" and fp8.bytes == 16 + 16 + 16 * 2
    causal_backward = work("aten::_scaled_dot_product_flash_attention_backward",
                           [kv, kv, kv, kv, kv, [], [], [], [], [], [], []], [BF16] * 5 + [""] * 7,
                           [""] * 11 + ["True"])  # fmt: skip
    assert causal_backward.flops == 2.5 * square.flops


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[[1, 2], [], [3]]", [[1, 2], [], [3]]),
        ('[1.5e300, "c10::Half", true, null]', [1.5e300, "c10::Half", True, None]),
        ("[123456789012345678901234567890]", [123456789012345678901234567890]),  # past 64 bits
        ("5", None),  # not a list
        (None, None),
    ],
)
def test_input_texts_parse_as_the_standard_library_reads_them(text, expected):
    from hta_lite.load.inputs import parse

    assert parse(text) == expected
    nan = parse("[NaN]")  # msgspec refuses NaN: the standard library's reading
    assert len(nan) == 1 and math.isnan(nan[0])


def test_backward_operator_described_by_the_last_forward_one_of_its_sequence_number(tmp_path):
    """Without fwdbwd flows: the last forward operator (by start) with the backward one's
    sequence number describes it, unless forward operators of two threads share that number."""
    b = TraceBuilder()
    fwd = {"Fwd thread id": 0}
    b.cpu_op("aten::mm", 10, 5, **{"Sequence number": 5, "Input Dims": [[2, 3], [3, 4]], **fwd})
    b.cpu_op("aten::mm", 20, 5, **{"Sequence number": 5, "Input Dims": [[6, 7], [7, 8]], **fwd})
    b.cpu_op("aten::mm", 30, 5, **{"Sequence number": 7, "Input Dims": [[1, 1], [1, 1]], **fwd})
    b.cpu_op("aten::mm", 31, 5, tid=3, **{"Sequence number": 7, **fwd})  # a second thread
    back = {"Fwd thread id": 1}
    b.cpu_op("MmBackward0", 50, 5, tid=2, **{"Sequence number": 5, **back})
    b.cpu_op("MmBackward0", 60, 5, tid=2, **{"Sequence number": 7, **back})
    b.cpu_op("MmBackward0", 70, 5, tid=2, **{"Sequence number": 9, **back})  # no forward one
    folder = b.write(tmp_path / "t" / "rank-0.json").parent
    inst = TraceAnalysis(trace_dir=folder, parallel=False).get_operator_instances()
    nodes = inst[inst["name"] == "MmBackward0"].reset_index(drop=True)
    assert nodes["shapes_from"].tolist() == ["forward", "", ""]
    assert nodes["input_dims"].iloc[0] == "[[6, 7], [7, 8]]"  # the later of the two


@pytest.mark.parametrize("seed", range(5))
def test_sorted_unique_is_numpys_unique(seed):
    from hta_lite.analyses.common import sorted_unique

    values = np.random.default_rng(seed).integers(-50, 50, seed * 40)
    np.testing.assert_array_equal(sorted_unique(values), np.unique(values))


def test_a_device_is_inferred_from_its_properties_where_they_can_only_be_one():
    """amd_mi250 names its device 'AMD Radeon Graphics': gfx90a (9.0), 104 compute units and
    64 GB are an MI250 GCD or an MI210, which have the same peaks."""
    from hta_lite.analyses.operators.devices import architecture_hint, by_properties
    from hta_lite.load.metadata import Device

    a = TraceAnalysis(trace_dir=SAMPLES / "amd_mi250", parallel=False)
    assert set(a.get_mfu()["device"]) == {"MI250 (one GCD)"}
    props = {"computeMajor": 8, "computeMinor": 0, "numSms": 108, "totalGlobalMem": 42_314_694_656}

    def by_props(props):
        return by_properties(Device.from_kineto(props))

    assert by_props(props).name == "A100 SXM4 40GB"
    assert by_props({**props, "totalGlobalMem": 85_899_345_920}) is None  # SXM4 or PCIe
    assert by_props({**props, "numSms": 80}) is None
    assert by_props({"computeMajor": None}) is None
    names = ["void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64>", "ampere_sgemm_128x64"]
    assert architecture_hint(names) == "sm80 or newer" and architecture_hint(["k"]) == ""
    finding = TraceAnalysis(trace_dir=SAMPLES / "two_ranks", parallel=False).get_key_findings()
    assert "its kernel names say sm80 or newer" in finding.set_index("kind").loc["mfu", "finding"]


def test_input_texts_nested_past_the_recursion_limit_read_as_not_recorded(tmp_path):
    """A text of 100,000 nested lists (a hostile trace's ``Concrete Inputs``, an Nsight export's
    NVTX ``sizes``) is no reading: the operator views go on without it, never a RecursionError.
    Of two convolutions, the one whose stride is such a text is not modelled; the other is. A
    matrix product whose ``Input Dims`` is such a text is counted as a shape that cannot be."""
    from hta_lite.load.inputs import arg_tensors, concrete_value, parse

    deep = "[" * 100_000 + "]" * 100_000
    assert parse(deep) is None and concrete_value(deep) == deep
    nested = "[" + "[" * 600 + "]" * 600 + "]"  # parses, but is no list of shapes
    assert arg_tensors(nested, '["TensorList"]') == ((-1, ""),)
    b = TraceBuilder().step(1, 0, 1000)
    dims = [[1, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], [], [], []]
    types = ["float"] * 3 + ["ScalarList"] * 3 + ["Scalar", "ScalarList", "Scalar"]
    for ts, stride in ((10, "[1, 1]"), (200, deep)):
        concrete = ["", "", "", stride, "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"]
        b.cpu_op("aten::convolution", ts, 100, **{"Input Dims": dims, "Input type": types,
                                                  "Concrete Inputs": concrete})  # fmt: skip
        b.kernel("conv", ts + 30, 50, launch_ts=ts + 10)
    b.cpu_op("aten::mm", 400, 100, **{"Input Dims": deep, "Input type": ["float", "float"]})
    b.kernel("gemm", 430, 100, launch_ts=410)
    analysis = TraceAnalysis(trace_dir=b.write(tmp_path / "t" / "rank0.json").parent)
    assert analysis.get_operator_summary()["calls"].tolist() == [2, 1]
    assert analysis.get_mfu(device="H100 SXM")["modelled_gpu_pctg"].tolist() == [25.0]
    assert len(analysis.get_operator_roofline(device="H100 SXM")) == 1
    health = analysis.health().set_index("code")
    assert health.loc["shape_invalid", "count"] == 1
    assert health.loc["shape_invalid", "item"].startswith("aten::mm calls")
