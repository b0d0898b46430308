"""Key findings (the report's and the CLI summary's first block) and what they rest on: the idle
time of the whole GPU by cause, readable units."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import SAMPLES
from synth import TraceBuilder

from hta_lite import TraceAnalysis, plots
from hta_lite.analyses import key_findings as kf
from hta_lite.units import fmt_bytes, fmt_pct, fmt_us


def test_units():
    assert [fmt_bytes(v) for v in (0, 1023, 1536, 2**31, 104_510_323_200)] == [
        "0 B", "1023 B", "1.5 KiB", "2.0 GiB", "97.3 GiB",
    ]  # fmt: skip
    assert [fmt_us(v) for v in (0, 2.5, 850, 167_577, 2_500_000)] == [
        "0 µs", "2.5 µs", "850 µs", "167.6 ms", "2.50 s",
    ]  # fmt: skip
    assert fmt_pct(54.137) == "54.1 %"
    assert fmt_bytes(math.nan) == fmt_us(math.nan) == fmt_pct(math.nan) == "–"


def test_gpu_idle_by_cause_classifies_each_gap_of_the_whole_gpu(tmp_path):
    """Two streams; the GPU is idle (no stream busy) in two gaps: 100-200 (the next kernel was
    launched at 175: host_wait) and 300-310 (launched long before, 10 µs: kernel_wait). Stream
    9's own long gap (10-400) is not GPU idle where stream 7 works."""
    b = TraceBuilder()
    b.kernel("a", 0, 100, stream=7, launch_ts=-5)
    b.kernel("s", 0, 10, stream=9, launch_ts=-5)
    b.kernel("b", 200, 100, stream=7, launch_ts=175)
    b.kernel("c", 310, 100, stream=7, launch_ts=20)
    b.kernel("t", 400, 10, stream=9, launch_ts=20)
    a = TraceAnalysis(trace_files={0: b.write(tmp_path / "t.json")}, parallel=False, cache=False)
    table = a.get_gpu_idle_by_cause().set_index("idle_category")
    assert table["idle_time"].to_dict() == {"host_wait": 100.0, "kernel_wait": 10.0, "other": 0.0}
    assert table["idle_time"].sum() == a.get_temporal_breakdown(False)["idle_time(us)"].iloc[0]
    assert table.loc["host_wait", "idle_time_pctg"] == pytest.approx(90.91)
    per_stream, _ = a.get_idle_time_breakdown(visualize=False)
    assert per_stream.query("stream == 9")["idle_time"].sum() == 390.0  # a stream's own gaps
    assert len(plots.plot_gpu_idle_by_cause(a.get_gpu_idle_by_cause()).data) == 3


def test_a_gpu_span_far_shorter_than_the_step_says_the_share_of_the_step(tmp_path):
    """One 4 µs kernel in each 1,000 µs step (HTA's triton sample: a 1.8 µs kernel in a 1.8 ms
    step read "idle 0.0 %" of the GPU's span): the line adds that the span is a small share of
    the steps' time and the GPU's busy share of them (4 of 1,000 µs: 0.4 %)."""
    b = TraceBuilder()
    for n in range(3):
        b.step(n + 1, n * 1000, 1000)
        b.kernel("k", n * 1000 + 500, 4, stream=7, launch_ts=n * 1000 + 490)
    a = TraceAnalysis(trace_files={0: b.write(tmp_path / "t.json")}, parallel=False, cache=False)
    text = a.get_key_findings().set_index("kind").loc["gpu_idle", "finding"]
    assert "; in the steps, the GPU's work spans 0.4 % of their time" in text
    assert "and the GPU is busy 0.4 % of it" in text


def test_the_steps_share_does_not_call_the_whole_gpu_span_a_share_of_the_steps(tmp_path):
    """GPU work 20,000 µs before the first step (Nsight Systems' saxpy: its first-to-last GPU
    span is longer than its steps): the line once said "that span is 0.4 % of the steps' time"
    of a span 7 times the steps'; it states the steps' own span."""
    b = TraceBuilder()
    b.kernel("warm", 0, 10, stream=7, launch_ts=0)
    for n in range(3):
        start = 20_000 + n * 1000
        b.step(n + 1, start, 1000)
        b.kernel("k", start + 500, 4, stream=7, launch_ts=start + 490)
    a = TraceAnalysis(trace_files={0: b.write(tmp_path / "t.json")}, parallel=False, cache=False)
    text = a.get_key_findings().set_index("kind").loc["gpu_idle", "finding"]
    assert "idle 99.9 % of the time from its first to its last work" in text
    assert "in the steps, the GPU's work spans 0.4 % of their time" in text
    assert "that span" not in text


