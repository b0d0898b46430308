"""The roofline times each computation at the innermost modelled operator (issue #37): an
``aten::matmul``'s operand copies and an ``aten::linear``'s separate bias add get their own
memory-bound rows, and the GEMM row is the GEMM kernel's own throughput."""

from __future__ import annotations

import gzip
import json
import math

import pytest
from conftest import SAMPLES
from synth import TraceBuilder

from hta_lite import TraceAnalysis

BF16 = "c10::BFloat16"


def op(b, name, ts, dur, dims=None, types=None):
    args = {} if dims is None else {"Input Dims": dims, "Input type": types}
    b.cpu_op(name, ts, dur, **args)


def composite_trace(tmp_path):
    b = TraceBuilder().step(1, 0, 1000)
    # aten::matmul of [16, 128, 64] @ [16, 64, 128]: a copy of one operand (20 µs), the bmm (10 µs)
    op(b, "aten::matmul", 10, 100, [[16, 128, 64], [16, 64, 128]], [BF16, BF16])
    op(b, "aten::contiguous", 12, 30)
    op(b, "aten::clone", 13, 28)
    op(b, "aten::copy_", 14, 26, [[16, 128, 64], [16, 128, 64], []], [BF16, BF16, "Scalar"])
    b.kernel("elementwise_copy_kernel", 200, 20, launch_ts=15)
    op(b, "aten::bmm", 50, 50, [[16, 128, 64], [16, 64, 128]], [BF16, BF16])
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 230, 10, launch_ts=55)
    # aten::linear with a 3-D input: matmul -> mm (8 µs), then the bias added alone (3 µs)
    op(b, "aten::linear", 300, 100, [[4, 100, 512], [1024, 512], [1024]], [BF16] * 3)
    op(b, "aten::matmul", 305, 50, [[4, 100, 512], [512, 1024]], [BF16, BF16])
    op(b, "aten::mm", 310, 40, [[400, 512], [512, 1024]], [BF16, BF16])
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 400, 8, launch_ts=315)
    op(b, "aten::add_", 360, 30, [[4, 100, 1024], [1024], []], [BF16, BF16, "Scalar"])
    b.kernel("vectorized_elementwise_add", 410, 3, launch_ts=365)
    # aten::max launches its reduction and calls fill_: one computation, counted at max
    op(b, "aten::max", 500, 50, [[1024, 1024]], [BF16])
    b.kernel("reduce_kernel", 600, 5, launch_ts=505)
    op(b, "aten::fill_", 520, 10, [[1], []], [BF16, "Scalar"])
    b.kernel("fill_kernel", 610, 1, launch_ts=522)
    return b.write(tmp_path / "t" / "rank-0.json").parent


@pytest.fixture
def analysis(tmp_path):
    return TraceAnalysis(trace_dir=composite_trace(tmp_path), parallel=False, cache=False)


def test_gemm_rows_are_the_gemm_kernels_own(analysis):
    table = analysis.get_operator_roofline(device="H100 SXM").set_index("name")
    assert "aten::matmul" not in table.index and "aten::linear" not in table.index
    bmm_flops = 2 * 16 * 128 * 64 * 128
    assert table.at["aten::bmm", "flops"] == bmm_flops
    assert table.at["aten::bmm", "gpu_time(us)"] == 10.0
    assert table.at["aten::bmm", "achieved_tflops"] == pytest.approx(bmm_flops / 10e-6 / 1e12)
    mm_flops = 2 * 400 * 512 * 1024
    assert table.at["aten::mm", "achieved_tflops"] == pytest.approx(mm_flops / 8e-6 / 1e12)
    # the copy and the bias add: rows of their own, moving bytes at their own kernels' time
    assert table.at["aten::copy_", "gpu_time(us)"] == 20.0
    assert table.at["aten::add_", "gpu_time(us)"] == 3.0
    assert table.at["aten::max", "gpu_time(us)"] == 6.0  # its reduction and the fill inside
    assert "aten::fill_" not in table.index


def test_each_gpu_event_counted_once(analysis):
    inst = analysis.get_operator_instances()
    counted = inst[inst["counted"]]
    assert sorted(counted["name"]) == [
        "aten::add_", "aten::bmm", "aten::copy_", "aten::max", "aten::mm",
    ]  # fmt: skip
    assert counted["device_total(us)"].sum() == 20 + 10 + 8 + 3 + 5 + 1


def _raw_gemm_table(path):
    """TraceLens's GEMM table from the raw trace, built apart from hta_lite: per (name, Input
    Dims, Input type) of every aten::mm / addmm / bmm call, 2·M·N·K FLOPs per call and the
    durations of the kernels its own launches (runtime calls inside it, on its thread) started."""
    events = json.load(gzip.open(path))["traceEvents"]
    kernels = {e["args"]["correlation"]: e["dur"] for e in events if e.get("cat") == "kernel"}
    launches = [
        e for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]
    ]  # fmt: skip
    table = {}
    for e in events:
        if e.get("cat") != "cpu_op" or e["name"] not in ("aten::mm", "aten::addmm", "aten::bmm"):
            continue
        dims = e["args"]["Input Dims"]
        a, b = (dims[1], dims[2]) if e["name"] == "aten::addmm" else (dims[0], dims[1])
        flops = 2 * math.prod(a) * b[-1]
        time = sum(
            kernels.get(r["args"]["correlation"], 0)
            for r in launches
            if r["tid"] == e["tid"] and e["ts"] <= r["ts"] <= e["ts"] + e["dur"]
        )
        key = (e["name"], str(dims).replace("'", ""), str(e["args"]["Input type"]))
        flops_sum, time_sum = table.get(key, (0, 0.0))
        table[key] = (flops_sum + flops, time_sum + time)
    return table


def test_gemm_rows_equal_an_independent_gemm_table():
    """h100_bert_small: every GEMM key (aten::addmm under aten::linear) with FLOPs exact and
    TFLOP/s within 1 % of the GEMM's own kernels' time."""
    path = next((SAMPLES / "h100_bert_small").glob("*.json.gz"))
    expected = _raw_gemm_table(path)
    roofline = TraceAnalysis(trace_dir=path.parent, parallel=False, cache=False)
    table = roofline.get_operator_roofline()
    gemms = table[table["name"].isin(["aten::mm", "aten::addmm", "aten::bmm"])]
    assert len(expected) == len(gemms) >= 4
    for row in gemms.itertuples():
        key = (row.name, row.input_dims, str(json.loads(row.input_types)))
        flops, time_us = expected[key]
        assert row.flops == flops
        assert row.achieved_tflops == pytest.approx(flops / time_us / 1e6, rel=0.01)
    assert not table["name"].isin(["aten::linear", "aten::matmul"]).any()
