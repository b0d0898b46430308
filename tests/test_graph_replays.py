"""CUDA / HIP graph replays (issue #37): a row per launch, the replayed kernels mapped to the
operators that issued them in a capture or an eager run, in every operator view; on traces
whose answer is known by construction and on the shared sglang decode replay and its capture."""

from __future__ import annotations

from conftest import SHARED, assert_missing, needs_shared
from synth import TraceBuilder

from hta_lite import TraceAnalysis

GEMM, RELU = "sm90_gemm_bf16", "relu_kernel"
DIMS = [[64], [32, 128], [128, 64]]
GEMM_FLOPS = 2 * 32 * 128 * 64
BF16 = ["c10::BFloat16"] * 3


def module(b, name, ts, dur):
    b.cpu_op(f"nn.Module: {name}", ts, dur, cat="python_function")


def linear_and_relu(b, at, kernels_at=None):
    """Model_0 > Linear_0 > aten::linear > aten::addmm (one GEMM), then aten::relu, from ``at``
    µs; with ``kernels_at`` their kernels run (an eager iteration), else they are captured."""
    module(b, "Linear_0", at + 5, 80)
    b.cpu_op("aten::linear", at + 10, 60)
    b.cpu_op("aten::addmm", at + 15, 50, **{"Input Dims": DIMS, "Input type": BF16})
    b.cpu_op("aten::relu", at + 100, 30, **{"Input Dims": [[32, 64]], "Input type": BF16[:1]})
    for name, launch in ((GEMM, at + 20), (RELU, at + 105)):
        if kernels_at is None:
            capture_launch(b, name, launch)
        else:
            b.kernel(name, kernels_at, 10 if name == GEMM else 2, launch_ts=launch)
            kernels_at += 12


def capture_launch(b, kernel, ts, named=True):
    """A launch recorded while the stream is captured: no GPU event; ROCm names the kernel."""
    b._corr += 1
    args = {"correlation": b._corr, **({"kernel": kernel} if named else {})}
    b.events.append(
        {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 10, "tid": 1,
         "ts": ts, "dur": 2, "args": args}
    )  # fmt: skip


def graph_launch(b, ts, kernels, stream=7, name="cudaGraphLaunch"):
    """One graph launch at ``ts`` replaying ``kernels`` ((name, start, dur[, stream]))."""
    b._corr += 1
    corr = b._corr
    for i, (kernel, start, dur, *on) in enumerate(kernels):
        b.kernel(kernel, start, dur, stream=on[0] if on else stream, correlation=corr,
                 launch_ts=ts if i == 0 else None, launch_name=name)  # fmt: skip


def eager_then_replay(tmp_path):
    """Step 1 runs the model eagerly, step 2 replays it from a graph launched inside Model_0."""
    b = TraceBuilder().step(1, 0, 1000).step(2, 1000, 1000).step(3, 2000, 10)
    module(b, "Model_0", 1, 300)
    linear_and_relu(b, 2, kernels_at=500)
    module(b, "Model_0", 1001, 300)
    graph_launch(b, 1010, [(GEMM, 1100, 10), (RELU, 1112, 2)])
    return b.write(tmp_path / "eager" / "rank-0.json").parent


def capture_then_replay(tmp_path, named=True, extra_launch=False):
    """A capture (hipStreamBeginCapture .. EndCapture) in step 1, the replay in step 2."""
    b = TraceBuilder().step(1, 0, 1000).step(2, 1000, 1000).step(3, 2000, 10)
    b.cpu_op("capture", 1, 400, cat="user_annotation")
    b.cpu_op("hipStreamBeginCapture", 2, 1, cat="cuda_runtime", correlation=1)
    module(b, "Model_0", 3, 300)
    if named:
        linear_and_relu(b, 4)
    else:
        b.cpu_op("aten::addmm", 19, 50, **{"Input Dims": DIMS, "Input type": BF16})
        capture_launch(b, None, 24, named=False)
        b.cpu_op("aten::relu", 104, 30)
        capture_launch(b, None, 109, named=False)
        if extra_launch:
            capture_launch(b, None, 200, named=False)
    b.cpu_op("hipStreamEndCapture", 350, 1, cat="cuda_runtime", correlation=2)
    module(b, "Model_0", 1001, 300)
    graph_launch(b, 1010, [(GEMM, 1100, 10), (RELU, 1112, 2)], name="hipGraphLaunch")
    return b.write(tmp_path / "capture" / "rank-0.json").parent


