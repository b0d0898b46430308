"""Queue length, memory bandwidth, augmented traces, launch stats, ATen op kernels, kernel
sequences."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal

import numpy as np
import pytest
from conftest import SAMPLES, health_messages
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.errors import TraceError
from hta_lite.tools.writer import write_trace


def analyze(tmp_path, builder, name="rank0.json"):
    builder.write(tmp_path / name)
    return TraceAnalysis(trace_dir=tmp_path, parallel=False)


def test_queue_length_known_by_construction(tmp_path):
    b = TraceBuilder()
    for i in range(3):  # three launches at 0, 1, 2 µs; kernels start at 10, 20, 30 µs
        b.kernel(f"k{i}", 10 * (i + 1), 5, stream=7, launch_ts=i, launch_dur=0.5)
    b.kernel("other", 10, 50, stream=8, launch_ts=0.5)
    a = analyze(tmp_path, b)
    series = a.get_queue_length_time_series()[0]
    s7 = series[series["stream"] == 7]
    assert s7["queue_length"].tolist() == [1, 2, 3, 2, 1, 0]
    assert (s7["ts"].to_numpy() == np.array([0, 1, 2, 10, 20, 30]) * 1000).all()
    blocked = a.get_time_spent_blocked_on_full_queue(max_queue_length=3)
    assert blocked[["rank", "stream"]].values.tolist() == [[0, 7]]
    assert blocked["duration_at_max_queue_length"].iloc[0] == 8.0  # from 2 µs to 10 µs
    both = a.get_time_spent_blocked_on_full_queue(max_queue_length=1)
    assert both["stream"].tolist() == [7, 8]  # every stream that hit the limit, not only the last


def test_graph_launch_counts_each_kernel_and_skew_never_goes_negative(tmp_path):
    b = TraceBuilder()
    for i in range(3):
        b.kernel(
            f"g{i}",
            10 + i * 10,
            5,
            launch_ts=0 if i == 0 else None,
            launch_name="cudaGraphLaunch",
            correlation=77,
        )
    b.kernel("early", 100, 5, stream=9, launch_ts=101)  # GPU start before its launch: clock skew
    a = analyze(tmp_path, b)
    series = a.get_queue_length_time_series()[0]
    assert series[series["stream"] == 7]["queue_length"].tolist() == [
        1,
        2,
        3,
        2,
        1,
        0,
    ]  # +3 at the graph launch
    assert (series["queue_length"] >= 0).all()
    assert (
        health_messages(a.traces[0].health)[
            "GPU events starting before their launch call (clock skew; queued at GPU start)"
        ]
        == 1
    )


def test_memory_bandwidth_known_by_construction(tmp_path):
    b = (
        TraceBuilder()
        .kernel(
            "Memcpy HtoD (Pageable -> Device)",
            0,
            10,
            cat="gpu_memcpy",
            **{"memory bandwidth (GB/s)": 5.0, "bytes": 50000},
        )
        .kernel(
            "Memcpy HtoD (Pinned -> Device)",
            5,
            10,
            stream=8,
            cat="gpu_memcpy",
            **{"memory bandwidth (GB/s)": 3.0},
        )
        .kernel(
            "Memcpy DtoH (Device -> Pinned)", 40, 1, cat="gpu_memcpy", bytes=1000
        )  # no bw arg: 1000 B / 1 µs
    )
    a = analyze(tmp_path, b)
    series = a.get_memory_bw_time_series()[0]
    htod = series[series["name"] == "Memcpy HtoD"]
    assert htod["memory_bw_gbps"].round(9).tolist() == [5.0, 8.0, 3.0, 0.0]
    dtoh = series[series["name"] == "Memcpy DtoH"]
    assert dtoh["memory_bw_gbps"].iloc[0] == pytest.approx(1.0)
    summary = a.get_memory_bw_summary()["memory_bw_gbps"]
    assert summary.loc[(0, "Memcpy HtoD"), "max"] == 8.0
    assert summary.loc[(0, "Memcpy HtoD"), "count"] == 3


@pytest.mark.parametrize("gz", [False, True])
def test_trace_with_counters_roundtrip(tmp_path, gz):
    src_dir = tmp_path / "in"
    src = src_dir / ("rank0.json.gz" if gz else "rank0.json")
    src_dir.mkdir()
    original = (SAMPLES / "two_ranks" / "sampled_rank-0.json.gz").read_bytes()
    src.write_bytes(original if gz else gzip.decompress(original))
    a = TraceAnalysis(trace_dir=src_dir, parallel=False)
    written = a.generate_trace_with_counters(output_dir=tmp_path / "out")
    out = written[0]
    assert out.name == ("rank0_with_counters.json.gz" if gz else "rank0_with_counters.json")
    data = out.read_bytes()
    assert (data[:2] == b"\x1f\x8b") == gz
    doc = json.loads(gzip.decompress(data) if gz else data, parse_float=Decimal)
    before = json.loads(gzip.decompress(original), parse_float=Decimal)
    n = len(before["traceEvents"])
    assert doc["traceEvents"][:n] == before["traceEvents"]
    assert {k: v for k, v in doc.items() if k != "traceEvents"} == {
        k: v for k, v in before.items() if k != "traceEvents"
    }
    counters = doc["traceEvents"][n:]
    queue = a.get_queue_length_time_series()[0]
    q7 = [e for e in counters if e["name"] == "Queue Length (stream 7)"]
    expected = queue[queue["stream"] == 7]
    assert [e["args"]["queue_length"] for e in q7] == expected["queue_length"].tolist()
    assert [int(e["ts"] * 1000) for e in q7] == expected["ts"].tolist()  # exact ns
    assert any(e["name"].startswith("Memory Bandwidth (") for e in counters)
    again = TraceAnalysis(trace_dir=tmp_path / "out", parallel=False)
    assert len(again.traces[0].counters) == len(counters)
    assert len(again.gpu_events(0)) == len(a.gpu_events(0))


def test_writer_never_overwrites_input(tmp_path):
    p = TraceBuilder().kernel("k", 0, 1).write(tmp_path / "t.json")
    with pytest.raises(TraceError, match="refusing"):
        write_trace(p, p)


def test_launch_stats_known_delays(tmp_path):
    b = (
        TraceBuilder()
        .kernel("k", 20, 3, launch_ts=0, launch_dur=5)  # delay 20 - 5 = 15
        .kernel("k2", 21, 3, stream=8, launch_ts=19, launch_dur=4)  # starts in its call: 0
        .kernel(
            "Memcpy DtoD (Device -> Device)", 40, 2, cat="gpu_memcpy", launch_ts=30, launch_dur=2
        )  # 8
        .kernel("h", 60, 2, launch_ts=50, launch_name="hipLaunchKernel")  # 9
    )
    a = analyze(tmp_path, b)
    stats = a.get_cuda_kernel_launch_stats(visualize=False)[0].set_index("kernel_name")
    assert stats["launch_delay"].to_dict() == {
        "k": 15.0,
        "k2": 0.0,
        "Memcpy DtoD (Device -> Device)": 8.0,
        "h": 9.0,
    }
    assert stats.loc["k", "cpu_duration"] == 5.0 and stats.loc["k", "gpu_duration"] == 3.0
    no_mem = a.get_cuda_kernel_launch_stats(visualize=False, include_memory_events=False)[0]
    assert "Memcpy DtoD (Device -> Device)" not in set(no_mem["kernel_name"])


@pytest.mark.parametrize(
    "folder, launch",
    [(SAMPLES / "two_ranks", "cudaLaunchKernel"), (SAMPLES / "amd_mi250", "hipLaunchKernel")],
)
def test_launch_stats_on_real_traces(folder, launch):
    a = TraceAnalysis(trace_dir=folder, parallel=False)
    for rank, stats in a.get_cuda_kernel_launch_stats(visualize=False).items():
        trace = a.traces[rank]
        assert len(stats) > 0 and launch in set(stats["launch_name"])
        assert (stats["launch_delay"] >= 0).all()
        row = stats.iloc[0]
        gpu = trace.gpu[trace.gpu["correlation"] == row["correlation"]].iloc[0]
        cpu = trace.cpu.iloc[gpu["launch_row"]]
        assert row["launch_delay"] == max(gpu["ts"] - cpu["ts"] - cpu["dur"], 0) / 1000
    assert len(plots_for(a)) == 3


def plots_for(analysis):
    from hta_lite import plots

    return plots.plot_launch_stats(
        analysis.get_cuda_kernel_launch_stats(visualize=False)[analysis.ranks[0]], analysis.ranks[0]
    )


def _op_with_kernels(b: TraceBuilder, op: str, start: float, kernels: list[str]) -> None:
    b.cpu_op(op, start, 10 + 5 * len(kernels))
    for i, k in enumerate(kernels):
        b.kernel(k, start + 100 + 10 * i, 2, launch_ts=start + 2 + 5 * i, launch_dur=1)


def test_aten_op_kernels_and_delay(tmp_path):
    b = TraceBuilder()
    _op_with_kernels(b, "aten::mm", 0, ["gemm"])
    _op_with_kernels(b, "aten::mm", 1000, ["gemm"])
    _op_with_kernels(b, "aten::add", 2000, ["add_kernel", "copy_kernel"])
    b.cpu_op(
        "aten::other_thread", -100, 10_000, tid=2
    )  # covers every launch, but on another thread
    out = analyze(tmp_path, b).get_aten_op_kernels_and_delay()[0].set_index("aten_op_name")
    assert "aten::other_thread" not in out.index
    assert out.loc["aten::mm", "occurrence_count"] == 2
    assert out.loc["aten::mm", "avg_aten_op_launch_delay"] == 2.0
    assert out.loc["aten::mm", "avg_runtime_delay"] == 98.0
    assert out.loc["aten::add", "kernel_sequence"] == "add_kernel -> copy_kernel"


def test_frequent_kernel_sequences_and_overlay(tmp_path):
    b = TraceBuilder()
    for i in range(3):
        _op_with_kernels(b, "aten::linear", i * 1000, ["k1", "k2", "k3"])
    _op_with_kernels(b, "aten::linear", 5000, ["k1", "k9", "k3"])
    _op_with_kernels(b, "aten::relu", 6000, ["r1", "r2", "r3"])
    a = analyze(tmp_path / "trace", b)
    patterns = a.get_frequent_cuda_kernel_sequences("aten::linear", tmp_path / "out", top_k=1)
    assert patterns["pattern"].tolist() == ["aten::linear|k1|k2|k3", "aten::linear|k1|k9|k3"]
    assert patterns["count"].tolist() == [3, 1]
    assert patterns["GPU kernel duration (us)"].tolist() == [18.0, 6.0]
    overlaid = json.loads((tmp_path / "out" / "overlaid_rank0.json").read_text())
    ranges = [e for e in overlaid["traceEvents"] if str(e.get("name", "")).startswith("Pattern 0")]
    assert len(ranges) == 3
    names = {e["name"] for e in overlaid["traceEvents"] if e.get("cat") == "kernel"}
    assert names == {"k1", "k2", "k3", "other kernel"}