def test_launched_work_the_gpu_holds_is_not_host_wait(tmp_path):
    """The GPU is idle 100-600; the kernel after the gap was launched at 150 (its call returned
    at 151) but started at 600: held by something the trace does not show (sglang_decode: a
    stream waiting on an event recorded before the trace). The host is late only until its
    call returned plus the launch latency (30 µs): 81 µs host_wait, 419 µs other. HTA's
    per-stream rule counts the whole gap as host wait; that table keeps it."""
    b = TraceBuilder()
    b.kernel("a", 0, 100, stream=7, launch_ts=-5)
    b.kernel("b", 600, 100, stream=7, launch_ts=150)
    a = TraceAnalysis(trace_files={0: b.write(tmp_path / "t.json")}, parallel=False, cache=False)
    table = a.get_gpu_idle_by_cause().set_index("idle_category")
    assert table["idle_time"].to_dict() == {"host_wait": 81.0, "kernel_wait": 0.0, "other": 419.0}
    assert table["idle_time"].sum() == a.get_temporal_breakdown(False)["idle_time(us)"].iloc[0]
    per_stream, _ = a.get_idle_time_breakdown(visualize=False)
    assert per_stream.set_index("idle_category").loc["host_wait", "idle_time"] == 500.0
    text = a.get_key_findings().set_index("kind").loc["gpu_idle", "finding"]
    assert "mostly with launched work waiting, held by something the trace does not show" in text


@pytest.fixture(scope="module")
def findings(two_ranks):
    return two_ranks.get_key_findings()


def test_key_findings_on_the_two_rank_sample(findings, two_ranks):
    assert list(findings.columns) == kf.COLUMNS
    assert findings["kind"].tolist() == [
        "gpu_idle", "exposed_communication", "straggler", "top_operator", "mfu", "memory_peak",
        "partial_job", "health",
    ]  # fmt: skip
    by_kind = findings.set_index("kind")
    temporal = two_ranks.get_temporal_breakdown(visualize=False)
    assert by_kind.loc["gpu_idle", "value"] == pytest.approx(temporal["idle_time_pctg"].mean())
    # a sampled trace: 56 % of its idle time, kernels launched long before wait with nothing on
    # the GPU (rank 0: a GEMM launched 0.4 ms into a 56.6 ms gap); HTA's rule says host_wait
    assert "mostly with launched work waiting" in by_kind.loc["gpu_idle", "finding"]
    # the late rank: the same figures as the straggler report and the collectives by rank
    report = two_ranks.get_straggler_report()
    late = report.ranks.set_index("rank").loc[1]
    assert by_kind.loc["straggler", "rank"] == 1
    assert by_kind.loc["straggler", "value"] == late["lateness_us"]
    steps = two_ranks.get_step_breakdown(visualize=False)
    assert by_kind.loc["straggler", "step_pctg"] == pytest.approx(
        100 * late["lateness_us"] / steps["step_time"].mean()
    )
    assert by_kind.loc["straggler", "finding"].startswith(
        "Rank 1 reaches its collectives 3.4 ms per step after the others (0.6 % of the"
    )
    exposed = (steps["communication"] - steps["comm_overlapped"]).mean()
    assert by_kind.loc["exposed_communication", "value"] == pytest.approx(exposed)
    # the part that can be waiting for the late rank: the straggler report's waits, per rank
    waiting = fmt_us(report.ranks["wait_suffered_us"].mean())
    assert waiting == "1.7 ms"  # rank 0 waits 3.4 ms per step, rank 1 none
    assert (
        f", up to {waiting} of it waiting for the last rank to arrive;"
        in (by_kind.loc["exposed_communication", "finding"])
    )
    # the profiler's wrapper around the collectives: said to be communication, not compute
    assert (
        "record_param_comms (collective communication kernels), 278.1 ms"
        in by_kind.loc["top_operator", "finding"]
    )
    assert (
        by_kind.loc["mfu", "finding"].startswith("MFU unknown")
        and "device=" in (by_kind.loc["mfu", "finding"])
    )
    assert "profile_memory=True" in by_kind.loc["memory_peak", "finding"]
    assert "last step left out, as HTA leaves out" in by_kind.loc["health", "finding"]
    # ranked: wall-clock findings by their share of the step, then the others
    timed = findings["step_pctg"].dropna()
    assert timed.is_monotonic_decreasing and timed.index.tolist() == [0, 1, 2]
    chart = plots.plot_key_findings(findings)
    assert list(chart.data[0].x) == timed.tolist()[::-1]  # drawn from exactly these rows