def open_(folder, **kw):
    return TraceAnalysis(trace_dir=folder, parallel=False, cache=False, progress=False, **kw)


def test_eager_iteration_maps_the_replay(tmp_path):
    a = open_(eager_then_replay(tmp_path))
    launch = a.get_graph_launches().iloc[0]
    assert launch["kernels"] == 2 and launch["mapped_kernels"] == 2
    assert launch["source"] == "eager in rank-0.json" and launch["mapped_by"] == "kernel names"
    assert launch["where"] == "Model_0" and launch["gpu_time(us)"] == 12
    assert launch["span(us)"] == 14 and launch["iteration"] == 2
    summary = a.get_operator_summary().set_index("name")
    assert "[graph replay]" not in summary.index
    assert summary.loc["aten::addmm", "calls"] == 2  # eager and replayed
    assert summary.loc["aten::addmm", "device_self_sum(us)"] == 20
    assert summary.loc["aten::relu", "device_self_sum(us)"] == 4
    inst = a.get_operator_instances()
    replayed = inst[inst["graph_launch_row"] >= 0]
    assert sorted(replayed["name"]) == ["aten::addmm", "aten::linear", "aten::relu"]
    assert (replayed["host_total(us)"] == 0).all() and (replayed["iteration"] == 2).all()
    modules = a.get_operator_summary(by="module").set_index("module")
    assert "Model_0.Model_0" not in modules.index  # the launch's own module is not repeated
    assert modules.loc["Model_0", "device_total_sum(us)"] == 24
    assert modules.loc["Model_0.Linear_0", "device_total_sum(us)"] == 20
    roof = a.get_operator_roofline(device="H100 SXM").set_index("name")
    assert roof.loc["aten::addmm", "calls"] == 2 and roof.loc["aten::addmm", "flops"] == (
        2 * GEMM_FLOPS
    )
    assert roof.loc["aten::addmm", "gpu_time(us)"] == 20
    assert roof["gpu_pctg"].sum() == 100  # every GPU event is under a modelled call
    mfu = a.get_mfu(device="H100 SXM").set_index("step")
    assert mfu.loc[2, "matrix_flops"] == GEMM_FLOPS  # the replayed GEMM counts in its step
    assert mfu.loc[2, "modelled_gpu_pctg"] == 100 and mfu.loc[2, "graph_replay_pctg"] == 0
    assert not a.health()["item"].str.contains("graph").any()


def test_named_capture_maps_the_replay(tmp_path):
    a = open_(capture_then_replay(tmp_path))
    launch = a.get_graph_launches().iloc[0]
    assert launch["mapped_kernels"] == 2 and launch["source"] == "capture in rank-0.json"
    kernels = a.get_graph_kernels().set_index("kernel")
    assert kernels.loc[GEMM, "operator"] == "aten::addmm" and kernels.loc[RELU, "mapped"]
    shapes = a.get_operator_summary(by="shape").set_index("name")
    assert shapes.loc["aten::addmm", "device_self_sum(us)"] == 10


def test_unnamed_capture_maps_by_launch_order_only_when_counts_agree(tmp_path):
    a = open_(capture_then_replay(tmp_path / "same", named=False))
    launch = a.get_graph_launches().iloc[0]
    assert launch["mapped_kernels"] == 2 and launch["mapped_by"] == "launch order"
    b = open_(capture_then_replay(tmp_path / "extra", named=False, extra_launch=True))
    launch = b.get_graph_launches().iloc[0]
    assert launch["mapped_kernels"] == 0 and launch["source"] == ""
    assert set(b.get_graph_kernels()["operator"]) == {"[graph replay]"}
    # not mapped: in the module view under the module around the launch, not at depth 0
    modules = b.get_operator_summary(by="module").set_index("module")
    assert modules.loc["Model_0", "device_total_sum(us)"] == 12
    assert "[graph replay]" not in modules.index
    # and said: in health, and in MFU's share of the step it could not model
    health = b.health().set_index("code")
    assert health.loc["graph_replay_unmapped", "count"] == 2
    assert "(1 of 1)" in health.loc["graph_replay_unmapped", "item"]
    mfu = b.get_mfu(device="H100 SXM").set_index("step")
    assert mfu.loc[2, "graph_replay_pctg"] == 100 and mfu.loc[2, "modelled_gpu_pctg"] == 0