def test_top_operator_says_when_more_gpu_time_has_no_operator():
    """sglang_decode replays CUDA graphs that no capture in the trace maps: the top operator,
    aten::argmax, holds 0.6 % of the GPU time and the unmapped replays 98.8 %; the headline
    says both (the operator alone would read as the run's hot spot)."""
    a = TraceAnalysis(trace_dir=SAMPLES / "sglang_decode", parallel=False)
    summary = a.get_operator_summary().set_index("name")
    replayed = fmt_pct(summary.loc["[graph replay]", "device_self_pctg"])
    finding = a.get_key_findings().set_index("kind").loc["top_operator", "finding"]
    assert finding.startswith("Top operator by GPU time: aten::argmax,")  # no wrapper note
    assert f"; {replayed} is CUDA / HIP graph replay mapped to no operator)" in finding
    assert replayed == "98.8 %"


def test_memory_peak_against_the_device_memory():
    a = TraceAnalysis(trace_dir=SAMPLES / "h100_bert_small", parallel=False)
    row = a.get_key_findings().set_index("kind").loc["memory_peak"]
    peaks = a.get_memory_peaks().set_index("device")
    assert row["value"] == peaks.loc["cuda:0", "peak_allocated"] == 101_305_344
    assert row["finding"].startswith(
        "Memory peak: 96.6 MiB allocated on rank 0 cuda:0 (0.1 % of 79.2 GiB), 116.0 MiB reserved"
    )


def test_no_straggler_says_what_was_tested():
    report_ranks = pd.DataFrame(
        {"rank": [1, 0], "lateness_us": [20.0, 0.0], "wait_caused_us": [20.0, 0.0]}
    )

    class Report:
        ranks, stragglers, causes = report_ranks, [], pd.DataFrame()
        rule = "the latest rank, 1, arrives 20 µs per step after the first"

    row = kf.straggler(Report, 1000.0)
    assert (
        row["finding"]
        == "No straggler: the latest rank, 1, arrives 20 µs per step after the first."
    )
    assert math.isnan(row["step_pctg"])


def test_cpu_only_trace_has_no_gpu_findings():
    a = TraceAnalysis(trace_dir=SAMPLES / "gloo_4ranks", parallel=False)
    kinds = a.get_key_findings()["kind"].tolist()
    assert kinds == ["straggler", "memory_peak", "health"]


def test_idle_of_a_span_mostly_outside_the_steps_says_the_steps_own_share(tmp_path):
    """Start-up launches a 10 µs kernel every 2,000 µs for 8,000 µs, then three 1,000 µs steps
    each run a 950 µs kernel (the last step left out): the GPU's span is idle ~80 %, mostly
    before the steps; the steps cover 2,000 of its 9,960 µs, and in them the GPU is busy 95 %."""
    b = TraceBuilder()
    b.cpu_op("aten::empty", 0, 7000)
    for k in range(4):
        b.kernel("init", 10 + 2000 * k, 10, launch_ts=5 + 2000 * k)
    for step in range(3):
        start = 8000 + 1000 * step
        b.step(step + 1, start, 1000)
        b.cpu_op("aten::mm", start + 5, 20)
        b.kernel("gemm", start + 20, 950, launch_ts=start + 10)
    b.write(tmp_path / "rank0.json")
    row = TraceAnalysis(trace_dir=tmp_path, cache=False).get_key_findings().set_index("kind")
    text = row.loc["gpu_idle", "finding"]
    assert "the steps cover 20.1 % of that time, and in them the GPU is busy 95.0 %" in text