def test_capture_in_a_second_trace(tmp_path):
    folder = capture_then_replay(tmp_path)
    capture = TraceBuilder()
    capture.events = [e for e in _events(folder) if e["ts"] < 1000]
    replay = TraceBuilder().step(2, 1000, 1000).step(3, 2000, 10)
    replay.events += [e for e in _events(folder) if e["ts"] >= 1000 and "Profiler" not in e["name"]]
    alone = replay.write(tmp_path / "replay" / "rank-0.json").parent
    assert open_(alone).get_graph_launches()["mapped_kernels"].iloc[0] == 0
    capture.write(tmp_path / "captures" / "bs_1_rank0.json")
    a = open_(alone, graph_capture=tmp_path / "captures")
    launch = a.get_graph_launches().iloc[0]
    assert launch["mapped_kernels"] == 2 and launch["source"] == "capture in bs_1_rank0.json"
    assert launch["equally_good"] == 0
    capture.write(tmp_path / "captures" / "bs_2_rank0.json")  # the same kernel names
    both = open_(alone, graph_capture=tmp_path / "captures").get_graph_launches().iloc[0]
    assert both["source"] == "capture in bs_1_rank0.json" and both["equally_good"] == 1
    again = open_(alone, graph_capture=tmp_path / "captures")
    again.get_graph_launches()
    assert "graph_replay_ambiguous" in set(again.health()["code"])


def test_interleaved_streams_map_by_occurrence(tmp_path):
    """Captured A, B, C, D; B and D run on a second stream and reach the GPU after C."""
    b = TraceBuilder().step(1, 0, 1000).step(2, 1000, 1000).step(3, 2000, 10)
    b.cpu_op("hipStreamBeginCapture", 2, 1, cat="cuda_runtime", correlation=1)
    for i, name in enumerate("ABCD"):
        b.cpu_op(f"op_{name}", 10 + 20 * i, 10)
        capture_launch(b, name, 12 + 20 * i)
    b.cpu_op("hipStreamEndCapture", 200, 1, cat="cuda_runtime", correlation=2)
    graph_launch(b, 1010, [("A", 1100, 5), ("C", 1106, 5), ("B", 1107, 5, 8), ("D", 1113, 5, 8)])
    a = open_(b.write(tmp_path / "t" / "rank-0.json").parent)
    kernels = a.get_graph_kernels().set_index("kernel")
    assert {k: kernels.loc[k, "operator"] for k in "ABCD"} == {k: f"op_{k}" for k in "ABCD"}


def test_no_graph_launch_is_said(tmp_path):
    b = TraceBuilder().step(1, 0, 100).step(2, 100, 100)
    b.cpu_op("aten::relu", 10, 20)
    b.kernel(RELU, 40, 2, launch_ts=12)
    a = open_(b.write(tmp_path / "t" / "rank-0.json").parent)
    assert_missing(a.get_graph_launches(), "no cudaGraphLaunch")
    assert_missing(a.get_graph_kernels(), "no cudaGraphLaunch")


def _events(folder):
    import json

    return json.loads((folder / "rank-0.json").read_text())["traceEvents"]


@needs_shared
def test_sglang_decode_replay_mapped_to_its_capture():
    """TraceLens' sglang decode trace: one hipGraphLaunch replays 544 kernels (98.75 % of GPU
    time); its profiled capture names all 544, in order."""
    folder = SHARED / "traces/tracelens/sglang_decode"
    capture = SHARED / "graph_capture/sglang_decode"
    a = open_(folder, graph_capture=capture)
    launch = a.get_graph_launches().iloc[0]
    assert launch["kernels"] == launch["mapped_kernels"] == 544
    assert launch["source"] == "capture in bs_32_rank0.json.gz"
    summary = a.get_operator_summary().set_index("name")
    assert "[graph replay]" not in summary.index
    assert summary.loc["aten::mm", "calls"] == 145 and summary.loc["aten::mm", "kernels"] == 145
    modules = a.get_operator_summary(by="module").set_index("module")
    assert modules.loc["Qwen3Model_0", "device_total_pctg"] > 94
    roof = a.get_operator_roofline(device="MI300X")
    gate_up_dims = "[[32, 4096], [4096, 24576]]"
    rows = roof[(roof["name"] == "aten::mm") & (roof["input_dims"] == gate_up_dims)]
    assert len(rows) == 1
    gate_up = rows.iloc[0]
    assert gate_up["calls"] == 36 and gate_up["flops"] == 36 * 2 * 32 * 4096 * 24576
    without = open_(folder).get_operator_summary().set_index("name")
    assert without.loc["[graph replay]", "device_self_pctg"] == 98.75


def test_cli_and_report_show_the_launches(tmp_path, capsys):
    from hta_lite.views.cli import main
    from hta_lite.views.report import build_report

    folder = capture_then_replay(tmp_path, named=False, extra_launch=True)
    assert main(["summarize", str(folder), "--serial", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "CUDA / HIP graph launches" in out and "1 of 1 launch(es) replay GPU events" in out
    html = build_report(open_(folder))
    assert "CUDA / HIP graph launches" in html and "--graph-capture" in html
    mapped = eager_then_replay(tmp_path)
    assert main(["summarize", str(mapped), "--serial", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "eager in rank-0.json" in out and "launch(es) replay GPU events" not in out


def test_sample_replay_maps_with_the_vendored_capture():
    """The vendored sglang decode step and its trimmed capture (sample_traces/README.md)."""
    from conftest import SAMPLES

    folder = SAMPLES / "sglang_decode"
    a = open_(folder, graph_capture=folder / "capture")
    launch = a.get_graph_launches().iloc[0]
    assert launch["kernels"] == launch["mapped_kernels"] == 544
    modules = a.get_operator_summary(by="module").set_index("module")
    assert modules.loc["Qwen3Model_0", "device_total_pctg"] == 94.61
    layers = modules[modules.index.str.fullmatch(r"Qwen3Model_0\.Qwen3DecoderLayer_\d+")]
    assert len(layers) == 36
    finding = open_(folder).get_key_findings().set_index("kind").loc["mfu", "finding"]
    assert "98.8 % of GPU time is CUDA / HIP graph replay mapped to no operator" in finding
    assert "does not name a GPU" not in finding  # the MI300X is named; the work is unmapped


def test_the_batch_maps_replays_with_the_capture_as_the_analysis(tmp_path, capsys):
    """``summarize_folder(graph_capture=...)`` / ``hta-lite batch --graph-capture``: each worker
    maps its rank's replays against the capture, and every view the batch prints (the graph
    launches, the operators, MFU's coverage in the key findings, health) is the analysis's."""
    import pandas as pd
    from conftest import SAMPLES

    from hta_lite.tools.batch import summarize_folder
    from hta_lite.views.batch_cli import batch_tables
    from hta_lite.views.cli import main
    from hta_lite.views.summary import summary_tables

    folder = SAMPLES / "sglang_decode"
    batch = summarize_folder(
        folder, cache=tmp_path, progress=False, graph_capture=folder / "capture"
    )
    (printed, _), (shown, _) = (
        batch_tables(batch),
        summary_tables(open_(folder, graph_capture=folder / "capture")),
    )
    assert set(printed) == set(shown)
    for name, table in shown.items():
        if name == "operators":  # equal sums: the order of ties is free
            by = ["device_self_sum(us)", "name"]
            table, printed[name] = (
                t.sort_values(by, ignore_index=True) for t in (table, printed[name])
            )
        pd.testing.assert_frame_equal(printed[name], table, check_dtype=False, obj=name)
    assert batch["graph_launches"]["mapped_kernels"].tolist() == [544]
    assert "graph_replay_unmapped" not in set(batch["health"]["code"])
    capture = str(folder / "capture")
    assert main(["batch", str(folder), "--graph-capture", capture, "--serial", "--no-cache"]) == 0
    assert "capture in bs_32_rank0.json.gz" in capsys.readouterr().out
    assert main(["batch", str(folder), "--graph-capture", str(tmp_path / "no"), "--serial"]) == 2
    assert capsys.readouterr().err.endswith("no: trace folder does not exist\n")
